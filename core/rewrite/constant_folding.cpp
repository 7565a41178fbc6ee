#include "core/rewrite/constant_folding.h"

#include <cmath>
#include <optional>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"
#include "core/scalar/interpreter_support.h"
#include "core/support/dtype.h"

namespace nautilus::rewrite {
namespace {

// The value of a float unary op on a constant, computed and rounded to `dtype` as the
// interpreters compute every result.
double fold_unary(UnaryOp op, double x, DType dtype) {
  return round_to(dtype, scalar::detail::apply_unary(op, x));
}

// As fold_unary; nullopt for the index-only ops, which are not folded.
std::optional<double> fold_binary(BinaryOp op, double a, double b, DType dtype) {
  if (op == BinaryOp::FloorDiv || op == BinaryOp::Mod) return std::nullopt;
  return round_to(dtype, scalar::detail::apply_float_binary(op, a, b));
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
