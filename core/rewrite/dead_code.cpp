#include "core/rewrite/dead_code.h"

#include <unordered_set>
#include <utility>

#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

// Liveness by fixed point: sweeps the kernel backwards until no value or op becomes live.
// Sweeping a whole (small) kernel repeatedly is simpler than a worklist over loop-carried
// edges and is fast enough at tile-IR sizes.
class Liveness {
 public:
  explicit Liveness(const vrtile::Kernel& kernel) {
    bool changed = true;
    while (changed) {
      changed = false;
      if (kernel.body) sweep(*kernel.body, &changed);
    }
  }

  bool live(const Value& value) const { return value && live_values_.count(value.get()); }
  bool live(const Op& op) const { return live_ops_.count(&op) != 0; }
  // Carried value i of a For: its result or its block argument is read.
  bool carried_live(const Op& loop, size_t i) const {
    return live(loop.results[i]) || (i < loop.block_args.size() && live(loop.block_args[i]));
  }

 private:
  void mark(const Value& value, bool* changed) {
    if (value && live_values_.insert(value.get()).second) *changed = true;
  }
  void mark(const Op& op, bool* changed) {
    if (live_ops_.insert(&op).second) *changed = true;
  }

  void sweep(const vrtile::Region& region, bool* changed) {
    for (auto it = region.ops.rbegin(); it != region.ops.rend(); ++it) {
      if (*it) sweep_op(**it, changed);
    }
  }

  void sweep_op(const Op& op, bool* changed) {
    switch (op.kind) {
      case OpKind::Store:
        mark(op, changed);
        for (const Value& operand : op.operands) mark(operand, changed);
        return;
      case OpKind::Yield:
        return;  // its operands are marked per carried value by the enclosing For
      case OpKind::For: {
        if (!op.body) return;
        // The yield reads what the live carried values need next iteration.
        const OpPtr& yield = op.body->ops.empty() ? nullptr : op.body->ops.back();
        for (size_t i = 0; i < op.results.size(); ++i) {
          if (!carried_live(op, i)) continue;
          if (i < op.operands.size()) mark(op.operands[i], changed);
          if (yield && i < yield->operands.size()) mark(yield->operands[i], changed);
        }
        sweep(*op.body, changed);
        bool body_live = false;
        for (const OpPtr& inner : op.body->ops) {
          if (inner && inner->kind != OpKind::Yield && live(*inner)) body_live = true;
        }
        bool any_carried = false;
        for (size_t i = 0; i < op.results.size(); ++i) any_carried |= carried_live(op, i);
        if (body_live || any_carried) {
          mark(op, changed);
          if (op.trip_count) mark(op.trip_count, changed);
        }
        return;
      }
      default: {
        bool needed = false;
        for (const Value& result : op.results) needed = needed || live(result);
        if (!needed) return;
        mark(op, changed);
        for (const Value& operand : op.operands) mark(operand, changed);
        return;
      }
    }
  }

  std::unordered_set<const ValueNode*> live_values_;
  std::unordered_set<const Op*> live_ops_;
};

// Rebuilds a For keeping only its live carried values; the body is already rebuilt.
OpPtr drop_dead_carried(const Op& original, const OpPtr& renamed, const Liveness& liveness) {
  std::vector<size_t> keep;
  for (size_t i = 0; i < original.results.size(); ++i) {
    if (liveness.carried_live(original, i)) keep.push_back(i);
  }
  if (keep.size() == original.results.size()) return renamed;
  Op copy = *renamed;
  copy.operands.clear();
  copy.results.clear();
  copy.block_args.clear();
  std::vector<OpPtr> body_ops = renamed->body->ops;
  Op yield = *body_ops.back();
  yield.operands.clear();
  for (size_t i : keep) {
    copy.operands.push_back(renamed->operands[i]);
    copy.results.push_back(renamed->results[i]);
    copy.block_args.push_back(renamed->block_args[i]);
    yield.operands.push_back(renamed->body->ops.back()->operands[i]);
  }
  body_ops.back() = vrtile::make_op(std::move(yield));
  copy.body = vrtile::make_region(std::move(body_ops));
  return vrtile::make_op(std::move(copy));
}

KernelPtr eliminate_in_kernel(const KernelPtr& kernel) {
  const Liveness liveness(*kernel);
  Rebuilder rebuilder(*kernel);
  return rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
    if (original.kind == OpKind::Yield) {
      out.emit(renamed);  // trimmed by its For
    } else if (original.kind == OpKind::For) {
      if (liveness.live(original)) out.emit(drop_dead_carried(original, renamed, liveness));
    } else if (liveness.live(original)) {
      out.emit(renamed);
    }
  });
}

}  // namespace

ModulePtr eliminate_dead_code(const ModulePtr& module) {
  return map_kernels(module, eliminate_in_kernel);
}

}  // namespace nautilus::rewrite
