// Common subexpression elimination for VR tile IR.
//
// Two pure ops of the same kind, with the same fields (op, axis, dims, constant, result type)
// and the same operands compute the same tile; the later one is dropped and its uses read the
// earlier one, which must be visible there (defined in the same region or an enclosing one).
// Commutative binary ops (add, mul, max, min, and, or, eq, ne) match with operands swapped.
// Loads match only when the kernel never stores into their buffer (no store can come between).
// Fors, stores and yields are never merged.
//
//   before:                                   after:
//     %d1 = sub %mx_i, %mx1 : f32[8]            %d1 = sub %mx_i, %mx1 : f32[8]
//     %a1 = exp %d1 : f32[8]                    %a1 = exp %d1 : f32[8]
//     %d2 = sub %mx_i, %mx1 : f32[8]            %l_s = mul %l_i, %a1 : f32[8]
//     %a2 = exp %d2 : f32[8]                    %a_t = broadcast %a1, dims [0] : f32[8, 4]
//     %l_s = mul %l_i, %a1 : f32[8]
//     %a_t = broadcast %a2, dims [0] : f32[8, 4]
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no two ops compute the same tile.
vrtile::ModulePtr eliminate_common_subexpressions(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
