#include "core/rewrite/rescale_cancellation.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

// One factor of a product: a plain value (multiplied or divided), or exp(k·(plus − minus)),
// possibly broadcast.
struct Factor {
  Value value;  // the factor as it appears in the product (plain factors, unchanged exps)
  bool divides = false;
  bool is_exp = false;
  UnaryOp exp_op = UnaryOp::Exp;
  Value plus, minus;
  Value scale;             // the constant k, when the exponent is scaled
  BinaryOp scale_op = BinaryOp::Mul;
  std::optional<BroadcastOf> broadcast;
  bool changed = false;
};

bool same_broadcast(const std::optional<BroadcastOf>& a, const std::optional<BroadcastOf>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || a->dims == b->dims;
}

// Reads exp(k·(plus − minus)) (or exp2), looking through one broadcast.
std::optional<Factor> exp_factor(const Value& value, const KernelIndex& index) {
  Factor factor;
  factor.value = value;
  Value inner = value;
  if (std::optional<BroadcastOf> b = broadcast_of(value, index)) {
    factor.broadcast = b;
    inner = b->source;
  }
  const Op* exp = index.def(inner);
  if (!exp || exp->kind != OpKind::Unary ||
      (exp->unary_op != UnaryOp::Exp && exp->unary_op != UnaryOp::Exp2)) {
    return std::nullopt;
  }
  factor.exp_op = exp->unary_op;
  const Op* argument = index.def(exp->operands[0]);
  if (argument && argument->kind == OpKind::Binary &&
      (argument->binary_op == BinaryOp::Mul || argument->binary_op == BinaryOp::Div) &&
      constant_of(argument->operands[1], index)) {
    factor.scale = argument->operands[1];
    factor.scale_op = argument->binary_op;
    argument = index.def(argument->operands[0]);
  }
  if (!argument || argument->kind != OpKind::Binary || argument->binary_op != BinaryOp::Sub) {
    return std::nullopt;
  }
  factor.is_exp = true;
  factor.plus = argument->operands[0];
  factor.minus = argument->operands[1];
  return factor;
}

bool same_scale(const Factor& a, const Factor& b, const KernelIndex& index) {
  if (!a.scale || !b.scale) return !a.scale && !b.scale;
  return a.scale_op == b.scale_op &&
         *constant_of(a.scale, index) == *constant_of(b.scale, index);
}

// Collects the factors of `value`'s product chain, descending into muls and divs of the same
// type whose result has no other use (those only exist for this product).
void collect(const Value& value, bool divides, bool top, const KernelIndex& index,
             std::vector<Factor>* factors) {
  const Op* op = index.def(value);
  const bool chain = op && op->kind == OpKind::Binary && op->operands.size() == 2 &&
                     (op->binary_op == BinaryOp::Mul || op->binary_op == BinaryOp::Div) &&
                     (top || index.uses(value).size() == 1) &&
                     op->operands[0]->type == value->type && op->operands[1]->type == value->type;
  if (chain) {
    collect(op->operands[0], divides, false, index, factors);
    collect(op->operands[1], divides != (op->binary_op == BinaryOp::Div), false, index, factors);
    return;
  }
  if (std::optional<Factor> exp = exp_factor(value, index)) {
    if (divides) {  // 1 / exp(k(a − b)) = exp(k(b − a))
      std::swap(exp->plus, exp->minus);
      exp->changed = true;
    }
    factors->push_back(*exp);
    return;
  }
  Factor plain;
  plain.value = value;
  plain.divides = divides;
  factors->push_back(plain);
}

// Merges chained exponentials and drops ones; returns whether anything changed.
bool simplify(std::vector<Factor>* factors, const KernelIndex& index) {
  bool changed = false;
  for (size_t i = 0; i < factors->size(); ++i) {
    Factor& a = (*factors)[i];
    if (!a.is_exp) continue;
    for (size_t j = i + 1; j < factors->size(); ++j) {
      Factor& b = (*factors)[j];
      if (!b.is_exp || b.exp_op != a.exp_op || !same_scale(a, b, index) ||
          !same_broadcast(a.broadcast, b.broadcast)) {
        continue;
      }
      if (a.minus == b.plus) {
        a.minus = b.minus;
      } else if (b.minus == a.plus) {
        a.plus = b.plus;
      } else {
        continue;
      }
      a.changed = true;
      factors->erase(factors->begin() + static_cast<std::ptrdiff_t>(j));
      changed = true;
      j = i;  // look again from the start: the merged factor may chain further
    }
  }
  const auto numerators = [&] {
    return std::count_if(factors->begin(), factors->end(), [](const Factor& f) { return !f.divides; });
  };
  for (size_t i = 0; i < factors->size();) {
    const Factor& f = (*factors)[i];
    const bool one = (f.is_exp && f.plus == f.minus) ||
                     (!f.is_exp && constant_of(f.value, index) == std::optional<double>(1.0));
    // A constant 1 that is the only numerator (1 / l) would only come back as a new 1.
    const bool lone_numerator = !f.is_exp && !f.divides && numerators() == 1;
    if (one && !lone_numerator) {
      factors->erase(factors->begin() + static_cast<std::ptrdiff_t>(i));
      changed = true;
    } else {
      ++i;
    }
  }
  for (const Factor& f : *factors) changed = changed || f.changed;
  return changed;
}

// Emits the value of a (changed) exponential factor.
Value emit_exp(const Factor& f, const TileType& type, const Provenance& p, Rebuilder& out) {
  const Value plus = out.lookup(f.plus), minus = out.lookup(f.minus);
  Value argument = out.binary(BinaryOp::Sub, plus, minus, "rescale_arg", p);
  if (f.scale) {
    argument = out.binary(f.scale_op, argument, out.lookup(f.scale), "rescale_arg", p);
  }
  Value exp = out.unary(f.exp_op, argument, "rescale", p);
  if (f.broadcast) exp = out.broadcast(exp, type.shape, f.broadcast->dims, "rescale_t", p);
  return exp;
}

KernelPtr rewrite_kernel(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    const bool product = original.kind == OpKind::Binary &&
                         (original.binary_op == BinaryOp::Mul ||
                          original.binary_op == BinaryOp::Div) &&
                         is_float(original.results[0]->type.dtype);
    std::vector<Factor> factors;
    if (product) collect(original.results[0], false, true, index, &factors);
    if (!product || !simplify(&factors, index)) {
      out.emit(renamed);
      return;
    }
    const TileType& type = original.results[0]->type;
    const Provenance& p = original.provenance;
    Value result;
    std::vector<Value> divisors;
    for (const Factor& f : factors) {
      const Value value = f.is_exp && f.changed ? emit_exp(f, type, p, out) : out.lookup(f.value);
      if (f.divides) {
        divisors.push_back(value);
      } else {
        result = result ? out.binary(BinaryOp::Mul, result, value, original.results[0]->name, p)
                        : value;
      }
    }
    if (!result) result = out.full(1.0, type, "one", p);
    for (const Value& divisor : divisors) {
      result = out.binary(BinaryOp::Div, result, divisor, original.results[0]->name, p);
    }
    out.map()[original.results[0].get()] = result;
  });
}

}  // namespace

ModulePtr cancel_rescales(const ModulePtr& module) {
  const ModulePtr rewritten = map_kernels(module, rewrite_kernel);
  return rewritten == module ? module : eliminate_dead_code(rewritten);
}

}  // namespace nautilus::rewrite
