// Delayed normalization: a division (or multiplication) by a factor that does not vary along a
// summed axis moves out of the sum, so it is applied to the small result instead of the big
// operand, and an accumulator that a loop keeps normalized is normalized once after the loop.
//
// 1. Reductions. `reduce sum (x / broadcast(c)), axis A`, where the broadcast does not map c
//    onto axis A (c is constant along it), becomes `(reduce sum x) / c` (c re-broadcast to the
//    reduced shape if needed); the same for `x · broadcast(c)` and chains of such factors.
// 2. Dots. `dot(a / broadcast(c_row), b)` with c constant along K (broadcast onto a's rows)
//    becomes `dot(a, b) / broadcast(c_row)`; likewise a factor of b constant along K (onto its
//    columns). Dots with an accumulator are left to rule 3.
//    Rules 1 and 2 apply only when every use of the divided tile can be rewritten, so that the
//    per-element division of the big tile disappears.
// 3. Loops. A For-carried tile `acc` whose next value is a sum of terms, each a tile times
//    per-row factors — acc_i · (f…) and t · (g…) / n, with t not reading acc — where every
//    other term is divided by one per-row value n that is either loop-invariant or the next
//    value of another carried per-row value k, carries u = acc · n instead (u = acc · k_i at
//    the start of an iteration), which needs no division in the loop; after the loop
//    acc = u / n (or u / k). Per-row factors are read as products of atoms through mul and
//    div, so l_i · alpha / l_new cancels against l_new to alpha. This turns the normalized
//    FlashAttention-1 update into FlashAttention-2's. It needs n ≠ 0 and a loop of at least one
//    iteration (both hold for a softmax denominator), and it reassociates, so results change
//    by rounding only.
//
//   before (rule 3):                          after:
//     %l, %acc = for n_o in 0..3                %l, %acc_unnorm = for n_o in 0..3
//         iter_args(%l_i = %l0, %acc_i = %z) {      iter_args(%l_i = %l0, %acc_i_unnorm = %z) {
//       %l1 = add %l_scaled, %rowsum : f32[8]     %l1 = add %l_scaled, %rowsum : f32[8]
//       %f = mul %l_i, %alpha : f32[8]            %alpha_t = broadcast %alpha, dims [0]
//       %g = div %f, %l1 : f32[8]                 %t = mul %acc_i_unnorm, %alpha_t
//       %g_t = broadcast %g, dims [0]             %acc1_unnorm = dot %p, %vf, %t : f32[8, 4]
//       %a_s = mul %acc_i, %g_t : f32[8, 4]       yield %l1, %acc1_unnorm
//       %l1_t = broadcast %l1, dims [0]         }
//       %pn = div %p, %l1_t : f32[8, 16]        %l_t = broadcast %l, dims [0] : f32[8, 4]
//       %acc1 = dot %pn, %vf, %a_s              %acc = div %acc_unnorm, %l_t : f32[8, 4]
//       yield %l1, %acc1
//     }
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no division can move.
vrtile::ModulePtr delay_normalization(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
