#include "core/rewrite/scale_folding.h"

#include <cmath>
#include <deque>
#include <optional>
#include <unordered_set>
#include <utility>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

// A root s = c·x: `s = mul x, C` (c = C) or `s = div x, C` (c = 1/C).
struct Root {
  const Op* op = nullptr;
  Value x;
  double constant = 1.0;  // C
  bool divides = false;
};

std::optional<Root> root_of(const Op& op, const KernelIndex& index) {
  if (op.kind != OpKind::Binary || op.operands.size() != 2 || op.results.size() != 1) {
    return std::nullopt;
  }
  if (op.results[0]->type.dtype != DType::F32) return std::nullopt;
  auto positive = [&](const Value& value) -> std::optional<double> {
    std::optional<double> c = constant_of(value, index);
    if (c && std::isfinite(*c) && *c > 0.0) return c;
    return std::nullopt;
  };
  if (op.binary_op == BinaryOp::Div) {
    if (std::optional<double> c = positive(op.operands[1])) {
      return Root{&op, op.operands[0], *c, true};
    }
  } else if (op.binary_op == BinaryOp::Mul) {
    if (std::optional<double> c = positive(op.operands[1])) {
      return Root{&op, op.operands[0], *c, false};
    }
    if (std::optional<double> c = positive(op.operands[0])) {
      return Root{&op, op.operands[1], *c, false};
    }
  }
  return std::nullopt;
}

// The values that can hold their value divided by c (the "scaled set" S), the exponentials they
// end in, and whether the set is closed: every use is an op that is linear in c or a sink.
class ScaledSet {
 public:
  ScaledSet(const std::vector<Root>& roots, const KernelIndex& index) : index_(index) {
    for (const Root& root : roots) add(root.op->results[0]);
    while (ok_ && !work_.empty()) {
      const Value value = work_.front();
      work_.pop_front();
      for (const Use& use : index_.uses(value)) visit(*use.op, use.operand);
    }
    if (ok_) check_operands(roots);
  }

  bool ok() const { return ok_; }
  bool contains(const Value& value) const { return value && members_.count(value.get()); }
  const std::vector<Value>& members() const { return ordered_; }
  const std::vector<const Op*>& linear_ops() const { return linear_ops_; }

 private:
  void add(const Value& value) {
    if (value->type.dtype != DType::F32) ok_ = false;
    if (members_.insert(value.get()).second) {
      ordered_.push_back(value);
      work_.push_back(value);
    }
  }

  void add_carried(const Op& loop, size_t i) {
    if (i >= loop.results.size() || i >= loop.block_args.size()) {
      ok_ = false;
      return;
    }
    add(loop.block_args[i]);
    add(loop.results[i]);
  }

  void visit(const Op& op, size_t operand) {
    switch (op.kind) {
      case OpKind::Unary:
        // A sink: the scale joins log2(e) there in the exp → exp2 pass. An exp2's argument
        // is already in its final scaled form (often that pass's output), so it is no sink.
        if (op.unary_op == UnaryOp::Exp) return;
        if (op.unary_op != UnaryOp::Neg) break;
        linear(op);
        return;
      case OpKind::Broadcast:
      case OpKind::Permute:
      case OpKind::Reduce:
      case OpKind::Dot:
        linear(op);
        return;
      case OpKind::Binary:
        if (op.binary_op == BinaryOp::FloorDiv || op.binary_op == BinaryOp::Mod) break;
        if (op.binary_op == BinaryOp::Div && operand == 1) break;
        linear(op);
        return;
      case OpKind::Select:
        if (operand == 0) break;
        linear(op);
        return;
      case OpKind::Compare:
        // A sink that keeps its result: a positive scale preserves order and equality, so a
        // compare of scaled values (or of a scaled value and a constant, divided too) is the
        // same boolean. The guard of a fully masked row, `Mx == -inf`, is one.
        linear_ops_.push_back(&op);
        return;
      case OpKind::For:
        linear_ops_.push_back(&op);
        add_carried(op, operand);
        return;
      case OpKind::Yield: {
        const Op* loop = index_.parent(&op);
        if (!loop) break;
        linear_ops_.push_back(loop);
        add_carried(*loop, operand);
        return;
      }
      default: break;
    }
    ok_ = false;  // a use that is not linear in the scale
  }

  void linear(const Op& op) {
    linear_ops_.push_back(&op);
    add(op.results[0]);
  }

  // Operands of linear ops that are not scaled must be constants (which get divided by c) or,
  // for mul, div and dot, the other factor.
  bool scaled_or_constant(const Value& value) const {
    return contains(value) || constant_of(value, index_).has_value();
  }

  void check_operands(const std::vector<Root>& roots) {
    for (const Root& root : roots) ok_ = ok_ && !contains(root.x);
    for (const Op* op : linear_ops_) {
      const auto& in = op->operands;
      switch (op->kind) {
        case OpKind::Binary:
          if (op->binary_op == BinaryOp::Mul) {
            ok_ = ok_ && contains(in[0]) != contains(in[1]);
          } else if (op->binary_op == BinaryOp::Div) {
            ok_ = ok_ && contains(in[0]) && !contains(in[1]);
          } else {
            ok_ = ok_ && scaled_or_constant(in[0]) && scaled_or_constant(in[1]);
          }
          break;
        case OpKind::Select:
          ok_ = ok_ && !contains(in[0]) && scaled_or_constant(in[1]) && scaled_or_constant(in[2]);
          break;
        case OpKind::Compare:
          ok_ = ok_ && scaled_or_constant(in[0]) && scaled_or_constant(in[1]);
          break;
        case OpKind::Dot:
          ok_ = ok_ && contains(in[0]) != contains(in[1]) &&
                (in.size() < 3 || scaled_or_constant(in[2]));
          break;
        case OpKind::For: {
          const Op& yield = *op->body->ops.back();
          for (size_t i = 0; i < op->block_args.size(); ++i) {
            if (!contains(op->block_args[i])) continue;
            ok_ = ok_ && scaled_or_constant(in[i]) && scaled_or_constant(yield.operands[i]);
          }
          break;
        }
        default: break;
      }
    }
  }

  const KernelIndex& index_;
  std::unordered_set<const ValueNode*> members_;
  std::vector<Value> ordered_;
  std::deque<Value> work_;
  std::vector<const Op*> linear_ops_;
  bool ok_ = true;
};

void find_roots(const vrtile::Region& region, const KernelIndex& index,
                std::vector<Root>* roots) {
  for (const OpPtr& op : region.ops) {
    if (std::optional<Root> root = root_of(*op, index)) roots->push_back(*root);
    if (op->kind == OpKind::For && op->body) find_roots(*op->body, index, roots);
  }
}

// Rewrites the kernel for one root whose scaled set is closed.
KernelPtr fold_roots(const KernelPtr& kernel, const std::vector<Root>& roots,
                     const ScaledSet& scaled, const KernelIndex& index) {
  Rebuilder rebuilder(*kernel);
  // Each scaled value is replaced by a value of the same name and type holding value / c; the
  // old one disappears entirely, so the name stays unique. Roots are replaced by their x.
  std::unordered_set<const Op*> root_ops;
  for (const Root& r : roots) root_ops.insert(r.op);
  for (const Value& value : scaled.members()) {
    rebuilder.map()[value.get()] = vrtile::make_value(value->name, value->type);
  }
  for (const Root& r : roots) rebuilder.map()[r.op->results[0].get()] = r.x;
  const Root& root = roots.front();  // all roots share the constant and its use
  const std::unordered_set<const Op*> linear(scaled.linear_ops().begin(),
                                             scaled.linear_ops().end());
  auto scaled_constant = [&](double k) { return root.divides ? k * root.constant : k / root.constant; };

  // Replaces operand `i` of `op`, a constant that is not scaled, by the constant divided by c.
  auto scale_constant_operand = [&](Op* op, size_t i, const Value& original,
                                    Rebuilder& out) {
    if (scaled.contains(original)) return;
    const double k = *constant_of(original, index);
    const double divided = scaled_constant(k);
    if (divided == k || (std::isnan(k) && std::isnan(divided))) return;  // 0, ±inf, nan
    op->operands[i] = out.full(divided, original->type, original->name, op->provenance);
  };

  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    if (root_ops.count(&original)) return;  // its uses read x now
    const bool is_sink = original.kind == OpKind::Unary && original.unary_op == UnaryOp::Exp &&
                         scaled.contains(original.operands[0]);
    if (is_sink) {
      // exp(s) = exp(c · s'): apply the scale at the exponent, as the root did.
      const Value& argument = renamed->operands[0];
      const Value& scale = root.op->operands[root.x == root.op->operands[0] ? 1 : 0];
      const Value c = out.full(root.constant, argument->type, scale->name, original.provenance);
      Op copy = *renamed;
      copy.operands[0] = out.binary(root.divides ? BinaryOp::Div : BinaryOp::Mul, argument, c,
                                    argument->name + "_scaled", original.provenance);
      out.emit(vrtile::make_op(std::move(copy)));
      return;
    }
    const Op* yield_loop = original.kind == OpKind::Yield ? index.parent(&original) : nullptr;
    if (!linear.count(&original) && !(yield_loop && linear.count(yield_loop))) {
      out.emit(renamed);
      return;
    }
    Op copy = *renamed;
    switch (original.kind) {
      case OpKind::Binary:
        if (original.binary_op != BinaryOp::Mul && original.binary_op != BinaryOp::Div) {
          scale_constant_operand(&copy, 0, original.operands[0], out);
          scale_constant_operand(&copy, 1, original.operands[1], out);
        }
        break;
      case OpKind::Select:
        scale_constant_operand(&copy, 1, original.operands[1], out);
        scale_constant_operand(&copy, 2, original.operands[2], out);
        break;
      case OpKind::Compare:
        scale_constant_operand(&copy, 0, original.operands[0], out);
        scale_constant_operand(&copy, 1, original.operands[1], out);
        break;
      case OpKind::Dot:
        if (original.operands.size() == 3) {
          scale_constant_operand(&copy, 2, original.operands[2], out);
        }
        break;
      case OpKind::For:
        for (size_t i = 0; i < original.block_args.size(); ++i) {
          if (scaled.contains(original.block_args[i])) {
            scale_constant_operand(&copy, i, original.operands[i], out);
          }
        }
        break;
      case OpKind::Yield:
        for (size_t i = 0; i < yield_loop->block_args.size(); ++i) {
          if (scaled.contains(yield_loop->block_args[i])) {
            scale_constant_operand(&copy, i, original.operands[i], out);
          }
        }
        break;
      default: break;
    }
    out.emit(vrtile::make_op(std::move(copy)));
  });
}

KernelPtr fold_first_root(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  std::vector<Root> roots;
  if (kernel->body) find_roots(*kernel->body, index, &roots);
  // First every root scaling by the same constant at once (a max of two scaled tiles needs
  // both), then each root alone.
  for (const Root& root : roots) {
    std::vector<Root> group;
    for (const Root& other : roots) {
      if (other.constant == root.constant && other.divides == root.divides) group.push_back(other);
    }
    if (group.size() < 2) continue;
    const ScaledSet scaled(group, index);
    if (scaled.ok() && !scaled.linear_ops().empty()) return fold_roots(kernel, group, scaled, index);
  }
  for (const Root& root : roots) {
    const ScaledSet scaled({root}, index);
    // A scale that reaches an exponential directly has nothing to travel through: folding it
    // would only move the multiply (and never terminate).
    if (scaled.ok() && !scaled.linear_ops().empty()) {
      return fold_roots(kernel, {root}, scaled, index);
    }
  }
  return kernel;
}

}  // namespace

ModulePtr fold_scales(const ModulePtr& module) {
  const ModulePtr folded = repeat_until_unchanged(
      module, [](const ModulePtr& current) { return map_kernels(current, fold_first_root); });
  return folded == module ? module : eliminate_dead_code(folded);
}

}  // namespace nautilus::rewrite
