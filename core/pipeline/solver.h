// The pipeline solver (DESIGN.md §5, Twill): software pipelining and warp specialization of one
// loop as one constraint problem, solved exactly with Z3.
//
// Model. Cycle counts are first normalized to slots of `quantum` cycles (every latency and busy
// time rounded up), so the lower bound on the interval is about `target_slots` slots: the SMT
// problem's size depends on these numbers, not on raw cycles. Then, for a fixed initiation
// interval II (slots), the unknowns are, per op v:
//   t_v      its start in the flat schedule of one iteration (stage k_v = t_v div II, row
//            m_v = t_v mod II of the modulo reservation table),
//   r_v      its role (sm_90a: 0 = the TMA producer warpgroup, 1..C = consumer warpgroups;
//            sm_80: one role),
// and per copied operand its ring depth (buffers), per register value its copies (modulo
// variable expansion). Constraints, each a *tracked* group so an unsat core names it:
//   dependence   t_to - t_from >= latency + (hand-off if r_from != r_to) - II * distance
//   unit         on each unit, the busy intervals [m_v, m_v + busy) never overlap modulo II
//   shared       sum over rings of depth * stage bytes + other allocations <= capacity, where a
//                ring needs depth * II >= (end of its last read) - (its copy's start)
//   registers    per role, base + sum of value registers * copies <= the role's budget
//                (sm_90a: setmaxnreg; 40 for the producer, the rest split among consumers)
//   rule         sm_90a: TMA copies run on the producer, everything else on consumers (Twill's
//                "variable-latency ops on a designated warp")
//   pins         --stages N (every ring N deep), an op's role, an op's stage.
// Search: II from the lower bound max(resource bound, recurrence bound): the bound itself with a
// third of the time, then galloping upwards (bound + 1, + 2, + 4, ...) until a schedule is in
// hand, then every II from the bound up to it with all the time left (the first with a schedule
// is the smallest); at each II the consumer count C = 1..max; then the length L (t_v +
// latency_v <= L) is minimized by bisection, then the number of cross-role edges.
//
// Status. `Optimal`: II equals the lower bound or every smaller II was proven unsat, and the
// length and cross-role edges were proven minimal (all under the model, whose horizon allows
// 3 stages more than the longest dependence path needs). `BestFound`: a schedule was found but a check ran out of time, and the
// notes say which bound is not proven. `Infeasible`: no II up to the cap has a schedule: the
// explanation names the conflicting constraints (a minimized unsat core). When the best II is
// above the lower bound, `explanation` says why the next smaller interval is impossible.
//
//   auto graph = build_graph(*module, *machine_for("sm_80")).graph;
//   Solution s = solve(*graph, *machine_for("sm_80"), {});
//   // s.status == Optimal, s.ii == 913 (tensor core bound), s.stages == 3, roles {"main"}
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/pipeline/graph.h"
#include "core/pipeline/machine.h"

namespace nautilus::pipeline {

struct SolveOptions {
  // The budget in solver seconds: Z3 resource units (its deterministic `rlimit` count) over
  // kZ3UnitsPerSecond, not wall or CPU time, so that the same problem gets the same answer on a
  // loaded machine, a faster one or a second run. Real time still bounds the wait:
  // cpu_cap_seconds() of the solving thread's CPU time, wall_cap_seconds() of wall time.
  double time_limit_seconds = 25;
  std::optional<int> max_registers;  // caps every compute role's budget (--max-regs)
  std::optional<int> stages;         // every copied operand's ring depth (--stages)
  std::optional<int64_t> max_ii;     // cycles: give up beyond this interval (--max-ii)
  std::optional<int> consumers;      // sm_90a: pin the number of consumer warpgroups (--consumers)
  std::vector<std::pair<std::string, std::string>> role_pins;  // op -> "producer", "consumer1", "main"
  std::vector<std::pair<std::string, int>> stage_pins;         // op -> stage
  int target_slots = 24;  // normalization: the interval's lower bound in slots
  // Bound each ring released together by the depth at which all of them fit (the lowering
  // realizes them at the deepest one's depth). solve sets it, and solves again, when an answer
  // without it does not fit so.
  bool bound_rings_released_together = false;
  // Stops the search early when requested (from another thread): the running Z3 check is
  // interrupted and the answer is what was proven or found so far, with a note saying it was
  // stopped (never cached as a proof). The studio stops a solve whose answer is stale.
  std::stop_token stop;
};

enum class SolveStatus { Optimal, BestFound, Infeasible, NoSolution };
const char* status_name(SolveStatus status);  // "optimal", "best found", "infeasible", "no solution"

struct OpSlot {
  std::string name;
  int64_t start = 0;  // cycles from the iteration's start
  int stage = 0;      // start / II
  std::string role;
  int64_t start_slot = 0;
  int role_index = 0;
};

struct RoleUse {
  std::string name;
  int register_limit = 0;
  std::string limit_source;  // "--max-regs 128", "setmaxnreg budget of 2 consumers", ...
  int registers = 0;         // base + values' registers * copies
  std::vector<std::string> ops;
};

struct Solution {
  SolveStatus status = SolveStatus::NoSolution;
  std::string summary;  // one line: what was proven, or why nothing was found
  int quantum = 1;      // cycles per slot
  int64_t ii = 0, length = 0;                       // cycles
  int64_t ii_slots = 0, length_slots = 0;
  int64_t ii_lower_bound = 0;                       // cycles
  std::string bound_reason;                         // "tensor core", "recurrence through ..."
  std::vector<OpSlot> ops;                          // in graph order
  std::vector<RoleUse> roles;
  std::map<std::string, int> ring_depth;            // copy op -> buffers
  int stages = 0;                                   // the deepest ring
  int64_t shared_bytes = 0;
  int cross_role_edges = 0;
  std::string explanation_title;                    // "no schedule: ..." / "why not II = N"
  std::vector<std::string> explanation;             // the conflicting constraints, in words
  std::vector<std::string> notes;                   // timeouts, fallbacks
  double seconds = 0;      // wall time of the solve
  double cpu_seconds = 0;  // the solving thread's CPU time
  double solver_seconds = 0;  // Z3 resource units over kZ3UnitsPerSecond (what the time limit counts)
  int checks = 0;
  bool cached = false;
};

// Z3 resource units per solver second: about what Z3 4.8 spends per CPU second on the pipeline
// problems of the assets on the development machines (NAUTILUS_PIPELINE_TRACE prints both).
constexpr double kZ3UnitsPerSecond = 1500000.0;
// The real-time caps on a solve of SolveOptions::time_limit_seconds `limit`: the solving
// thread's CPU time, 1.2 times the limit, and at least 2 s more than it (building the
// constraints and reading models is not Z3's counted work, and weighs on short limits); and
// wall time, 4 times the limit and at least 8 s more than it (a short limit on a machine whose
// other cores' work also takes this one's turns still gets its solver time).
constexpr double cpu_cap_seconds(double limit) { return limit * 1.2 > limit + 2.0 ? limit * 1.2 : limit + 2.0; }
constexpr double wall_cap_seconds(double limit) { return limit * 4.0 > limit + 8.0 ? limit * 4.0 : limit + 8.0; }

// An in-process cache of solutions by key() (graph, machine, options), optionally backed by a
// directory of JSON files (one per key) so separate runs share it. Thread-safe.
class SolveCache {
 public:
  explicit SolveCache(std::string directory = "") : directory_(std::move(directory)) {}
  static std::string key(const Graph& graph, const Machine& machine, const SolveOptions& options);
  std::optional<Solution> find(const std::string& key);
  void store(const std::string& key, const Solution& solution);
  int hits() const { return hits_; }

 private:
  std::string directory_;
  std::mutex mutex_;
  std::map<std::string, Solution> entries_;
  int hits_ = 0;
};

// The model's view of one op in slots of `quantum` cycles, as the solver and check_solution
// use it: its latency (at least 1 slot) and its busy slots per unit (0 for a unit it does not
// use; every use rounded up to at least 1 slot). The Pipeline panel's modulo reservation table
// reads the same numbers (schedule_view.h).
struct SlotTimes {
  int64_t latency = 1;
  std::array<int64_t, kUnitCount> busy{};
};
SlotTimes slot_times(const Node& node, int quantum);

Solution solve(const Graph& graph, const Machine& machine, const SolveOptions& options = {},
               SolveCache* cache = nullptr);

// Checks a solution against the model's constraints (in slots), independently of Z3: "" when it
// holds, else the first violation in words. Tests run it on every solution.
std::string check_solution(const Graph& graph, const Machine& machine, const SolveOptions& options,
                           const Solution& solution);

std::string describe_solution(const Graph& graph, const Solution& solution);
nlohmann::ordered_json solution_json(const Graph& graph, const Solution& solution);
nlohmann::ordered_json graph_json(const Graph& graph);
Solution solution_from_json(const nlohmann::json& json);

}  // namespace nautilus::pipeline
