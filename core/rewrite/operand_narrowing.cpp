#include "core/rewrite/operand_narrowing.h"

#include <optional>
#include <utility>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

bool is_16_bit(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// The 16-bit tile an f32 dot operand was cast from: `cast(x)`, or `permute(cast(x))`, whose
// narrow form is `permute(x)` (the permute then still has to be emitted).
struct NarrowSource {
  Value value;
  const Op* permute = nullptr;
};

std::optional<NarrowSource> narrow_source(const Value& operand, const KernelIndex& index) {
  const Op* op = index.def(operand);
  NarrowSource source;
  if (op && op->kind == OpKind::Permute) {
    source.permute = op;
    op = index.def(op->operands[0]);
  }
  if (!op || op->kind != OpKind::Cast || !is_16_bit(op->operands[0]->type.dtype)) {
    return std::nullopt;
  }
  source.value = op->operands[0];
  return source;
}

Value emit_narrow(const NarrowSource& source, Rebuilder& out) {
  if (!source.permute) return source.value;
  return out.permute(source.value, source.permute->dims, source.permute->results[0]->name,
                     source.permute->provenance);
}

KernelPtr rewrite_kernel(const KernelPtr& kernel, NarrowingMode mode) {
  const KernelIndex index(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    if (original.kind != OpKind::Dot || original.operands.size() < 2 ||
        original.operands[0]->type.dtype != DType::F32) {
      out.emit(renamed);
      return;
    }
    const std::optional<NarrowSource> a = narrow_source(original.operands[0], index);
    const std::optional<NarrowSource> b = narrow_source(original.operands[1], index);
    Op copy = *renamed;
    const Provenance& p = original.provenance;
    if (a && b && a->value->type.dtype == b->value->type.dtype) {
      copy.operands[0] = emit_narrow(*a, out);
      copy.operands[1] = emit_narrow(*b, out);
    } else if (mode == NarrowingMode::RoundComputed && (a.has_value() != b.has_value())) {
      // Round the computed operand to the cast one's 16-bit type (an approximation).
      const size_t narrow = a ? 0 : 1, computed = 1 - narrow;
      const NarrowSource& source = a ? *a : *b;
      copy.operands[narrow] = emit_narrow(source, out);
      const Value& other = renamed->operands[computed];
      copy.operands[computed] = out.cast(other, source.value->type.dtype, other->name, p);
    } else {
      out.emit(renamed);
      return;
    }
    out.emit(vrtile::make_op(std::move(copy)));
  });
}

}  // namespace

ModulePtr narrow_dot_operands(const ModulePtr& module, NarrowingMode mode) {
  const ModulePtr rewritten =
      map_kernels(module, [mode](const KernelPtr& kernel) { return rewrite_kernel(kernel, mode); });
  return rewritten == module ? module : eliminate_dead_code(rewritten);
}

}  // namespace nautilus::rewrite
