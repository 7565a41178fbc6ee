// Traversal and rewriting of scalar IR.
//
// `Visitor` walks every node (override a `visit` to inspect, call the base to recurse).
// `Mutator` rebuilds a tree bottom-up and returns the *same* node when none of its children
// changed, so a pass that changes nothing returns its input (the pass log marks it unchanged by
// pointer identity) and unchanged subtrees stay shared between snapshots.
#pragma once

#include "core/scalar/ir.h"

namespace nautilus::scalar {

class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual void visit(const Expr& expr);
  virtual void visit(const Stmt& stmt);

 protected:
#define NAUTILUS_VISIT_DECL(name) virtual void visit_##name(const name& node);
  NAUTILUS_SCALAR_EXPR_NODES(NAUTILUS_VISIT_DECL)
  NAUTILUS_SCALAR_STMT_NODES(NAUTILUS_VISIT_DECL)
#undef NAUTILUS_VISIT_DECL
};

class Mutator {
 public:
  virtual ~Mutator() = default;
  virtual Expr mutate(const Expr& expr);
  virtual Stmt mutate(const Stmt& stmt);

 protected:
  // Each receives the node and its shared pointer (to return unchanged).
#define NAUTILUS_MUTATE_EXPR_DECL(name) virtual Expr mutate_##name(const name& node, const Expr& self);
  NAUTILUS_SCALAR_EXPR_NODES(NAUTILUS_MUTATE_EXPR_DECL)
#undef NAUTILUS_MUTATE_EXPR_DECL
#define NAUTILUS_MUTATE_STMT_DECL(name) virtual Stmt mutate_##name(const name& node, const Stmt& self);
  NAUTILUS_SCALAR_STMT_NODES(NAUTILUS_MUTATE_STMT_DECL)
#undef NAUTILUS_MUTATE_STMT_DECL
};

}  // namespace nautilus::scalar
