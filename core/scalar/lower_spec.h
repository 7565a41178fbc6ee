// Unoptimized lowering: checked spec → scalar IR.
//
// Every definition becomes one loop nest over its left-hand variables around one block; every
// reduction that is nested inside an expression (or that feeds an output narrower than f32,
// since reductions accumulate in f32) becomes its own reduction nest writing an f32 temporary
// over the variables the reduction depends on, computed before the statement that uses it.
// All intermediates are materialized in global memory. Arithmetic is f32: narrower loads are
// widened with a Cast and stores to narrower buffers are Cast back.
//
//   Y[r, c] : bf16 = E[r, c] / sum(c2) E[r, c2]
//
// becomes
//
//   alloc Y_sum : f32[R]
//   for r in 0..R:
//     for c2 in 0..C:
//       block Y_sum(r = r; reduce c2 = c2):
//         init:
//           Y_sum[r] = 0.0f
//         Y_sum[r] = Y_sum[r] + E[r, c2]
//   for r in 0..R:
//     for c in 0..C:
//       block Y(r = r, c = c):
//         Y[r, c] = bf16(E[r, c] / Y_sum[r])
#pragma once

#include "core/scalar/ir.h"
#include "core/spec/ast.h"

namespace nautilus::scalar {

ProgramPtr lower_spec(const spec::Spec& spec);

}  // namespace nautilus::scalar
