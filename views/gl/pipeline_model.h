// The data behind the pipeline panel (pipeline_panel.h): the inner loop of an MA tile kernel as a
// per-warp timeline, built from what the MA tile IR says today. Nothing here knows Qt or ImGui.
//
// What is simulated. MA tile IR has no warp specialization: every warp executes every op in
// program order (core/matile/ir.h). timeline_from_kernel() walks the kernel body up to its inner
// loop (the prologue) and then `iterations` iterations of that loop, per warp, with a clock per
// warp:
//   * an op occupies its warp for its estimated cycles (CycleCosts below): instructions the warp
//     issues x a per-class cost;
//   * cp.async only *issues* on the warp; the copy then flies on its own and lands
//     `copy_latency + bytes / copy_bytes_per_cycle` cycles after the warp issued it. Copies are
//     drawn on separate rows, one per shared-memory stage, so stage s+1's copy in flight is seen
//     next to the MMAs reading stage s;
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
// the warp runs its 32 QK mma.sync, the softmax and its 32 PV mma.sync on stage 0), and
// iteration 1 waits for them at its own wait_group.
//
// Later the pipeline solver (DESIGN.md §5) produces a modulo reservation table and a per-warp
// schedule; it only has to fill a PipelineTimeline (rows, bars) for the panel to draw it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/matile/ir.h"

namespace nautilus::views::gl {

// What a bar is, for its colour and legend.
enum class OpClass {
  AsyncCopy,    // cp.async issue (on a warp row) or flight (on a copy row)
  Wait,         // cp.async.wait_group, bar.sync: the time a warp waits
  SharedLoad,   // ldmatrix, ld.shared, st.shared
  Mma,          // mma.sync, fma_dot
  ElementWise,  // softmax arithmetic: exp2, mul, sub, max, casts, layout conversions
  Reduce,       // row reductions: in-thread combines, shuffles, cross-warp scratch
  Global,       // ld.global / st.global
  Control,      // uniform index arithmetic, commit_group, nested loops
};
const char* op_class_name(OpClass op_class);  // "cp.async", "wait", "ldmatrix", "mma", ...
constexpr int kOpClassCount = 8;

// Cycle costs per warp instruction (one SM sub-partition, no contention between warps). The
// defaults are rough Ampere figures; they only set the bars' proportions.
struct CycleCosts {
  int64_t alu = 2;              // f32 add/mul/max/select/cvt per register slot (16 lanes/clock)
  int64_t sfu = 8;              // exp2, log2, rsqrt, sqrt, tanh, sigmoid, div per slot (4 lanes/clock)
  int64_t index = 1;            // one uniform integer op (stage numbers, offsets)
  int64_t shuffle = 4;          // shfl.sync.bfly, per slot and mask
  int64_t mma = 8;              // mma.sync m16n8k16 (2048 FMA at 256 FMA/clock)
  int64_t fma = 2;              // fma_dot: one fmaf per accumulator slot and k
  int64_t shared_wavefront = 1; // ldmatrix / ld.shared / st.shared: per wavefront (bank model)
  int64_t copy_issue = 4;       // cp.async: per 16-byte vector instruction
  int64_t copy_latency = 500;   // cp.async: issue to landing, plus the bytes below
  int64_t copy_bytes_per_cycle = 32;  // the CTA's share of global bandwidth
  int64_t global_latency = 500; // ld.global: until the registers are usable
  int64_t global_store = 2;     // st.global per slot
  int64_t commit = 1;           // cp.async.commit_group
  int64_t barrier = 20;         // bar.sync once every warp has arrived
};

struct TimelineRow {
  enum class Kind { Warp, Copies };
  Kind kind = Kind::Warp;
  std::string name;  // "warp 3", "cp.async stage 1"
  int warp = -1;     // Warp rows
  int stage = -1;    // Copies rows (-1: copies whose stage is not known)
};

struct TimelineBar {
  int row = 0;
  int iteration = -1;  // -1: the prologue before the loop; else the loop variable's value
  int64_t start = 0, end = 0;  // cycles; end == start for ops that cost nothing
  OpClass op_class = OpClass::Control;
  std::string label;   // "mma.m16n8k16 %27_k0", "cp.async K -> K_smem[1]", "wait_group 0"
  int64_t instructions = 0;  // warp instructions issued (0 for waits and copy flights)
  int stage = -1;      // cp.async: the stage written (when the stage index is known)
  int op_index = -1;   // position of the op in its region (the loop body, or the prologue's)
  bool predicated_off = false;  // a cp.async whose predicate is false: issues nothing
};

struct PipelineTimeline {
  std::string kernel;
  std::string loop_var;      // "n_o"
  int64_t loop_extent = 0;
  int pipeline_stages = 0;
  int iterations = 0;        // loop iterations drawn
  std::vector<TimelineRow> rows;
  std::vector<TimelineBar> bars;
  // [start, end) cycles of each drawn iteration on warp 0; the prologue is [0, loop_start).
  std::vector<std::pair<int64_t, int64_t>> iteration_spans;
  int64_t loop_start = 0;
  int64_t total_cycles = 0;
  // Why there is no timeline ("kernel softmax has no loop"); empty when there is one.
  std::string error;
};

struct TimelineOptions {
  int iterations = 3;  // at most the loop's trip count
  CycleCosts costs;
};

// The inner loop of `kernel`: the first software-pipelined For (pipeline_stages > 0), else the
// first For, searched depth-first in program order; the timeline covers the ops before it at the
// kernel's top level and its first iterations. A kernel without a loop yields `error`.
PipelineTimeline timeline_from_kernel(const matile::Kernel& kernel,
                                      const TimelineOptions& options = {});

// Groups of warp rows whose bars are identical (the same ops over the same cycles), in row order,
// each group listing its rows in increasing order. Without warp specialization every warp runs
// the same program, so all warps form one group; the panel then draws one row for them.
std::vector<std::vector<int>> identical_warp_rows(const PipelineTimeline& timeline);

}  // namespace nautilus::views::gl
