// split_k_update(BLOCK, AXIS, splits=S) — split a reduction over AXIS into S independent partial
// reductions and a combine that merges them: split-K for a plain sum, FlashDecoding for the
// online softmax that rolling_update builds.
//
// The loop that iterates AXIS in BLOCK's binding (the outermost one, `n_o` after
// rolling_update(..., tile=T)) is the *reduction loop*. Every block under it is split with it:
// the statements of its nest form
//
//   common loops (perfectly nested)          for b, h, m:
//     prologue: blocks initializing states      Mx = -inf; L = 0; O_acc = 0
//     the reduction loop, updating states       for n_o: ... Mx, L, O_acc ...
//     epilogue: blocks reading the states       O_sum = O_acc / L
//
// where the *states* are the buffers written under the reduction loop. A plain reduction as
// lowered is the special case with one state whose init (in the block) moves to the prologue.
// After tile, the reduction loop is the k tiles' loop and the block sits under the tile's inner
// loops; the init then moves to the prologue inside copies of the inner loops its position
// uses, and the combine runs over the same tiles:
//
//   for m_o, n_o: for k_o, m_i, n_i, k_i: C_sum (init 0)      (tile(C_sum, m=4, n=2, k=4))
//   ->  for k_s, m_o, n_o: { for m_i, n_i: C_sum_init_part = 0; for k_o (chunk), m_i, n_i, k_i:
//       C_sum_part += ... }   for m_o, n_o, m_i, n_i, k_s: C_sum += C_sum_part[k_s, ...]
//
// The rewrite:
//   1. The partial nest: a new loop AXIS_s in 0..S around the common loops (inside them when
//      one is bound to the grid already), so that tiles of the common loops leave it outside,
//      free to become a grid dimension; every block of the
//      prologue and the reduction loop gets a spatial iteration variable AXIS_s, its states
//      become partial buffers X_part[AXIS_s, ...], and the reduction loop runs the
//      chunk = ceil(steps / S) steps of split AXIS_s. Bindings stay local to the split, so
//      AXIS_s is a spatial loop of every block (bind can make it the grid dimension); bodies
//      read the global position (n + n_s * 16), and predicates mask by global position and cut
//      the overhanging steps of the last split. Guards keep a split that has seen only −inf (a
//      causal row whose keys in the split are all masked) from computing exp(−inf − (−inf)):
//      such steps contribute nothing, and finite values are unchanged.
//   2. The combine nest, after it: for each state, one reduction over AXIS_s, in dependency
//      order, then the epilogue unchanged. How partials merge is read off the states' update
//      blocks: a max / min / sum whose values read no state merges with the same operation; a
//      sum that rolling_update repairs with a rescale block `X = X * f(prev, cur)` (f a product of
//      exponentials of differences of running values and their copies from before the step)
//      merges as X = Σ_s X_part[s] · f(prev := Y_part[s], cur := Y), the same repair applied
//      once per split. Softmax statistics give FlashDecoding's combine:
//         M = max_s M_s      L = Σ_s L_s·exp(M_s − M)      O = Σ_s O_s·exp(M_s − M)
//      then the delayed normalization O / L of the epilogue.
//
//   before (attention after rolling_update(O_sum, n, tile=8), N = 20):
//     for b, h, m:
//       Mx_init; L_init; for d: O_sum_acc_init
//       for n_o in 0..3:
//         Mx_prev = Mx; for n_i: Mx = max(Mx, S[n]); L_rescale; for n_i: L += ...; ...
//       for d: O_sum = O_sum_acc / L
//   after split_k_update(O_sum_acc, n, splits=2):
//     for n_s in 0..2:
//       for b, h, m:
//         Mx_init_part: Mx_part[n_s] = -inf; ...
//         for n_o in 0..2:
//           block Mx_prev_part(n_s = n_s, ...) if n_s * 2 + n_o < 3: Mx_prev_part[n_s] = Mx_part[n_s]
//           for n_i: block Mx_part(n_s = n_s, ...; reduce n = n_o * 8 + n_i)
//                        if n_s * 16 + n_o * 8 + n_i < 20 and n_s * 2 + n_o < 3:
//                      Mx_part[n_s] = max(Mx_part[n_s], S[n + n_s * 16])
//           ...
//     for b, h, m:
//       for n_s: block Mx(...; reduce n_s = n_s): Mx = max(Mx, Mx_part[n_s])
//       for n_s: block L(...; reduce n_s = n_s): L = L + L_part[n_s] * exp(Mx_part[n_s] - Mx)
//       for d: for n_s: block O_sum_acc(...): O_sum_acc = O_sum_acc + O_sum_acc_part[n_s, d] *
//                                                          exp(Mx_part[n_s] - Mx)
//       for d: block O_sum: O_sum = O_sum_acc / L
//
// Refused, with the reason: a spatial AXIS, a reduction loop bound to the grid or inside loops
// that are not perfectly nested, S < 2, a split that would be empty, other work in the prologue
// or states written in the epilogue (apply split_k_update before compute_at into that nest),
// a state whose start is not its operation's identity, a max/min with a rescale, a rescale that
// is not an exponential of differences, and a state that changes without a rescale while its
// values read other states (its partials could not be merged).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult split_k_update(const scalar::ProgramPtr& program, std::string_view block,
                           std::string_view axis, int64_t splits);

DecisionKind split_k_update_decision();

}  // namespace nautilus::sched
