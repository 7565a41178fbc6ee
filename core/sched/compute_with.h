// compute_with: merge a block's loop into a sibling loop of the same extent, so that one loop
// computes both (Halide's compute_with).
//
// compute_with(BLOCK, OTHER, LOOP) takes loop LOOP of block OTHER's nest. The nests of BLOCK
// and OTHER part at some loop at or above LOOP (two children of one sequence, under the same
// loops): from there down to LOOP, OTHER's loops and as many of BLOCK's must be perfect nests,
// level by level of the same extent, all serial. BLOCK's loops go away; their body runs in
// LOOP's body with their variables replaced by OTHER's, after LOOP's own statements (before
// them when BLOCK's nest came first: program order is kept). Whatever stood between the two
// nests now runs after the merged one.
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
//   compute_at(U, A, f_o), tile(G, h=64), tile(U, h=64); before (t, f and h_o are the parting
//   loops, perfect nests in both):
//
//     for t_o in 0..32:
//       for f_o in 0..86:
//         for t in 0..128: for f in 0..128: for h_o in 0..64: for h_i in 0..64:
//           block G(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//         for t in 0..128: for f in 0..128: for h_o in 0..64: for h_i in 0..64:
//           block U(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//         for t_i in 0..128: for f_i in 0..128:
//           block A(...)
//
//   after:
//
//     for t_o in 0..32:
//       for f_o in 0..86:
//         for t in 0..128: for f in 0..128: for h_o in 0..64:
//           for h_i in 0..64:
//             block G(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//           for h_i in 0..64:
//             block U(t = t_o * 128 + t, f = f_o * 128 + f; reduce h = h_o * 64 + h_i)
//         for t_i in 0..128: for f_i in 0..128:
//           block A(...)
//
//   Tilize makes t and f the dims of the tiles, so the kernel runs one h_o loop with both dots.
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult compute_with(const scalar::ProgramPtr& program, std::string_view block,
                         std::string_view other, std::string_view loop);

DecisionKind compute_with_decision();

}  // namespace nautilus::sched
