// compute_at: move a producer's nest under a loop of its consumer's nest, computing in each
// iteration only the part the iteration reads.
//
// compute_at(PRODUCER, CONSUMER, LOOP) takes block PRODUCER, which writes one tensor X in the
// plain form `X[spatial iteration variables] = ...` (as lowering gives), and loop LOOP of block
// CONSUMER's nest. Every block that reads X must be under LOOP; CONSUMER itself need not read X
// (it names the nest), so a chain fuses from the last consumer back: compute_at(Y_sum, Y, r)
// then compute_at(E, Y, r) puts E before Y_sum in Y's r loop. Then:
//
//   1. For each dimension of X, the part read in one iteration of the loops down to LOOP is
//      found from the readers' bindings (region.h): each read must index X directly with an
//      iteration variable, whose binding gives `offset + [lo, hi)` with the offset over loops
//      down to LOOP. A dimension that does not move is clipped to X's extent; readers that need
//      different moving parts of one dimension are not supported.
//   2. PRODUCER's old nest (the loops that enclose only it) is removed, and a new one is built
//      (region.h, build_region_nest): a loop per iteration variable whose part is wider than one
//      element, named after it, in iteration-variable order; reduce variables run over their whole
//      extent, so every element is complete within the iteration. The predicate keeps bindings of
//      the last, overhanging tile inside the extents. Any split or tile of PRODUCER's own loops is
//      not carried over (tile it again under LOOP), and its old predicate is dropped: the passes
//      only ever predicate the overhang of a split, which the new predicate covers.
//   3. The new nest goes into LOOP's body right before the first statement that reads X.
//
// Validity, checked with reasons: X is an intermediate (an output must be written whole) with no
// other writer; LOOP may iterate a reader's reduction axis (attention's key-tile loop after
// rolling_update): every iteration then computes the part that iteration reads, so the
// reduction consumes its input tile by tile; each tensor PRODUCER reads is complete where
// PRODUCER now runs: written before LOOP, or in the same iteration by a statement of LOOP's body
// before the new nest that writes all PRODUCER reads of it (region.h, uncovered_read). X stays a
// global buffer (localizing it is cache_read / cache_write's job).
//
//   compute_at(S, O_sum, m_o) on attention (M = 12, N = 20, D = 8) after tile(O_sum, m=4, n=8),
//   inline(P), compute_at(L, O_sum, m_o) and compute_at(Mx, O_sum, m_o), before:
//
//     for b in 0..1:                           (S's own nest)
//       for h in 0..2:
//         for m in 0..12:
//           for n in 0..20:
//             for d in 0..8:
//               block S(b = b, h = h, m = m, n = n; reduce d = d):
//     for b in 0..1:
//       for h in 0..2:
//         for m_o in 0..3:
//           for m in 0..4:                     (Mx, the first reader of S)
//             for n in 0..20:
//               block Mx(b = b, h = h, m = m_o * 4 + m; reduce n = n):
//           ...                                (L, then O_sum's n_o loop)
//
//   after:
//
//     for b in 0..1:
//       for h in 0..2:
//         for m_o in 0..3:
//           for m in 0..4:
//             for n in 0..20:
//               for d in 0..8:
//                 block S(b = b, h = h, m = m_o * 4 + m, n = n; reduce d = d):
//           for m in 0..4:
//             for n in 0..20:
//               block Mx(b = b, h = h, m = m_o * 4 + m; reduce n = n):
//           ...
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult compute_at(const scalar::ProgramPtr& program, std::string_view producer,
                       std::string_view consumer, std::string_view loop);

DecisionKind compute_at_decision();

}  // namespace nautilus::sched
