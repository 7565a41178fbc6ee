// Reciprocal divisors: a division by a broadcast lower-rank value, `x / broadcast(l)`, becomes
// one reciprocal per element of `l` and a multiply per element of `x`.
//
// A GPU f32 division is a subroutine (FCHK, MUFU.RCP, two Newton FFMAs and a slow-path branch,
// about 8 instructions); attention's normalization `O / L` paid it on every output element of
// every tile (64 per thread of a 128 x 128 wgmma tile, a fifth of the consumer's epilogue time
// under ncu on short rows). After this pass each thread divides once per row it owns. The
// result differs from x / l by the rounding of 1/l (at most about 1.5 ulp of f32) and where
// 1/l overflows (|l| below 2^-126), far inside the f32 tolerance for every normalization the
// compiler produces (sums of exponentials are at least 1). Only f32 divisions are rewritten;
// constant divisors are fold-constants' work.
//
//   before:                                   after:
//     %l_t = broadcast %l, dims [0]             %one = full 1.0 : f32[8]
//       : f32[8, 16]                            %l_inv = div %one, %l : f32[8]
//     %y = div %o, %l_t : f32[8, 16]            %l_inv_t = broadcast %l_inv, dims [0] : f32[8, 16]
//                                               %y = mul %o, %l_inv_t : f32[8, 16]
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no f32 division has a broadcast divisor.
vrtile::ModulePtr reciprocal_divisors(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
