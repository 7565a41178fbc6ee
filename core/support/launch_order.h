// The order in which a GPU launches the CTAs of a grid, and the grouped tile order that the
// `tile_order` decision asks for (core/sched/tile_order.h).
//
// CTAs start in launch order: blockIdx.x fastest, then y, then z. A kernel whose grid axes
// 0 and 1 (x and y) enumerate output tiles normally runs the tiles of one whole x row before
// the next row, so one wave of CTAs shares few tiles of the operand that depends on y and reads
// all the tiles of the one that depends on x. The grouped order with group G walks a band of G
// rows of y column by column instead: the CTA launched L-th (L counted over axes 0 and 1 only;
// further axes stay in launch order, slower) runs
//
//   band  = L / (G * X)                    X, Y: the extents of axes 0 and 1
//   rows  = min(G, Y - band * G)           the last band is short when G does not divide Y
//   y     = band * G + (L % (G * X)) % rows
//   x     = (L % (G * X)) / rows
//
// so a wave of W CTAs touches about G rows and W / G columns instead of W / X rows and all X
// columns. Example, X = 3, Y = 5, G = 2 (grid point (x, y) written as its launch index):
//
//   plain order           grouped, G = 2
//   y=0:  0  1  2         0  2  4
//   y=1:  3  4  5         1  3  5
//   y=2:  6  7  8         6  8 10
//   y=3:  9 10 11         7  9 11
//   y=4: 12 13 14        12 13 14      (last band: one row)
//
// The map is a bijection on the grid for every G >= 1 (G = 1 is the plain order); the CPU
// interpreters run a grouped kernel's grid points through it and the CUDA emitter computes the
// same formula from blockIdx, so both sides agree on which CTA computes which tile.
#pragma once

#include <cstdint>
#include <vector>

namespace nautilus {

// The grid point (one coordinate per axis, axis 0 first) of the CTA launched `launch_index`-th
// in a grid of `extents` whose axes 0 and 1 are grouped by `group` rows of axis 1 (group <= 1, or
// fewer than two axes: the plain launch order). 0 <= launch_index < product of extents.
// Each axis i with bit i of `reversed_axes` set is walked from its last coordinate down (the
// tile_order decision's reverse=LOOP): coordinate c of the order above becomes extent - 1 - c, so
// the CTAs launched first run that axis's last tiles (causal attention's longest query tiles).
std::vector<int64_t> grid_point_in_launch_order(int64_t launch_index,
                                                const std::vector<int64_t>& extents, int64_t group,
                                                uint32_t reversed_axes = 0);
// The same into `point` (resized to the axes), for loops over many CTAs.
void grid_point_in_launch_order(int64_t launch_index, const std::vector<int64_t>& extents,
                                int64_t group, std::vector<int64_t>* point,
                                uint32_t reversed_axes = 0);

}  // namespace nautilus
