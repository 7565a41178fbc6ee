// fold-constants: element-wise ops on constant tiles become constants, and a division by a
// constant becomes a multiplication by its reciprocal.
//
// The scale of attention is spelled `S / sqrt(D)` in the spec; after tilize it is a `div` of
// the score tile by a broadcast `sqrt` of a constant. A float division is a short subroutine on
// the GPU (FCHK, a reciprocal, Newton steps, a slow path), a multiplication one FMUL, so every
// score element pays several times over for it. Here `sqrt(128.0)` folds to 11.3137 and the
// division to a multiplication by 1/11.3137 (rounded to f32 once), which the later exp → exp2
// rewrite then merges with log2(e). The product differs from the quotient by at most one
// rounding of the reciprocal (relative 2⁻²⁴), far inside the f32 tolerance.
//
//   before:                                   after:
//     %28 = full 128.0 : f32                    %28 = full 128.0 : f32        (dead, removed)
//     %29 = sqrt %28 : f32                      %29 = full 11.313708 : f32
//     %30 = broadcast %29 : f32[128, 64]        %30 = broadcast %29 : f32[128, 64]
//     %31 = div %27, %30 : f32[128, 64]         %inv = full 0.0883883 : f32[128, 64]
//                                               %31 = mul %27, %inv : f32[128, 64]
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when nothing folds.
vrtile::ModulePtr fold_constants(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
