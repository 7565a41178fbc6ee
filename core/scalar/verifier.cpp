#include "core/scalar/verifier.h"

#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/scalar/printer.h"

namespace nautilus::scalar {
namespace {

// Walks the program once, keeping the set of variables visible at the current point. Scoping:
// a loop variable is visible in its loop's body; a block's bindings and predicate see the
// variables visible around the block, while its init and body see only its own iteration
// variables (plus loops nested inside them).
class Verifier {
 public:
  explicit Verifier(const Program& program) : program_(program) {}

  std::vector<std::string> run() {
    check_buffers();
    if (!program_.body) {
      error("program " + program_.name + " has no body");
    } else {
      where_ = "program body";
      if (const auto* seq = program_.body->as<Seq>()) {
        for (const Stmt& nest : seq->stmts) nest_tops_.insert(nest.get());
      } else {
        nest_tops_.insert(program_.body.get());
      }
      check_stmt(program_.body);
    }
    return std::move(errors_);
  }

 private:
  void error(std::string message) { errors_.push_back(std::move(message)); }
  void error_here(const std::string& message) { error(where_ + ": " + message); }

  // 1. Buffers: declared once, roles consistent with where they are declared, positive
  //    extents, a float element type.
  void check_buffers() {
    check_global_buffers(program_.params, program_.allocations, &declared_, &errors_);
  }

  // 2. Statements.
  void check_stmt(const Stmt& stmt) {
    if (!stmt) {
      error_here("null statement");
      return;
    }
    switch (stmt->kind) {
      case StmtKind::For: return check_for(*stmt->as<For>());
      case StmtKind::Seq:
        for (const Stmt& child : stmt->as<Seq>()->stmts) check_stmt(child);
        return;
      case StmtKind::Store: return check_store(*stmt->as<Store>());
      case StmtKind::Block: return check_block(*stmt->as<Block>());
    }
  }

  void check_for(const For& loop) {
    const std::string name = loop.var ? loop.var->name : "<null>";
    if (loop.extent <= 0) {
      error_here("loop " + name + " has extent " + std::to_string(loop.extent) +
                 "; loop extents must be positive");
    }
    // Grid loops enclose everything else (ir.h, ForKind): a grid loop inside a serial loop or a
    // block would launch a grid per iteration, and a repeated dimension has no CUDA meaning.
    const bool grid = is_grid(loop.for_kind);
    if (grid && !innermost_serial_.empty()) {
      error_here("loop " + name + " is bound to " + for_kind_name(loop.for_kind) +
                 " inside " + innermost_serial_ + "; grid loops must enclose every serial loop "
                 "and block");
    }
    const bool new_dim = grid && grid_dims_.insert(loop.for_kind).second;
    if (grid && !new_dim) {
      error_here("loop " + name + " is bound to " + for_kind_name(loop.for_kind) +
                 ", which an enclosing loop is already bound to");
    }
    if (loop.launch) check_launch(loop, name);
    const std::string saved_serial = innermost_serial_;
    if (!grid) innermost_serial_ = "serial loop " + name;
    const bool bound = bind(loop.var, "loop " + name);
    check_stmt(loop.body);
    if (bound) unbind(loop.var);
    innermost_serial_ = saved_serial;
    if (new_dim) grid_dims_.erase(loop.for_kind);
  }

  // Launch attributes describe the kernel of a whole nest, so only a nest's outermost loop
  // carries them, with values the MA lowering accepts (core/sched/launch.h).
  void check_launch(const For& loop, const std::string& name) {
    if (!nest_tops_.count(&loop)) {
      error_here("loop " + name + " has launch attributes but is not the outermost loop of a "
                 "nest");
    }
    const int warps = loop.launch->warps;
    if (warps != 1 && warps != 2 && warps != 4 && warps != 8) {
      error_here("loop " + name + " launches " + std::to_string(warps) +
                 " warps; warps must be 1, 2, 4 or 8");
    }
    if (loop.launch->stages < 1 || loop.launch->stages > 8) {
      error_here("loop " + name + " has " + std::to_string(loop.launch->stages) +
                 " pipeline stages; stages must be between 1 and 8");
    }
    if (loop.launch->consumers < 0 || loop.launch->consumers > 3) {
      error_here("loop " + name + " has " + std::to_string(loop.launch->consumers) +
                 " consumer warpgroups; consumers must be 0 to 3");
    }
    if (loop.launch->group < 1 || loop.launch->group > kMaxTileOrderGroup) {
      error_here("loop " + name + " groups its tiles by " + std::to_string(loop.launch->group) +
                 " rows; the tile order's group must be between 1 and " +
                 std::to_string(kMaxTileOrderGroup));
    }
  }

  void check_store(const Store& store) {
    if (!store.buffer) {
      error_here("store to a null buffer");
      return;
    }
    const std::string saved_where = where_;
    where_ += ": store to " + store.buffer->name;
    if (check_buffer_access(store.buffer, store.indices)) {
      if (store.buffer->role == BufferRole::Input) {
        error_here("stores into input buffer " + store.buffer->name);
      }
      if (store.value && store.value->dtype != store.buffer->dtype) {
        error_here("value has dtype " + std::string(dtype_name(store.value->dtype)) + " but " +
                   store.buffer->name + " holds " + dtype_name(store.buffer->dtype) +
                   " (conversions are explicit casts)");
      }
    }
    check_expr(store.value);
    where_ = saved_where;
  }

  void check_block(const Block& block) {
    const std::string saved_where = where_;
    const std::string label = "block " + block.name;
    if (block.name.empty()) error_here("a block has an empty name");
    if (!block_names_.insert(block.name).second) {
      error(label + ": block name is not unique in the program");
    }
    if (block.bindings.size() != block.iter_vars.size()) {
      error(label + " has " + std::to_string(block.iter_vars.size()) + " iteration variables but " +
            std::to_string(block.bindings.size()) + " bindings");
    }

    // Bindings and the predicate are evaluated in the enclosing scope.
    for (size_t i = 0; i < block.bindings.size(); ++i) {
      const std::string var_name =
          i < block.iter_vars.size() && block.iter_vars[i].var ? block.iter_vars[i].var->name
                                                               : "#" + std::to_string(i);
      where_ = label + " binding of " + var_name;
      check_index_expr(block.bindings[i], "binding");
    }
    if (block.predicate) {
      where_ = label + " predicate";
      check_expr(block.predicate);
      if (block.predicate->dtype != DType::Bool) {
        error_here("has dtype " + std::string(dtype_name(block.predicate->dtype)) +
                   "; predicates are bool");
      }
    }

    // The iteration variables become the only visible ones inside init and body.
    where_ = label;
    const std::string saved_serial = innermost_serial_;
    innermost_serial_ = label;
    std::unordered_map<std::string, const VarNode*> outer_scope;
    outer_scope.swap(visible_);
    bool has_reduce = false;
    for (const IterVar& iter : block.iter_vars) {
      has_reduce |= iter.kind == IterKind::Reduce;
      const std::string var_name = iter.var ? iter.var->name : "<null>";
      if (iter.extent <= 0) {
        error_here("iteration variable " + var_name + " has extent " +
                   std::to_string(iter.extent) + "; iteration extents must be positive");
      }
      bind(iter.var, label);
    }
    if (block.init) {
      if (!has_reduce) error_here("has an init statement but no reduce variable");
      where_ = label + " init";
      check_stmt(block.init);
    }
    where_ = label + " body";
    check_stmt(block.body);
    visible_.swap(outer_scope);
    innermost_serial_ = saved_serial;
    where_ = saved_where;
  }

  // Binds `var` at the current point. Returns false (after reporting) when it cannot be bound:
  // null, bound before, or shadowing a visible variable of the same name.
  bool bind(const Var& var, const std::string& binder) {
    if (!var) {
      error_here(binder + " binds a null variable");
      return false;
    }
    auto [previous, inserted] = bound_by_.emplace(var.get(), binder);
    if (!inserted) {
      error_here("variable " + var->name + " is bound twice (by " + previous->second + " and by " +
                 binder + ")");
      return false;
    }
    if (var->name.empty()) error_here(binder + " binds a variable with an empty name");
    if (!visible_.emplace(var->name, var.get()).second) {
      error_here("variable " + var->name + " of " + binder +
                 " shadows another visible variable of the same name");
      return false;
    }
    return true;
  }

  void unbind(const Var& var) { visible_.erase(var->name); }

  // Checks that `buffer` is declared and indexed with its rank by Index expressions.
  bool check_buffer_access(const Buffer& buffer, const std::vector<Expr>& indices) {
    bool ok = true;
    if (!declared_.count(buffer.get())) {
      const Buffer* named = program_.find_buffer(buffer->name);
      error_here(named ? "refers to a buffer " + buffer->name +
                             " that is not the one the program declares under that name"
                       : "buffer " + buffer->name + " is not declared in the program");
      ok = false;
    }
    if (indices.size() != buffer->shape.size()) {
      error_here(buffer->name + " has rank " + std::to_string(buffer->shape.size()) +
                 " but is indexed with " + std::to_string(indices.size()) + " indices");
      ok = false;
    }
    for (const Expr& index : indices) check_index_expr(index, "index of " + buffer->name);
    return ok;
  }

  // `role` says what the expression is used as ("binding", "index of A") for the message.
  void check_index_expr(const Expr& expr, const std::string& role) {
    check_expr(expr);
    if (expr && expr->dtype != DType::Index) {
      error_here(print_expr(expr) + " used as " + role + " has dtype " + dtype_name(expr->dtype) +
                 "; it must be index");
    }
  }

  // 3. Expressions: scope of variable references and typing of every operator.
  void check_expr(const Expr& expr) {
    if (!expr) {
      error_here("null expression");
      return;
    }
    switch (expr->kind) {
      case ExprKind::IntImm: return;
      case ExprKind::FloatImm:
        if (!is_float(expr->dtype)) {
          error_here("float immediate " + print_expr(expr) + " has non-float dtype " +
                     dtype_name(expr->dtype));
        }
        return;
      case ExprKind::VarRef: return check_var_ref(*expr->as<VarRef>());
      case ExprKind::Load: {
        const Load& node = *expr->as<Load>();
        check_buffer_access(node.buffer, node.indices);
        return;
      }
      case ExprKind::Cast: return check_expr(expr->as<Cast>()->value);
      case ExprKind::Unary: return check_unary(*expr->as<Unary>(), expr);
      case ExprKind::Binary: return check_binary(*expr->as<Binary>(), expr);
      case ExprKind::Compare: {
        const Compare& node = *expr->as<Compare>();
        check_expr(node.a);
        check_expr(node.b);
        if (node.a && node.b &&
            (node.a->dtype != node.b->dtype || node.a->dtype == DType::Bool)) {
          error_here(operand_problem(expr, node.a, node.b, "comparisons need equal, non-bool"));
        }
        return;
      }
      case ExprKind::Logical: {
        const Logical& node = *expr->as<Logical>();
        check_expr(node.a);
        check_expr(node.b);
        if (node.a && node.b && (node.a->dtype != DType::Bool || node.b->dtype != DType::Bool)) {
          error_here(operand_problem(expr, node.a, node.b, "logical operators need bool"));
        }
        return;
      }
      case ExprKind::Select: {
        const Select& node = *expr->as<Select>();
        check_expr(node.condition);
        check_expr(node.if_true);
        check_expr(node.if_false);
        if (node.condition && node.condition->dtype != DType::Bool) {
          error_here("condition of " + print_expr(expr) + " has dtype " +
                     dtype_name(node.condition->dtype) + "; conditions are bool");
        }
        if (node.if_true && node.if_false && node.if_true->dtype != node.if_false->dtype) {
          error_here(operand_problem(expr, node.if_true, node.if_false,
                                     "select branches need equal"));
        }
        return;
      }
    }
  }

  void check_var_ref(const VarRef& ref) {
    if (!ref.var) {
      error_here("reference to a null variable");
      return;
    }
    auto it = visible_.find(ref.var->name);
    if (it != visible_.end() && it->second == ref.var.get()) return;
    auto binder = bound_by_.find(ref.var.get());
    error_here("variable " + ref.var->name +
               (binder == bound_by_.end() ? " is not bound by any enclosing loop or block"
                                          : " (bound by " + binder->second +
                                                ") is used out of its scope"));
  }

  void check_unary(const Unary& node, const Expr& self) {
    check_expr(node.a);
    const DType dtype = node.a->dtype;
    // Negation and absolute value are also index arithmetic; the rest are float functions.
    const bool index_ok = node.op == UnaryOp::Neg || node.op == UnaryOp::Abs;
    if (!is_float(dtype) && !(index_ok && dtype == DType::Index)) {
      error_here(std::string(unary_op_name(node.op)) + " of " + dtype_name(dtype) + " in " +
                 print_expr(self) + (index_ok ? "; needs a float or index operand"
                                              : "; needs a float operand"));
    }
  }

  void check_binary(const Binary& node, const Expr& self) {
    check_expr(node.a);
    check_expr(node.b);
    if (!node.b) return;
    if (node.a->dtype != node.b->dtype) {
      error_here(operand_problem(self, node.a, node.b, "arithmetic needs equal"));
      return;
    }
    const DType dtype = node.a->dtype;
    const char* op = binary_op_name(node.op);
    switch (node.op) {
      case BinaryOp::Div:
        if (!is_float(dtype)) {
          error_here(std::string(op) + " of " + dtype_name(dtype) + " in " + print_expr(self) +
                     "; index division is floordiv");
        }
        return;
      case BinaryOp::FloorDiv:
      case BinaryOp::Mod:
        if (dtype != DType::Index) {
          error_here(std::string(op) + " of " + dtype_name(dtype) + " in " + print_expr(self) +
                     "; floordiv and mod are index operations");
        }
        return;
      case BinaryOp::Add:
      case BinaryOp::Sub:
      case BinaryOp::Mul:
      case BinaryOp::Max:
      case BinaryOp::Min:
        if (dtype == DType::Bool) {
          error_here(std::string(op) + " of bool in " + print_expr(self) +
                     "; arithmetic needs float or index operands");
        }
        return;
    }
  }

  static std::string operand_problem(const Expr& self, const Expr& a, const Expr& b,
                                     const std::string& need) {
    return "operands of " + print_expr(self) + " have dtypes " + dtype_name(a->dtype) + " and " +
           dtype_name(b->dtype) + "; " + need + " dtypes";
  }

  const Program& program_;
  std::vector<std::string> errors_;
  std::string where_;  // names the construct being checked, prefixes every message
  std::set<std::string> block_names_;
  std::unordered_set<const BufferNode*> declared_;
  std::unordered_map<const VarNode*, std::string> bound_by_;  // every variable bound so far
  std::unordered_map<std::string, const VarNode*> visible_;   // name -> variable in scope
  // What grid loops may not be nested in: the innermost enclosing serial loop or block ("serial
  // loop h", "block S"), empty at the top; and the grid dimensions of the enclosing loops.
  std::string innermost_serial_;
  std::set<ForKind> grid_dims_;
  std::set<const StmtNode*> nest_tops_;  // the outermost loops of the top-level nests
};

}  // namespace

void check_global_buffers(const std::vector<Buffer>& params,
                          const std::vector<Buffer>& allocations,
                          std::unordered_set<const BufferNode*>* declared,
                          std::vector<std::string>* errors) {
  std::set<std::string> names;
  auto error = [errors](std::string message) { errors->push_back(std::move(message)); };
  auto check_buffer = [&](const BufferNode& buffer) {
    if (!names.insert(buffer.name).second) {
      error("buffer name " + buffer.name + " is declared twice");
    }
    declared->insert(&buffer);
    for (size_t axis = 0; axis < buffer.shape.size(); ++axis) {
      if (buffer.shape[axis] <= 0) {
        error("buffer " + buffer.name + " has extent " + std::to_string(buffer.shape[axis]) +
              " in dimension " + std::to_string(axis) + "; extents must be positive");
      }
    }
    if (!is_float(buffer.dtype)) {
      error("buffer " + buffer.name + " has element type " + dtype_name(buffer.dtype) +
            "; buffers hold f16, bf16, f32 or f64");
    }
  };
  bool seen_output = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const Buffer& buffer = params[i];
    if (!buffer) {
      error("param #" + std::to_string(i) + " is null");
      continue;
    }
    check_buffer(*buffer);
    if (buffer->role == BufferRole::Intermediate || buffer->role == BufferRole::Workspace) {
      error("param " + buffer->name + " has role " + buffer_role_name(buffer->role) +
            "; params are inputs and outputs");
    } else if (buffer->role == BufferRole::Input && seen_output) {
      error("input param " + buffer->name + " follows an output; inputs come first");
    }
    seen_output |= buffer->role == BufferRole::Output;
  }
  for (size_t i = 0; i < allocations.size(); ++i) {
    const Buffer& buffer = allocations[i];
    if (!buffer) {
      error("allocation #" + std::to_string(i) + " is null");
      continue;
    }
    check_buffer(*buffer);
    if (buffer->role != BufferRole::Intermediate && buffer->role != BufferRole::Workspace) {
      error("allocation " + buffer->name + " has role " + buffer_role_name(buffer->role) +
            "; allocations are intermediates");
    }
  }
}

std::vector<std::string> verify(const Program& program) { return Verifier(program).run(); }

}  // namespace nautilus::scalar
