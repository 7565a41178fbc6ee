#include "core/scalar/lower_spec.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

namespace nautilus::scalar {
namespace {

using SpecVars = std::vector<Var>;  // spec variable id → iteration variable of the current block

// Variables an expression depends on: every index variable it mentions, minus the variables
// bound by reductions inside it. Sorted by id, which is spatial-first declaration order.
void collect_index_vars(const spec::IndexExpr& index, std::set<int>& out) {
  if (index.kind == spec::IndexKind::Name && index.name_kind == spec::NameKind::IndexVar) {
    out.insert(index.var);
  }
  if (index.lhs) collect_index_vars(*index.lhs, out);
  if (index.rhs) collect_index_vars(*index.rhs, out);
}

void collect_condition_vars(const spec::Condition& condition, std::set<int>& out) {
  if (condition.lhs_index) collect_index_vars(*condition.lhs_index, out);
  if (condition.rhs_index) collect_index_vars(*condition.rhs_index, out);
  if (condition.lhs) collect_condition_vars(*condition.lhs, out);
  if (condition.rhs) collect_condition_vars(*condition.rhs, out);
}

std::set<int> free_vars(const spec::Expr& expr) {
  std::set<int> vars;
  if (expr.kind == spec::ExprKind::Name && expr.name_kind == spec::NameKind::IndexVar) {
    vars.insert(expr.var);
  }
  for (const auto& index : expr.indices) collect_index_vars(*index, vars);
  if (expr.condition) collect_condition_vars(*expr.condition, vars);
  for (const auto& operand : expr.operands) {
    std::set<int> inner = free_vars(*operand);
    vars.insert(inner.begin(), inner.end());
  }
  if (expr.kind == spec::ExprKind::Reduce) {
    for (const spec::ReduceVar& rv : expr.reduce_vars) vars.erase(rv.var);
  }
  return vars;
}

constexpr MemoryScope kGlobal = MemoryScope::Global;

// The text of a nested reduction with its variables named by role: the free ones by their
// position in the temporary that holds it (s0, s1, ...), the bound ones in binding order (r0,
// r1, ...), each with its extent. Two reductions with the same text compute the same
// temporary, element for element, whatever their variables are called: the four copies of the
// scores in attention written as one statement,
//   sum(d) Q[b, h, m, d] * K[b, h, n, d]   and   sum(d3) Q[b, h, m, d3] * K[b, h, n3, d3]
// (free b, h, m, n and b, h, m, n3), are both `sum(r0:64) T0[s0,s1,s2,r0]*T1[s0,s1,s3,r0]`.
class ReductionText {
 public:
  ReductionText(const spec::Statement& statement, const std::vector<int>& free)
      : statement_(statement) {
    for (size_t k = 0; k < free.size(); ++k) {
      names_[free[k]] = "s" + std::to_string(k) + ":" +
                        std::to_string(statement.vars[static_cast<size_t>(free[k])].extent);
    }
  }

  std::string expr(const spec::Expr& e) {
    std::string out = "<" + std::to_string(static_cast<int>(e.dtype)) + ">";
    switch (e.kind) {
      case spec::ExprKind::Number: {
        char text[32];
        std::snprintf(text, sizeof(text), "%.17g", e.number);
        return out + text;
      }
      case spec::ExprKind::Name:
        return out + (e.name_kind == spec::NameKind::IndexVar ? var(e.var)
                                                               : "$" + std::to_string(e.size_value));
      case spec::ExprKind::Access: {
        out += "T" + std::to_string(e.tensor) + "[";
        for (const auto& index : e.indices) out += this->index(*index) + ",";
        return out + "]";
      }
      case spec::ExprKind::Call: out += "f" + std::to_string(static_cast<int>(e.func)); break;
      case spec::ExprKind::Select: out += "select(" + condition(*e.condition) + ")"; break;
      case spec::ExprKind::Reduce:
        out += "r" + std::to_string(static_cast<int>(e.reduce_op)) + "(";
        for (const spec::ReduceVar& rv : e.reduce_vars) {
          names_[rv.var] = "r" + std::to_string(bound_++) + ":" +
                           std::to_string(statement_.vars[static_cast<size_t>(rv.var)].extent);
          out += names_[rv.var] + ",";
        }
        out += ")";
        break;
      case spec::ExprKind::Neg: out += "neg"; break;
      case spec::ExprKind::Binary: out += "b" + std::to_string(static_cast<int>(e.binary_op)); break;
    }
    out += "(";
    for (const auto& operand : e.operands) out += expr(*operand) + ",";
    return out + ")";
  }

 private:
  std::string var(int id) {
    auto found = names_.find(id);
    return found != names_.end() ? found->second : "?" + std::to_string(id);
  }
  std::string index(const spec::IndexExpr& i) {
    switch (i.kind) {
      case spec::IndexKind::Literal: return std::to_string(i.literal);
      case spec::IndexKind::Name:
        return i.name_kind == spec::NameKind::IndexVar ? var(i.var) : "$" + std::to_string(i.size_value);
      default: break;
    }
    std::string out = "i" + std::to_string(static_cast<int>(i.kind)) + "(" + index(*i.lhs);
    if (i.rhs) out += "," + index(*i.rhs);
    return out + ")";
  }
  std::string condition(const spec::Condition& c) {
    if (c.kind != spec::Condition::Kind::Compare) {
      return std::string(c.kind == spec::Condition::Kind::And ? "and(" : "or(") + condition(*c.lhs) +
             "," + condition(*c.rhs) + ")";
    }
    return "c" + std::to_string(static_cast<int>(c.compare)) + "(" + index(*c.lhs_index) + "," +
           index(*c.rhs_index) + ")";
  }

  const spec::Statement& statement_;
  std::map<int, std::string> names_;
  int bound_ = 0;
};

class Lowering {
 public:
  explicit Lowering(const spec::Spec& spec) : spec_(spec) {}

  ProgramPtr run() {
    auto program = std::make_shared<Program>();
    program->name = spec_.name;
    buffers_.resize(spec_.tensors.size());
    for (size_t i = 0; i < spec_.tensors.size(); ++i) {
      const spec::Tensor& tensor = spec_.tensors[i];
      BufferRole role = tensor.role == spec::TensorRole::Input    ? BufferRole::Input
                        : tensor.role == spec::TensorRole::Output ? BufferRole::Output
                                                                  : BufferRole::Intermediate;
      buffers_[i] = make_buffer(tensor.name, tensor.shape, tensor.dtype, kGlobal, role,
                                Provenance{tensor.statement, tensor.range});
      used_names_.insert(tensor.name);
    }
    for (int index : spec_.inputs) program->params.push_back(buffers_[index]);
    for (int index : spec_.outputs) program->params.push_back(buffers_[index]);
    for (size_t i = 0; i < spec_.tensors.size(); ++i) {
      if (spec_.tensors[i].role == spec::TensorRole::Intermediate) {
        allocations_.push_back(buffers_[i]);
      }
    }
    for (int index : spec_.definitions) lower_definition(index);
    program->allocations = std::move(allocations_);
    program->body = make_seq(std::move(nests_), Provenance{});
    return program;
  }

 private:
  void lower_definition(int statement_index) {
    statement_index_ = statement_index;
    statement_ = &spec_.statement(statement_index);
    const spec::Tensor& tensor = spec_.tensors[statement_->tensor];
    const Buffer& buffer = buffers_[statement_->tensor];
    const spec::Expr& value = *statement_->value;
    const Provenance provenance{statement_index, statement_->range};

    std::vector<int> spatial;
    for (size_t i = 0; i < statement_->lhs.size(); ++i) spatial.push_back(static_cast<int>(i));

    if (value.kind == spec::ExprKind::Reduce && tensor.dtype == DType::F32) {
      // The statement is a reduction that accumulates in place.
      emit_reduction_nest(value, spatial, buffer, tensor.name, provenance);
      return;
    }
    SpecVars vars(statement_->vars.size());
    std::vector<IterVar> iter_vars = make_iter_vars(spatial, {}, vars);
    Expr result = lower_value(value, vars);
    if (tensor.dtype != DType::F32) result = cast(tensor.dtype, result, expr_provenance(value));
    Stmt body = make_store(buffer, indices_of(spatial, vars), result, provenance);
    emit_nest(tensor.name, iter_vars, nullptr, body, provenance);
  }

  // Creates one iteration variable per spec variable (named like it) and records it in `vars`.
  std::vector<IterVar> make_iter_vars(const std::vector<int>& spatial,
                                      const std::vector<int>& reduced, SpecVars& vars) {
    std::vector<IterVar> iter_vars;
    for (int id : spatial) {
      vars[id] = make_var(statement_->vars[id].name);
      iter_vars.push_back({vars[id], statement_->vars[id].extent, IterKind::Spatial});
    }
    for (int id : reduced) {
      vars[id] = make_var(statement_->vars[id].name);
      iter_vars.push_back({vars[id], statement_->vars[id].extent, IterKind::Reduce});
    }
    return iter_vars;
  }

  std::vector<Expr> indices_of(const std::vector<int>& ids, const SpecVars& vars) {
    std::vector<Expr> indices;
    for (int id : ids) indices.push_back(var_ref(vars[id]));
    return indices;
  }

  // Wraps `block body` into a block and one serial loop per iteration variable, outermost first.
  void emit_nest(const std::string& name, const std::vector<IterVar>& iter_vars, Stmt init,
                 Stmt body, Provenance provenance) {
    std::vector<Var> loop_vars;
    std::vector<Expr> bindings;
    for (const IterVar& iv : iter_vars) {
      loop_vars.push_back(make_var(iv.var->name));
      bindings.push_back(var_ref(loop_vars.back()));
    }
    Stmt nest = make_block(name, iter_vars, std::move(bindings), nullptr, std::move(init),
                           std::move(body), provenance);
    for (size_t i = iter_vars.size(); i-- > 0;) {
      nest = make_for(loop_vars[i], iter_vars[i].extent, nest, provenance);
    }
    nests_.push_back(nest);
  }

  // A reduction nest: `buffer[spatial] (op)= body` over the reduction's variables.
  void emit_reduction_nest(const spec::Expr& reduce, const std::vector<int>& spatial,
                           const Buffer& buffer, const std::string& name, Provenance provenance) {
    std::vector<int> reduced;
    for (const spec::ReduceVar& rv : reduce.reduce_vars) reduced.push_back(rv.var);
    SpecVars vars(statement_->vars.size());
    std::vector<IterVar> iter_vars = make_iter_vars(spatial, reduced, vars);
    Provenance value_provenance = expr_provenance(reduce);
    Expr value = lower_value(*reduce.operands[0], vars);

    double identity = 0.0;
    BinaryOp combine = BinaryOp::Add;
    if (reduce.reduce_op == spec::ReduceOp::Max) {
      identity = -std::numeric_limits<double>::infinity();
      combine = BinaryOp::Max;
    } else if (reduce.reduce_op == spec::ReduceOp::Min) {
      identity = std::numeric_limits<double>::infinity();
      combine = BinaryOp::Min;
    }
    std::vector<Expr> target = indices_of(spatial, vars);
    Stmt init = make_store(buffer, target, float_imm(identity, DType::F32, value_provenance),
                           provenance);
    Expr accumulated =
        binary(combine, load(buffer, target, value_provenance), value, value_provenance);
    Stmt body = make_store(buffer, target, accumulated, provenance);
    emit_nest(name, iter_vars, init, body, provenance);
  }

  // Computes a nested reduction into a fresh f32 temporary indexed by the variables it depends
  // on, and returns the load of that temporary for the current block.
  Expr extract_reduction(const spec::Expr& reduce, const SpecVars& outer_vars) {
    std::set<int> depends = free_vars(reduce);
    std::vector<int> spatial(depends.begin(), depends.end());
    // The same reduction written again (under other variable names) reads the temporary the
    // first one filled: its nest is not emitted twice.
    const std::string text = ReductionText(*statement_, spatial).expr(reduce);
    if (auto found = lowered_reductions_.find(text); found != lowered_reductions_.end()) {
      std::vector<Expr> indices;
      for (int id : spatial) indices.push_back(var_ref(outer_vars[id], expr_provenance(reduce)));
      return load(found->second, std::move(indices), expr_provenance(reduce));
    }
    std::vector<int64_t> shape;
    for (int id : spatial) shape.push_back(statement_->vars[id].extent);
    const spec::Tensor& tensor = spec_.tensors[statement_->tensor];
    std::string name = fresh_name(tensor.name + "_" + spec::reduce_op_name(reduce.reduce_op));
    Provenance provenance = expr_provenance(reduce);
    Buffer temporary = make_buffer(name, shape, DType::F32, kGlobal, BufferRole::Intermediate,
                                   provenance);
    allocations_.push_back(temporary);
    emit_reduction_nest(reduce, spatial, temporary, name, provenance);
    lowered_reductions_.emplace(text, temporary);
    std::vector<Expr> indices;
    for (int id : spatial) indices.push_back(var_ref(outer_vars[id], provenance));
    return load(temporary, std::move(indices), provenance);
  }

  std::string fresh_name(const std::string& base) {
    std::string name = base;
    for (int k = 1; used_names_.count(name); ++k) name = base + "_" + std::to_string(k);
    used_names_.insert(name);
    return name;
  }

  Provenance expr_provenance(const spec::Expr& expr) const {
    return Provenance{statement_index_, expr.range};
  }

  Expr lower_index(const spec::IndexExpr& index, const SpecVars& vars) {
    Provenance p{statement_index_, index.range};
    switch (index.kind) {
      case spec::IndexKind::Literal: return int_imm(index.literal, p);
      case spec::IndexKind::Name:
        return index.name_kind == spec::NameKind::IndexVar ? var_ref(vars[index.var], p)
                                                           : int_imm(index.size_value, p);
      case spec::IndexKind::Neg:
        return binary(BinaryOp::Sub, int_imm(0, p), lower_index(*index.lhs, vars), p);
      case spec::IndexKind::Add:
        return binary(BinaryOp::Add, lower_index(*index.lhs, vars), lower_index(*index.rhs, vars), p);
      case spec::IndexKind::Sub:
        return binary(BinaryOp::Sub, lower_index(*index.lhs, vars), lower_index(*index.rhs, vars), p);
      case spec::IndexKind::Mul:
        return binary(BinaryOp::Mul, lower_index(*index.lhs, vars), lower_index(*index.rhs, vars), p);
      case spec::IndexKind::FloorDiv:
        return binary(BinaryOp::FloorDiv, lower_index(*index.lhs, vars),
                      lower_index(*index.rhs, vars), p);
      case spec::IndexKind::Mod:
        return binary(BinaryOp::Mod, lower_index(*index.lhs, vars), lower_index(*index.rhs, vars), p);
    }
    return int_imm(0, p);
  }

  Expr lower_condition(const spec::Condition& condition, const SpecVars& vars) {
    Provenance p{statement_index_, condition.range};
    switch (condition.kind) {
      case spec::Condition::Kind::And:
        return logical(LogicalOp::And, lower_condition(*condition.lhs, vars),
                       lower_condition(*condition.rhs, vars), p);
      case spec::Condition::Kind::Or:
        return logical(LogicalOp::Or, lower_condition(*condition.lhs, vars),
                       lower_condition(*condition.rhs, vars), p);
      case spec::Condition::Kind::Compare: break;
    }
    static constexpr CompareOp kOps[] = {CompareOp::LT, CompareOp::LE, CompareOp::GT,
                                         CompareOp::GE, CompareOp::EQ, CompareOp::NE};
    return compare(kOps[static_cast<int>(condition.compare)],
                   lower_index(*condition.lhs_index, vars),
                   lower_index(*condition.rhs_index, vars), p);
  }

  Expr lower_value(const spec::Expr& expr, const SpecVars& vars) {
    Provenance p = expr_provenance(expr);
    switch (expr.kind) {
      case spec::ExprKind::Number: return float_imm(expr.number, DType::F32, p);
      case spec::ExprKind::Name:
        if (expr.name_kind == spec::NameKind::IndexVar) {
          return cast(DType::F32, var_ref(vars[expr.var], p), p);
        }
        return float_imm(static_cast<double>(expr.size_value), DType::F32, p);
      case spec::ExprKind::Access: {
        std::vector<Expr> indices;
        for (const auto& index : expr.indices) indices.push_back(lower_index(*index, vars));
        const Buffer& buffer = buffers_[expr.tensor];
        Expr loaded = load(buffer, std::move(indices), p);
        return buffer->dtype == DType::F32 ? loaded : cast(DType::F32, loaded, p);
      }
      case spec::ExprKind::Call: {
        Expr a = lower_value(*expr.operands[0], vars);
        switch (expr.func) {
          case spec::Func::Exp: return unary(UnaryOp::Exp, a, p);
          case spec::Func::Exp2: return unary(UnaryOp::Exp2, a, p);
          case spec::Func::Log: return unary(UnaryOp::Log, a, p);
          case spec::Func::Log2: return unary(UnaryOp::Log2, a, p);
          case spec::Func::Sqrt: return unary(UnaryOp::Sqrt, a, p);
          case spec::Func::Rsqrt: return unary(UnaryOp::Rsqrt, a, p);
          case spec::Func::Tanh: return unary(UnaryOp::Tanh, a, p);
          case spec::Func::Sigmoid: return unary(UnaryOp::Sigmoid, a, p);
          case spec::Func::Abs: return unary(UnaryOp::Abs, a, p);
          case spec::Func::Max:
            return binary(BinaryOp::Max, a, lower_value(*expr.operands[1], vars), p);
          case spec::Func::Min:
            return binary(BinaryOp::Min, a, lower_value(*expr.operands[1], vars), p);
        }
        return a;
      }
      case spec::ExprKind::Select:
        return select(lower_condition(*expr.condition, vars), lower_value(*expr.operands[0], vars),
                      lower_value(*expr.operands[1], vars), p);
      case spec::ExprKind::Reduce: return extract_reduction(expr, vars);
      case spec::ExprKind::Neg: return unary(UnaryOp::Neg, lower_value(*expr.operands[0], vars), p);
      case spec::ExprKind::Binary: {
        static constexpr BinaryOp kOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul,
                                            BinaryOp::Div};
        return binary(kOps[static_cast<int>(expr.binary_op)], lower_value(*expr.operands[0], vars),
                      lower_value(*expr.operands[1], vars), p);
      }
    }
    return float_imm(0.0, DType::F32, p);
  }

  const spec::Spec& spec_;
  std::vector<Buffer> buffers_;  // spec tensor id → buffer
  std::vector<Buffer> allocations_;
  std::vector<Stmt> nests_;
  std::set<std::string> used_names_;
  std::map<std::string, Buffer> lowered_reductions_;  // ReductionText -> its temporary
  const spec::Statement* statement_ = nullptr;
  int statement_index_ = -1;
};

}  // namespace

ProgramPtr lower_spec(const spec::Spec& spec) { return Lowering(spec).run(); }

}  // namespace nautilus::scalar
