#include "core/scalar/interpreter.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <new>
#include <unordered_map>
#include <utility>

#include "core/scalar/interpreter_support.h"
#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"

namespace nautilus::scalar {
namespace {

using detail::apply_float_binary;
using detail::apply_unary;
using detail::bracketed;
using detail::BufferState;
using detail::compare_values;
using detail::floor_divide;
using detail::round_value;
using detail::RuntimeError;

// How the interpreter works:
//   1. The program is verified; a malformed program is reported, never executed.
//   2. Inputs are checked against the parameter buffers and rounded to their dtypes; outputs and
//      intermediates start unwritten (NaN, with a written flag per element).
//   3. The IR is compiled into flat arrays of nodes: every variable gets a slot in one int64
//      array, every buffer an index with precomputed strides, so executing touches no maps.
//   4. The compiled statements run; any error (out of bounds, unwritten read, budget, ...)
//      unwinds with a RuntimeError that becomes InterpretResult::error.
//   5. Outputs must be completely written; they and the intermediates are returned.
//
// Evaluation order follows the IR semantics in ir.h. Where ir.h leaves it open: `select`
// evaluates only the chosen branch and `and`/`or` short-circuit (as the generated CUDA does), so
// a masked-out branch may index out of bounds without error; a block evaluates its bindings,
// then its predicate, and checks that the bindings lie inside the iteration extents only when
// the predicate holds; a store evaluates its value before its indices.

constexpr int32_t kNoNode = -1;

struct ExprCode {
  ExprKind kind;
  DType dtype;          // result dtype
  DType operand_dtype;  // Cast and Compare: the dtype of the (first) operand
  int op = 0;           // UnaryOp / BinaryOp / CompareOp / LogicalOp
  int32_t a = kNoNode, b = kNoNode, c = kNoNode;
  int32_t slot = 0;         // VarRef
  int32_t buffer = 0;       // Load
  int32_t first_index = 0;  // Load: indices are index_pool_[first_index, first_index + rank)
  int32_t rank = 0;
  int64_t int_value = 0;    // IntImm
  double float_value = 0;   // FloatImm, already rounded to dtype
  const ExprNode* source = nullptr;
};

struct IterCode {
  int32_t slot;
  int64_t extent;
  bool reduce;
  int32_t binding;
  const VarNode* var;
};

struct StmtCode {
  StmtKind kind;
  // For
  int32_t slot = 0;
  int64_t extent = 0;
  bool has_effects = false;  // contains a store or a block; loops without effects are skipped
  // Seq: children are child_pool_[first, first + count); Block: iterators in iter_pool_
  int32_t first = 0;
  int32_t count = 0;
  // Store
  int32_t buffer = 0;
  int32_t first_index = 0;
  int32_t rank = 0;
  int32_t value = kNoNode;
  // Block; `body` is also the For's body
  int32_t predicate = kNoNode;
  int32_t init = kNoNode;
  int32_t body = kNoNode;
  const StmtNode* source = nullptr;
};

class Interpreter {
 public:
  Interpreter(const Program& program, const InterpretOptions& options)
      : program_(program),
        step_limit_(options.max_steps == 0 ? std::numeric_limits<uint64_t>::max()
                                            : options.max_steps) {}

  InterpretResult run(const TensorMap& inputs) {
    InterpretResult result =
        detail::run_guarded<InterpretResult>("program", program_.name, [&](InterpretResult& r) {
          detail::check_verified(verify(program_), "program");
          globals_.allocate(program_.params, program_.allocations, inputs);
          const int32_t body = compile_stmt(program_.body);
          exec(body);
          globals_.collect(&r.outputs, &r.intermediates);
        });
    result.steps = steps_;
    return result;
  }

 private:
  // -------------------------------------------------------------------------------------------
  // 3. Compilation to flat arrays

  int32_t new_slot(const Var& var) {
    const int32_t slot = static_cast<int32_t>(slots_.size());
    slots_.push_back(0);
    slot_of_.emplace(var.get(), slot);
    return slot;
  }

  int32_t slot_of(const Var& var) const {
    auto it = slot_of_.find(var.get());
    // The verifier guarantees every reference is to a bound variable in scope.
    if (it == slot_of_.end()) throw RuntimeError{"internal error: unbound variable " + var->name};
    return it->second;
  }

  // Compiles `indices` and stores their node ids contiguously; returns the first position.
  int32_t compile_indices(const std::vector<Expr>& indices) {
    std::vector<int32_t> ids;
    ids.reserve(indices.size());
    for (const Expr& index : indices) ids.push_back(compile_expr(index));
    const int32_t first = static_cast<int32_t>(index_pool_.size());
    index_pool_.insert(index_pool_.end(), ids.begin(), ids.end());
    return first;
  }

  int32_t compile_expr(const Expr& expr) {
    ExprCode code{expr->kind, expr->dtype, expr->dtype};
    code.source = expr.get();
    switch (expr->kind) {
      case ExprKind::IntImm: code.int_value = expr->as<IntImm>()->value; break;
      case ExprKind::FloatImm:
        code.float_value = round_to(expr->dtype, expr->as<FloatImm>()->value);
        break;
      case ExprKind::VarRef: code.slot = slot_of(expr->as<VarRef>()->var); break;
      case ExprKind::Load: {
        const Load& node = *expr->as<Load>();
        code.buffer = globals_.index.at(node.buffer.get());
        code.first_index = compile_indices(node.indices);
        code.rank = static_cast<int32_t>(node.indices.size());
        break;
      }
      case ExprKind::Cast: {
        const Expr& value = expr->as<Cast>()->value;
        code.operand_dtype = value->dtype;
        code.a = compile_expr(value);
        break;
      }
      case ExprKind::Unary: {
        const Unary& node = *expr->as<Unary>();
        code.op = static_cast<int>(node.op);
        code.a = compile_expr(node.a);
        break;
      }
      case ExprKind::Binary: {
        const Binary& node = *expr->as<Binary>();
        code.op = static_cast<int>(node.op);
        code.a = compile_expr(node.a);
        code.b = compile_expr(node.b);
        break;
      }
      case ExprKind::Compare: {
        const Compare& node = *expr->as<Compare>();
        code.op = static_cast<int>(node.op);
        code.operand_dtype = node.a->dtype;
        code.a = compile_expr(node.a);
        code.b = compile_expr(node.b);
        break;
      }
      case ExprKind::Logical: {
        const Logical& node = *expr->as<Logical>();
        code.op = static_cast<int>(node.op);
        code.a = compile_expr(node.a);
        code.b = compile_expr(node.b);
        break;
      }
      case ExprKind::Select: {
        const Select& node = *expr->as<Select>();
        code.a = compile_expr(node.condition);
        code.b = compile_expr(node.if_true);
        code.c = compile_expr(node.if_false);
        break;
      }
    }
    exprs_.push_back(code);
    return static_cast<int32_t>(exprs_.size() - 1);
  }

  int32_t compile_stmt(const Stmt& stmt) {
    StmtCode code{stmt->kind};
    code.source = stmt.get();
    switch (stmt->kind) {
      case StmtKind::For: {
        const For& loop = *stmt->as<For>();
        code.slot = new_slot(loop.var);
        code.extent = loop.extent;
        code.body = compile_stmt(loop.body);
        code.has_effects = stmts_[code.body].has_effects;
        break;
      }
      case StmtKind::Seq: {
        std::vector<int32_t> children;
        for (const Stmt& child : stmt->as<Seq>()->stmts) {
          children.push_back(compile_stmt(child));
          code.has_effects |= stmts_[children.back()].has_effects;
        }
        code.first = static_cast<int32_t>(child_pool_.size());
        code.count = static_cast<int32_t>(children.size());
        child_pool_.insert(child_pool_.end(), children.begin(), children.end());
        break;
      }
      case StmtKind::Store: {
        const Store& store = *stmt->as<Store>();
        code.has_effects = true;
        code.buffer = globals_.index.at(store.buffer.get());
        code.first_index = compile_indices(store.indices);
        code.rank = static_cast<int32_t>(store.indices.size());
        code.value = compile_expr(store.value);
        break;
      }
      case StmtKind::Block: {
        const Block& block = *stmt->as<Block>();
        code.has_effects = true;
        std::vector<IterCode> iters;
        for (size_t i = 0; i < block.iter_vars.size(); ++i) {
          const IterVar& iter = block.iter_vars[i];
          const int32_t binding = compile_expr(block.bindings[i]);
          iters.push_back({new_slot(iter.var), iter.extent, iter.kind == IterKind::Reduce,
                           binding, iter.var.get()});
        }
        code.first = static_cast<int32_t>(iter_pool_.size());
        code.count = static_cast<int32_t>(iters.size());
        iter_pool_.insert(iter_pool_.end(), iters.begin(), iters.end());
        if (block.predicate) code.predicate = compile_expr(block.predicate);
        if (block.init) code.init = compile_stmt(block.init);
        code.body = compile_stmt(block.body);
        break;
      }
    }
    stmts_.push_back(code);
    return static_cast<int32_t>(stmts_.size() - 1);
  }

  // -------------------------------------------------------------------------------------------
  // 4. Execution

  void exec(int32_t id) {
    const StmtCode& code = stmts_[id];
    switch (code.kind) {
      case StmtKind::For: {
        if (!code.has_effects) return;
        int64_t& var = slots_[code.slot];
        for (int64_t i = 0; i < code.extent; ++i) {
          var = i;
          exec(code.body);
        }
        return;
      }
      case StmtKind::Seq:
        for (int32_t i = 0; i < code.count; ++i) exec(child_pool_[code.first + i]);
        return;
      case StmtKind::Store: return exec_store(code);
      case StmtKind::Block: return exec_block(code);
    }
  }

  void count_step() {
    if (++steps_ > step_limit_) {
      throw error("exceeds the step budget of " + std::to_string(step_limit_) +
                  " block instances and stores");
    }
  }

  void exec_block(const StmtCode& code) {
    const StmtNode* saved_context = context_;
    context_ = code.source;
    count_step();
    const IterCode* iters = iter_pool_.data() + code.first;
    for (int32_t i = 0; i < code.count; ++i) slots_[iters[i].slot] = eval_index(iters[i].binding);
    if (code.predicate == kNoNode || eval_bool(code.predicate)) {
      // The init rule: init runs exactly when every reduce variable is bound to 0.
      bool first_reduction_step = true;
      for (int32_t i = 0; i < code.count; ++i) {
        const int64_t value = slots_[iters[i].slot];
        if (value < 0 || value >= iters[i].extent) {
          throw error("binds " + iters[i].var->name + " to " + std::to_string(value) +
                      ", outside its extent " + std::to_string(iters[i].extent));
        }
        if (iters[i].reduce && value != 0) first_reduction_step = false;
      }
      if (code.init != kNoNode && first_reduction_step) exec(code.init);
      exec(code.body);
    }
    context_ = saved_context;
  }

  void exec_store(const StmtCode& code) {
    const StmtNode* saved_context = context_;
    if (!context_) context_ = code.source;  // a store outside any block names itself
    count_step();
    const double value = eval_float(code.value);
    BufferState& buffer = globals_.buffers[code.buffer];
    const int64_t offset = flat_offset(buffer, code.first_index, code.rank, "writes");
    buffer.values[offset] = round_value(buffer.node->dtype, value);
    buffer.written[offset] = 1;
    context_ = saved_context;
  }

  // Row-major offset of an access, checking every index against the buffer's shape.
  int64_t flat_offset(const BufferState& buffer, int32_t first_index, int32_t rank,
                      const char* verb) {
    int64_t offset = 0;
    const std::vector<int64_t>& shape = buffer.node->shape;
    for (int32_t d = 0; d < rank; ++d) {
      const int64_t index = eval_index(index_pool_[first_index + d]);
      if (index < 0 || index >= shape[d]) {
        throw error(std::string(verb) + " " + buffer.node->name +
                    bracketed(eval_indices(first_index, rank)) + " outside its shape " +
                    bracketed(shape));
      }
      offset += index * buffer.strides[d];
    }
    return offset;
  }

  // The indices of an access, for messages (index expressions have no side effects).
  std::vector<int64_t> eval_indices(int32_t first_index, int32_t rank) {
    std::vector<int64_t> indices;
    for (int32_t d = 0; d < rank; ++d) indices.push_back(eval_index(index_pool_[first_index + d]));
    return indices;
  }

  double load(const ExprCode& code) {
    const BufferState& buffer = globals_.buffers[code.buffer];
    const int64_t offset = flat_offset(buffer, code.first_index, code.rank, "reads");
    if (!buffer.written.empty() && !buffer.written[offset]) {
      throw error("reads " + buffer.node->name +
                  bracketed(eval_indices(code.first_index, code.rank)) +
                  " before it was written");
    }
    return buffer.values[offset];
  }

  // Any scalar as a double: the operand of a cast.
  double eval_number(int32_t id) {
    const DType dtype = exprs_[id].dtype;
    if (dtype == DType::Bool) return eval_bool(id) ? 1.0 : 0.0;
    if (dtype == DType::Index) return static_cast<double>(eval_index(id));
    return eval_float(id);
  }

  double eval_float(int32_t id) {
    const ExprCode& code = exprs_[id];
    switch (code.kind) {
      case ExprKind::FloatImm: return code.float_value;
      case ExprKind::Load: return load(code);
      case ExprKind::Cast: return round_value(code.dtype, eval_number(code.a));
      case ExprKind::Unary: return round_value(code.dtype, apply_unary(static_cast<UnaryOp>(code.op), eval_float(code.a)));
      case ExprKind::Binary: {
        const double a = eval_float(code.a), b = eval_float(code.b);
        return round_value(code.dtype, apply_float_binary(static_cast<BinaryOp>(code.op), a, b));
      }
      case ExprKind::Select:
        return eval_bool(code.a) ? eval_float(code.b) : eval_float(code.c);
      case ExprKind::IntImm:
      case ExprKind::VarRef:
      case ExprKind::Compare:
      case ExprKind::Logical: break;
    }
    throw internal_type_error(code);
  }

  int64_t eval_index(int32_t id) {
    const ExprCode& code = exprs_[id];
    switch (code.kind) {
      case ExprKind::IntImm: return code.int_value;
      case ExprKind::VarRef: return slots_[code.slot];
      case ExprKind::Binary: {
        const int64_t a = eval_index(code.a), b = eval_index(code.b);
        return apply_index_binary(code, a, b);
      }
      case ExprKind::Unary: {  // neg or abs (verified)
        const int64_t x = eval_index(code.a);
        if (static_cast<UnaryOp>(code.op) == UnaryOp::Abs && x >= 0) return x;
        if (x == std::numeric_limits<int64_t>::min()) throw index_overflow(code);
        return -x;
      }
      case ExprKind::Cast: return cast_to_index(code);
      case ExprKind::Select: return eval_bool(code.a) ? eval_index(code.b) : eval_index(code.c);
      case ExprKind::FloatImm:
      case ExprKind::Load:
      case ExprKind::Compare:
      case ExprKind::Logical: break;
    }
    throw internal_type_error(code);
  }

  int64_t cast_to_index(const ExprCode& code) {
    if (code.operand_dtype == DType::Index) return eval_index(code.a);
    const double value = round_to(DType::Index, eval_number(code.a));
    // 2^63 is exactly representable; every double strictly below it converts without overflow.
    if (!(value >= -0x1p63 && value < 0x1p63)) {
      char digits[32];
      const std::to_chars_result printed = std::to_chars(digits, digits + sizeof digits, value);
      throw error("cannot convert " + std::string(digits, printed.ptr) + " to an index in " +
                  print_expr(expr_of(code)));
    }
    return static_cast<int64_t>(value);
  }

  // Floor division and modulo as in Python: the quotient rounds toward -inf and the remainder
  // has the sign of the divisor.
  int64_t apply_index_binary(const ExprCode& code, int64_t a, int64_t b) {
    int64_t result = 0;
    switch (static_cast<BinaryOp>(code.op)) {
      case BinaryOp::Add:
        if (__builtin_add_overflow(a, b, &result)) throw index_overflow(code);
        return result;
      case BinaryOp::Sub:
        if (__builtin_sub_overflow(a, b, &result)) throw index_overflow(code);
        return result;
      case BinaryOp::Mul:
        if (__builtin_mul_overflow(a, b, &result)) throw index_overflow(code);
        return result;
      case BinaryOp::FloorDiv: {
        if (b == 0) throw division_by_zero(code);
        if (a == std::numeric_limits<int64_t>::min() && b == -1) throw index_overflow(code);
        return floor_divide(a, b).quotient;
      }
      case BinaryOp::Mod: {
        if (b == 0) throw division_by_zero(code);
        if (b == -1) return 0;  // a % -1 overflows for the most negative a
        return floor_divide(a, b).remainder;
      }
      case BinaryOp::Max: return a > b ? a : b;
      case BinaryOp::Min: return a < b ? a : b;
      case BinaryOp::Div: break;  // float-only (verified)
    }
    throw internal_type_error(code);
  }

  bool eval_bool(int32_t id) {
    const ExprCode& code = exprs_[id];
    switch (code.kind) {
      case ExprKind::Compare: {
        if (code.operand_dtype == DType::Index) {
          return compare_values(static_cast<CompareOp>(code.op), eval_index(code.a), eval_index(code.b));
        }
        return compare_values(static_cast<CompareOp>(code.op), eval_float(code.a), eval_float(code.b));
      }
      case ExprKind::Logical:
        if (static_cast<LogicalOp>(code.op) == LogicalOp::And) {
          return eval_bool(code.a) && eval_bool(code.b);
        }
        return eval_bool(code.a) || eval_bool(code.b);
      case ExprKind::Cast: return eval_number(code.a) != 0.0;
      case ExprKind::Select: return eval_bool(code.a) ? eval_bool(code.b) : eval_bool(code.c);
      case ExprKind::IntImm:
      case ExprKind::FloatImm:
      case ExprKind::VarRef:
      case ExprKind::Load:
      case ExprKind::Unary:
      case ExprKind::Binary: break;
    }
    throw internal_type_error(code);
  }

  // -------------------------------------------------------------------------------------------
  // Errors name the block (or the store outside any block) and its spec statement.

  RuntimeError error(const std::string& what) const {
    std::string message;
    int statement = -1;
    if (const Block* block = context_ ? context_->as<Block>() : nullptr) {
      message = "block " + block->name + " " + what;
      statement = block->provenance.statement;
    } else if (const Store* store = context_ ? context_->as<Store>() : nullptr) {
      message = "store to " + store->buffer->name + " " + what;
      statement = store->provenance.statement;
    } else {
      message = what;
    }
    if (statement >= 0) message += " (spec statement " + std::to_string(statement) + ")";
    return RuntimeError{message};
  }

  RuntimeError division_by_zero(const ExprCode& code) const {
    return error("divides by zero in index expression " + print_expr(expr_of(code)));
  }

  RuntimeError index_overflow(const ExprCode& code) const {
    return error("overflows int64 in index expression " + print_expr(expr_of(code)));
  }

  RuntimeError internal_type_error(const ExprCode& code) const {
    return error("internal error: expression " + print_expr(expr_of(code)) + " of dtype " +
                 dtype_name(code.dtype) + " evaluated in the wrong context");
  }

  // print_expr takes a shared pointer; wrap the borrowed node without owning it.
  static Expr expr_of(const ExprCode& code) {
    return Expr(std::shared_ptr<const ExprNode>(), code.source);
  }

  const Program& program_;
  const uint64_t step_limit_;
  uint64_t steps_ = 0;
  const StmtNode* context_ = nullptr;  // innermost executing block, or a store outside blocks

  detail::GlobalBuffers globals_{"program", program_.name};
  std::unordered_map<const VarNode*, int32_t> slot_of_;
  std::vector<int64_t> slots_;
  std::vector<ExprCode> exprs_;
  std::vector<StmtCode> stmts_;
  std::vector<int32_t> index_pool_;
  std::vector<int32_t> child_pool_;
  std::vector<IterCode> iter_pool_;
};

}  // namespace

InterpretResult interpret(const Program& program, const TensorMap& inputs,
                          const InterpretOptions& options) {
  return Interpreter(program, options).run(inputs);
}

}  // namespace nautilus::scalar
