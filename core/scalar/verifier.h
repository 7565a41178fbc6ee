// Structural and type checks of a scalar IR program. A failure is a compiler bug (an internal
// error), never a user error: every pass's output is verified in the pipeline and in tests.
//
// Checked: every variable is bound exactly once and used only in scope (loop variables in
// bindings and index expressions of their loops; a block's iteration variables only inside its
// init and body); bindings match iteration variables one to one; iteration extents and loop
// extents are positive; buffers referenced are declared and indexed with their rank; indices
// are Index-typed; operand dtypes agree; a store's value has the buffer's dtype; `init` only in
// blocks with reduce variables; block and buffer names are unique; a variable name is never
// shadowed (two variables visible at one point have different names; separate nests may reuse);
// no serial loop or block encloses a grid loop, and no grid dimension is bound twice on a path.
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include "core/scalar/ir.h"

namespace nautilus::scalar {

// Returns one message per problem; empty when the program is well formed.
std::vector<std::string> verify(const Program& program);

// The checks of a program's (or VR tile module's) global buffers, shared with the VR tile
// verifier: declared once, params inputs then outputs, allocations intermediates, positive
// extents, a float element type. Appends the problems to `errors` and every buffer to
// `declared`.
void check_global_buffers(const std::vector<Buffer>& params,
                          const std::vector<Buffer>& allocations,
                          std::unordered_set<const BufferNode*>* declared,
                          std::vector<std::string>* errors);

}  // namespace nautilus::scalar
