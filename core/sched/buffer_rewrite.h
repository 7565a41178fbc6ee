// Rewriting which buffer statements access, and the bookkeeping that goes with new buffers: the
// plumbing that the passes introducing buffers share (split_k_update's partial states,
// cache_read / cache_write's copies).
//
// A buffer access is retargeted by a function that, given the old indices, returns the new ones:
//
//   retarget_accesses(body, {{K, K_shared, [](idx) { return {idx[2] mod 8, idx[3]}; }}})
//   K[b, h, n, d]  →  K_shared[n mod 8, d]
//
// Block bodies see only the block's iteration variables, so index functions used inside blocks
// must build indices from the old indices (and iteration variables of that block) alone.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/scalar/ir.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

struct Retarget {
  scalar::Buffer to;
  // New indices from the old ones.
  std::function<std::vector<scalar::Expr>(const std::vector<scalar::Expr>&)> indices;
};
using RetargetMap = std::unordered_map<const scalar::BufferNode*, Retarget>;

// `stmt` (or `expr`) with every load of and store to a key of `map` going to its target instead.
// Unchanged subtrees are shared.
scalar::Stmt retarget_accesses(const scalar::Stmt& stmt, const RetargetMap& map);
scalar::Expr retarget_accesses(const scalar::Expr& expr, const RetargetMap& map);

// `stmt` with loop variables replaced in every block's bindings and predicate (block bodies see
// only iteration variables and are shared).
scalar::Stmt substitute_in_bindings(const scalar::Stmt& stmt, const VarReplacements& replacements);

// Every buffer `stmt` loads from or stores to.
std::set<const scalar::BufferNode*> buffers_used(const scalar::Stmt& stmt);

// Every buffer and block name of the program, for making fresh ones.
std::set<std::string> buffer_names(const scalar::Program& program);
std::set<std::string> block_names(const scalar::Stmt& body);

// A copy of `program` with a new body and allocations: the old allocations the body still uses,
// then `added` (those the body uses).
scalar::ProgramPtr with_body_and_buffers(const scalar::ProgramPtr& program, scalar::Stmt body,
                                         const std::vector<scalar::Buffer>& added);

// The conjuncts of a predicate (`a and b and c` → a, b, c); empty for nullptr.
std::vector<scalar::Expr> conjuncts(const scalar::Expr& predicate);

}  // namespace nautilus::sched
