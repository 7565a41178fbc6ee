// Stored intermediate narrowing: a global f32 intermediate that every reader rounds to one 16-bit
// type is stored in that type.
//
// After narrow-dot-operands, a dot of a GEMM chain reads an f32 intermediate written by an
// earlier kernel (the element-wise gate of a GeGLU / SwiGLU MLP before its down projection) as
// `cast(load A : f32 → bf16)`. When every load of A in the module is read only through casts
// to the same 16-bit T, A is stored in T instead: each store writes `cast(v : f32 → T)` and each
// load reads T directly. The values every reader sees are bit for bit the same (one rounding of
// the same f32 value, at the store instead of after the load), the buffer moves half the bytes,
// and the dot's operand is a plain 16-bit loaded tile, which the Hopper TMA/wgmma form needs.
// Inputs, outputs and buffers read in any other way (an f32 use, a read-modify-write) keep f32.
//
//   before:                                     after:
//     alloc A : f32[T, F]                         alloc A : bf16[T, F]
//     kernel gate:                                kernel gate:
//       store A[...], %a : f32                      %a.1 = cast %a : bf16
//                                                   store A[...], %a.1
//     kernel down:                                kernel down:
//       %A = load A[...] : f32[128, 64]             %A = load A[...] : bf16[128, 64]
//       %A.1 = cast %A : bf16[128, 64]              %Y = dot %A, %Wd, %Y_i
//       %Y = dot %A.1, %Wd, %Y_i
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no intermediate can be stored narrower.
vrtile::ModulePtr narrow_stored_intermediates(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
