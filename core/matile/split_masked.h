// split_masked_loops: run the iterations of a loop in which a mask holds on the whole tile
// without the mask.
//
// A serial loop whose body selects with an element-wise comparison of index tiles —
// causal attention's `select(n <= m, s, -inf)`, with n = n_o * 64 + (0..63) the key and
// m = m_o * 128 + (0..127) the query — masks only some of its iterations: the comparison holds
// for every element of the tile while the largest key is at most the smallest query,
// n_o * 64 + 63 <= m_o * 128, that is for the first floor((m_o * 128 - 63) / 64) + 1
// iterations. The pass proves such a prefix (both sides affine in the loop variable, uniform
// scalars from outside the loop and iota lanes, so the tile's extremes are known; the condition
// may reach the select through a broadcast, as a partial last tile's `n < N` does; with
// several such selects the shortest prefix counts), and splits
// the loop in two: the first runs the unmasked prefix with the comparison replaced by `true`
// (the select, the compare and the index arithmetic behind it disappear), the second runs the
// remaining iterations with the body as it was, its loop variable offset by the prefix. The
// loop-carried values flow from the first loop into the second; a software-pipelined loop stays
// one pipeline (the second loop waits for and issues exactly the copies the original iterations
// did), so nothing else changes.
//
//   before:                                         after:
//     %acc = for n_o in 0..32 trip %trips {           %u = ... floordiv(%m0 - 63, 64) + 1,
//       %n = add n_o * 64, iota 64                          clamped to 0..%trips
//       %c = cmp le %n, %m                            %acc.u = for n_o in 0..32 trip %u {
//       %s = select %c, %qk, -inf                       (no iota, cmp or select: %s is %qk)
//       ...                                           }
//     }                                               %rest = sub %trips, %u
//                                                     %acc = for n_o.masked in 0..32 trip %rest
//                                                         iter_args(= %acc.u) {
//                                                       %n_o.1 = add %u, %n_o.masked
//                                                       ... the original body on %n_o.1 ...
//                                                     }
//
// Why: the mask costs more than its ALU work. ptxas hoists the per-element index arithmetic
// out of the loop and keeps it in registers across the whole body, which on a 128-row,
// D = 128 causal attention kernel pushes the body past 255 registers and spills; with the
// masked iterations in a loop of their own (two of them per CTA in that kernel), the main loop
// has the register needs of unmasked attention. FlashAttention-2 splits its loop the same way.
//
// A loop without such a select is left alone, and so is one whose prefix is known to be empty
// or the whole loop in every CTA (a comparison of constants), and a loop of one iteration. The result computes the same
// values, bit for bit: select(true, s, -inf) is s (tests/matile/split_masked_test.cpp runs the
// interpreter on both).
#pragma once

#include "core/matile/ir.h"

namespace nautilus::matile {

ModulePtr split_masked_loops(const ModulePtr& module);

// When `second` is the masked half of a loop this pass split and `first` the unmasked half
// before it: the value that offsets the second loop's variable by the first loop's trip count
// (`%n_o.1 = add %n_o_unmasked, %n_o.masked`), else null. The cost model uses it to see the two
// loops as one iteration space.
Value split_loop_offset(const Op& first, const Op& second);

}  // namespace nautilus::matile
