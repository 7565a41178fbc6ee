// factor: compute the factors of a reduction's update that do not depend on one of its axes as
// a tensor of their own, in a new element-wise block before the reduction.
//
// factor(BLOCK, TENSOR, AXIS) takes a reduction block whose update is `B[...] = B[...] + e` and
// one of its spatial iteration variables, AXIS. `e` is read as a product of factors (a tree of
// multiplications; any other node is one factor). The factors whose value does not depend on
// AXIS -- there must be some, one of them a load, and some that do depend on it -- become
// TENSOR, indexed by the iteration variables they use, in BLOCK's order:
//
//   1. TENSOR is a new f32 intermediate with those variables' extents, written by a new block
//      TENSOR (one loop per variable) as the product of the independent factors, in their order.
//   2. BLOCK's update becomes `B[...] = B[...] + TENSOR[vars] * (the other factors)`.
//   3. The new nest goes right before the top-level statement that holds BLOCK.
//
// The product is reassociated only where independent and dependent factors were interleaved
// (`a * w * b` becomes `(a * b) * w`), which changes f32 rounding by an ulp; factors in the
// usual order (the independent ones first) multiply exactly as before. What the independent
// factors read must be complete before the new nest: every block that writes it comes earlier.
//
// What it is for: a reduction that recomputes a function of its operands once per step of an
// axis it does not depend on. A gated MLP's down projection `Y[t, e] = sum(f) G[t, f] *
// sigmoid(G[t, f]) * U[t, f] * Wd[f, e]` recomputes silu(G) * U for every column tile of Y, and
// reads G and U (f32) each time; factor(Y_sum, A, e) computes A[t, f] = silu(G) * U once, which
// the GEMMs of G and U can then produce in their epilogue (compute_with).
//
//   factor(Y_sum, A, e), before:
//
//     for t in 0..8:
//       for e in 0..16:
//         for f in 0..24:
//           block Y_sum(t = t, e = e; reduce f = f):
//             Y_sum[t, e] = Y_sum[t, e] + G[t, f] * sigmoid(G[t, f]) * U[t, f] * f32(Wd[f, e])
//
//   after:
//
//     for t in 0..8:
//       for f in 0..24:
//         block A(t = t, f = f):
//           A[t, f] = G[t, f] * sigmoid(G[t, f]) * U[t, f]
//     for t in 0..8:
//       for e in 0..16:
//         for f in 0..24:
//           block Y_sum(t = t, e = e; reduce f = f):
//             Y_sum[t, e] = Y_sum[t, e] + A[t, f] * f32(Wd[f, e])
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult factor(const scalar::ProgramPtr& program, std::string_view block, std::string_view tensor,
                   std::string_view axis);

DecisionKind factor_decision();

}  // namespace nautilus::sched
