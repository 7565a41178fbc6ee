// tilize: scheduled scalar IR → VR tile IR.
//
// Every top-level loop nest of the program becomes one kernel; the nest's loops take one of three
// roles:
//
//   grid    the perfectly nested outer loops down to the last loop `bind` put on the grid (they
//           must be spatial for every block below). A nest with no bound loop is an unscheduled
//           one: its outer loops that are spatial for every block below all become the grid, so
//           plain lowering gives one CTA per output element (the naive kernels the runner uses
//           as its reference).
//   serial  a loop over a reduction axis that the schedule split into tiles (its var and a loop
//           below it both appear in one reduce binding: attention's key-tile loop `n_o`, GEMM's
//           `k_o`), and in an unscheduled nest every reduction loop. It becomes a `for` whose
//           carried values are the running results of the blocks under it. Also a spatial loop
//           split into tiles inside the CTA (its var and a loop below it both appear in one
//           spatial binding): a row's output after its statistics,
//             for r [grid.x]: ...; for c_o in 0..16: for c_i in 0..2048: block Y(c = c_o*2048+c_i)
//           becomes `for c_o.1 in 0..16 { load X[r, c_o.1*2048 + i0]; store Y[...] }`, a loop
//           that carries nothing and stores one [2048] tile per iteration.
//   vector  every other loop. Its iterations happen at once: each loop is one axis of the tiles
//           of the blocks below it, so a block inside vector loops m_i and n computes a
//           [|m_i|, |n|] tile per execution. A vector loop over a reduction axis becomes a
//           `reduce` (or a `dot`, when the summand is a product of a factor over (i, k) and a
//           factor over (k, j)), so it may hold only that one block.
//
// Values flow through *regions*: the part of a buffer that one execution of a block writes,
// identified by the buffer and, per dimension, its base index (over grid and serial variables)
// and whether a vector loop spans it. A block that reads exactly a region that is held in
// registers reads the SSA tile; any other read loads from global memory. Regions updated in a
// serial loop that already have a value before it (the running max after its -inf init, an
// accumulator after its hoisted init) are the loop's carried values. A buffer is stored to
// global memory only when something reads it from there (another kernel, a read that no region
// serves) or it is an output; otherwise it lives only in registers and is not allocated, which
// is how attention's scores S and statistics never reach memory.
//
//   for b [grid.z]: for h [grid.y]: for m_o [grid.x]:           kernel attention grid(b, h, m_o)
//     for m_i in 0..128:                                           (m_i: a tile axis)
//       block Mx_init: Mx = -inf                                   %Mx = full -inf : f32[128]
//       for n_o in 0..64:                        ──►               %Mx.1, ... = for n_o in 0..64
//         for n in 0..64: for d in 0..128:                             iter_args(%Mx_i = %Mx, ...)
//           block S(...; reduce d)                                   %S = dot %Q, %K_t ...
//         for n_i in 0..64:                                          %Mx.2 = max %Mx_i,
//           block Mx(...; reduce n = n_o * 64 + n_i)                          reduce max %S
//
// Rounding: a reduction's summands may be regrouped (a factor constant along the reduced axis
// is applied once to the sum, a dot accumulates in f32 fused multiply-adds), so results agree
// with the scalar IR within the f32 tolerance, not bit for bit.
#pragma once

#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/vrtile/ir.h"

namespace nautilus::tilize {

struct TilizeResult {
  vrtile::ModulePtr module;  // null when the program cannot be tiled
  std::string error;         // why not ("loop n of block O_sum ... ")
  // Per kernel, in launch order: the names of the scalar blocks it computes.
  std::vector<std::vector<std::string>> kernel_blocks;
};

TilizeResult lower_to_vrtile(const scalar::Program& program);

}  // namespace nautilus::tilize
