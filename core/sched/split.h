// split: one loop of a block's nest becomes an outer and an inner loop.
//
// split(BLOCK, AXIS, FACTOR) finds the loop AXIS names in BLOCK's nest: the one loop that the
// binding of BLOCK's iteration variable AXIS uses (in the unoptimized program loops and iteration
// variables share names), or else the enclosing loop whose variable is named AXIS (to split a
// loop that split made, or one shared by a fused nest). It replaces `for x in 0..E` by
//
//   for x_o in 0..ceil(E / FACTOR):
//     for x_i in 0..FACTOR:
//
// and substitutes x = x_o * FACTOR + x_i in the bindings and predicates of every block under the
// loop. When FACTOR does not divide E, the last outer iteration overhangs and every block under
// the loop that uses x gets the predicate `x_o * FACTOR + x_i < E` (after its own, joined with
// `and`). A block that does not use x (a loop left around a block that compute_at placed under
// another block's loops) and whose reductions lie inside x gets none: each iteration of x
// repeats its whole computation, so an overhang iteration writes the same values again, while a
// guard there would bound nothing the block indexes (tilize masks a reduction's init and final
// store only by the bounds of what they index). The new names are made unique (m_o2) when the
// nest already uses them. The new loops are serial; a loop bound to the grid cannot be split
// (split first, then bind).
//
// Blocks see only their iteration variables, so their bodies do not change; the init rule still
// holds because a reduce binding is 0 exactly when x_o and x_i are.
//
//   split(C_sum, m, 5) on gemm with M = 12, before:
//
//     for m in 0..12:
//       for n in 0..10:
//         for k in 0..24:
//           block C_sum(m = m, n = n; reduce k = k):
//
//   after:
//
//     for m_o in 0..3:
//       for m_i in 0..5:
//         for n in 0..10:
//           for k in 0..24:
//             block C_sum(m = m_o * 5 + m_i, n = n; reduce k = k) if m_o * 5 + m_i < 12:
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/sched/decision.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

// The names split gave the two loops.
struct SplitLoops {
  std::string outer, inner;
};

ApplyResult split(const scalar::ProgramPtr& program, std::string_view block, std::string_view axis,
                  int64_t factor, SplitLoops* loops = nullptr);

// The index into path.stmts of the loop that `axis` names for the block at the end of `path`
// (see above); nullopt with a reason when it names none.
std::optional<size_t> find_axis_loop(const BlockPath& path, std::string_view axis,
                                     std::string* reason);

DecisionKind split_decision();

}  // namespace nautilus::sched
