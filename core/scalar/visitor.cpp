#include "core/scalar/visitor.h"

namespace nautilus::scalar {

// ---------------------------------------------------------------------------------------------
// Visitor

// Optional children (a block's predicate and init) are null; visiting them is a no-op so that
// every visit_* can recurse without testing.
void Visitor::visit(const Expr& expr) {
  if (!expr) return;
  switch (expr->kind) {
#define NAUTILUS_DISPATCH(name) \
  case ExprKind::name: return visit_##name(static_cast<const name&>(*expr));
    NAUTILUS_SCALAR_EXPR_NODES(NAUTILUS_DISPATCH)
#undef NAUTILUS_DISPATCH
  }
}

void Visitor::visit(const Stmt& stmt) {
  if (!stmt) return;
  switch (stmt->kind) {
#define NAUTILUS_DISPATCH(name) \
  case StmtKind::name: return visit_##name(static_cast<const name&>(*stmt));
    NAUTILUS_SCALAR_STMT_NODES(NAUTILUS_DISPATCH)
#undef NAUTILUS_DISPATCH
  }
}

void Visitor::visit_IntImm(const IntImm&) {}
void Visitor::visit_FloatImm(const FloatImm&) {}
void Visitor::visit_VarRef(const VarRef&) {}

void Visitor::visit_Load(const Load& node) {
  for (const Expr& index : node.indices) visit(index);
}

void Visitor::visit_Cast(const Cast& node) { visit(node.value); }
void Visitor::visit_Unary(const Unary& node) { visit(node.a); }

void Visitor::visit_Binary(const Binary& node) {
  visit(node.a);
  visit(node.b);
}

void Visitor::visit_Compare(const Compare& node) {
  visit(node.a);
  visit(node.b);
}

void Visitor::visit_Logical(const Logical& node) {
  visit(node.a);
  visit(node.b);
}

void Visitor::visit_Select(const Select& node) {
  visit(node.condition);
  visit(node.if_true);
  visit(node.if_false);
}

void Visitor::visit_For(const For& node) { visit(node.body); }

void Visitor::visit_Seq(const Seq& node) {
  for (const Stmt& stmt : node.stmts) visit(stmt);
}

void Visitor::visit_Store(const Store& node) {
  for (const Expr& index : node.indices) visit(index);
  visit(node.value);
}

void Visitor::visit_Block(const Block& node) {
  for (const Expr& binding : node.bindings) visit(binding);
  visit(node.predicate);
  visit(node.init);
  visit(node.body);
}

// ---------------------------------------------------------------------------------------------
// Mutator

namespace {

// Applies `mutate` to every element; returns true when any element became a different node.
template <typename Node, typename MutateFn>
bool mutate_all(const std::vector<Node>& in, std::vector<Node>* out, MutateFn mutate) {
  out->reserve(in.size());
  bool changed = false;
  for (const Node& node : in) {
    out->push_back(mutate(node));
    changed |= out->back() != node;
  }
  return changed;
}

}  // namespace

// Null stays null, which lets the block rewrite treat optional children like the others.
Expr Mutator::mutate(const Expr& expr) {
  if (!expr) return expr;
  switch (expr->kind) {
#define NAUTILUS_DISPATCH(name) \
  case ExprKind::name: return mutate_##name(static_cast<const name&>(*expr), expr);
    NAUTILUS_SCALAR_EXPR_NODES(NAUTILUS_DISPATCH)
#undef NAUTILUS_DISPATCH
  }
  return expr;
}

Stmt Mutator::mutate(const Stmt& stmt) {
  if (!stmt) return stmt;
  switch (stmt->kind) {
#define NAUTILUS_DISPATCH(name) \
  case StmtKind::name: return mutate_##name(static_cast<const name&>(*stmt), stmt);
    NAUTILUS_SCALAR_STMT_NODES(NAUTILUS_DISPATCH)
#undef NAUTILUS_DISPATCH
  }
  return stmt;
}

Expr Mutator::mutate_IntImm(const IntImm&, const Expr& self) { return self; }
Expr Mutator::mutate_FloatImm(const FloatImm&, const Expr& self) { return self; }
Expr Mutator::mutate_VarRef(const VarRef&, const Expr& self) { return self; }

Expr Mutator::mutate_Load(const Load& node, const Expr& self) {
  std::vector<Expr> indices;
  if (!mutate_all(node.indices, &indices, [this](const Expr& e) { return mutate(e); })) return self;
  return load(node.buffer, std::move(indices), node.provenance);
}

Expr Mutator::mutate_Cast(const Cast& node, const Expr& self) {
  Expr value = mutate(node.value);
  if (value == node.value) return self;
  return cast(node.dtype, std::move(value), node.provenance);
}

Expr Mutator::mutate_Unary(const Unary& node, const Expr& self) {
  Expr a = mutate(node.a);
  if (a == node.a) return self;
  return unary(node.op, std::move(a), node.provenance);
}

Expr Mutator::mutate_Binary(const Binary& node, const Expr& self) {
  Expr a = mutate(node.a), b = mutate(node.b);
  if (a == node.a && b == node.b) return self;
  return binary(node.op, std::move(a), std::move(b), node.provenance);
}

Expr Mutator::mutate_Compare(const Compare& node, const Expr& self) {
  Expr a = mutate(node.a), b = mutate(node.b);
  if (a == node.a && b == node.b) return self;
  return compare(node.op, std::move(a), std::move(b), node.provenance);
}

Expr Mutator::mutate_Logical(const Logical& node, const Expr& self) {
  Expr a = mutate(node.a), b = mutate(node.b);
  if (a == node.a && b == node.b) return self;
  return logical(node.op, std::move(a), std::move(b), node.provenance);
}

Expr Mutator::mutate_Select(const Select& node, const Expr& self) {
  Expr condition = mutate(node.condition);
  Expr if_true = mutate(node.if_true), if_false = mutate(node.if_false);
  if (condition == node.condition && if_true == node.if_true && if_false == node.if_false) {
    return self;
  }
  return select(std::move(condition), std::move(if_true), std::move(if_false), node.provenance);
}

Stmt Mutator::mutate_For(const For& node, const Stmt& self) {
  Stmt body = mutate(node.body);
  if (body == node.body) return self;
  return make_for(node.var, node.extent, std::move(body), node.provenance, node.for_kind,
                  node.launch);
}

Stmt Mutator::mutate_Seq(const Seq& node, const Stmt& self) {
  std::vector<Stmt> stmts;
  if (!mutate_all(node.stmts, &stmts, [this](const Stmt& s) { return mutate(s); })) return self;
  return make_seq(std::move(stmts), node.provenance);
}

Stmt Mutator::mutate_Store(const Store& node, const Stmt& self) {
  std::vector<Expr> indices;
  bool changed = mutate_all(node.indices, &indices, [this](const Expr& e) { return mutate(e); });
  Expr value = mutate(node.value);
  if (!changed && value == node.value) return self;
  return make_store(node.buffer, std::move(indices), std::move(value), node.provenance);
}

Stmt Mutator::mutate_Block(const Block& node, const Stmt& self) {
  std::vector<Expr> bindings;
  bool changed = mutate_all(node.bindings, &bindings, [this](const Expr& e) { return mutate(e); });
  Expr predicate = mutate(node.predicate);
  Stmt init = mutate(node.init);
  Stmt body = mutate(node.body);
  if (!changed && predicate == node.predicate && init == node.init && body == node.body) {
    return self;
  }
  return make_block(node.name, node.iter_vars, std::move(bindings), std::move(predicate),
                    std::move(init), std::move(body), node.provenance);
}

}  // namespace nautilus::scalar
