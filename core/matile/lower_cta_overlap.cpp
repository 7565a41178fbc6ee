// CTAs that share global data (a refusal, no rewrite): a kernel whose CTAs would write the same
// elements of a global buffer that the kernel also reads, or writes more than once (an initial
// value, then the result), is refused before anything is placed.
// The CTAs of one launch run in no fixed order, so one CTA's initialization or partial sums of
// such a buffer land in the middle of another's use of them. The CPU interpreters run CTAs one
// after the other and see nothing wrong (the MA interpreter's cross-CTA check catches the
// race at run time: interpreter.cpp, step 5); on a GPU the results are wrong now and then.
//
// The typical schedule computes a producer at a loop of its consumer that is bound to the
// grid, while the producer's buffer keeps its full shape:
//
//   before (VR, Y = Z · C, compute_at(Z, Y_sum, p_o), bind(Y, m=grid.y, p=grid.x)):
//     kernel Y grid(m: 8, p_o: 2) {
//       store Z[%m, n] = 0 ...           // every CTA (m, p_o) for both values of p_o
//       for k ... { %z = load Z[%m, n]; store Z[%m, n], %z + ... }
//       %y = ... load Z[%m, n] ...
//   after: lower_to_matile: kernel Y: the CTAs along grid axis p_o (2 of them) write the same
//     elements of Z, which the kernel also reads: ...
//
// Every grid axis of more than one CTA must reach the store's index tiles through their
// definitions (a dependence, not only an affine term: gathers and masked windows count too).
// Stores of buffers the kernel never reads (an output written once per element, even
// redundantly with equal values) are left alone.
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

namespace {

// The buffers a kernel reads, and the number of store ops of each.
void collect_accesses(const vrtile::Region& region,
                      std::unordered_set<const scalar::BufferNode*>* loaded,
                      std::unordered_map<const scalar::BufferNode*, int>* stores) {
  for (const vrtile::OpPtr& op : region.ops) {
    if (op->kind == VOpKind::Load && op->buffer) loaded->insert(op->buffer.get());
    if (op->kind == VOpKind::Store && op->buffer) ++(*stores)[op->buffer.get()];
    if (op->body) collect_accesses(*op->body, loaded, stores);
  }
}

}  // namespace

void KernelLowering::refuse_stores_shared_between_ctas() {
  std::unordered_set<const scalar::BufferNode*> loaded;
  std::unordered_map<const scalar::BufferNode*, int> stores;
  collect_accesses(*vk_.body, &loaded, &stores);
  // The grid variables each value depends on, through its definition's operands (memoized).
  std::unordered_map<const VNode*, std::unordered_set<const VNode*>> grid_dependencies;
  std::unordered_set<const VNode*> grid_vars;
  for (const vrtile::GridAxis& axis : vk_.grid) grid_vars.insert(axis.var.get());
  const auto depends = [&](const auto& self, const VValue& v) -> const std::unordered_set<const VNode*>& {
    auto found = grid_dependencies.find(v.get());
    if (found != grid_dependencies.end()) return found->second;
    std::unordered_set<const VNode*>& deps = grid_dependencies[v.get()];
    if (grid_vars.count(v.get())) {
      deps.insert(v.get());
      return deps;
    }
    if (const VOp* op = def(v)) {
      std::unordered_set<const VNode*> collected;
      for (const VValue& operand : op->operands) {
        if (operand) {
          const std::unordered_set<const VNode*>& inner = self(self, operand);
          collected.insert(inner.begin(), inner.end());
        }
      }
      grid_dependencies[v.get()] = std::move(collected);
    }
    return grid_dependencies[v.get()];
  };
  const auto check = [&](const auto& self, const vrtile::Region& region) -> void {
    for (const vrtile::OpPtr& op : region.ops) {
      if (op->body) self(self, *op->body);
      // A buffer written once per element and never read back may be written by several CTAs
      // with equal values; one read back, or written first with an initial value, may not.
      if (op->kind != VOpKind::Store || !op->buffer ||
          op->buffer->scope != scalar::MemoryScope::Global ||
          (!loaded.count(op->buffer.get()) && stores[op->buffer.get()] < 2)) {
        continue;
      }
      std::unordered_set<const VNode*> used;
      for (const VValue& index : vrtile::access_indices(*op)) {
        if (!index) continue;
        const std::unordered_set<const VNode*>& deps = depends(depends, index);
        used.insert(deps.begin(), deps.end());
      }
      for (const vrtile::GridAxis& axis : vk_.grid) {
        if (axis.extent <= 1 || used.count(axis.var.get())) continue;
        fail("the CTAs along grid axis " + axis.var->name + " (" + std::to_string(axis.extent) +
             " of them) write the same elements of " + op->buffer->name +
             (loaded.count(op->buffer.get()) ? ", which the kernel also reads"
                                             : " more than once (an initial value, then the result)") +
             ": CTAs run in no fixed order, so each would see or overwrite the others' partial "
             "values. Give " + op->buffer->name +
             " its own kernel, or compute it at a loop inside the CTA");
      }
    }
  };
  check(check, *vk_.body);
}

}  // namespace nautilus::matile::lowering
