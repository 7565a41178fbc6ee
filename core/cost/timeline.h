// The inner loop of an MA tile kernel as a per-warp timeline: what the Pipeline panel draws. The
// size of every bar comes from the analytical cost model's count of the op's work
// (analytical_model.h, op_work), so the picture and the estimate read the same numbers.
//
// Warp-specialized kernels (a Roles op, sm_90a) are simulated role by role: see the section
// "Warp specialization" below.
//
// What is simulated. Without warp specialization every warp executes every op in
// program order (core/matile/ir.h). timeline_from_kernel() walks the kernel body up to its inner
// loop (the prologue) and then `iterations` iterations of that loop, per warp, with a clock per
// warp:
//   * an op occupies its warp for its share of the op's work, each pipe at its cost per warp
//     instruction (CycleCosts): op_work's CUDA-core lane operations / 32 per warp at `alu`,
//     MUFU operations at `sfu`, tensor FLOPs / 4096 (one mma.m16n8k16) at `mma`, shared bytes /
//     128 (one wavefront) at `shared_wavefront`, and each CTA-wide barrier at `barrier` -- the
//     work divided evenly over the CTA's warps, as the model divides it;
//   * cp.async only *issues* on the warp (its vector instructions at `copy_issue`); the copy then
//     flies on its own and lands `copy_latency + bytes / copy_bytes_per_cycle` cycles after the
//     warp issued it. Copies are drawn on separate rows, one per shared-memory stage, so stage
//     s+1's copy in flight is seen next to the MMAs reading stage s;
//   * cp.async.wait_group n stalls the warp until all but its n most recent committed groups
//     have landed; bar.sync stalls every warp until the last one arrives. Stalls are bars of the
//     Wait class, so an exposed copy latency is visible as a long wait;
//   * uniform index scalars (loop variables, stage numbers, the `%more` predicate) are evaluated
//     per iteration, so copies show their stage index and predicated-off copies (the last
//     iterations of a pipelined loop) issue nothing.
// A nested loop inside the inner loop is one bar (its body's cycles x its trip count).
//
// Example (attention, warps 8, pipeline 2): iteration n_o = 0 starts with wait_group 0 and
// bar.sync, issues the K and V copies of stage 1 (they fly on the "cp.async stage 1" row while
// the warp runs its QK mma.sync, the softmax and its PV mma.sync on stage 0), and iteration 1
// waits for them at its own wait_group.
//
// Warp specialization. When the kernel body holds a Roles op, the ops before it run on every
// warp as above; then each role runs on its own warps with its own clock: the ops of its body
// before its first loop (a consumer's peeled first k step), then that loop's first `iterations`
// iterations (a producer as many more as its ring lets it run ahead); what follows the loop (the
// epilogue) is not drawn. The roles meet only at mbarriers: an arrive (with its expect_tx bytes)
// and the landing of the TMA boxes counted on a slot complete its phase, and mbarrier.try_wait
// blocks until the phase of its parity has completed, so a role waiting for a stage shows a Wait
// bar as long as the copy or the consumers keep it. A TMA box flies on a "tma stage s" row; a
// wgmma occupies the SM's tensor cores (one "tensor cores (wgmma)" row, shared by the consumers,
// whose wgmmas queue there) and wgmma.wait_group n waits until all but the n most recent groups
// of its role have run. A 1-stage ring therefore shows the producer and the consumers taking
// turns, a deep one the next stages' boxes flying under the current stage's wgmma. Roles left
// waiting when the drawn iterations end are not an error.
//
// Named barriers (bar.sync / bar.arrive ID, THREADS inside roles) synchronize roles too: each
// arrival counts its role's threads, and a bar.sync returns when THREADS have arrived -- how one
// consumer warpgroup orders its tensor-core phase after another's (ping-pong).
//
// Hand-offs. Every wait that a role's mbarrier.wait or bar.sync ends because another row
// completed the phase is a TimelineHandoff: from the TMA box landing on a "tma stage s" row (the
// stage is full), from a consumer's arrival on the producer's empty barrier (the stage is
// released), or from the last arrival at a named barrier, to the waiting role's rows (the first
// warp of each of its warpgroups) at the moment it goes on. role_phases() cuts each role's row into phases -- tensor core (a wgmma
// issued until its wait_group retires it), softmax / element-wise, waiting at a barrier, issuing
// copies -- the picture FlashAttention-3 draws of its warpgroups.
//
// The pipeline solver's answer (modulo reservation table, per-role timeline of the steady
// state) is core/pipeline/schedule_view.h's; this file times the kernel as the IR writes it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/matile/ir.h"

namespace nautilus::cost {

// What a bar is, for its colour and legend.
enum class OpClass {
  AsyncCopy,    // cp.async issue (on a warp row) or flight (on a copy row)
  Wait,         // cp.async.wait_group, bar.sync: the time a warp waits
  SharedLoad,   // ldmatrix, ld.shared, st.shared, convert_layout through shared memory
  Mma,          // mma.sync, fma_dot
  ElementWise,  // softmax arithmetic: exp2, mul, sub, max, casts, layout conversions
  Reduce,       // row reductions: in-thread combines, shuffles, cross-warp scratch
  Global,       // ld.global / st.global
  Control,      // uniform index arithmetic, commit_group, nested loops
};
const char* op_class_name(OpClass op_class);  // "cp.async", "wait / barrier", "mma", ...
constexpr int kOpClassCount = 8;

// Cycles per warp instruction of each pipe (one SM sub-partition, no contention between warps),
// and the latencies the model has no per-op work for. The defaults are rough Ampere figures; they
// only set the bars' proportions.
struct CycleCosts {
  int64_t alu = 2;              // CUDA-core instruction: 32 lanes at 16 lanes/clock
  int64_t sfu = 8;              // MUFU instruction: 32 lanes at 4 lanes/clock
  int64_t mma = 8;              // mma.sync m16n8k16 (2048 FMA at 256 FMA/clock)
  int64_t shared_wavefront = 1; // one 128-byte shared-memory wavefront
  int64_t barrier = 20;         // bar.sync once every warp has arrived
  int64_t copy_issue = 4;       // cp.async: per 16-byte vector instruction
  int64_t copy_latency = 500;   // cp.async: issue to landing, plus the bytes below
  int64_t copy_bytes_per_cycle = 32;  // the CTA's share of global bandwidth
  int64_t global_latency = 500; // ld.global: until the registers are usable
  int64_t commit = 1;           // cp.async.commit_group
  // Hopper (warp-specialized kernels). wgmma runs on the SM's tensor cores at 4096 FLOP per
  // clock (the data sheet's 989 TFLOP/s dense bf16 over 132 SMs at its 1.83 GHz boost clock),
  // beside the warps that issued it; issuing one takes `wgmma_issue`. A TMA box flies like a
  // cp.async (copy_latency + bytes / copy_bytes_per_cycle) after its one-thread issue, whose
  // cycles, like those of mbarrier waits and arrives, fences and commits, are the analytical
  // model's fixed latencies (op_work's sync_cycles).
  int64_t wgmma_flops_per_cycle = 4096;
  int64_t wgmma_issue = 8;
};

struct TimelineRow {
  enum class Kind { Warp, Copies };
  Kind kind = Kind::Warp;
  std::string name;  // "warp 3", "cp.async stage 1", "warp 4 (consumer0)", "tma stage 2",
                     // "tensor cores (wgmma)"
  int warp = -1;     // Warp rows
  int stage = -1;    // Copies rows (-1: copies whose stage is not known)
  std::string role;  // Warp rows of a warp-specialized kernel: the role ("producer", "consumers")
  int warpgroup = -1;  // ... and the warp's warpgroup within its role (0-based)
};

struct TimelineBar {
  int row = 0;
  int iteration = -1;  // -1: the prologue before the loop; else the loop variable's value
  int64_t start = 0, end = 0;  // cycles; end == start for ops that cost nothing
  OpClass op_class = OpClass::Control;
  std::string label;   // "mma.m16n8k16 %27_k0", "cp.async K -> K_smem[1]", "wait_group 0"
  // Warp instructions issued (0 for waits and copy flights); for shared-memory accesses, the
  // wavefronts they take.
  int64_t instructions = 0;
  int stage = -1;      // cp.async: the stage written (when the stage index is known)
  int op_index = -1;   // position of the op in its region (the loop body, or the prologue's)
  bool predicated_off = false;  // a cp.async whose predicate is false: issues nothing
};

// A synchronization between rows: `to_row` waited (mbarrier.wait, bar.sync) until the event at
// `from_row` completed the phase it waited for.
struct TimelineHandoff {
  bool named_barrier = false;  // a named barrier; else an mbarrier phase
  std::string label;           // "full[1]", "empty[0]", "bar 3"
  int from_row = -1, to_row = -1;
  int64_t from_cycle = 0;      // the phase completed (a TMA box landed, the last arrival)
  int64_t to_cycle = 0;        // the waiter goes on
  int iteration = -1;          // the waiter's loop iteration (-1 before its loop)
};

struct PipelineTimeline {
  std::string kernel;
  std::string loop_var;      // "n_o"
  int64_t loop_extent = 0;
  int pipeline_stages = 0;   // a warp-specialized kernel: its ring's stages
  int iterations = 0;        // loop iterations drawn
  std::vector<TimelineRow> rows;
  std::vector<TimelineBar> bars;
  // [start, end) cycles of each drawn iteration on warp 0; the prologue is [0, loop_start).
  std::vector<std::pair<int64_t, int64_t>> iteration_spans;
  int64_t loop_start = 0;
  int64_t total_cycles = 0;
  std::vector<TimelineHandoff> handoffs;  // warp-specialized kernels only
  // Why there is no timeline ("kernel softmax has no loop"); empty when there is one.
  std::string error;
};

struct TimelineOptions {
  int iterations = 3;  // at most the loop's trip count
  CycleCosts costs;
};

// The class and per-warp cycles of one op (not a wait, barrier or For, which the simulation
// times), from the cost model's work of the op.
struct WarpCost {
  OpClass op_class = OpClass::Control;
  int64_t cycles = 0;
  int64_t instructions = 0;
};
WarpCost warp_cost(const matile::Kernel& kernel, const matile::Op& op, const CycleCosts& costs = {});

// The inner loop of `kernel`: the first software-pipelined For (pipeline_stages > 0), else the
// first For, searched depth-first in program order; the timeline covers the ops before it at the
// kernel's top level and its first iterations. A kernel without a loop yields `error`. A kernel
// with a Roles op at its top level: every role's loop (above, "Warp specialization"); the
// loop_var, extent and iteration spans are those of the first role whose loop loads nothing by
// TMA (a consumer: the producer runs ahead of the work), else of the first role's loop.
PipelineTimeline timeline_from_kernel(const matile::Kernel& kernel,
                                      const TimelineOptions& options = {});

// Groups of warp rows whose bars are identical (the same ops over the same cycles), in row order,
// each group listing its rows in increasing order. Without warp specialization every warp runs
// the same program, so all warps form one group; the panel then draws one row for them.
std::vector<std::vector<int>> identical_warp_rows(const PipelineTimeline& timeline);

// A stretch of a role's row doing one kind of work (see "Hand-offs" above).
struct RolePhase {
  enum class Kind { TensorCore, ElementWise, Wait, Copy };
  int row = 0;
  Kind kind = Kind::ElementWise;
  int64_t start = 0, end = 0;
  int iteration = -1;   // of its first bar
  std::string label;    // "tensor core: wgmma %27", "softmax / element-wise: 17 ops", "wait: full[0]"
};
const char* role_phase_name(RolePhase::Kind kind);  // "tensor core", "softmax / element-wise", ...

// The phases of every role row, in row order then time: consecutive bars of one kind merge
// (free bars and index / control bars in between do not split a phase). Rows outside roles
// have none.
std::vector<RolePhase> role_phases(const PipelineTimeline& timeline);

}  // namespace nautilus::cost
