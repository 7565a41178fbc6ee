// tile: the two-level tile of a block's nest (CTA tile, then the work inside it).
//
// tile(BLOCK, AXIS=SIZE, ...) splits the loop of every named axis by its size (exactly as split
// does, giving AXIS_o and AXIS_i, with the overhang predicate when SIZE does not divide the
// extent) and then reorders the band of loops from the outermost to the innermost of the new
// loops: first the outer (tile-index) loops, in the order the axes' loops had in the nest, then
// the band's other loops in their order. Loops outside the band keep their places. The order in
// which the axes are written does not matter.
//
// The outer loops of spatial axes enumerate output tiles: they are the candidates for the CTA
// grid, which `bind` makes explicit (tile itself leaves every loop serial). The outer loop of a
// reduction axis stays a serial loop over reduction tiles inside them; each block's init still
// runs once per output element, at its first tile, because it runs when every reduce binding is
// 0, i.e. when both the tile index and the index inside the tile are 0.
//
//   tile(O_sum, m=4, n=8) on attention (M = 12, N = 20, D = 8), before:
//
//     for b in 0..1:
//       for h in 0..2:
//         for m in 0..12:
//           for d in 0..8:
//             for n in 0..20:
//               block O_sum(b = b, h = h, m = m, d = d; reduce n = n):
//
//   after (band m .. n; outer loops m_o, n_o first, then m_i, d, n_i):
//
//     for b in 0..1:
//       for h in 0..2:
//         for m_o in 0..3:
//           for n_o in 0..3:
//             for m_i in 0..4:
//               for d in 0..8:
//                 for n_i in 0..8:
//                   block O_sum(b = b, h = h, m = m_o * 4 + m_i, d = d;
//                               reduce n = n_o * 8 + n_i) if n_o * 8 + n_i < 20:
//
// Failure reasons are those of split and reorder: an axis the block does not have, a size that is
// not positive, a band that is not perfectly nested or crosses a reduction of a fused nest, a loop
// already bound to the grid.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

struct TileSize {
  std::string axis;
  int64_t size = 0;
};

ApplyResult tile(const scalar::ProgramPtr& program, std::string_view block,
                 const std::vector<TileSize>& sizes);

DecisionKind tile_decision();

}  // namespace nautilus::sched
