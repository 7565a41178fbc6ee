// Register budgets of a warp-specialized kernel, moved between its first role (the TMA
// producer) and the others (the consumers).
//
// ptxas allocates each role's code under the role's setmaxnreg budget, and near the edge its
// choice is not monotonic in that budget: the held-out ALiBi attention (two consumers, overlap,
// persistent, ping-pong; B4 H16 S4096 d 64) spills 4 bytes at 232 consumer registers, 36 at 224,
// 12 at 184 and none at 176, 216 or 240 (NVRTC 13.0, 2026-11-28). The budgets add up to at most
// the CTA's registers at launch (hopper.h, role_register_pool). A package build that finds a
// Hopper kernel spilling (driver/kernel_package.cpp) tries the neighbouring budgets before it
// refuses the kernel; nothing else in the kernel changes.
//
//   before:                                     with_consumer_registers(kernel, 240):
//     roles {                                     roles {
//       role producer warpgroups 1 registers 40     role producer warpgroups 1 registers 24
//       role consumers warpgroups 2 registers 232   role consumers warpgroups 2 registers 240
//     }                                           }
//   and the note "registers: producer 24, consumers 240 (setmaxnreg; the lowering chose 40 / 232,
//   at which ptxas spilled)".
#pragma once

#include <vector>

#include "core/matile/ir.h"

namespace nautilus::matile {

// The consumer budgets to try instead of the kernel's own, nearest first (+8, -8, +16, -16):
// those in 24..240, multiples of 8, that leave the first role at least 24 registers within the
// CTA's registers at launch (role_register_pool: 504 per warpgroup thread for three warpgroups).
// Empty for a kernel without a Roles op.
std::vector<int> consumer_register_alternatives(const Kernel& kernel);

// The kernel with every role but the first at `registers` and the first role at what is left
// (the pool minus the others, rounded down to 8, at most the registers of the kernel's launch), and a
// note saying so; nullptr when the kernel has no Roles op or the split is illegal (roles_error).
KernelPtr with_consumer_registers(const KernelPtr& kernel, int registers);

}  // namespace nautilus::matile
