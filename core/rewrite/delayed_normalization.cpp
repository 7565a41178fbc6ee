#include "core/rewrite/delayed_normalization.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <unordered_set>
#include <utility>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

// ---------------------------------------------------------------------------------------------
// Rules 1 and 2: factors constant along a summed axis move out of reduce sum and dot.

struct Factor {
  Value value;  // the broadcast's source
  std::vector<int> dims;
  bool divides = false;
};

using DimsAllowed = std::function<bool(const std::vector<int>&)>;

// Peels x = y · Π broadcast(f)^±1 while the broadcasts' dims are allowed; returns y.
Value peel(const Value& x, const KernelIndex& index, const DimsAllowed& allowed,
           std::vector<Factor>* factors) {
  Value current = x;
  while (true) {
    const Op* op = index.def(current);
    if (!op || op->kind != OpKind::Binary || op->operands.size() != 2) break;
    auto factor_at = [&](size_t i) -> std::optional<BroadcastOf> {
      std::optional<BroadcastOf> b = broadcast_of(op->operands[i], index);
      if (b && allowed(b->dims)) return b;
      return std::nullopt;
    };
    if (op->binary_op == BinaryOp::Div) {
      std::optional<BroadcastOf> b = factor_at(1);
      if (!b) break;
      factors->push_back(Factor{b->source, b->dims, true});
      current = op->operands[0];
    } else if (op->binary_op == BinaryOp::Mul) {
      if (std::optional<BroadcastOf> b = factor_at(1)) {
        factors->push_back(Factor{b->source, b->dims, false});
        current = op->operands[0];
      } else if (std::optional<BroadcastOf> b0 = factor_at(0)) {
        factors->push_back(Factor{b0->source, b0->dims, false});
        current = op->operands[1];
      } else {
        break;
      }
    } else {
      break;
    }
  }
  return current;
}

DimsAllowed without_axis(int axis) {
  return [axis](const std::vector<int>& dims) {
    return std::find(dims.begin(), dims.end(), axis) == dims.end();
  };
}

// What a use of a tile can peel: a reduce sum along its axis, an accumulator-free dot along K.
std::optional<DimsAllowed> peelable_use(const Use& use) {
  const Op& op = *use.op;
  if (op.kind == OpKind::Reduce && op.reduce_op == ReduceOp::Sum) return without_axis(op.axis);
  if (op.kind == OpKind::Dot && op.operands.size() == 2 && use.operand < 2) {
    return without_axis(use.operand == 0 ? 1 : 0);  // a: not along K (axis 1); b: axis 0
  }
  return std::nullopt;
}

// Every use of `x` peels at least one factor.
bool every_use_peels(const Value& x, const KernelIndex& index) {
  const std::vector<Use>& uses = index.uses(x);
  if (uses.empty()) return false;
  for (const Use& use : uses) {
    std::optional<DimsAllowed> allowed = peelable_use(use);
    std::vector<Factor> factors;
    if (!allowed) return false;
    peel(x, index, *allowed, &factors);
    if (factors.empty()) return false;
  }
  return true;
}

// Applies the peeled factors to `value` (of the result's shape, the summed axis `removed`
// dropped, or -1 when no axis was dropped); the last op defines `result`.
void apply_factors(Value value, const std::vector<Factor>& factors, int removed,
                   const Value& result, const Provenance& p, Rebuilder& out) {
  const std::vector<int64_t>& shape = result->type.shape;
  for (size_t i = 0; i < factors.size(); ++i) {
    const Factor& f = factors[i];
    std::vector<int> dims;
    for (int dim : f.dims) dims.push_back(removed >= 0 && dim > removed ? dim - 1 : dim);
    Value factor = out.lookup(f.value);
    std::vector<int> identity(shape.size());
    for (size_t d = 0; d < identity.size(); ++d) identity[d] = static_cast<int>(d);
    if (factor->type.shape != shape || dims != identity) {
      factor = out.broadcast(factor, shape, dims, f.value->name + "_t", p);
    }
    const BinaryOp op = f.divides ? BinaryOp::Div : BinaryOp::Mul;
    if (i + 1 == factors.size()) {
      out.emit(with_result(vrtile::make_binary("", op, value, factor, p), result));
    } else {
      value = out.binary(op, value, factor, result->name, p);
    }
  }
}

KernelPtr move_factors_out_of_sums(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    const Provenance& p = original.provenance;
    if (original.kind == OpKind::Reduce && original.reduce_op == ReduceOp::Sum &&
        every_use_peels(original.operands[0], index)) {
      std::vector<Factor> factors;
      const Value base = peel(original.operands[0], index, without_axis(original.axis), &factors);
      const Value sum = out.reduce(ReduceOp::Sum, out.lookup(base), original.axis,
                                   original.results[0]->name, p);
      apply_factors(sum, factors, original.axis, original.results[0], p, out);
      return;
    }
    if (original.kind == OpKind::Dot && original.operands.size() == 2) {
      std::vector<Factor> factors;
      Value a = original.operands[0], b = original.operands[1];
      if (every_use_peels(a, index)) a = peel(a, index, without_axis(1), &factors);
      if (every_use_peels(b, index)) b = peel(b, index, without_axis(0), &factors);
      if (!factors.empty()) {
        const Value product =
            out.dot(out.lookup(a), out.lookup(b), nullptr, original.results[0]->name, p);
        apply_factors(product, factors, -1, original.results[0], p, out);
        return;
      }
    }
    out.emit(renamed);
  });
}

// ---------------------------------------------------------------------------------------------
// Rule 3: an accumulator kept normalized by a loop is normalized once after it.

// One term of a sum: base · Π factors, base a tile or dot(dot_a, dot_b).
struct Term {
  Value base;
  Value dot_a, dot_b;
  bool is_dot = false;
  Monomial factors;
};

// The source of a broadcast of a per-row value onto `value` (all axes but the last).
std::optional<Value> row_factor(const Value& value, const KernelIndex& index) {
  std::optional<BroadcastOf> b = broadcast_of(value, index);
  if (!b) return std::nullopt;
  const std::vector<int64_t>& shape = value->type.shape;
  if (shape.empty()) return std::nullopt;
  const std::vector<int64_t> rows(shape.begin(), shape.end() - 1);
  std::vector<int> dims(rows.size());
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
  if (b->source->type.shape != rows || b->dims != dims) return std::nullopt;
  return b->source;
}

Term term_of(const Value& value, const KernelIndex& index) {
  const Op* op = index.def(value);
  if (op && op->kind == OpKind::Binary && op->operands.size() == 2) {
    if (op->binary_op == BinaryOp::Mul || op->binary_op == BinaryOp::Div) {
      for (size_t i : {size_t{1}, size_t{0}}) {
        if (op->binary_op == BinaryOp::Div && i == 0) break;
        if (std::optional<Value> f = row_factor(op->operands[i], index)) {
          Term term = term_of(op->operands[1 - i], index);
          term.factors.multiply(factor_product(*f, index),
                                op->binary_op == BinaryOp::Div ? -1 : 1);
          return term;
        }
      }
    }
  }
  if (op && op->kind == OpKind::Dot && op->operands.size() == 2 &&
      op->operands[0]->type.shape.size() == 2) {
    const Term a = term_of(op->operands[0], index);
    if (!a.is_dot) return Term{nullptr, a.base, op->operands[1], true, a.factors};
  }
  return Term{value, nullptr, nullptr, false, {}};
}

void terms_of(const Value& value, const KernelIndex& index, std::vector<Term>* terms) {
  const Op* op = index.def(value);
  if (op && op->kind == OpKind::Binary && op->binary_op == BinaryOp::Add) {
    terms_of(op->operands[0], index, terms);
    terms_of(op->operands[1], index, terms);
    return;
  }
  if (op && op->kind == OpKind::Dot && op->operands.size() == 3 &&
      op->operands[0]->type.shape.size() == 2) {
    terms_of(op->operands[2], index, terms);
    const Term a = term_of(op->operands[0], index);
    if (!a.is_dot) {
      terms->push_back(Term{nullptr, a.base, op->operands[1], true, a.factors});
      return;
    }
    terms->push_back(Term{nullptr, op->operands[0], op->operands[1], true, {}});
    return;
  }
  terms->push_back(term_of(value, index));
}

// The values of a body that depend on `start` (itself included); nullopt when one is read by
// a nested loop (too far to follow).
std::optional<std::unordered_set<const ValueNode*>> dependents(const Value& start,
                                                               const KernelIndex& index) {
  std::unordered_set<const ValueNode*> seen{start.get()};
  std::vector<Value> work{start};
  while (!work.empty()) {
    const Value value = work.back();
    work.pop_back();
    for (const Use& use : index.uses(value)) {
      if (use.op->kind == OpKind::For) return std::nullopt;
      for (const Value& result : use.op->results) {
        if (seen.insert(result.get()).second) work.push_back(result);
      }
    }
  }
  return seen;
}

// Nothing that stays live reads a value depending on acc_i: no store, no other yield slot.
bool contained(const std::unordered_set<const ValueNode*>& tainted, const KernelIndex& index,
               size_t slot) {
  for (const ValueNode* value : tainted) {
    for (const Use& use : index.uses(value)) {
      if (use.op->kind == OpKind::Store) return false;
      if (use.op->kind == OpKind::Yield && use.operand != slot) return false;
    }
  }
  return true;
}

// The normalizer n as known at an iteration's start, before the loop and after it.
struct Normalizer {
  Value n, at_start, initial, final;
};

struct Plan {
  size_t carried = 0;
  std::vector<Term> terms;
  size_t acc_term = 0;
  Normalizer normalizer;
};

// Looks for n: an atom with exponent -1 in every term but acc_i's, loop-invariant or the
// yielded value of another carried per-row value; after multiplying by n (and dividing acc_i's
// term by n's value at the iteration's start) no factor may be left divided.
bool plan_normalizer(const Op& loop, const KernelIndex& index, Plan* plan) {
  const Op& yield = *loop.body->ops.back();
  const std::unordered_set<const ValueNode*> in_body = values_defined_in(loop);
  const std::vector<int64_t>& shape = loop.block_args[plan->carried]->type.shape;
  const std::vector<int64_t> rows(shape.begin(), shape.end() - 1);
  const Term& first = plan->terms[plan->acc_term == 0 ? 1 : 0];
  for (const auto& [candidate, exponent] : first.factors.terms()) {
    if (exponent != -1 || candidate->type.shape != rows) continue;
    bool everywhere = true;
    for (size_t t = 0; t < plan->terms.size(); ++t) {
      if (t != plan->acc_term && plan->terms[t].factors.exponent(candidate) != -1) {
        everywhere = false;
      }
    }
    if (!everywhere) continue;
    Normalizer normalizer{candidate, candidate, candidate, candidate};
    if (in_body.count(candidate.get())) {
      bool carried = false;
      for (size_t k = 0; k < loop.block_args.size(); ++k) {
        if (k == plan->carried || yield.operands[k] != candidate) continue;
        normalizer = Normalizer{candidate, loop.block_args[k], loop.operands[k], loop.results[k]};
        carried = true;
        break;
      }
      if (!carried) continue;
    }
    std::vector<Term> terms = plan->terms;
    bool divides = false;
    for (size_t t = 0; t < terms.size(); ++t) {
      terms[t].factors.multiply(candidate, 1);
      if (t == plan->acc_term) terms[t].factors.multiply(normalizer.at_start, -1);
      for (const auto& [atom, e] : terms[t].factors.terms()) divides = divides || e < 0;
    }
    if (divides) continue;
    (void)index;
    plan->terms = std::move(terms);
    plan->normalizer = normalizer;
    return true;
  }
  return false;
}

std::optional<Plan> plan_loop(const Op& loop, const KernelIndex& kernel_index) {
  if (loop.extent < 1 || !loop.body || loop.body->ops.empty()) return std::nullopt;
  // Definitions before the loop (a hoisted broadcast of a normalizer) come from the kernel.
  const KernelIndex index(*loop.body, &kernel_index);
  const Op& yield = *loop.body->ops.back();
  for (size_t j = 0; j < loop.block_args.size(); ++j) {
    const Value& acc = loop.block_args[j];
    if (acc->type.dtype != DType::F32 || acc->type.shape.empty()) continue;
    Plan plan;
    plan.carried = j;
    terms_of(yield.operands[j], index, &plan.terms);
    // acc_i is the base of exactly one term, and nothing else in the body that stays live
    // reads it: its dependents feed only each other and yield slot j.
    size_t acc_terms = 0;
    for (size_t t = 0; t < plan.terms.size(); ++t) {
      if (!plan.terms[t].is_dot && plan.terms[t].base == acc) {
        ++acc_terms;
        plan.acc_term = t;
      }
    }
    if (acc_terms != 1 || plan.terms.size() < 2) continue;
    const auto tainted = dependents(acc, index);
    if (!tainted || !contained(*tainted, index, j)) continue;
    bool independent = true;
    for (size_t t = 0; t < plan.terms.size(); ++t) {
      const Term& term = plan.terms[t];
      std::vector<Value> read{term.dot_a, term.dot_b};
      if (t != plan.acc_term) read.push_back(term.base);
      for (const auto& [atom, exponent] : term.factors.terms()) read.push_back(atom);
      for (const Value& value : read) {
        if (value && tainted->count(value.get())) independent = false;
      }
    }
    if (independent && plan_normalizer(loop, index, &plan)) return plan;
  }
  return std::nullopt;
}

std::vector<int> row_dims(const TileType& type) {
  std::vector<int> dims(type.shape.size() - 1);
  for (size_t d = 0; d < dims.size(); ++d) dims[d] = static_cast<int>(d);
  return dims;
}

// Emits `tile · broadcast(Π factors)` (all exponents are positive here).
Value scaled_term(Value tile, const Monomial& factors, const TileType& type, const Provenance& p,
                  Rebuilder& out) {
  Value product;
  for (const auto& [atom, exponent] : factors.terms()) {
    for (int e = 0; e < exponent; ++e) {
      product = product ? out.binary(BinaryOp::Mul, product, atom, atom->name + "_f", p) : atom;
    }
  }
  if (!product) return tile;
  const Value spread = out.broadcast(product, type.shape, row_dims(type), product->name + "_t", p);
  return out.binary(BinaryOp::Mul, tile, spread, tile->name + "_s", p);
}

// Rebuilds `loop` (its body already rebuilt) to carry u = acc · n as `plan` says, emitting the
// initial u before it and acc = u / n after it.
void carry_unnormalized(const Op& loop, const Plan& plan, const KernelIndex& kernel_index,
                        Rebuilder& out) {
  const size_t j = plan.carried;
  const Value& acc = loop.block_args[j];
  const TileType& type = acc->type;
  const Provenance& p = loop.provenance;
  const Normalizer& n = plan.normalizer;

  // u0 = acc0 · n0 (a zero accumulator stays zero).
  Value initial = loop.operands[j];
  if (constant_of(initial, kernel_index) != std::optional<double>(0.0)) {
    const Value spread =
        out.broadcast(n.initial, type.shape, row_dims(type), n.initial->name + "_t", p);
    initial = out.binary(BinaryOp::Mul, initial, spread, initial->name + "_unnorm", p);
  }
  const Value u_start = vrtile::make_value(out.names().fresh(acc->name + "_unnorm"), type);

  out.begin_region();
  const Op& yield = *loop.body->ops.back();
  for (size_t i = 0; i + 1 < loop.body->ops.size(); ++i) out.emit(loop.body->ops[i]);
  // The sum of the terms; a dot term without factors takes the others as its accumulator.
  std::optional<size_t> carrier;
  for (size_t t = 0; t < plan.terms.size(); ++t) {
    if (plan.terms[t].is_dot && plan.terms[t].factors.empty()) {
      carrier = t;
      break;
    }
  }
  const std::string u_name = yield.operands[j]->name + "_unnorm";
  Value sum;
  for (size_t t = 0; t < plan.terms.size(); ++t) {
    if (carrier && t == *carrier) continue;
    const Term& term = plan.terms[t];
    const Provenance& tp = p;
    Value tile = t == plan.acc_term ? u_start : term.base;
    if (term.is_dot) tile = out.dot(term.dot_a, term.dot_b, nullptr, u_name, tp);
    tile = scaled_term(tile, term.factors, type, tp, out);
    sum = sum ? out.binary(BinaryOp::Add, sum, tile, u_name, tp) : tile;
  }
  if (carrier) {
    const Term& term = plan.terms[*carrier];
    sum = out.dot(term.dot_a, term.dot_b, sum, u_name, p);
  }
  Op new_yield = yield;
  new_yield.operands[j] = sum;
  out.emit(vrtile::make_op(std::move(new_yield)));
  std::vector<OpPtr> body = out.end_region();

  Op copy = loop;
  copy.operands[j] = initial;
  copy.block_args[j] = u_start;
  const Value u_final =
      vrtile::make_value(out.names().fresh(loop.results[j]->name + "_unnorm"), type);
  copy.results[j] = u_final;
  copy.body = vrtile::make_region(std::move(body));
  out.emit(vrtile::make_op(std::move(copy)));

  // acc = u / n after the loop; the division defines the loop's old result value, so every use
  // after the loop reads it unchanged.
  const Value spread = out.broadcast(n.final, type.shape, row_dims(type), n.final->name + "_t", p);
  out.emit(with_result(vrtile::make_binary("", BinaryOp::Div, u_final, spread, p),
                       loop.results[j]));
}

KernelPtr normalize_after_loops(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    if (original.kind == OpKind::For) {
      if (std::optional<Plan> plan = plan_loop(*renamed, index)) {
        carry_unnormalized(*renamed, *plan, index, out);
        return;
      }
    }
    out.emit(renamed);
  });
}

}  // namespace

ModulePtr delay_normalization(const ModulePtr& module) {
  // Loops first (a loop's rewrite leaves its old update dead, which DCE removes before the
  // per-op rules look at uses), then reductions and dots until nothing moves.
  ModulePtr current = repeat_until_unchanged(module, [](const ModulePtr& m) {
    const ModulePtr rewritten = map_kernels(m, normalize_after_loops);
    return rewritten == m ? m : eliminate_dead_code(rewritten);
  });
  current = repeat_until_unchanged(current, [](const ModulePtr& m) {
    const ModulePtr rewritten = map_kernels(m, move_factors_out_of_sums);
    return rewritten == m ? m : eliminate_dead_code(rewritten);
  });
  return current;
}

}  // namespace nautilus::rewrite
