// skip_masked(MASK, LOOP) — skip the iterations of LOOP in which tensor MASK is masked entirely.
//
// MASK is a block inside serial loop LOOP whose store is `X[...] = select(condition, value, c)`
// with c a constant: where the condition fails, X is c (causal attention's `-inf` above the
// diagonal). The pass proves, by simplifying every block of LOOP's body under the assumption
// that all of X in the iteration is c, that such an iteration changes nothing that outlives it:
// each block that writes a tensor read after the iteration (a running max, a running sum, an
// accumulator) must simplify to storing the value it already holds —
//
//   Mx = max(Mx, X)                       →  max(Mx, -inf)            →  Mx
//   L = L * exp(Mx_prev - Mx)             →  L * exp(Mx - Mx) = L * 1 →  L     (Mx_prev = Mx)
//   O_sum_acc = O_sum_acc + exp(X - Mx) * V →  O_sum_acc + 0 * V     →  O_sum_acc
//
// — while tensors that live only within one iteration (the scores, Mx_prev) may take any value.
// Then every block of LOOP's body gets the condition under which the iteration's tile is not
// entirely masked: the mask's condition with every variable other than LOOP's and the grid
// loops' taken at its most favourable value. For causal attention (`n <= m`, 128 query rows by
// 64 keys per tile):
//
//   before:                                       after skip_masked(S, n_o):
//     for m_o [grid.x]: for m_i in 0..128:          for m_o [grid.x]: for m_i in 0..128:
//       for n_o in 0..64:                             for n_o in 0..64:
//         block S(...): S = select(n <= m, ...)         block S(...) if n_o * 64 <= m_o * 128 + 127:
//         block Mx(...): Mx = max(Mx, S)                block Mx(...) if ... and n_o * 64 <= m_o * 128 + 127:
//
// A predicated-off block does nothing, so the program computes the same values; tilize turns a
// condition that bounds LOOP's variable from above into the loop's trip count, so the masked key
// tiles of causal attention are never visited. A conjunct that bounds it from below (a sliding
// window's `m - n < W`) may mask LOOP's first iteration, which runs the inits of the reductions
// in the loop: it is added as `conjunct or n_o == 0` (iteration 0 runs, changing nothing but
// the inits), and tilize, which hoists those inits above the loop, starts the loop at the first
// iteration the conjunct admits. A disjunction (prefix-LM's `n <= m or n < P`) keeps the
// iteration where either side can hold; tilize ends the loop at the later of the two ends. A
// block equality `m / c == n / c` (a document mask) keeps it where the blocks that the tile's
// queries and keys reach overlap, as a lower and an upper bound on the keys over values known
// before the loop. The simplification assumes that values other
// than the mask constant are finite (x * 0 = 0). Refused, with the reason: MASK is not such a
// select, LOOP is not a serial loop around it, a block would change a value that outlives the
// iteration, or the condition is not affine in the loop variables or does not involve LOOP.
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult skip_masked(const scalar::ProgramPtr& program, std::string_view mask_block,
                        std::string_view loop_name);

DecisionKind skip_masked_decision();

}  // namespace nautilus::sched
