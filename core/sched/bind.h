// bind: map loops of a block's nest to CTA grid dimensions (or back to serial loops).
//
// bind(BLOCK, LOOP=grid.x, LOOP=grid.y, ...) sets the kind of each named loop of BLOCK's nest to
// grid.x, grid.y, grid.z or serial (ir.h, ForKind). Each iteration of a grid loop becomes one CTA,
// and CTAs run concurrently in any order, so a loop bound to the grid must be
//   - spatial: for every block under it, the loop variable appears in the binding of some
//     spatial iteration variable and in no reduce binding (a reduction split across CTAs would
//     race on its accumulator; a block that does not depend on the loop would be computed by
//     every CTA at once);
//   - outermost: after the rebinding, no serial loop of the nest encloses a grid loop (so in
//     `for b / for h / for m_o` binding m_o alone fails; bind b, h and m_o), and each grid
//     dimension is bound once on a path.
// The other decisions leave grid loops alone (split and reorder fail on them), so bind comes
// last for a nest. Loops and bodies are otherwise unchanged; the interpreter runs grid loops in
// order. Rebinding loops to the kinds they have returns the program itself.
//
//   bind(O, b=grid.z, h=grid.y, m_o=grid.x) on a tiled cast nest, before:
//
//     for b in 0..1:
//       for h in 0..2:
//         for m_o in 0..3:
//           for m_i in 0..4:
//             for d in 0..8:
//               block O(b = b, h = h, m = m_o * 4 + m_i, d = d):
//
//   after:
//
//     for b in 0..1 [grid.z]:
//       for h in 0..2 [grid.y]:
//         for m_o in 0..3 [grid.x]:
//           for m_i in 0..4:
//             for d in 0..8:
//               block O(b = b, h = h, m = m_o * 4 + m_i, d = d):
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

struct LoopBinding {
  std::string loop;
  scalar::ForKind kind = scalar::ForKind::Serial;
};

// Named bind_loops, not bind: with std arguments, argument-dependent lookup finds std::bind.
ApplyResult bind_loops(const scalar::ProgramPtr& program, std::string_view block,
                       const std::vector<LoopBinding>& bindings);

// "grid.x" → GridX, ..., "serial" → Serial; nullopt for anything else.
std::optional<scalar::ForKind> parse_for_kind(std::string_view name);

DecisionKind bind_decision();

}  // namespace nautilus::sched
