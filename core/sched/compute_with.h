// compute_with: merge a block's loop into a sibling loop of the same extent, so that one loop
// computes both (Halide's compute_with).
//
// compute_with(BLOCK, OTHER, LOOP) takes loop LOOP of block OTHER's nest and the loop L of
// BLOCK's nest that is LOOP's sibling: a child of the same sequence, under the same enclosing
// loops. L must have LOOP's extent, and both must be serial loops. L goes away and its body runs
// in LOOP's body, after LOOP's own statements (before them when L came first), with L's variable
// replaced by LOOP's. Whatever stood between the two loops now runs after both.
//
// Validity, checked with reasons: the loops' blocks share no written tensor (neither nest reads
// or writes what the other writes; both may read the same inputs), so the interleaving of their
// iterations computes what the two loops computed one after the other; and the statements
// between the two loops neither write what the later loop's blocks read or write, nor read what
// they write.
//
// What it is for: two GEMMs that read the same operand (a gated MLP's gate and up projections,
// G = X Wg and U = X Wu), computed at one tile of their consumer A = f(G) * U, become one
// reduction loop: each iteration reads one k tile of X for both products, and one kernel holds
// both accumulators and computes A in its epilogue, so G and U are never stored.
//
//   compute_with(U, G, h_o) after tile(A, t=128, f=128), compute_at(G, A, f_o),
//   compute_at(U, A, f_o), tile(G, h=64), tile(U, h=64); before:
//
//     for t_o in 0..32:
//       for f_o in 0..86:
//         for h_o in 0..64:
//           for t in 0..128: for f in 0..128: for h_i in 0..64:
//             block G(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//         for h_o.1 in 0..64:
//           for t in 0..128: for f in 0..128: for h_i in 0..64:
//             block U(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o.1 * 64 + h_i)
//         for t_i in 0..128: for f_i in 0..128:
//           block A(...)
//
//   after:
//
//     for t_o in 0..32:
//       for f_o in 0..86:
//         for h_o in 0..64:
//           for t in 0..128: for f in 0..128: for h_i in 0..64:
//             block G(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//           for t in 0..128: for f in 0..128: for h_i in 0..64:
//             block U(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//         for t_i in 0..128: for f_i in 0..128:
//           block A(...)
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult compute_with(const scalar::ProgramPtr& program, std::string_view block,
                         std::string_view other, std::string_view loop);

DecisionKind compute_with_decision();

}  // namespace nautilus::sched
