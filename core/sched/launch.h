// launch(BLOCK, warps=W, stages=S) — how the kernel that computes BLOCK is launched and
// pipelined: W warps per CTA (1, 2, 4 or 8) and S software-pipeline stages for the copies of its
// inner loop (1 to 4). Either keyword may be left out (defaults: 4 warps, 2 stages).
//
// The decision does not change the scalar IR: it is recorded in the schedule, checked here (the
// block must exist, the numbers must be in range) and read by the placement of stage matile
// (driver: launch_choices), which gives the kernel of BLOCK's loop nest those options. More
// warps split the CTA's tile among more threads, which is how the attention kernel with 128
// query rows and a 128-wide head keeps its accumulator, scores and Q fragments in registers:
//
//   launch(O_sum_acc, warps=8)   →   kernel O: 8 warps, each 16 query rows × 128 of the head
//                                    (64 accumulator registers per thread instead of 128)
#pragma once

#include <string>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

struct LaunchChoice {
  std::string block;  // the kernel computing this block
  int warps = 4;
  int stages = 2;
};

// The launch decisions of a schedule, in order (a later one for the same block wins).
std::vector<LaunchChoice> launch_choices(const Schedule& schedule);

DecisionKind launch_decision();

}  // namespace nautilus::sched
