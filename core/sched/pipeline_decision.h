// pipeline(BLOCK, stages=S, early_stages=E, consumers=C) — the software pipeline of the kernel that computes
// BLOCK, as the pipeline solver (core/pipeline) chose or completed it: S buffers in the ring of
// every operand its main loop copies into shared memory (each copy issued as far ahead as the
// ring allows: S-1 iterations with cp.async, as soon as a buffer is released by the TMA
// producer), and C consumer warpgroups beside the producer on sm_90a (0: one role, no warp
// specialization). Either keyword may be left out; `pipeline(BLOCK)` with neither asks the
// solver for the whole answer.
//
// The decision writes the kernel's launch attributes (scalar::LaunchAttrs) through
// update_launch_attrs, after the `launch` and `warp_spec` decisions it refines, and the MA
// lowering realizes them (core/matile/lower_pipeline.cpp on sm_80, lower_hopper.cpp on sm_90a).
// `nautilus schedule` appends it for every kernel with a pipelined loop (docs/pipeline.md):
//
//   warp_spec(C_sum, consumers=2, stages=4)      solver: II 1152 cycles (tensor core bound),
//   (the search's choice, by the cost model)  →    rings A 2, B 3: 3 stages, optimal
//                                                  pipeline(C_sum, stages=3, consumers=2)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

DecisionKind pipeline_decision();

// What a schedule's `pipeline` decisions pin for the kernel computing one of `blocks` (the last
// such decision wins); nullopt fields are left to the solver.
struct PipelinePins {
  bool present = false;  // some pipeline decision names one of the blocks
  std::optional<int> stages;
  std::optional<int> early_stages;
  std::optional<int> consumers;
};
PipelinePins pipeline_pins(const Schedule& schedule, const std::vector<std::string>& blocks);

}  // namespace nautilus::sched
