#include "core/rewrite/operand_narrowing.h"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

bool is_16_bit(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// The 16-bit tile an f32 dot operand was cast from: `cast(x)`, or `permute(cast(x))`, whose
// narrow form is `permute(x)` (the permute then still has to be emitted). An 8-bit x is widened
// exactly to a 16-bit type when emitted (`widened` is then set).
struct NarrowSource {
  Value value;
  const Op* permute = nullptr;
  bool widened = false;
  DType dtype() const { return widened ? DType::BF16 : value->type.dtype; }
};

std::optional<NarrowSource> narrow_source(const Value& operand, const KernelIndex& index) {
  const Op* op = index.def(operand);
  NarrowSource source;
  if (op && op->kind == OpKind::Permute) {
    source.permute = op;
    op = index.def(op->operands[0]);
  }
  if (!op || op->kind != OpKind::Cast) return std::nullopt;
  const DType from = op->operands[0]->type.dtype;
  if (!is_16_bit(from) && !is_narrow_storage(from)) return std::nullopt;
  source.value = op->operands[0];
  source.widened = is_narrow_storage(from);
  return source;
}

// Whether `operand` is an f32 input of the operator read as is (through permutes and
// broadcasts only): the user declared it f32, so it is never rounded.
bool is_loaded_input(const Value& operand, const KernelIndex& index) {
  const Op* op = index.def(operand);
  while (op && (op->kind == OpKind::Permute || op->kind == OpKind::Broadcast)) {
    op = index.def(op->operands[0]);
  }
  return op && op->kind == OpKind::Load && op->buffer->role == scalar::BufferRole::Input;
}

// Whether every output of the module that `value` flows into has a 16-bit dtype: then the
// output's tolerance covers a 16-bit rounding of a dot operand, and an f32 output asks for f32
// accuracy. Follows the data through every op, loop-carried values (For inits, yields, block
// arguments, results) and global intermediates (a store taints the buffer, a load of a tainted
// buffer in the same or a later kernel reads the taint), to a fixed point.
bool reaches_only_16_bit_outputs(const Value& value, const vrtile::Module& module) {
  std::unordered_set<const ValueNode*> tainted = {value.get()};
  std::set<std::string> tainted_buffers;
  bool changed = true;
  const auto taint = [&](const Value& v) {
    if (v && tainted.insert(v.get()).second) changed = true;
  };
  const auto any_tainted = [&](const std::vector<Value>& values) {
    for (const Value& v : values) {
      if (v && tainted.count(v.get())) return true;
    }
    return false;
  };
  std::function<void(const vrtile::Region&, const Op*)> walk = [&](const vrtile::Region& region,
                                                                    const Op* loop) {
    for (const OpPtr& op : region.ops) {
      switch (op->kind) {
        case OpKind::For:
          for (size_t i = 0; i < op->operands.size(); ++i) {
            if (tainted.count(op->operands[i].get())) {
              taint(op->block_args[i]);
              taint(op->results[i]);
            }
          }
          walk(*op->body, op.get());
          break;
        case OpKind::Yield:
          for (size_t i = 0; loop && i < op->operands.size(); ++i) {
            if (tainted.count(op->operands[i].get())) {
              taint(loop->block_args[i]);
              taint(loop->results[i]);
            }
          }
          break;
        case OpKind::Store:
          if (any_tainted(op->operands) && tainted_buffers.insert(op->buffer->name).second) {
            changed = true;
          }
          break;
        default:
          if (any_tainted(op->operands) ||
              (op->kind == OpKind::Load && tainted_buffers.count(op->buffer->name))) {
            for (const Value& result : op->results) taint(result);
          }
      }
    }
  };
  while (changed) {
    changed = false;
    for (const KernelPtr& kernel : module.kernels) walk(*kernel->body, nullptr);
  }
  for (const vrtile::Buffer& buffer : module.params) {
    if (buffer->role == scalar::BufferRole::Output && tainted_buffers.count(buffer->name) &&
        !is_16_bit(buffer->dtype)) {
      return false;
    }
  }
  return true;
}

// The narrow operand: the 16-bit tile, or the 8-bit one converted (exactly) to `dtype`.
Value emit_narrow(const NarrowSource& source, DType dtype, const Provenance& p, Rebuilder& out) {
  Value value = source.value;
  if (source.widened) value = out.cast(value, dtype, value->name + "_" + dtype_name(dtype), p);
  if (!source.permute) return value;
  return out.permute(value, source.permute->dims, source.permute->results[0]->name,
                     source.permute->provenance);
}

KernelPtr rewrite_kernel(const KernelPtr& kernel, const vrtile::Module& module,
                         NarrowingMode mode) {
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
    // The 16-bit type of an exact pair: the shared one, or the 16-bit side's when the other is
    // 8-bit (widened to it), bf16 when both are 8-bit.
    std::optional<DType> pair;
    if (a && b) {
      if (!a->widened && !b->widened) {
        if (a->dtype() == b->dtype()) pair = a->dtype();
      } else {
        pair = !a->widened ? a->dtype() : !b->widened ? b->dtype() : DType::BF16;
      }
    }
    if (pair) {
      copy.operands[0] = emit_narrow(*a, *pair, p, out);
      copy.operands[1] = emit_narrow(*b, *pair, p, out);
    } else if (mode == NarrowingMode::RoundComputed && (a.has_value() != b.has_value()) &&
               !is_loaded_input(original.operands[a ? 1 : 0], index) &&
               reaches_only_16_bit_outputs(original.results[0], module)) {
      // Round the computed operand to the cast one's 16-bit type (an approximation within the
      // tolerance of the 16-bit outputs it reaches).
      const size_t narrow = a ? 0 : 1, computed = 1 - narrow;
      const NarrowSource& source = a ? *a : *b;
      copy.operands[narrow] = emit_narrow(source, source.dtype(), p, out);
      const Value& other = renamed->operands[computed];
      copy.operands[computed] = out.cast(other, source.dtype(), other->name, p);
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
      map_kernels(module, [&](const KernelPtr& kernel) { return rewrite_kernel(kernel, *module, mode); });
  return rewritten == module ? module : eliminate_dead_code(rewritten);
}

}  // namespace nautilus::rewrite
