// CTAs that share global data (a refusal, no rewrite): a kernel whose CTAs would write the same
// elements of a global buffer that the kernel also reads is refused before anything is placed.
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
// A store is checked when its window is affine in grid and loop variables: then every grid
// axis of more than one CTA must appear in its indices. Stores of buffers the kernel never
// reads (an output written once per element, even redundantly with equal values) and stores
// whose indices are not affine (gathers) are left alone.
#include <string>
#include <unordered_set>

#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

namespace {

void collect_loaded_buffers(const vrtile::Region& region,
                            std::unordered_set<const scalar::BufferNode*>* loaded) {
  for (const vrtile::OpPtr& op : region.ops) {
    if (op->kind == VOpKind::Load && op->buffer) loaded->insert(op->buffer.get());
    if (op->body) collect_loaded_buffers(*op->body, loaded);
  }
}

void collect_loop_vars(const vrtile::Region& region, std::unordered_set<const VNode*>* vars) {
  for (const vrtile::OpPtr& op : region.ops) {
    if (op->kind == VOpKind::For && op->loop_var) vars->insert(op->loop_var.get());
    if (op->body) collect_loop_vars(*op->body, vars);
  }
}

}  // namespace

void KernelLowering::refuse_stores_shared_between_ctas() {
  std::unordered_set<const scalar::BufferNode*> loaded;
  collect_loaded_buffers(*vk_.body, &loaded);
  std::unordered_set<const VNode*> known;  // the variables an index may be affine in
  collect_loop_vars(*vk_.body, &known);
  for (const vrtile::GridAxis& axis : vk_.grid) known.insert(axis.var.get());
  const auto check = [&](const auto& self, const vrtile::Region& region) -> void {
    for (const vrtile::OpPtr& op : region.ops) {
      if (op->body) self(self, *op->body);
      if (op->kind != VOpKind::Store || !op->buffer ||
          op->buffer->scope != scalar::MemoryScope::Global || !loaded.count(op->buffer.get())) {
        continue;
      }
      const std::optional<Window> window = match_window(*op, vrtile::stored_value(*op)->type.shape);
      if (!window) continue;
      std::unordered_set<const VNode*> used;
      bool affine_in_known = true;
      for (const Affine& offset : window->offsets) {
        for (const auto& [atom, coef] : offset.atoms) {
          if (coef == 0) continue;
          if (!known.count(atom)) affine_in_known = false;
          used.insert(atom);
        }
      }
      if (!affine_in_known) continue;
      for (const vrtile::GridAxis& axis : vk_.grid) {
        if (axis.extent <= 1 || used.count(axis.var.get())) continue;
        fail("the CTAs along grid axis " + axis.var->name + " (" + std::to_string(axis.extent) +
             " of them) write the same elements of " + op->buffer->name +
             ", which the kernel also reads: CTAs run in no fixed order, so each would see the "
             "others' partial values. Give " + op->buffer->name +
             " its own kernel, or compute it at a loop inside the CTA");
      }
    }
  };
  check(check, *vk_.body);
}

}  // namespace nautilus::matile::lowering
