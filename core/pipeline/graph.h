// The pipeline solver's problem: the dependence graph of one loop iteration's tile ops, with
// latencies, loop-carried distances and per-op reservations of the machine's units, registers
// and shared memory (DESIGN.md §5, Twill's input).
//
// build_graph() reads it off MA tile IR. It finds the kernel's software-pipelined loop:
//   sm_80 form   a For with pipeline_stages > 0 (cp.async copies, ldmatrix, mma.sync, element-
//                wise ops, reduces), as core/matile/lower.h produces;
//   Hopper form  a Roles op whose roles each run a loop (a TMA producer loop, wgmma consumer
//                loops; tests/common/hopper_kernels.h builds one): the loops' bodies together
//                are one logical iteration, and each op remembers the role the hand gave it.
// and groups its ops into tile ops (nodes):
//   - copies into one shared allocation form one node ("cp.async:A_smem", "tma:As");
//   - ldmatrix reads of one allocation form one node (all its k steps: "ldmatrix:A_smem");
//   - an mma / wgmma chain through its accumulator forms one node ("mma:C_sum");
//   - a run of consecutive element-wise ops / reduces over tiles of the same rank forms one node;
//   - synchronization (waits, commits, barriers, mbarriers, fences) is left out: that is what a
//     realized schedule emits, not what it schedules; so are address arithmetic on uniform
//     scalars, constants and register-only moves (broadcast, slices, register layout changes).
// Edges: register values (distance 0, or 1 through the loop's iter_args) and shared memory
// (a copy into an allocation -> the ops that read it, distance 0: the copy of logical
// iteration i feeds the reads of iteration i, whatever stage the hand schedule issued it in).
//
// Retargeting. With an sm_90a machine, an sm_80-form loop (what the lowering emits today for
// either arch) is read as its Hopper equivalent: each cp.async node becomes a TMA box load (a
// variable-latency op), mma.sync chains become wgmma chains that read their shared operands
// directly (the ldmatrix nodes that only fed them disappear), and every op over the CTA tile's
// rows is split into 64-row sub-tiles (wgmma's M per warpgroup): "wgmma:C_sum.h0", ".h1". The
// sub-tiles are what lets the solver give halves of the tile to different consumer warpgroups.
//
//   GEMM 128x128x64 on sm_80 (assets/specs/gemm.nt + schedules/gemm.json):
//     cp.async:A_smem  copy 137 cyc, latency 487, buffer 16384 B
//     cp.async:B_smem  copy 137 cyc, latency 487, buffer 16384 B
//     ldmatrix:A_smem  LSU 128 cyc ...          cp.async:A_smem -> ldmatrix:A_smem  515 cycles
//     ldmatrix:B_smem  LSU 128 cyc ...          ldmatrix:A_smem -> mma:C_sum         66 cycles
//     mma:C_sum        tensor core 913 cyc, 128 registers, mma:C_sum -> mma:C_sum distance 1
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/matile/ir.h"
#include "core/pipeline/machine.h"

namespace nautilus::pipeline {

enum class NodeKind {
  AsyncCopy,    // cp.async tile copy global -> shared
  TmaLoad,      // TMA box load global -> shared
  SharedLoad,   // ldmatrix / ld.shared of a shared operand
  Mma,          // mma.sync chain
  Wgmma,        // wgmma chain
  Elementwise,  // a run of element-wise ops and reduces
  Exchange,     // a layout change through shared memory
  FmaDot,       // CUDA-core dot from shared memory
  Memory,       // other global / shared loads and stores
};
const char* node_kind_name(NodeKind kind);

struct Node {
  std::string name;  // unique in the graph, e.g. "mma:C_sum", "wgmma:acc_k.h1"
  NodeKind kind = NodeKind::Elementwise;
  // Cycles each unit is busy from the op's issue (its reservation table: one interval per unit).
  std::array<double, kUnitCount> occupancy{};
  // Latency = fixed + the sum of the occupancies (the op's work streams through its units).
  double fixed = 0;
  int steps = 1;               // merged MA ops (k steps of a chain)
  int64_t register_bytes = 0;  // bytes of its results that live in registers past it
  int64_t buffer_bytes = 0;    // copies: one stage of the shared buffer they fill
  bool variable_latency = false;  // asynchronous copies (their latency varies with the memory)
  // sm_90a copies: the bytes of the boxes that land with it when that, at the loaded rate, set
  // its latency (0: its own latency with the margin).
  int64_t landing_bytes = 0;
  int64_t rows = 0;            // leading extent of its results (sub-tiling)
  std::array<int64_t, 3> mma_shape{};  // Mma / Wgmma: M, N and total K of the chain
  int subtile = -1;            // sm_90a: which 64-row sub-tile (-1: the whole op)
  std::string hand_role;       // Hopper form: the role the hand-written kernel gave it
  std::vector<std::string> ops;  // the MA ops it stands for (their labels)

  double latency() const;
  // Until its first k step's result exists: what a streamed consumer (mma of ldmatrix) waits.
  double first_latency() const;
  bool is_copy() const { return kind == NodeKind::AsyncCopy || kind == NodeKind::TmaLoad; }
};

struct Edge {
  int from = 0, to = 0;
  double latency = 0;   // `to` may issue this many cycles after `from` (same iteration)
  int distance = 0;     // iterations between them (1: through the loop's iter_args)
  bool through_shared = false;  // a copy's buffer read by `to` (its lifetime sizes the ring)
  std::string what;     // the value or allocation: "%C_sum", "A_smem"
};

struct Graph {
  std::string kernel;
  std::string loop;            // the loop variable
  int64_t trip_count = 0;
  std::string arch;            // the machine it was built for
  std::string form;            // "sm_80 loop", "sm_80 loop retargeted to sm_90a", "hopper roles"
  int threads = 128;           // threads that run a compute op (a CTA on sm_80, a warpgroup on sm_90a)
  int hand_stages = 0;         // the hand-written kernel's ring depth
  int64_t fixed_shared_bytes = 0;  // shared memory outside the rings (operands copied once, scratch)
  // Rings whose slot the consumers release in the iteration that reads it, by allocation name
  // (matile::SharedAlloc::released_in_iteration: attention's K beside V). The realized ring
  // depth counts each such ring's life apart (shared_ring_depth); the others share one depth.
  std::set<std::string> rings_released_in_iteration;
  std::vector<Node> nodes;
  std::vector<Edge> edges;

  int find(const std::string& name) const;  // node index or -1
  // Whether the ring copy node `v` fills is released in its own iteration
  // (rings_released_in_iteration) rather than together with the others.
  bool released_in_iteration(size_t v) const;
  // Shared memory of the rings at these depths (depth_of(v) for each copy node v) as the
  // lowering realizes them, plus fixed_shared_bytes: the rings released together all take the
  // deepest one's depth (one slot index for every operand of an iteration), the others their own.
  int64_t realized_shared_bytes(const std::function<int64_t(size_t)>& depth_of) const;
  // Registers per thread a node's results take on the threads that run it.
  int registers(const Node& node) const;
  // A stable text of everything the solver reads (the cache key hashes it).
  std::string canonical_text() const;
};

struct GraphResult {
  std::optional<Graph> graph;
  std::string error;  // why no graph: "kernel C has no software-pipelined loop", ...
};

// The graph of the first kernel (or the kernel named `kernel`) of `module` that has a
// pipelined loop, for `machine`.
GraphResult build_graph(const matile::Module& module, const Machine& machine,
                        const std::string& kernel = "");

// Human-readable listing: one line per node (units, latency, registers, buffer), then edges.
std::string describe_graph(const Graph& graph);

}  // namespace nautilus::pipeline
