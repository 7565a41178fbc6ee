// Register-only data movement as CUDA (Broadcast, Permute, ExtractSlice, ConvertLayout): each
// result slot copies the source slot that holds its element, through a constexpr table that
// must be the same for every thread (registers are indexed only by constants, so they stay
// registers; a table that differs between threads is Unsupported), or, where threads take
// their elements from different source slots, picks the element with a chain of selects. A
// ConvertLayout through shared memory writes the scratch allocation, synchronizes, reads it
// back and synchronizes again.
//
//   %Mx_log2_t = broadcast %Mx_log2,  ->  float Mx_log2_t[64];
//     dims [0] : f32[128, 64] #L3         constexpr int Mx_log2_t_from[64] = {0, 0, 1, 1, ...};
//                                         #pragma unroll
//                                         for (int s = 0; s < 64; ++s) {
//                                           Mx_log2_t[s] = Mx_log2[Mx_log2_t_from[s]];
//                                         }
#include "core/codegen/kernel_emitter.h"

namespace nautilus::codegen::detail {

// A per-slot table that is the same for every thread, or an Unsupported error.
std::vector<int64_t> KernelEmitter::thread_independent(const std::vector<int32_t>& table,
                                                       int64_t slots, const std::string& what) {
  std::vector<int64_t> per_slot(static_cast<size_t>(slots));
  for (int64_t v = 0; v < slots; ++v) per_slot[static_cast<size_t>(v)] = table[static_cast<size_t>(v)];
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] != per_slot[i % static_cast<size_t>(slots)]) {
      unsupported(what + ": thread " + std::to_string(i / static_cast<size_t>(slots)) +
                  " needs another source slot than thread 0 (registers cannot be indexed "
                  "per thread)");
    }
  }
  return per_slot;
}

// `out[s] = in[table[s]]` through a constexpr table, or a plain copy when the table is the
// identity (or the value a scalar).
void KernelEmitter::table_copy(const Value& result, const Value& source,
                               const std::vector<int64_t>& table) {
  const int64_t slots = result->layout.slots();
  bool identity = source->layout.slots() == slots;
  for (int64_t v = 0; v < slots && identity; ++v) identity = table[static_cast<size_t>(v)] == v;
  if (identity || source->layout.slots() == 1) {
    for_slots(slots, [&](const std::string& s) { line(at(result, s) + " = " + at(source, s) + ";"); });
    return;
  }
  if (slots == 1) {
    line(at(result, "0") + " = " + at(source, str(table[0])) + ";");
    return;
  }
  std::string entries;
  for (int64_t v = 0; v < slots; ++v) entries += (v ? ", " : "") + str(table[static_cast<size_t>(v)]);
  const std::string table_name = unique(name_of(result) + "_from");
  line("constexpr int " + table_name + "[" + str(slots) + "] = {" + entries + "};");
  for_slots(slots, [&](const std::string& s) {
    line(at(result, s) + " = " + at(source, table_name + "[" + s + "]") + ";");
  });
}

// The column-major source element each result slot needs (as the interpreter defines it).
std::vector<int64_t> KernelEmitter::needed_elements(const Op& op) {
  std::vector<int64_t> argument;
  const matile::RegisterMove move = matile::register_move_of(op, &argument);
  return matile::register_move_sources(move, argument, op.operands[0]->type.shape,
                                       op.results[0]->type.shape,
                                       matile::slot_elements(op.results[0]->layout));
}

void KernelEmitter::register_move(const Op& op) {
  const Value& result = op.results[0];
  const Value& source = op.operands[0];
  auto table = matile::register_gather(source->layout, source->type.element_count(),
                                       needed_elements(op), result->layout.slots());
  if (!table) unsupported(matile::op_label(op) + ": " + table.error().message);
  if (op.kind == OpKind::ConvertLayout && !same_for_every_thread(*table, result->layout.slots())) {
    return select_by_element(op);
  }
  std::vector<int64_t> per_slot = thread_independent(*table, result->layout.slots(), matile::op_label(op));
  const bool folded = folded_index_tiles_.count(result.get()) > 0;
  if (!folded) {
    declare(result);
    table_copy(result, source, per_slot);
  }
  // The words a narrow tile was loaded in follow its slots (an int4 weight's permute between
  // its load and the widening cast).
  if (auto loaded = previous_loaded_bytes_.find(source.get()); loaded != previous_loaded_bytes_.end()) {
    std::vector<LoadedByte> moved;
    for (int64_t v : per_slot) moved.push_back(loaded->second[static_cast<size_t>(v)]);
    loaded_bytes_[result.get()] = std::move(moved);
  }
  // The affine form of an index tile follows its slots (a causal mask's broadcast indices).
  if (const AffineIndex* affine = affine_index(source); affine && result->layout.slots() > 1) {
    AffineIndex moved{affine->base, {}};
    for (int64_t v : per_slot) moved.offsets.push_back(affine->offset(v));
    affine_indices_[result.get()] = std::move(moved);
  }
  if (folded && !affine_indices_.count(result.get())) {
    invalid("internal: index tile %" + result->name + " has no affine form");
  }
}

bool KernelEmitter::same_for_every_thread(const std::vector<int32_t>& table, int64_t slots) {
  for (size_t i = 0; i < table.size(); ++i) {
    if (table[i] != table[i % static_cast<size_t>(slots)]) return false;
  }
  return true;
}

// A register-only conversion where threads take their elements from different source slots
// (a row statistic every thread holds whole, converted to a layout where each thread keeps
// one row): every result slot computes its element index and picks it with a chain of
// selects over the elements that slot takes in any thread. Registers are only indexed by
// constants, so they stay registers. This needs a source whose slot of an element is the
// same in every thread that holds it, and few candidates per slot.
void KernelEmitter::select_by_element(const Op& op) {
  constexpr size_t kMaxCandidates = 32;
  const Value& result = op.results[0];
  const Value& source = op.operands[0];
  const std::string what = matile::op_label(op);
  const int64_t source_slots = source->layout.slots(), result_slots = result->layout.slots();
  const std::vector<int64_t> source_elements = matile::slot_elements(source->layout);
  const std::vector<int64_t> result_elements = matile::slot_elements(result->layout);
  std::map<int64_t, int64_t> slot_of_element;
  for (size_t i = 0; i < source_elements.size(); ++i) {
    const int64_t slot = static_cast<int64_t>(i) % source_slots;
    auto [it, inserted] = slot_of_element.emplace(source_elements[i], slot);
    if (!inserted && it->second != slot) {
      unsupported(what + ": element " + str(source_elements[i]) + " sits in different slots " +
                  "of different threads (registers cannot be indexed per thread)");
    }
  }
  std::vector<std::set<int64_t>> candidates(static_cast<size_t>(result_slots));
  for (size_t i = 0; i < result_elements.size(); ++i) {
    candidates[i % static_cast<size_t>(result_slots)].insert(result_elements[i]);
  }
  declare(result);
  line("// each thread picks its elements: the source slot depends on the thread");
  for (int64_t v = 0; v < result_slots; ++v) {
    const std::set<int64_t>& options = candidates[static_cast<size_t>(v)];
    if (options.size() > kMaxCandidates) {
      unsupported(what + ": slot " + str(v) + " takes " + str(static_cast<int64_t>(options.size())) +
                  " different elements across threads (registers cannot be indexed per thread)");
    }
    std::string value = at(source, str(slot_of_element.at(*options.rbegin())));
    if (options.size() > 1) {
      const std::string element = unique(name_of(result) + "_e");
      line("const int " + element + " = " + element_index(result, str(v), what) + ";");
      for (auto it = std::next(options.rbegin()); it != options.rend(); ++it) {
        value = element + " == " + str(*it) + " ? " + at(source, str(slot_of_element.at(*it))) +
                " : " + value;
      }
    }
    line(at(result, str(v)) + " = " + value + ";");
  }
}

void KernelEmitter::convert_via_shared(const Op& op) {
  const Value& result = op.results[0];
  const Value& source = op.operands[0];
  if (op.scratch < 0) invalid(matile::op_label(op) + ": via shared memory without scratch");
  SharedRef ref;
  ref.alloc = op.scratch;
  const SharedAlloc& alloc = alloc_of(ref);
  const std::string what = matile::op_label(op);
  // The scratch holds the tile either with the tile's shape or flat, in column-major order.
  auto address = [&](const Value& value, const std::string& s) {
    if (alloc.shape.size() == 1 && value->type.shape.size() != 1) {
      ref.offsets = {0};
      return shared_offset(ref, {element_index(value, s, what)});
    }
    ref.offsets.assign(value->type.shape.size(), 0);
    return shared_offset(ref, coordinates(value, s, what));
  };
  const std::string scratch = shared_name(alloc);
  for_slots(source->layout.slots(), [&](const std::string& s) {
    line(scratch + "[" + address(source, s) + "] = " + at(source, s) + ";");
  });
  line("__syncthreads();");
  declare(result);
  for_slots(result->layout.slots(), [&](const std::string& s) {
    line(at(result, s) + " = " + scratch + "[" + address(result, s) + "];");
  });
  line("__syncthreads();");
}

}  // namespace nautilus::codegen::detail
