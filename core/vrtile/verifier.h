// Structural and type checks of a VR tile module. A failure is a compiler bug (an internal
// error), never a user error: every pass's output is verified in the pipeline and in tests.
//
// Checked (ir.h states the rules):
//   - buffers: names unique, params are inputs then outputs, allocations intermediates, extents
//     positive, float element types; a kernel's params are buffers the module declares, and its
//     loads and stores use only its params; nothing stores into an input.
//   - SSA: every value is defined once; every operand is defined before its use in the same or
//     an enclosing region (grid variables everywhere in their kernel, a For's loop variable and
//     block arguments only in its body); value names are non-empty, made of letters, digits,
//     `_` and `.`, and unique within a kernel; kernel names are unique.
//   - types: every tile extent is positive; each op has its kind's operand and result counts and
//     its result type is the one ir.h determines; element-wise operands have equal types with
//     dtypes the op accepts; indices are Index, masks and select conditions Bool; a load or
//     store has one index per buffer axis, all of one shape with its mask and value; dot shapes
//     [M,K]×[K,N] (+ f32[M,N]) with f16/bf16/f32 operands of one dtype; a reduce axis in range
//     over a float tile; broadcast dims strictly increasing, in range, with equal extents;
//     permute orders are permutations; iota extents positive; Full constants representable in
//     their dtype (Index: integers up to 2^53, Bool: 0 or 1).
//   - loops: a For's extent is not negative; its loop variable is an index scalar; block
//     arguments and results have the types of its iter_args; its body ends with the only Yield,
//     whose values match the iter_args in number and type; grid extents are positive and grid
//     variables index scalars.
// Messages name the kernel and the op ("kernel attention: dot %s: ...").
#pragma once

#include <string>
#include <vector>

#include "core/vrtile/ir.h"

namespace nautilus::vrtile {

// Returns one message per problem; empty when the module is well formed.
std::vector<std::string> verify(const Module& module);

}  // namespace nautilus::vrtile
