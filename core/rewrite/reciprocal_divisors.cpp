#include "core/rewrite/reciprocal_divisors.h"

#include <optional>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

KernelPtr rewrite_kernel(const KernelPtr& kernel) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    const bool f32_division = original.kind == OpKind::Binary && original.binary_op == BinaryOp::Div &&
                              original.results[0]->type.dtype == DType::F32;
    const std::optional<BroadcastOf> divisor =
        f32_division ? broadcast_of(original.operands[1], index) : std::nullopt;
    // Only a divisor with fewer elements than the quotient saves divisions; a constant one is
    // folded by fold-constants.
    if (!divisor || divisor->source->type.dtype != DType::F32 ||
        divisor->source->type.element_count() >= original.results[0]->type.element_count() ||
        constant_of(divisor->source, index)) {
      out.emit(renamed);
      return;
    }
    const Provenance& p = original.provenance;
    const Value source = out.lookup(divisor->source);
    const Value one = out.full(1.0, source->type, "one", p);
    const Value inverse = out.binary(BinaryOp::Div, one, source, source->name + "_inv", p);
    const Value spread = out.broadcast(inverse, original.results[0]->type.shape, divisor->dims,
                                       source->name + "_inv_t", p);
    out.emit(with_result(vrtile::make_binary("", BinaryOp::Mul, renamed->operands[0], spread, p),
                         original.results[0]));
  });
}

}  // namespace

ModulePtr reciprocal_divisors(const ModulePtr& module) {
  const ModulePtr rewritten = map_kernels(module, rewrite_kernel);
  return rewritten == module ? module : eliminate_dead_code(rewritten);
}

}  // namespace nautilus::rewrite
