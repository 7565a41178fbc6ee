// tile_order(BLOCK, group=G) — the order in which the CTAs of the kernel that computes BLOCK are
// launched: in groups of G rows of grid.y, each group walked column by column (G = 1: the plain
// order, grid.x fastest).
//
// The tiles of a GEMM that run at once share the operand panels they read in L2. In the plain
// order one wave of CTAs covers a few whole rows of the grid: few panels of the operand indexed
// by grid.y, but every panel of the one indexed by grid.x, which streams from DRAM in every wave.
// Grouping G rows makes a wave about G rows by W / G columns, so both operands are reused
// (CUTLASS's and Triton's "swizzle" / GROUP_M raster). The decision changes no loop and no
// value: it writes the launch attribute `group` (scalar::LaunchAttrs) on BLOCK's nest, printed
// `launch(..., group=8)`; the MA kernel carries it as its tile order, the interpreters run grid
// points in that order and the CUDA emitter maps blockIdx through it
// (core/support/launch_order.h gives the map and an example).
//
//   bind(C_sum, n_o=grid.y, m_o=grid.x)         kernel C: grid(m_o: 64, n_o: 32)
//   tile_order(C_sum, group=8)             →    kernel C: grid(m_o: 64, n_o: 32) group(8)
//                                               CTA L runs n_o = 8 (L / 512) + (L % 512) % 8,
//                                                           m_o = (L % 512) / 8
//
// Refused unless BLOCK's nest binds loops to both grid.x and grid.y (the two axes the groups
// reorder), and for G outside 1..65535.
#pragma once

#include "core/sched/decision.h"

namespace nautilus::sched {

DecisionKind tile_order_decision();

}  // namespace nautilus::sched
