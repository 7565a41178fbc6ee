// rolling_update(BLOCK, AXIS[, tile=T]) — fuse a reduction with the reductions it depends on
// along the same axis into one pass, repairing partial results as those reductions advance.
// This is the online softmax of FlashAttention, derived from the math rather than matched.
//
// BLOCK must be a sum reduction over AXIS whose value reads, directly or through elementwise
// intermediates (which are inlined, "mock-inlined" in Neptune's terms), other reductions over an
// axis of the same extent. All of them are computed in one loop over AXIS, in dependency order.
// A reduction whose value reads no other is updated as before (the running max). A dependent sum
// reduction is rewritten by splitting its value into a sum of terms, each a product of
//   - factors of the loop's data and exponentials exp(x + r) whose exponent is additively
//     separable into a data part x and a part r of running reductions: evaluated every
//     iteration with the current running values;
//   - factors of running reductions only (e.g. 1 / L): deferred to after the loop.
// The repair of a term is then derived from its exponent alone: when the running values move
// from r to r', every partial sum of the term is rescaled by exp(r − r') (the "inverse" of the
// exponential, applied to the old values), and the deferred factors are applied once at the end
// (delayed normalization). Softmax gives the FlashAttention rescale t·exp(Mx − Mx');
// log-sum-exp gives the same; variance-style statistics (x − mean)² expand into separate sums
// that need no rescale. Anything else is refused with the reason.
//
//   before (attention, per row b, h, m):
//     Mx  = max(n) S[n]             P[n] = exp(S[n] - Mx)
//     L   = sum(n) P[n]             O_sum[d] = sum(n) P[n] * V[n, d] / L
//   after rolling_update(O_sum, n):
//     Mx = -inf; L = 0; O_sum_acc[d] = 0
//     for n:
//       Mx_prev = Mx
//       Mx = max(Mx, S[n])
//       L = L * exp(Mx_prev - Mx);                 L = L + exp(S[n] - Mx)
//       O_sum_acc[d] = O_sum_acc[d] * exp(Mx_prev - Mx)
//       O_sum_acc[d] = O_sum_acc[d] + exp(S[n] - Mx) * V[n, d]
//     O_sum[d] = O_sum_acc[d] / L
//
// Other sum reductions over the axis that read a fused reduction at their own point but that no
// member reads ("siblings": the two sums of `(sum(n) P * V) / (sum(n) P)`) join the same loop,
// and so do sums that read no fused reduction but load the same data along the axis the same
// way (everything else they read being program inputs), as plain running sums, so the data is
// read once:
//   before (cross-entropy, per row r):
//     Mx = max(c) X[c]     Lse = sum(c) exp(X[c] - Mx)     Dot = sum(c) T[c] * X[c]
//   after rolling_update(Lse, c):
//     for c: Dot = Dot + T[c] * X[c];  Mx_prev = Mx;  Mx = max(Mx, X[c]);
//            Lse = Lse * exp(Mx_prev - Mx);  Lse = Lse + exp(X[c] - Mx)
// Two plain sums of one row (sum(c) X, sum(c) X * X) fuse this way although neither reads the
// other.
// When a max or min can be infinite (its value comes from a `select(..., -inf)`), exponents read
// its current running value through the finite stand-in `select(Mx == -inf, 0, Mx)`
// (finite_stand_in.h), so rows whose values are all masked so far give 0, not NaN:
//       L = L * exp(Mx_prev - select(Mx == -inf, 0, Mx));  L = L + exp(S[n] - select(Mx == -inf, 0, Mx))
//
// With tile=T the axis is split into T-wide steps: the running reductions advance a whole tile
// at a time and the repair runs once per tile, as in FlashAttention's loop over key tiles.
// A T wider than the axis is one step over the axis rounded up to a multiple of 16, masked past
// its end (77 keys, tile=128: one step of 80), so the step stays a tensor-core extent.
// The pass expects the nests as lowered (one loop per iteration variable); apply it before
// tiling the blocks involved.
#pragma once

#include "core/sched/decision.h"

namespace nautilus::sched {

const DecisionKind& rolling_update_decision();

ApplyResult apply_rolling_update(const scalar::ProgramPtr& program, const Decision& decision);

}  // namespace nautilus::sched
