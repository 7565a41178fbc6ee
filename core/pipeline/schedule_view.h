// What the Pipeline panel's solver tab draws of a solver answer (solver.h), as plain data: the
// modulo reservation table and the per-role timeline of the steady state. Both read the solution
// in the model's own slots (slot_times), so the picture shows exactly what the solver decided and
// what check_solution verifies; nothing here re-times anything.
//
// Modulo reservation table (Twill's MRT). One interval of the steady state, II slots of
// `quantum` cycles down, the machine's units across. Op v busy on unit u for b slots from its
// start t_v occupies rows (t_v + c) mod II, c = 0..b-1, labelled with its stage t_v div II: in
// the steady state the ops of several iterations share the interval, and the stage says which.
// Copy of iteration i+2 on the copy engine while iteration i's GEMMs hold the tensor core reads
//
//   row  tensor core        copy engine
//     0  wgmma:27.h1 [s0]   tma:K_ring [s0]
//     1  wgmma:27.h1 [s0]   tma:K_ring [s0]
//   ...
//
// Per-role timeline. `iterations` consecutive iterations of the flat schedule, iteration i's op v
// at t_v + i * II on the row of its role ("producer", "consumer0", ...; "main" on sm_80). Each
// op's bar is its busy time (its longest unit occupancy) followed by the rest of its latency
// until its result is ready. Edges between roles become hand-offs (an mbarrier on Hopper): from
// the producer op's result to the consumer op's start, for the iterations drawn. Each copied
// operand's ring gets one row: iteration i's copy fills buffer i mod depth and holds it from the
// copy's start until the last op reading it (in the same iteration) is done; then the buffer is
// released for iteration i + depth.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/pipeline/graph.h"
#include "core/pipeline/machine.h"
#include "core/pipeline/solver.h"

namespace nautilus::pipeline {

// One op's reservation of one unit, in rows of the table.
struct Reservation {
  int op = 0;           // graph node
  Unit unit = Unit::ALU;
  int64_t first_row = 0;  // start slot mod II
  int64_t rows = 0;       // busy slots (it wraps past the last row to row 0)
  int stage = 0;
  int role = 0;           // Solution::roles index
};

struct ModuloTable {
  int quantum = 1;        // cycles per row
  int64_t ii_rows = 0;    // the interval in rows (slots)
  int64_t ii_cycles = 0;
  std::vector<Reservation> reservations;
  // cells[row][unit]: the reservations (indices into `reservations`) occupying that cell; more
  // than the unit's capacity never happens in a checked solution.
  std::vector<std::array<std::vector<int>, kUnitCount>> cells;
  std::array<int64_t, kUnitCount> busy_rows{};  // per unit, over the interval

  // Busy rows / II: 1.0 for the unit that bounds a resource-bound interval.
  double utilization(Unit unit) const;
};

// The table of a scheduled solution (Optimal or BestFound); an empty table (ii_rows 0) otherwise.
ModuloTable modulo_table(const Graph& graph, const Solution& solution);

// Text form: one line per row, `unit: op [stage]` for each busy unit. Tests compare it.
std::string describe_modulo_table(const Graph& graph, const ModuloTable& table);

struct ScheduledBar {
  int op = 0;             // graph node
  int iteration = 0;
  int role = 0;           // Solution::roles index
  int64_t start = 0;      // cycles from iteration 0's start
  int64_t busy_end = 0;   // start + its longest unit occupancy
  int64_t ready = 0;      // start + its latency: the result exists
  int stage = 0;
  int buffer = -1;        // copies: the ring buffer it fills (iteration mod ring depth)
};

// A cross-role dependence of the drawn iterations: `from`'s result hands over to `to`.
struct Handoff {
  int from_bar = 0, to_bar = 0;  // indices into RoleTimeline::bars
  int64_t from_cycle = 0;        // the producer op's result (start + edge latency)
  int64_t to_cycle = 0;          // the consumer op's start
  std::string what;              // the value or buffer handed over
};

// One buffer of a ring in use: filled by the copy of `iteration`, released after its last read.
struct RingHold {
  int ring = 0;           // index into RoleTimeline::rings
  int iteration = 0;
  int buffer = 0;
  int64_t fill_start = 0; // the copy starts
  int64_t filled = 0;     // the data has landed (the copy's latency)
  int64_t released = 0;   // the last reader is done with it
  int copy_bar = 0;       // the copy's bar
};

struct Ring {
  int copy_op = 0;        // the copy node that fills it
  std::string name;       // the copy's allocation: "K_ring"
  int depth = 0;          // buffers (Solution::ring_depth)
};

struct RoleTimeline {
  std::vector<std::string> roles;  // Solution::roles' names, in order
  int iterations = 0;
  int quantum = 1;
  int64_t ii = 0, length = 0, total_cycles = 0;  // cycles
  std::vector<ScheduledBar> bars;                 // iteration-major, graph order within one
  std::vector<Handoff> handoffs;
  std::vector<Ring> rings;
  std::vector<RingHold> holds;
};

// `iterations` (>= 1) iterations of a scheduled solution; an empty timeline otherwise.
RoleTimeline role_timeline(const Graph& graph, const Solution& solution, int iterations);

}  // namespace nautilus::pipeline
