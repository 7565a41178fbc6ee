// exp → exp2: `exp(x)` becomes `exp2(x · log2(e))`, the form the GPU's MUFU.EX2 unit computes.
//
// The factor log2(e) merges with a constant scale already applied to the argument: for
// `exp(y · C)` or `exp(y / C)` the result multiplies y once by C·log2(e) (or log2(e)/C),
// rounded to f32 once. When the (unscaled) argument is a difference `a - broadcast(b)` of a
// tile and a lower-rank value, the factor is distributed, so that the lower-rank value is scaled
// once per row and the tile sees one multiply and one subtract (one FFMA on the GPU) —
// FlashAttention's `exp2(s·scale·log2e − m·scale·log2e)`. Only f32 exponentials are rewritten.
// The result differs from exp(x) by the rounding of x·log2(e) (relative error about
// |x|·2⁻²⁴ in the exponent), far inside the f32 tolerance.
//
//   before:                                   after:
//     %shifted = sub %qk, %mx1_t : f32[8, 16]   %qk_log2 = mul %qk, %sd_log2e_t : f32[8, 16]
//     %arg = div %shifted, %sd_t : f32[8, 16]   %mx1_log2 = mul %mx1, %sd_log2e : f32[8]
//     %p = exp %arg : f32[8, 16]                %mx1_log2_t = broadcast %mx1_log2, dims [0]
//                                               %arg.1 = sub %qk_log2, %mx1_log2_t
//                                               %p = exp2 %arg.1 : f32[8, 16]
// (%sd_log2e holds log2(e)/2 where %sd_t held 2.)
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when it has no f32 exp.
vrtile::ModulePtr exp_to_exp2(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
