#include "core/spec/reference.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <limits>
#include <sstream>

#include "core/support/dtype.h"
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

void index_vars(const IndexExpr& index, std::vector<bool>& used) {
  if (index.kind == IndexKind::Name && index.name_kind == NameKind::IndexVar) used[index.var] = true;
  if (index.lhs) index_vars(*index.lhs, used);
  if (index.rhs) index_vars(*index.rhs, used);
}

void condition_vars(const Condition& condition, std::vector<bool>& used) {
  if (condition.lhs_index) index_vars(*condition.lhs_index, used);
  if (condition.rhs_index) index_vars(*condition.rhs_index, used);
  if (condition.lhs) condition_vars(*condition.lhs, used);
  if (condition.rhs) condition_vars(*condition.rhs, used);
}

// The statement variables the value of `expr` depends on: those it reads, less those bound by
// reductions inside it.
std::vector<bool> depends_on(const Expr& expr, size_t var_count) {
  std::vector<bool> vars(var_count, false);
  if (expr.kind == ExprKind::Reduce) {
    vars = depends_on(*expr.operands[0], var_count);
    for (const ReduceVar& rv : expr.reduce_vars) vars[rv.var] = false;
    return vars;
  }
  if (expr.kind == ExprKind::Name && expr.name_kind == NameKind::IndexVar) vars[expr.var] = true;
  for (const auto& index : expr.indices) index_vars(*index, vars);
  if (expr.condition) condition_vars(*expr.condition, vars);
  for (const auto& operand : expr.operands) {
    std::vector<bool> inner = depends_on(*operand, var_count);
    for (size_t v = 0; v < var_count; ++v) vars[v] = vars[v] || inner[v];
  }
  return vars;
}

// The variables a reduction's value depends on (depends_on, as indices). Its value is the same
// for every combination of the other variables, so it is computed once per change of these (the
// "hoisting" of an inline normalizer out of the enclosing sum).
std::vector<int> free_vars(const Expr& reduce, size_t var_count) {
  const std::vector<bool> used = depends_on(reduce, var_count);
  std::vector<int> vars;
  for (size_t v = 0; v < var_count; ++v) {
    if (used[v]) vars.push_back(static_cast<int>(v));
  }
  return vars;
}

// The loops (statement variable, extent) enclosing a point of the evaluation, outermost first.
using LoopStack = std::vector<std::pair<int, int64_t>>;

double trip_count(const LoopStack& loops) {
  double trips = 1.0;
  for (const auto& loop : loops) trips *= static_cast<double>(loop.second);
  return trips;
}

// Operations to evaluate `expr` at every point of `loops`, one per node. A reduction runs again
// only when one of its free variables changes (see StatementEvaluator::eval_reduce): the loops
// inside the innermost one it depends on do not repeat it.
double expr_operations(const Expr& expr, const Statement& statement, const LoopStack& loops) {
  if (expr.kind != ExprKind::Reduce) {
    double total = trip_count(loops);
    for (const auto& operand : expr.operands) {
      total += expr_operations(*operand, statement, loops);
    }
    return total;
  }
  std::vector<int> free = free_vars(expr, statement.vars.size());
  size_t depth = 0;  // loops[0, depth) hold every free variable
  for (size_t i = 0; i < loops.size(); ++i) {
    if (std::find(free.begin(), free.end(), loops[i].first) != free.end()) depth = i + 1;
  }
  LoopStack inner(loops.begin(), loops.begin() + static_cast<std::ptrdiff_t>(depth));
  const double evaluations = trip_count(inner);
  for (const ReduceVar& rv : expr.reduce_vars) inner.emplace_back(rv.var, statement.vars[rv.var].extent);
  return evaluations + expr_operations(*expr.operands[0], statement, inner);
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

  // A reduction's value depends only on its free variables: it is recomputed when one of them
  // changes and otherwise reused. Without this, an inline normalizer `/ (sum(n3) ...)` inside
  // `sum(n) ...` would be re-evaluated for every n, multiplying the work by N.
  double eval_reduce(const Expr& expr) {
    Memo& memo = memos_[&expr];
    if (!memo.analysed) {
      memo.free = free_vars(expr, statement_.vars.size());
      memo.analysed = true;
    }
    std::vector<int64_t> key(memo.free.size());
    for (size_t i = 0; i < memo.free.size(); ++i) key[i] = env_[memo.free[i]];
    if (memo.valid && key == memo.key) return memo.value;
    double value = compute_reduce(expr);
    if (error_.empty()) {
      memo.valid = true;
      memo.key = std::move(key);
      memo.value = value;
    }
    return value;
  }

  double compute_reduce(const Expr& expr) {
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

  struct Memo {
    bool analysed = false;
    std::vector<int> free;  // the statement variables the reduction's value depends on
    bool valid = false;
    std::vector<int64_t> key;  // their values when `value` was computed
    double value = 0.0;
  };

  const Statement& statement_;
  const std::vector<const TensorData*>& tensors_;
  std::vector<int64_t> env_;
  std::map<const Expr*, Memo> memos_;
  std::string error_;
};

}  // namespace

double estimate_reference_operations(const Spec& spec) {
  double total = 0.0;
  for (int index : spec.definitions) {
    const Statement& statement = spec.statement(index);
    LoopStack spatial;
    for (size_t v = 0; v < statement.lhs.size(); ++v) spatial.emplace_back(static_cast<int>(v), statement.vars[v].extent);
    total += expr_operations(*statement.value, statement, spatial);
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

double points(const std::vector<bool>& vars, const Statement& statement) {
  double product = 1.0;
  for (size_t v = 0; v < vars.size(); ++v) {
    if (vars[v]) product *= static_cast<double>(statement.vars[v].extent);
  }
  return product;
}

// Every node is counted once per value of the variables it depends on, as a compiler that
// hoists invariant work computes it: an inline normalizer `/ sum(c2) E[r, c2]` costs one sum per
// row, not one per element of the row.
double expr_flops(const Expr& expr, const Statement& statement) {
  if (is_constant(expr) || expr.kind == ExprKind::Access) return 0.0;
  const size_t var_count = statement.vars.size();
  double inner = 0.0;
  if (expr.kind == ExprKind::Reduce) {
    std::vector<bool> iterated = depends_on(expr, var_count);
    for (const ReduceVar& rv : expr.reduce_vars) iterated[rv.var] = true;
    const Expr& body = *expr.operands[0];
    std::vector<const Expr*> factors;
    product_factors(body, &factors);
    if (expr.reduce_op == ReduceOp::Sum && factors.size() >= 2) {
      for (const Expr* factor : factors) inner += expr_flops(*factor, statement);
      return 2.0 * points(iterated, statement) + inner;  // one multiply-add per term
    }
    return points(iterated, statement) + expr_flops(body, statement);
  }
  for (const auto& operand : expr.operands) inner += expr_flops(*operand, statement);
  return points(depends_on(expr, var_count), statement) + inner;
}

}  // namespace

double estimate_flops(const Spec& spec) {
  double total = 0.0;
  for (int index : spec.definitions) {
    const Statement& statement = spec.statement(index);
    total += expr_flops(*statement.value, statement);
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
      total += static_cast<double>(global_bytes(tensor.dtype, static_cast<int64_t>(elements)));
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
  std::map<std::string, TensorData> stored_outputs;  // outputs as later statements read them
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
    // A tensor is stored at its dtype (declared, or the narrow one sema keeps for an
    // intermediate) and later statements read the stored values, so a 16-bit rounding is part
    // of what the spec means: a `Xn : bf16` feeding an f32 output is read as bf16 by every
    // stage. An f32 rounding is within every tolerance and left out (the reference stays the
    // exact math there). An output itself is given exact (its tolerance covers its own
    // rounding); a later statement reading it reads a rounded copy. An 8-bit output is the
    // exception: its store saturates (448 for fp8e4m3, 127 for int8), which no tolerance
    // covers, so it is given rounded and saturated, as it is stored.
    tensors[statement.tensor] = &out;
    if (tensor.dtype != DType::F32) {
      const bool exact_output = tensor.role == TensorRole::Output && !is_narrow_storage(tensor.dtype);
      TensorData& stored = exact_output ? stored_outputs[tensor.name] = out : out;
      for (double& value : stored.values) value = round_to(tensor.dtype, value);
      tensors[statement.tensor] = &stored;
    }
  }
  result.ok = true;
  return result;
}

}  // namespace nautilus::spec
