#include "core/rewrite/constant_folding.h"

#include <cmath>
#include <optional>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"
#include "core/support/dtype.h"

namespace nautilus::rewrite {
namespace {

// The value of a float unary op on a constant, rounded to `dtype` as the interpreters round
// every result; nullopt for ops that are not folded.
std::optional<double> fold_unary(UnaryOp op, double x, DType dtype) {
  double y = 0.0;
  switch (op) {
    case UnaryOp::Neg: y = -x; break;
    case UnaryOp::Exp: y = std::exp(x); break;
    case UnaryOp::Exp2: y = std::exp2(x); break;
    case UnaryOp::Log: y = std::log(x); break;
    case UnaryOp::Log2: y = std::log2(x); break;
    case UnaryOp::Sqrt: y = std::sqrt(x); break;
    case UnaryOp::Rsqrt: y = 1.0 / std::sqrt(x); break;
    case UnaryOp::Tanh: y = std::tanh(x); break;
    case UnaryOp::Sigmoid: y = 1.0 / (1.0 + std::exp(-x)); break;
    case UnaryOp::Abs: y = std::fabs(x); break;
  }
  return round_to(dtype, y);
}

std::optional<double> fold_binary(BinaryOp op, double a, double b, DType dtype) {
  double y = 0.0;
  switch (op) {
    case BinaryOp::Add: y = a + b; break;
    case BinaryOp::Sub: y = a - b; break;
    case BinaryOp::Mul: y = a * b; break;
    case BinaryOp::Div: y = a / b; break;
    case BinaryOp::Max: y = std::fmax(a, b); break;
    case BinaryOp::Min: y = std::fmin(a, b); break;
    default: return std::nullopt;  // index-only ops
  }
  return round_to(dtype, y);
}

KernelPtr fold_kernel(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    const bool float_result = !original.results.empty() &&
                              is_float(original.results[0]->type.dtype);
    if (!float_result || (original.kind != OpKind::Unary && original.kind != OpKind::Binary)) {
      out.emit(renamed);
      return;
    }
    const Value& result = original.results[0];
    const DType dtype = result->type.dtype;
    const Provenance& p = original.provenance;
    std::optional<double> folded;
    if (original.kind == OpKind::Unary) {
      if (std::optional<double> x = constant_of(original.operands[0], index)) {
        folded = fold_unary(original.unary_op, *x, dtype);
      }
    } else {
      const std::optional<double> a = constant_of(original.operands[0], index);
      const std::optional<double> b = constant_of(original.operands[1], index);
      if (a && b) {
        folded = fold_binary(original.binary_op, *a, *b, dtype);
      } else if (original.binary_op == BinaryOp::Div && b && dtype == DType::F32 &&
                 std::isfinite(*b) && *b != 0.0) {
        const Value reciprocal = out.full(1.0 / *b, result->type, "inv", p);
        out.emit(with_result(vrtile::make_binary("", BinaryOp::Mul, renamed->operands[0],
                                                 reciprocal, p),
                             result));
        return;
      }
    }
    if (!folded) {
      out.emit(renamed);
      return;
    }
    out.emit(with_result(vrtile::make_full("", *folded, result->type, p), result));
  });
}

}  // namespace

ModulePtr fold_constants(const ModulePtr& module) {
  // A folded constant can make its users foldable (sqrt(8) first, then x / sqrt(8)).
  const ModulePtr rewritten = repeat_until_unchanged(module, [](const ModulePtr& m) {
    return map_kernels(m, fold_kernel);
  });
  return rewritten == module ? module : eliminate_dead_code(rewritten);
}

}  // namespace nautilus::rewrite
