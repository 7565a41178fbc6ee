// Reduce as CUDA, in the three steps the MA tile IR fixes: (1) each thread combines its own
// distinct elements of each result element in slot order, starting from the identity, (2) an xor
// butterfly of __shfl_xor_sync over the op's lane masks, (3) with a scratch allocation, every
// warp writes its partials to shared memory and each thread combines the warps' partials in
// warp order, between two barriers.
//
//   %32 = reduce max %27, axis 1      ->  float v32[4];
//     shfl [1, 2] : f32[128] #L1          // 1. within the thread, in slot order
//                                         for (int s = 0; s < 4; ++s) v32[s] = -inf;
//                                         constexpr int v32_slot[64] = {0, 0, 1, 1, ...};
//                                         for (int s = 0; s < 64; ++s)
//                                           v32[v32_slot[s]] = fmaxf(v32[v32_slot[s]], v27[s]);
//                                         // 2. across lanes: xor butterfly
//                                         for (int s = 0; s < 4; ++s)
//                                           v32[s] = fmaxf(v32[s], __shfl_xor_sync(0xffffffffu, v32[s], 1));
//                                         ... the same with mask 2
#include "core/codegen/kernel_emitter.h"

namespace nautilus::codegen::detail {

std::string KernelEmitter::combine(vrtile::ReduceOp reduce_op, DType dtype, const std::string& a,
                                   const std::string& b) {
  const std::string fa = to_float(a, dtype), fb = to_float(b, dtype);
  switch (reduce_op) {
    case vrtile::ReduceOp::Sum: return from_float(fa + " + " + fb, dtype);
    case vrtile::ReduceOp::Max: return from_float("fmaxf(" + fa + ", " + fb + ")", dtype);
    case vrtile::ReduceOp::Min: return from_float("fminf(" + fa + ", " + fb + ")", dtype);
  }
  return a;
}

void KernelEmitter::reduce(const Op& op) {
  const Value& source = op.operands[0];
  const Value& result = op.results[0];
  const DType dtype = source->type.dtype;
  if (!is_float(dtype)) invalid(matile::op_label(op) + ": reduce of a non-float tile");
  const std::vector<int64_t>& shape = source->type.shape;
  const int64_t source_slots = source->layout.slots(), result_slots = result->layout.slots();
  const std::vector<int64_t> source_elements = matile::slot_elements(source->layout);
  const std::vector<int64_t> result_elements = matile::slot_elements(result->layout);
  std::vector<int64_t> result_shape = shape;
  result_shape.erase(result_shape.begin() + op.axis);
  // Step 1's mapping: source slot -> result slot, which must not depend on the thread.
  std::vector<int32_t> table(static_cast<size_t>(role_threads_ * source_slots));
  for (int64_t t = 0; t < role_threads_; ++t) {
    std::map<int64_t, int64_t> slot_of_element;
    for (int64_t w = 0; w < result_slots; ++w) {
      slot_of_element.emplace(result_elements[static_cast<size_t>(t * result_slots + w)], w);
    }
    std::set<int64_t> combined;  // a repeated element counts once: its later slots map to -1
    for (int64_t v = 0; v < source_slots; ++v) {
      const int64_t element = source_elements[static_cast<size_t>(t * source_slots + v)];
      if (!combined.insert(element).second) {
        table[static_cast<size_t>(t * source_slots + v)] = -1;
        continue;
      }
      std::vector<int64_t> c = matile::coordinates_of(element, shape);
      c.erase(c.begin() + op.axis);
      auto found = slot_of_element.find(matile::index_of(c, result_shape));
      if (found == slot_of_element.end()) invalid(matile::op_label(op) + ": result layout misses an element");
      table[static_cast<size_t>(t * source_slots + v)] = static_cast<int32_t>(found->second);
    }
  }
  const std::vector<int64_t> target = thread_independent(table, source_slots, matile::op_label(op));
  const double identity = op.reduce_op == vrtile::ReduceOp::Sum ? 0.0
                          : op.reduce_op == vrtile::ReduceOp::Max ? -INFINITY
                                                                  : INFINITY;
  declare(result);
  line("// 1. within the thread, in slot order");
  for_slots(result_slots, [&](const std::string& s) {
    line(at(result, s) + " = " + constant_of(identity, dtype) + ";");
  });
  // Source slots in order; a table when the slot -> result mapping is not the identity.
  const bool repeats = std::find(target.begin(), target.end(), -1) != target.end();
  if (repeats) {
    // A layout that repeats elements in a thread (an mma fragment of fewer than 16 rows): one
    // statement per distinct slot, the repeats left out.
    for (int64_t v = 0; v < source_slots; ++v) {
      if (target[static_cast<size_t>(v)] < 0) continue;
      const std::string into = at(result, str(target[static_cast<size_t>(v)]));
      line(into + " = " + combine(op.reduce_op, dtype, into, at(source, str(v))) + ";");
    }
  } else {
    std::string entries;
    bool simple = result_slots == 1;
    for (int64_t v = 0; v < source_slots; ++v) entries += (v ? ", " : "") + str(target[static_cast<size_t>(v)]);
    std::string target_of_s = "0";
    if (!simple) {
      const std::string table_name = unique(name_of(result) + "_slot");
      line("constexpr int " + table_name + "[" + str(source_slots) + "] = {" + entries + "};");
      target_of_s = table_name + "[s]";
    }
    for_slots(source_slots, [&](const std::string& s) {
      const std::string into = at(result, source_slots == 1 ? str(target[0]) : target_of_s);
      line(into + " = " + combine(op.reduce_op, dtype, into, at(source, s)) + ";");
    });
  }
  if (!op.xor_masks.empty()) {
    line("// 2. across lanes: xor butterfly");
    uses_warp_ = true;
    for (int mask : op.xor_masks) {
      for_slots(result_slots, [&](const std::string& s) {
        const std::string here = at(result, s);
        line(here + " = " +
             combine(op.reduce_op, dtype, here,
                     "__shfl_xor_sync(0xffffffffu, " + here + ", " + std::to_string(mask) + ")") +
             ";");
      });
    }
  }
  if (op.scratch >= 0) cross_warp_reduce(op, result, dtype, identity);
}

// Step 3: every warp writes its partial of each result element to scratch[warp, element];
// after a barrier each thread combines the partials of its partner warps (the threads that
// differ from it only in the warp leaves of the reduced axis) in increasing order.
void KernelEmitter::cross_warp_reduce(const Op& op, const Value& result, DType dtype,
                                      double identity) {
  auto plan = matile::reduce_plan(op.operands[0]->layout, op.operands[0]->type.shape, op.axis);
  if (!plan) unsupported(matile::op_label(op) + ": " + plan.error().message);
  SharedRef ref;
  ref.alloc = op.scratch;
  const SharedAlloc& alloc = alloc_of(ref);
  const int64_t elements = result->type.element_count();
  if (alloc.shape.size() != 2 || alloc.shape[0] < kernel_.warps || alloc.shape[1] < elements) {
    invalid(matile::op_label(op) + ": scratch " + alloc.name + " is not [warps, elements]");
  }
  ref.offsets = {0, 0};
  std::vector<int64_t> partners{0};
  std::string base = "tid";
  for (const auto& [position, extent] : plan->warp_leaves) {
    base += " - " + term_text("tid", position, extent, position, kernel_.threads());
    std::vector<int64_t> grown;
    for (int64_t j = 0; j < extent; ++j) {
      for (int64_t p : partners) grown.push_back(p + j * position);
    }
    partners = std::move(grown);
  }
  std::sort(partners.begin(), partners.end());
  uses_warp_ = true;
  const std::string scratch = shared_name(alloc);
  const std::string what = matile::op_label(op);
  line("// 3. across warps through " + alloc.name + ", in warp order");
  for_slots(result->layout.slots(), [&](const std::string& s) {
    line(scratch + "[" + shared_offset(ref, {"warp", element_index(result, s, what)}) + "] = " +
         from_float(to_float(at(result, s), dtype), alloc.dtype) + ";");
  });
  line("__syncthreads();");
  line("{");
  ++indent_;
  const std::string base_name = unique(name_of(result) + "_base");
  line("const int " + base_name + " = " + base + ";");
  for_slots(result->layout.slots(), [&](const std::string& s) {
    line(at(result, s) + " = " + constant_of(identity, dtype) + ";");
    for (int64_t p : partners) {
      const std::string partner_warp = "(" + base_name + " + " + str(p) + ") / 32";
      const std::string partial = to_float(
          scratch + "[" + shared_offset(ref, {partner_warp, element_index(result, s, what)}) + "]",
          alloc.dtype);
      line(at(result, s) + " = " +
           combine(op.reduce_op, dtype, at(result, s), from_float(partial, dtype)) + ";");
    }
  });
  --indent_;
  line("}");
  line("__syncthreads();");
}

}  // namespace nautilus::codegen::detail
