#include "core/rewrite/loop_invariant_hoisting.h"

#include <unordered_set>
#include <utility>

#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

bool reads_any(const Op& op, const std::unordered_set<const ValueNode*>& values) {
  for (const Value& operand : op.operands) {
    if (operand && values.count(operand.get())) return true;
  }
  return op.trip_count && values.count(op.trip_count.get());
}

KernelPtr hoist_in_kernel(const KernelPtr& kernel) {
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op&, const OpPtr& renamed, Rebuilder& out) {
    if (renamed->kind != OpKind::For || !renamed->body || renamed->extent < 1) {
      out.emit(renamed);
      return;
    }
    // The body was rebuilt first, so invariants of inner loops already sit in this body.
    std::unordered_set<const ValueNode*> variant{renamed->loop_var.get()};
    for (const Value& arg : renamed->block_args) variant.insert(arg.get());
    std::vector<OpPtr> kept;
    bool hoisted = false;
    for (const OpPtr& op : renamed->body->ops) {
      const bool movable =
          is_pure(*op) && !reads_any(*op, variant) &&
          (op->kind != OpKind::Load || !kernel_stores_to(*kernel, op->buffer->name));
      if (movable) {
        out.emit(op);
        hoisted = true;
        continue;
      }
      for (const Value& result : op->results) variant.insert(result.get());
      if (op->kind == OpKind::For) {
        for (const ValueNode* inner : values_defined_in(*op)) variant.insert(inner);
      }
      kept.push_back(op);
    }
    if (!hoisted) {
      out.emit(renamed);
      return;
    }
    Op copy = *renamed;
    copy.body = vrtile::make_region(std::move(kept));
    out.emit(vrtile::make_op(std::move(copy)));
  });
}

}  // namespace

ModulePtr hoist_loop_invariants(const ModulePtr& module) {
  return map_kernels(module, hoist_in_kernel);
}

}  // namespace nautilus::rewrite
