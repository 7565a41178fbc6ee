// launch(BLOCK, warps=W, stages=S) — how the kernel that computes BLOCK is launched and
// pipelined: W warps per CTA (1, 2, 4 or 8) and S software-pipeline stages for the copies of its
// inner loop (1 to 8). Either keyword may be left out (defaults: 4 warps, 2 stages).
//
// The decision writes launch attributes (scalar::LaunchAttrs) on the outermost loop of BLOCK's
// loop nest; the scalar printer shows them on that loop, tilize copies them onto the nest's VR
// kernel and the MA lowering places that kernel with those warps and stages. More warps split
// the CTA's tile among more threads, which is how the attention kernel with 128 query rows and a
// 128-wide head keeps its accumulator, scores and Q fragments in registers:
//
//   launch(O_sum_acc, warps=8)   →   for b in 0..2 [grid.z] launch(warps=8, stages=2):
//                                      ...
//                                    kernel O: 8 warps, each 16 query rows × 128 of the head
//                                    (64 accumulator registers per thread instead of 128)
//
// Later decisions rebuild loop nests (tile splits the outermost loop, fusion moves a block into
// another nest); `keep_launch_attrs` gives every nest of their result the attributes its blocks'
// nests had, so a launch chosen before a fusion follows its block into the fused kernel.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

struct LaunchChoice {
  std::string block;  // the kernel computing this block
  int warps = 4;
  int stages = 2;
  scalar::SharedReads shared_reads = scalar::SharedReads::Auto;  // reads=
  scalar::MmaForm mma_form = scalar::MmaForm::Auto;               // mma=
};

// The launch decisions of a schedule, in order (a later one for the same block wins).
std::vector<LaunchChoice> launch_choices(const Schedule& schedule);

DecisionKind launch_decision();

// Rewrites the launch attributes of the nest that computes `block` (those it has, or the
// defaults) with `update`; fails, naming `decision_name`, when the block is in no loop nest.
// `launch` and `warp_spec` both write through it, each keeping what the other chose.
ApplyResult update_launch_attrs(const scalar::ProgramPtr& program, const std::string& block,
                                const std::string& decision_name,
                                const std::function<scalar::LaunchAttrs(scalar::LaunchAttrs)>& update);

// `after` (the result of a decision applied to `before`) with launch attributes on each
// top-level nest that lost them: a nest without attributes takes those of the nest that held
// its first block with attributes in `before`. Returns `after` itself when nothing was lost.
scalar::ProgramPtr keep_launch_attrs(const scalar::ProgramPtr& before,
                                     const scalar::ProgramPtr& after);

}  // namespace nautilus::sched
