#include "core/rewrite/exp_to_exp2.h"

#include <cmath>
#include <numbers>
#include <optional>
#include <utility>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

// x = z · factor, with factor a constant (1 when x is not a constant multiple).
struct Scaled {
  Value z;
  double factor = 1.0;
};

Scaled strip_constant_scale(const Value& x, const KernelIndex& index) {
  const Op* op = index.def(x);
  if (op && op->kind == OpKind::Binary && op->operands.size() == 2) {
    auto nonzero = [&](const Value& value) -> std::optional<double> {
      std::optional<double> c = constant_of(value, index);
      if (c && std::isfinite(*c) && *c != 0.0) return c;
      return std::nullopt;
    };
    if (op->binary_op == BinaryOp::Mul) {
      if (std::optional<double> c = nonzero(op->operands[1])) return {op->operands[0], *c};
      if (std::optional<double> c = nonzero(op->operands[0])) return {op->operands[1], *c};
    } else if (op->binary_op == BinaryOp::Div) {
      if (std::optional<double> c = nonzero(op->operands[1])) return {op->operands[0], 1.0 / *c};
    }
  }
  return {x, 1.0};
}

KernelPtr rewrite_kernel(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    if (original.kind != OpKind::Unary || original.unary_op != UnaryOp::Exp ||
        original.results[0]->type.dtype != DType::F32) {
      out.emit(renamed);
      return;
    }
    const Provenance& p = original.provenance;
    const Value& x = original.operands[0];
    const Scaled scaled = strip_constant_scale(x, index);
    const double factor = scaled.factor * std::numbers::log2e;
    const std::string factor_name = scaled.factor == 1.0 ? "log2e" : "scale_log2e";
    Value argument;
    const Op* difference = index.def(scaled.z);
    std::optional<BroadcastOf> subtrahend;
    if (difference && difference->kind == OpKind::Binary &&
        difference->binary_op == BinaryOp::Sub) {
      subtrahend = broadcast_of(difference->operands[1], index);
    }
    if (subtrahend) {
      // a·k − broadcast(b·k): the row value is scaled before it is broadcast.
      const Value& a = difference->operands[0];
      const Value& b = subtrahend->source;
      const Value k_tile = out.full(factor, a->type, factor_name, p);
      const Value a_scaled = out.binary(BinaryOp::Mul, a, k_tile, a->name + "_log2", p);
      const Value k_row = out.full(factor, b->type, factor_name, p);
      const Value b_scaled = out.binary(BinaryOp::Mul, b, k_row, b->name + "_log2", p);
      const Value b_tile = out.broadcast(b_scaled, a->type.shape, subtrahend->dims,
                                         b->name + "_log2_t", p);
      argument = out.binary(BinaryOp::Sub, a_scaled, b_tile, scaled.z->name + "_log2", p);
    } else {
      const Value k_tile = out.full(factor, x->type, factor_name, p);
      argument = out.binary(BinaryOp::Mul, scaled.z, k_tile, scaled.z->name + "_log2", p);
    }
    out.emit(with_result(vrtile::make_unary("", UnaryOp::Exp2, argument, p),
                         original.results[0]));
  });
}

}  // namespace

ModulePtr exp_to_exp2(const ModulePtr& module) {
  const ModulePtr rewritten = map_kernels(module, rewrite_kernel);
  return rewritten == module ? module : eliminate_dead_code(rewritten);
}

}  // namespace nautilus::rewrite
