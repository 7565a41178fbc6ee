#include "core/spec/reference.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "core/support/rng.h"

namespace nautilus::spec {

TensorMap make_random_inputs(const Spec& spec, uint64_t seed) {
  TensorMap inputs;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const Tensor& tensor = spec.tensors[spec.inputs[k]];
    inputs[tensor.name] = random_tensor(tensor.shape, tensor.dtype, derive_seed(seed, k));
  }
  return inputs;
}

namespace {

double product_of_extents(const Statement& statement, bool reduced) {
  double product = 1.0;
  for (const Statement::Var& var : statement.vars) {
    if (var.reduced == reduced) product *= static_cast<double>(var.extent);
  }
  return product;
}

// Operations to evaluate `expr` once (one per node, reductions multiplied by their trip count).
double expr_operations(const Expr& expr, const Statement& statement) {
  double own = 1.0;
  for (const auto& operand : expr.operands) own += expr_operations(*operand, statement);
  if (expr.kind == ExprKind::Reduce) {
    double trip = 1.0;
    for (const ReduceVar& rv : expr.reduce_vars) {
      trip *= static_cast<double>(statement.vars[rv.var].extent);
    }
    own *= trip;
  }
  return own;
}

// Evaluates one statement. Index variables live in `env`, indexed like Statement::vars.
class StatementEvaluator {
 public:
  StatementEvaluator(const Statement& statement, const std::vector<const TensorData*>& tensors)
      : statement_(statement), tensors_(tensors), env_(statement.vars.size(), 0) {}

  // Fills `out` (shaped like the statement's tensor). Returns false with error_ set on failure.
  bool run(TensorData& out) {
    const size_t spatial = statement_.lhs.size();
    std::vector<int64_t> extents(spatial);
    for (size_t i = 0; i < spatial; ++i) extents[i] = statement_.vars[i].extent;
    const int64_t count = out.element_count();
    for (int64_t flat = 0; flat < count; ++flat) {
      // Row-major: the last left-hand variable varies fastest.
      int64_t rest = flat;
      for (size_t i = spatial; i-- > 0;) {
        env_[i] = rest % extents[i];
        rest /= extents[i];
      }
      out.values[static_cast<size_t>(flat)] = eval(*statement_.value);
      if (!error_.empty()) return false;
    }
    return true;
  }

  const std::string& error() const { return error_; }

 private:
  int64_t eval_index(const IndexExpr& index) {
    switch (index.kind) {
      case IndexKind::Literal: return index.literal;
      case IndexKind::Name:
        return index.name_kind == NameKind::IndexVar ? env_[index.var] : index.size_value;
      case IndexKind::Neg: return -eval_index(*index.lhs);
      case IndexKind::Add: return eval_index(*index.lhs) + eval_index(*index.rhs);
      case IndexKind::Sub: return eval_index(*index.lhs) - eval_index(*index.rhs);
      case IndexKind::Mul: return eval_index(*index.lhs) * eval_index(*index.rhs);
      case IndexKind::FloorDiv:
      case IndexKind::Mod: {
        int64_t a = eval_index(*index.lhs), b = eval_index(*index.rhs);
        if (b == 0) {
          fail("division by zero in an index");
          return 0;
        }
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // floor, not truncation
        return index.kind == IndexKind::FloorDiv ? q : a - q * b;
      }
    }
    return 0;
  }

  bool eval_condition(const Condition& condition) {
    switch (condition.kind) {
      case Condition::Kind::And:
        return eval_condition(*condition.lhs) && eval_condition(*condition.rhs);
      case Condition::Kind::Or:
        return eval_condition(*condition.lhs) || eval_condition(*condition.rhs);
      case Condition::Kind::Compare: break;
    }
    int64_t a = eval_index(*condition.lhs_index), b = eval_index(*condition.rhs_index);
    switch (condition.compare) {
      case CompareOp::Less: return a < b;
      case CompareOp::LessEqual: return a <= b;
      case CompareOp::Greater: return a > b;
      case CompareOp::GreaterEqual: return a >= b;
      case CompareOp::Equal: return a == b;
      case CompareOp::NotEqual: return a != b;
    }
    return false;
  }

  double eval(const Expr& expr) {
    switch (expr.kind) {
      case ExprKind::Number: return expr.number;
      case ExprKind::Name:
        return expr.name_kind == NameKind::IndexVar ? static_cast<double>(env_[expr.var])
                                                    : static_cast<double>(expr.size_value);
      case ExprKind::Access: return eval_access(expr);
      case ExprKind::Call: return eval_call(expr);
      case ExprKind::Select:
        return eval_condition(*expr.condition) ? eval(*expr.operands[0]) : eval(*expr.operands[1]);
      case ExprKind::Reduce: return eval_reduce(expr);
      case ExprKind::Neg: return -eval(*expr.operands[0]);
      case ExprKind::Binary: {
        double a = eval(*expr.operands[0]), b = eval(*expr.operands[1]);
        switch (expr.binary_op) {
          case BinaryOp::Add: return a + b;
          case BinaryOp::Sub: return a - b;
          case BinaryOp::Mul: return a * b;
          case BinaryOp::Div: return a / b;
        }
      }
    }
    return 0.0;
  }

  double eval_access(const Expr& expr) {
    const TensorData* tensor = tensors_[expr.tensor];
    int64_t flat = 0;
    for (size_t i = 0; i < expr.indices.size(); ++i) {
      int64_t index = eval_index(*expr.indices[i]);
      int64_t extent = tensor->shape[i];
      if (index < 0 || index >= extent) {
        // Sema proves indices in bounds; reaching this is a compiler bug, reported not crashed.
        std::ostringstream message;
        message << "index " << index << " out of bounds for dimension " << i << " of '"
                << expr.name << "' (extent " << extent << ")";
        fail(message.str());
        return 0.0;
      }
      flat = flat * extent + index;
    }
    return tensor->values[static_cast<size_t>(flat)];
  }

  double eval_call(const Expr& expr) {
    double a = eval(*expr.operands[0]);
    switch (expr.func) {
      case Func::Exp: return std::exp(a);
      case Func::Exp2: return std::exp2(a);
      case Func::Log: return std::log(a);
      case Func::Log2: return std::log2(a);
      case Func::Sqrt: return std::sqrt(a);
      case Func::Rsqrt: return 1.0 / std::sqrt(a);
      case Func::Tanh: return std::tanh(a);
      case Func::Sigmoid: return 1.0 / (1.0 + std::exp(-a));
      case Func::Abs: return std::fabs(a);
      case Func::Max: return std::fmax(a, eval(*expr.operands[1]));
      case Func::Min: return std::fmin(a, eval(*expr.operands[1]));
    }
    return 0.0;
  }

  double eval_reduce(const Expr& expr) {
    double acc = expr.reduce_op == ReduceOp::Sum   ? 0.0
                 : expr.reduce_op == ReduceOp::Max ? -std::numeric_limits<double>::infinity()
                                                   : std::numeric_limits<double>::infinity();
    const size_t n = expr.reduce_vars.size();
    std::vector<int64_t> extents(n);
    int64_t trip = 1;
    for (size_t i = 0; i < n; ++i) {
      extents[i] = statement_.vars[expr.reduce_vars[i].var].extent;
      trip *= extents[i];
    }
    for (int64_t flat = 0; flat < trip; ++flat) {
      int64_t rest = flat;
      for (size_t i = n; i-- > 0;) {
        env_[expr.reduce_vars[i].var] = rest % extents[i];
        rest /= extents[i];
      }
      double value = eval(*expr.operands[0]);
      if (!error_.empty()) return 0.0;
      switch (expr.reduce_op) {
        case ReduceOp::Sum: acc += value; break;
        case ReduceOp::Max: acc = std::fmax(acc, value); break;
        case ReduceOp::Min: acc = std::fmin(acc, value); break;
      }
    }
    return acc;
  }

  void fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
  }

  const Statement& statement_;
  const std::vector<const TensorData*>& tensors_;
  std::vector<int64_t> env_;
  std::string error_;
};

}  // namespace

double estimate_reference_operations(const Spec& spec) {
  double total = 0.0;
  for (int index : spec.definitions) {
    const Statement& statement = spec.statement(index);
    total += product_of_extents(statement, false) * expr_operations(*statement.value, statement);
  }
  return total;
}

namespace {

bool is_constant(const Expr& expr) {
  switch (expr.kind) {
    case ExprKind::Number:
    case ExprKind::Name: return true;
    case ExprKind::Access:
    case ExprKind::Reduce:
    case ExprKind::Select: return false;
    default:
      for (const auto& operand : expr.operands) {
        if (!is_constant(*operand)) return false;
      }
      return true;
  }
}

double expr_flops(const Expr& expr, const Statement& statement);

// The factors of a product `a * b / c ...` (a Mul/Div chain), or nothing when `expr` is not a
// product of at least two non-constant factors.
void product_factors(const Expr& expr, std::vector<const Expr*>* factors) {
  if (expr.kind == ExprKind::Binary &&
      (expr.binary_op == BinaryOp::Mul || expr.binary_op == BinaryOp::Div)) {
    product_factors(*expr.operands[0], factors);
    product_factors(*expr.operands[1], factors);
    return;
  }
  if (!is_constant(expr)) factors->push_back(&expr);
}

double expr_flops(const Expr& expr, const Statement& statement) {
  if (is_constant(expr) || expr.kind == ExprKind::Access) return 0.0;
  double inner = 0.0;
  if (expr.kind == ExprKind::Reduce) {
    double trip = 1.0;
    for (const ReduceVar& rv : expr.reduce_vars) {
      trip *= static_cast<double>(statement.vars[rv.var].extent);
    }
    const Expr& body = *expr.operands[0];
    std::vector<const Expr*> factors;
    product_factors(body, &factors);
    if (expr.reduce_op == ReduceOp::Sum && factors.size() >= 2) {
      for (const Expr* factor : factors) inner += expr_flops(*factor, statement);
      return trip * (2.0 + inner);  // one multiply-add per term
    }
    return trip * (1.0 + expr_flops(body, statement));
  }
  for (const auto& operand : expr.operands) inner += expr_flops(*operand, statement);
  return 1.0 + inner;
}

}  // namespace

double estimate_flops(const Spec& spec) {
  double total = 0.0;
  for (int index : spec.definitions) {
    const Statement& statement = spec.statement(index);
    total += product_of_extents(statement, false) * expr_flops(*statement.value, statement);
  }
  return total;
}

double estimate_compulsory_bytes(const Spec& spec) {
  double total = 0.0;
  for (const std::vector<int>* list : {&spec.inputs, &spec.outputs}) {
    for (int index : *list) {
      const Tensor& tensor = spec.tensors[index];
      double elements = 1.0;
      for (int64_t extent : tensor.shape) elements *= static_cast<double>(extent);
      total += elements * static_cast<double>(dtype_bytes(tensor.dtype));
    }
  }
  return total;
}

ReferenceResult evaluate_reference(const Spec& spec, const TensorMap& inputs,
                                   const ReferenceOptions& options) {
  ReferenceResult result;
  double operations = estimate_reference_operations(spec);
  if (operations > options.max_operations) {
    std::ostringstream message;
    message << "the float64 reference needs about " << static_cast<double>(operations)
            << " operations at these sizes (limit " << options.max_operations
            << "); bind smaller sizes with -D NAME=VALUE";
    result.error = message.str();
    return result;
  }
  std::vector<const TensorData*> tensors(spec.tensors.size(), nullptr);
  for (int index : spec.inputs) {
    const Tensor& tensor = spec.tensors[index];
    auto it = inputs.find(tensor.name);
    if (it == inputs.end()) {
      result.error = "missing input '" + tensor.name + "'";
      return result;
    }
    if (it->second.shape != tensor.shape) {
      result.error = "input '" + tensor.name + "' has the wrong shape";
      return result;
    }
    tensors[index] = &it->second;
  }
  for (int index : spec.definitions) {
    const Statement& statement = spec.statement(index);
    const Tensor& tensor = spec.tensors[statement.tensor];
    TensorData& out = result.tensors[tensor.name];
    out.shape = tensor.shape;
    out.dtype = DType::F64;
    out.values.assign(static_cast<size_t>(out.element_count()), 0.0);
    StatementEvaluator evaluator(statement, tensors);
    if (!evaluator.run(out)) {
      result.error = "reference evaluation of '" + tensor.name + "': " + evaluator.error();
      return result;
    }
    tensors[statement.tensor] = &out;
  }
  result.ok = true;
  return result;
}

}  // namespace nautilus::spec
