// reorder: permute perfectly nested loops of a block's nest.
//
// reorder(BLOCK, L1, L2, ...) takes loops of BLOCK's nest by variable name. Between the
// outermost and the innermost of them the loops must be perfectly nested (each one's body is
// the next loop). The named loops trade places so that they appear in the order given; loops
// of that band that are not named keep their positions:
//
//   loops b, h, m, d, n:   reorder(O_sum, n, m)   gives b, h, n, d, m
//
// Bodies, bindings and predicates do not change. Legality: when the band encloses one block,
// any order is valid. Its instances for one output element run in a different order only if a
// reduce loop moved, which regroups the reduction (float sums round differently, as any
// reassociation does). Init still runs first, because bindings grow with every loop from 0 and
// the instance with every reduce binding 0 is the first of its element in any order. When the
// band encloses several blocks (a fused nest), every loop of the band must iterate only spatial
// axes of each block under it, so that no reduction or producer-consumer order is exchanged.
// Loops bound to the grid cannot be reordered (bind after reordering). Naming the loops in their
// current order changes nothing and returns the program itself.
//
//   reorder(C_sum, k, m) on gemm, before:
//
//     for m in 0..12:
//       for n in 0..10:
//         for k in 0..24:
//           block C_sum(m = m, n = n; reduce k = k):
//
//   after:
//
//     for k in 0..24:
//       for n in 0..10:
//         for m in 0..12:
//           block C_sum(m = m, n = n; reduce k = k):
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult reorder(const scalar::ProgramPtr& program, std::string_view block,
                    const std::vector<std::string>& loops);

DecisionKind reorder_decision();

}  // namespace nautilus::sched
