// Scale folding: a positive constant scale is carried symbolically through max/sum/sub chains
// and applied once, inside the exponent where those chains end.
//
// A root `%s = mul %x, C` or `%s = div %x, C` (C a positive constant tile, e.g. a broadcast of
// `full sqrt(d)`) means s = c·x. For c > 0, max(c·a, c·b) = c·max(a, b), and likewise for min,
// add, sub, neg, select, broadcast, permute, reduce and dot; so every value computed from s by
// those ops (and the loop-carried values they feed, such as a running max) can hold its value
// divided by c instead, and only the ops that are not linear in c — the exponentials — apply the
// scale: exp(w) becomes exp(w' · c). Constants met on the way (a -inf mask, a -inf initial max)
// are divided by c. A compare of such values (or of one and a constant, divided too) is a sink
// that keeps its boolean: a positive scale preserves order and equality, so masked attention's
// guard of a fully masked row, `Mx == -inf ? 0 : Mx`, lets the scale through. The pass applies
// only when every value reached ends in an exponential, a compare or a loop-carried value, so the per-element multiply on the big tile disappears and the one left
// at the exponent merges with log2(e) in the exp → exp2 pass. Only `exp` is a sink: an `exp2`
// argument is already in its final scaled form (usually that pass's own output). Roots that
// scale by the same constant are folded together when one alone does not close (two loops
// over the same scores, joined through the running max). Negative or zero scales are left
// alone (they swap max and min).
//
//   before:                                   after:
//     %s = div %qk, %sd_t : f32[8, 16]          %rowmax = reduce max %qk, axis 1 : f32[8]
//     %rowmax = reduce max %s, axis 1           %mx1 = max %mx_i, %rowmax : f32[8]
//     %mx1 = max %mx_i, %rowmax : f32[8]        %mx1_t = broadcast %mx1, dims [0]
//     %mx1_t = broadcast %mx1, dims [0]         %shifted = sub %qk, %mx1_t : f32[8, 16]
//     %shifted = sub %s, %mx1_t : f32[8, 16]    %sd_t.1 = full 2.0 : f32[8, 16]
//     %p = exp %shifted : f32[8, 16]            %shifted.1 = div %shifted, %sd_t.1
//                                               %p = exp %shifted.1 : f32[8, 16]
// (the running max %mx_i now holds the maximum of qk, i.e. the old running max times sqrt(d)).
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no scale can be folded.
vrtile::ModulePtr fold_scales(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
