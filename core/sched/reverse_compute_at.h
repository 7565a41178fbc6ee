// reverse_compute_at: move a consumer's nest under a loop of its producer's nest, computing in
// each iteration the part that the producer has just completed.
//
// reverse_compute_at(CONSUMER, PRODUCER, LOOP) takes block PRODUCER, which writes one tensor X in
// the plain form `X[spatial iteration variables] = ...`, and loop LOOP of PRODUCER's nest. Then:
//
//   1. For each dimension of X, the part PRODUCER writes in one iteration of the loops down to
//      LOOP is read off its bindings (region.h) as `offset + [lo, hi)`, clipped to X's extent.
//      The parts of different iterations must be disjoint (so everything in an iteration's part
//      is written by that iteration), which holds for the tiles split and tile make.
//   2. CONSUMER must read X indexed directly by its iteration variables; each variable that
//      indexes dimension j runs over dimension j's part, the others over their whole extent.
//      A reduce variable must get its whole extent (a reduction cannot be cut into the
//      producer's tiles here), and no two variables may follow the same loop: with
//      `Y[i, j] = A[i] + A[j]` at A's loop i, only the diagonal of Y would ever run.
//   3. CONSUMER's old nest is removed and a new one (region.h, build_region_nest) is appended to
//      LOOP's body, after everything the loop already runs. As in compute_at, earlier splits of
//      CONSUMER's loops and their overhang predicate are replaced.
//
// Validity, checked with reasons: the loops down to LOOP iterate only spatial axes of PRODUCER,
// so the elements of its part are final at the end of the iteration; every other writer of X
// (the init and rescale blocks of a rolling sum) runs under LOOP and writes the same part;
// every other tensor CONSUMER reads is written before LOOP, or under LOOP by a block that writes
// all CONSUMER reads of it in the same iteration (region.h, uncovered_read); whatever CONSUMER
// writes has no other writer and is read only after LOOP. Redundant work is allowed: when a
// part does not move with some loop down to LOOP, CONSUMER recomputes it in each iteration of
// that loop, with the same result.
//
//   reverse_compute_at(O, O_sum, m_o) on attention after tile(O_sum, m=4, n=8), before:
//
//     for b in 0..1:
//       for h in 0..2:
//         for m_o in 0..3:
//           for n_o in 0..3:
//             ...
//                   block O_sum(b = b, h = h, m = m_o * 4 + m_i, d = d; reduce n = ...):
//     for b in 0..1:                 (O's own nest)
//       for h in 0..2:
//         for m in 0..12:
//           for d in 0..8:
//             block O(b = b, h = h, m = m, d = d):
//
//   after:
//
//     for b in 0..1:
//       for h in 0..2:
//         for m_o in 0..3:
//           for n_o in 0..3:
//             ...
//           for m in 0..4:
//             for d in 0..8:
//               block O(b = b, h = h, m = m_o * 4 + m, d = d):
#pragma once

#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult reverse_compute_at(const scalar::ProgramPtr& program, std::string_view consumer,
                               std::string_view producer, std::string_view loop);

DecisionKind reverse_compute_at_decision();

}  // namespace nautilus::sched
