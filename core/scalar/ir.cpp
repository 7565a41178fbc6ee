#include "core/scalar/ir.h"

namespace nautilus::scalar {

const char* memory_scope_name(MemoryScope scope) {
  switch (scope) {
    case MemoryScope::Global: return "global";
    case MemoryScope::Shared: return "shared";
    case MemoryScope::Register: return "register";
  }
  return "?";
}

const char* buffer_role_name(BufferRole role) {
  switch (role) {
    case BufferRole::Input: return "input";
    case BufferRole::Output: return "output";
    case BufferRole::Intermediate: return "intermediate";
    case BufferRole::Workspace: return "workspace";
  }
  return "?";
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Exp2: return "exp2";
    case UnaryOp::Log: return "log";
    case UnaryOp::Log2: return "log2";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Rsqrt: return "rsqrt";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Abs: return "abs";
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::FloorDiv: return "floordiv";
    case BinaryOp::Mod: return "mod";
    case BinaryOp::Max: return "max";
    case BinaryOp::Min: return "min";
  }
  return "?";
}

const char* compare_op_name(CompareOp op) {
  switch (op) {
    case CompareOp::LT: return "<";
    case CompareOp::LE: return "<=";
    case CompareOp::GT: return ">";
    case CompareOp::GE: return ">=";
    case CompareOp::EQ: return "==";
    case CompareOp::NE: return "!=";
  }
  return "?";
}

const char* logical_op_name(LogicalOp op) {
  switch (op) {
    case LogicalOp::And: return "and";
    case LogicalOp::Or: return "or";
  }
  return "?";
}

const char* for_kind_name(ForKind kind) {
  switch (kind) {
    case ForKind::Serial: return "serial";
    case ForKind::GridX: return "grid.x";
    case ForKind::GridY: return "grid.y";
    case ForKind::GridZ: return "grid.z";
  }
  return "?";
}

bool is_grid(ForKind kind) { return kind != ForKind::Serial; }

int64_t BufferNode::element_count() const {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

Buffer make_buffer(std::string name, std::vector<int64_t> shape, DType dtype, MemoryScope scope,
                   BufferRole role, Provenance provenance) {
  return std::make_shared<const BufferNode>(
      BufferNode{std::move(name), std::move(shape), dtype, scope, role, provenance});
}

Var make_var(std::string name) { return std::make_shared<const VarNode>(VarNode{std::move(name)}); }

Expr int_imm(int64_t value, Provenance p) { return std::make_shared<const IntImm>(value, p); }

Expr float_imm(double value, DType dtype, Provenance p) {
  return std::make_shared<const FloatImm>(value, dtype, p);
}

Expr var_ref(const Var& var, Provenance p) { return std::make_shared<const VarRef>(var, p); }

Expr load(const Buffer& buffer, std::vector<Expr> indices, Provenance p) {
  return std::make_shared<const Load>(buffer, std::move(indices), p);
}

Expr cast(DType dtype, Expr value, Provenance p) {
  return std::make_shared<const Cast>(dtype, std::move(value), p);
}

Expr unary(UnaryOp op, Expr a, Provenance p) {
  return std::make_shared<const Unary>(op, std::move(a), p);
}

Expr binary(BinaryOp op, Expr a, Expr b, Provenance p) {
  return std::make_shared<const Binary>(op, std::move(a), std::move(b), p);
}

Expr compare(CompareOp op, Expr a, Expr b, Provenance p) {
  return std::make_shared<const Compare>(op, std::move(a), std::move(b), p);
}

Expr logical(LogicalOp op, Expr a, Expr b, Provenance p) {
  return std::make_shared<const Logical>(op, std::move(a), std::move(b), p);
}

Expr select(Expr condition, Expr if_true, Expr if_false, Provenance p) {
  return std::make_shared<const Select>(std::move(condition), std::move(if_true),
                                        std::move(if_false), p);
}

Stmt make_for(Var var, int64_t extent, Stmt body, Provenance p, ForKind kind,
              std::optional<LaunchAttrs> launch) {
  return std::make_shared<const For>(std::move(var), extent, kind, std::move(body), p, launch);
}

Stmt with_launch(const For& loop, std::optional<LaunchAttrs> launch) {
  return make_for(loop.var, loop.extent, loop.body, loop.provenance, loop.for_kind, launch);
}

Stmt make_seq(std::vector<Stmt> stmts, Provenance p) {
  return std::make_shared<const Seq>(std::move(stmts), p);
}

Stmt make_store(Buffer buffer, std::vector<Expr> indices, Expr value, Provenance p) {
  return std::make_shared<const Store>(std::move(buffer), std::move(indices), std::move(value), p);
}

Stmt make_block(std::string name, std::vector<IterVar> iter_vars, std::vector<Expr> bindings,
                Expr predicate, Stmt init, Stmt body, Provenance p) {
  return std::make_shared<const Block>(std::move(name), std::move(iter_vars), std::move(bindings),
                                       std::move(predicate), std::move(init), std::move(body), p);
}

const Buffer* Program::find_buffer(const std::string& buffer_name) const {
  for (const std::vector<Buffer>* list : {&params, &allocations}) {
    for (const Buffer& buffer : *list) {
      if (buffer && buffer->name == buffer_name) return &buffer;
    }
  }
  return nullptr;
}

}  // namespace nautilus::scalar
