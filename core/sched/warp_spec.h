// warp_spec(BLOCK, consumers=N, stages=S) — the warp-specialized Hopper form of the kernel that
// computes BLOCK: one producer warpgroup issues the TMA copies of the kernel's main loop into a
// ring of S shared buffers (S left out: the `launch` decision's stages), and N consumer
// warpgroups (1 to 3) run everything else, with the loop's dots on wgmma reading those buffers.
// Full and empty mbarriers hand each buffer from the producer to the consumers and back.
// consumers=0 removes the specialization again. pingpong=1 (2 or 3 consumers) makes the consumer
// warpgroups take turns on the tensor cores: each waits on its own named barrier before issuing
// an iteration's first MMAs and passes the turn to the next warpgroup after issuing them
// (warpgroup 0 starts), so the softmax (or epilogue) of one runs while the other's MMAs compute.
//
// The decision writes `consumers` (and `stages`) into the nest's launch attributes (scalar::LaunchAttrs; the
// warps of `launch` are then unused); the MA lowering (core/matile/lower_hopper.cpp) builds the
// roles on sm_90a, or says why the kernel cannot take that form (a dot whose rows are not
// 64 x N, an operand that no tensor map can copy, ...). On sm_80 the kernel keeps the mma.sync
// form with 4 x N warps.
//
//   tile(C_sum, m=128, n=256, k=64)              kernel C: grid(n_o: 16, m_o: 32)
//   warp_spec(C_sum, consumers=2, stages=4)  →     roles { producer: 1 warpgroup, 40 registers
//                                                          consumers: 2 warpgroups, 232 registers }
#pragma once

#include "core/sched/decision.h"

namespace nautilus::sched {

DecisionKind warp_spec_decision();

}  // namespace nautilus::sched
