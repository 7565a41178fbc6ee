// Memory accesses as CUDA: GlobalLoad / GlobalStore slot by slot at a hoisted 32-bit start
// plus a constant (bounds checked only where an index can reach them; unmasked runs of
// neighbouring slots as one access of up to 16 bytes, and a run that reaches a bound only along
// the last axis as one wide store when its last element is in bounds, element by element
// otherwise; one holder of a replicated element writes it), AsyncCopy
// as one cp.async of 16 bytes per vector with zero-fill past the window's bounds, SharedLoad as
// ldmatrix.x4[.trans] per issue, or ld.shared per run of slots at consecutive aligned offsets
// (16 bytes for a staged epilogue's rows) or per slot, SharedStore likewise (runs of slots at
// consecutive aligned offsets as one st.shared of up to 16 bytes, else per slot). A store with
// realigned rows (GlobalAccess::realign_rows) shifts each run by its row's misalignment through
// the next lane and stores aligned 16-byte vectors (realigned_row_store below).
// Shared addresses are the hoisted swizzled lane part, plus the stage, plus a constant.
//
//   cp.async K_smem[%next_stage][0, 0]     ->  if (more) {
//     <- K[%b, %h, %4 + i0, i1] ... vec 8        const int K_start_1 = b * 8388608 + h * 524288
//     if %more                                                     + v4 * 128 + K_thread;
//                                                cp_async_16((K_smem_addr + next_stage * 16384u
//                                                             + lane_offset_1), (K + K_start_1), 16);
//                                                ... one line per vector
//                                              }
//   global_store O[%b, %h, %9 + i0, i1]    ->  const int O_start = b * 8388608 + ... + O_thread;
//     bounds [2, 16, 4096, 128], %58           *reinterpret_cast<unsigned*>((O + O_start)) =
//                                                  pack2(v58[0], v58[1]);
//                                              ... one line per slot pair
//   global_store C[%3 + i0, %23 + i1]      ->  if ((v23 + l0_col + 7) < 264) {
//     bounds [200, 264], %34.1 (runs of 8)       *reinterpret_cast<uint4*>((C + C_start)) = ...;
//                                              } else { if ((v23 + l0_col) < 264) ... per element }
#include <algorithm>

#include "core/codegen/kernel_emitter.h"

namespace nautilus::codegen::detail {

KernelEmitter::WindowIndex KernelEmitter::window(const Op& op, const std::vector<std::string>& c) {
  const matile::GlobalAccess& access = op.access;
  const size_t rank = op.buffer->shape.size();
  if (access.tile_axes.size() != rank || access.offsets.size() != rank || access.bounds.size() != rank) {
    invalid(matile::op_label(op) + ": window access of the wrong rank");
  }
  WindowIndex out;
  for (size_t j = 0; j < rank; ++j) {
    std::string index;
    if (access.offsets[j]) index = name_of(access.offsets[j]);
    if (access.tile_axes[j] >= 0) {
      const std::string& coordinate = c[static_cast<size_t>(access.tile_axes[j])];
      index = index.empty() ? coordinate : index + " + " + coordinate;
    }
    if (index.empty()) index = "0";
    out.indices.push_back(index);
    // An index that can only be 0 is always in bounds; anything else is checked.
    if (index != "0" || access.bounds[j] < 1) {
      out.valid += (out.valid.empty() ? "" : " && ") + std::string("(") + index + ") < " +
                   str(access.bounds[j]);
    }
  }
  return out;
}

std::string KernelEmitter::flat_offset(const scalar::Buffer& buffer,
                                       const std::vector<std::string>& indices) {
  std::string flat;
  int64_t stride = 1;
  std::vector<std::string> terms;
  for (size_t j = buffer->shape.size(); j-- > 0;) {
    std::string term = "static_cast<long long>(" + indices[j] + ")";
    if (stride != 1) term += " * " + str(stride);
    terms.push_back(term);
    stride *= buffer->shape[j];
  }
  for (size_t i = terms.size(); i-- > 0;) flat += (flat.empty() ? "" : " + ") + terms[i];
  return flat.empty() ? "0" : flat;
}

void KernelEmitter::global_load(const Op& op) {
  const Value& result = op.results[0];
  const std::vector<Value> gather = matile::gather_indices(op);
  const Value mask = matile::gather_mask(op);
  declare(result);
  // An int4 buffer is packed two elements a byte: runs of slots are read as their bytes
  // (planned_int4_load), other elements through int4_at.
  const bool packed = op.buffer->dtype == DType::I4;
  if (planned_window_load(op, result)) return;
  const std::string buffer = buffer_name(op.buffer);
  const std::string other = constant_of(op.constant, op.buffer->dtype);
  for_slots(result->layout.slots(), [&](const std::string& s) {
    std::vector<std::string> indices;
    std::string valid;
    if (op.access.form == matile::GlobalAccess::Form::Window) {
      WindowIndex w = window(op, coordinates(result, s, matile::op_label(op)));
      indices = w.indices;
      valid = w.valid;
    } else {
      for (const Value& index : gather) indices.push_back(at(index, s));
      if (mask) valid = at(mask, s);
    }
    const std::string flat = flat_offset(op.buffer, indices);
    const std::string read =
        packed ? "nautilus_device::int4_at(" + buffer + ", " + flat + ")" : buffer + "[" + flat + "]";
    line(at(result, s) + " = " + (valid.empty() ? read : valid + " ? " + read + " : " + other) + ";");
  });
}

// Which slots of a replicated layout write: the stride-0 thread leaves give a per-thread
// condition (coordinate 0 writes), the stride-0 slot leaves a per-slot one.
std::pair<std::string, std::string> KernelEmitter::single_writer(const RegisterLayout& layout,
                                                                 const std::string& slot) {
  auto conditions = [](const layout::Layout& mode, const std::string& index, int64_t bound) {
    const std::vector<int64_t> extents = layout::leaves(mode.shape());
    const std::vector<int64_t> strides = layout::leaves(mode.stride());
    std::string condition;
    int64_t position = 1;
    for (size_t i = 0; i < extents.size(); ++i) {
      if (strides[i] == 0 && extents[i] > 1) {
        condition += (condition.empty() ? "" : " && ") +
                     term_text(index, position, extents[i], 1, bound) + " == 0";
      }
      position *= extents[i];
    }
    return condition;
  };
  return {conditions(layout.tv.layout.mode(0), "tid", layout.threads()),
          conditions(layout.tv.layout.mode(1), slot, layout.slots())};
}

std::optional<KernelEmitter::WindowPlan> KernelEmitter::window_plan(const Op& op,
                                                                    const Value& value,
                                                                    const Value& predicate) {
  const matile::GlobalAccess& access = op.access;
  const size_t rank = op.buffer->shape.size();
  const std::vector<int64_t>& shape = value->type.shape;
  if (access.form != matile::GlobalAccess::Form::Window || rank == 0 || access.tile_axes.size() != rank ||
      access.offsets.size() != rank || access.bounds.size() != rank) {
    return std::nullopt;
  }
  int64_t elements = 1;
  for (int64_t extent : op.buffer->shape) elements *= extent;
  if (elements >= (int64_t{1} << 31)) return std::nullopt;
  const LayoutInfo& info = layout_info(value->layout.tv, shape, matile::op_label(op));
  const int64_t threads = info.coords.threads, slots = value->layout.slots();
  std::vector<int64_t> stride(rank, 1);
  for (size_t j = rank - 1; j-- > 0;) stride[j] = stride[j + 1] * op.buffer->shape[j + 1];
  WindowPlan plan;
  plan.slot_flat.assign(static_cast<size_t>(slots), 0);
  plan.slot_check.assign(static_cast<size_t>(slots), "");
  plan.slot_check_rest.assign(static_cast<size_t>(slots), "");
  plan.slot_check_last.assign(static_cast<size_t>(slots), "");
  plan.slot_last.assign(static_cast<size_t>(slots), 0);
  std::string uniform, per_thread;
  int64_t uniform_alignment = 0;  // every uniform part is a multiple of it (0: the part is 0)
  std::vector<int64_t> thread_flat(static_cast<size_t>(threads), 0);
  for (size_t j = 0; j < rank; ++j) {
    const std::string factor = stride[j] == 1 ? "" : " * " + str(stride[j]);
    std::optional<IndexRange> offset = range_given(access.offsets[j], predicate);
    if (access.offsets[j] && offset) {
      // A tighter top proven CTA by CTA (split reductions' loops over whole tiles).
      if (std::optional<int64_t> largest = largest_by_grid_cases(access.offsets[j])) {
        offset->hi = std::min(offset->hi, *largest);
      }
    }
    const int a = access.tile_axes[j];
    int64_t thread_most = 0;
    std::string thread_part;
    if (a >= 0) {
      const size_t axis = static_cast<size_t>(a);
      for (int64_t t = 0; t < threads; ++t) {
        const int64_t part = evaluate_terms(info.coords.thread_terms[axis], t);
        thread_most = std::max(thread_most, part);
        thread_flat[static_cast<size_t>(t)] += part * stride[j];
      }
      if (info.thread_vars[axis] != "0") {
        thread_part = info.thread_vars[axis];
        per_thread += (per_thread.empty() ? "" : " + ") + thread_part + factor;
      }
    }
    if (access.offsets[j]) {
      uniform += (uniform.empty() ? "" : " + ") + name_of(access.offsets[j]) + factor;
      uniform_alignment = std::gcd(uniform_alignment, alignment_of(access.offsets[j]) * stride[j]);
    }
    for (int64_t v = 0; v < slots; ++v) {
      const int64_t constant = a >= 0 ? evaluate_terms(info.coords.slot_terms[static_cast<size_t>(a)], v) : 0;
      plan.slot_flat[static_cast<size_t>(v)] += constant * stride[j];
      if (j + 1 == rank) plan.slot_last[static_cast<size_t>(v)] = constant;
      if (offset && offset->hi + thread_most + constant < access.bounds[j]) continue;
      std::string index = access.offsets[j] ? name_of(access.offsets[j]) : "";
      if (!thread_part.empty()) index += (index.empty() ? "" : " + ") + thread_part;
      if (constant || index.empty()) index += (index.empty() ? "" : " + ") + str(constant);
      const std::string axis_check = parenthesized(index) + " < " + str(access.bounds[j]);
      std::string& check = plan.slot_check[static_cast<size_t>(v)];
      check += (check.empty() ? "" : " && ") + axis_check;
      std::string& part = j + 1 == rank ? plan.slot_check_last[static_cast<size_t>(v)]
                                        : plan.slot_check_rest[static_cast<size_t>(v)];
      part += (part.empty() ? "" : " && ") + axis_check;
    }
  }
  const std::string buffer = buffer_name(op.buffer);
  std::string start = per_thread.empty() ? "" : hoisted("int", buffer + "_thread", per_thread);
  if (!uniform.empty()) start = start.empty() ? uniform : uniform + " + " + start;
  if (!start.empty() && !uniform.empty()) {
    const std::string start_name = unique(buffer + "_start");
    line("const int " + start_name + " = " + start + ";");
    start = start_name;
  }
  plan.base = start.empty() ? buffer : "(" + buffer + " + " + start + ")";
  plan.start = start;
  plan.start_alignment = uniform_alignment;
  for (int64_t f : thread_flat) plan.start_alignment = std::gcd(plan.start_alignment, f);
  return plan;
}

// Window stores through a WindowPlan: checks only where an index can reach its bound, and
// unchecked runs of consecutive slots as one access of up to 16 bytes (uint4 of eight 16-bit
// elements, float4 of four f32, and the narrower halves of both).
bool KernelEmitter::planned_window_store(const Op& op, const Value& value) {
  std::optional<WindowPlan> plan = window_plan(op, value);
  if (!plan) return false;
  if (op.access.realign_rows) {
    realigned_row_store(op, value, *plan);
    return true;
  }
  const DType dtype = op.buffer->dtype;
  const int64_t most = is_narrow_float(dtype) ? 8 : dtype == DType::F32 ? 4 : 1;
  const int64_t slots = value->layout.slots();
  for (int64_t v = 0; v < slots; ++v) {
    // Replicated holders store the same value; one of them is enough.
    auto [thread_writes, slot_writes] = single_writer(value->layout, str(v));
    int64_t n = thread_writes.empty() ? plan->vector(v, most) : 1;
    // A run that reaches the bounds only along the last axis (a ragged edge): stored wide when
    // its last element is in bounds, element by element otherwise.
    int64_t checked = n == 1 && thread_writes.empty() ? plan->checked_vector(v, most) : 1;
    for (int64_t k = 0; k < std::max(n, checked); ++k) {
      if (!single_writer(value->layout, str(v + k)).second.empty()) n = checked = 1;
    }
    const auto wide_store = [&](int64_t run) {
      std::vector<std::string> parts;
      if (dtype == DType::F32) {
        for (int64_t k = 0; k < run; ++k) parts.push_back(at(value, str(v + k)));
      } else {
        for (int64_t k = 0; k < run; k += 2) {
          parts.push_back("pack2(" + at(value, str(v + k)) + ", " + at(value, str(v + k + 1)) + ")");
        }
      }
      std::string joined;
      for (const std::string& part : parts) joined += (joined.empty() ? "" : ", ") + part;
      const std::string type = dtype == DType::F32 ? (run == 4 ? "float4" : "float2")
                                                   : (run == 8 ? "uint4" : run == 4 ? "uint2" : "unsigned");
      const std::string made = parts.size() == 1 ? joined : "make_" + type + "(" + joined + ")";
      return "*reinterpret_cast<" + type + "*>(" + plan->at(v) + ") = " + made + ";";
    };
    if (checked > 1) {
      const size_t i = static_cast<size_t>(v);
      const std::string& rest = plan->slot_check_rest[i];
      const std::string& last = plan->slot_check_last[i + static_cast<size_t>(checked) - 1];
      std::string guard = rest;
      if (!last.empty()) guard += (guard.empty() ? "" : " && ") + last;
      line("if (" + guard + ") {");
      line("  " + wide_store(checked));
      line("} else {");
      for (int64_t k = 0; k < checked; ++k) {
        const std::string& valid = plan->slot_check[i + static_cast<size_t>(k)];
        const std::string store = "*(" + plan->at(v + k) + ") = " + at(value, str(v + k)) + ";";
        line("  " + (valid.empty() ? store : "if (" + valid + ") " + store));
      }
      line("}");
      v += checked - 1;
      continue;
    }
    if (n > 1) {
      line(wide_store(n));
      v += n - 1;
      continue;
    }
    std::string valid = plan->slot_check[static_cast<size_t>(v)];
    for (const std::string& condition : {thread_writes, slot_writes}) {
      if (!condition.empty()) valid = valid.empty() ? condition : condition + " && " + valid;
    }
    const std::string store = "*(" + plan->at(v) + ") = " + at(value, str(v)) + ";";
    line(valid.empty() ? store : "if (" + valid + ") " + store);
  }
  return true;
}

// A staged epilogue's rows at a pitch that is not 16-byte aligned (GlobalAccess::realign_rows):
// each run of 8 slots is 8 consecutive elements of a tile row, the row's next run on the next
// lane. Every lane takes its neighbour's run (a shuffle, before any branch), finds the elements
// from its run's start to the next 16-byte boundary (h, the same for the whole row) and stores
// elements h..h+7 of its run and the next as one aligned 16-byte vector; the row's first lane
// stores its elements before h, its last lane its elements from h on, element by element.
//   global_store C[%3 + i0, %14 + i1] bounds [8192, 50257] realigned rows, %27.1   ->
//     auto* const run = (C + C_start);  const int head = realign_head(run);
//     const uint4 mine = make_uint4(pack2(v[0], v[1]), ...);  const uint4 next = shuffle_down_uint4(mine);
//     if (head == 0) { 16-byte store of mine (checked) } else {
//       if (first lane of the row) elements 0..head-1 one by one
//       if (not the last lane) *reinterpret_cast<uint4*>(run + head) = realign16(mine, next, head);
//       else elements head..7 one by one }
void KernelEmitter::realigned_row_store(const Op& op, const Value& value, const WindowPlan& plan) {
  const std::string label = matile::op_label(op);
  const std::vector<int64_t>& shape = value->type.shape;
  const size_t rank = op.buffer->shape.size();
  if (!is_narrow_float(op.buffer->dtype) || shape.size() != 2 || op.access.tile_axes[rank - 1] != 1) {
    invalid(label + ": realigned rows need a 16-bit tile whose columns run along the buffer's last axis");
  }
  const int64_t columns = shape[1], threads = value->layout.threads(), slots = value->layout.slots();
  // The layout must hold runs of 8 row neighbours, the row's next run on the next lane of the warp.
  std::vector<int64_t> here, there;
  const auto at_slot = [&](int64_t t, int64_t v, std::vector<int64_t>& c) {
    matile::coordinates_into(value->layout.tv.index(t, v), shape, c);
  };
  if (slots % 8 != 0) invalid(label + ": realigned rows need runs of 8 slots");
  for (int64_t t = 0; t < threads; ++t) {
    for (int64_t v = 0; v < slots; v += 8) {
      at_slot(t, v, here);
      bool ok = here[1] % 8 == 0;
      for (int64_t k = 1; k < 8 && ok; ++k) {
        at_slot(t, v + k, there);
        ok = there[0] == here[0] && there[1] == here[1] + k;
      }
      if (ok && here[1] + 8 < columns) {
        ok = (t + 1) % matile::kWarpSize != 0;
        if (ok) {
          at_slot(t + 1, v, there);
          ok = there[0] == here[0] && there[1] == here[1] + 8;
        }
      }
      if (!ok) invalid(label + ": realigned rows: the layout does not hold a row's runs on neighbouring lanes");
    }
  }
  const int64_t bound = op.access.bounds[rank - 1];
  bool column_checked = false;
  for (const std::string& check : plan.slot_check_last) column_checked = column_checked || !check.empty();
  const auto all = [](std::initializer_list<std::string> parts) {
    std::string joined;
    for (const std::string& part : parts) {
      if (!part.empty()) joined += (joined.empty() ? "" : " && ") + part;
    }
    return joined;
  };
  const auto guarded = [&](const std::string& condition, const std::string& statement) {
    return condition.empty() ? statement : "if (" + condition + ") " + statement;
  };
  for (int64_t v = 0; v < slots; v += 8) {
    const std::vector<std::string> tile = coordinates(value, str(v), label);
    const WindowIndex w = window(op, tile);
    const std::string run = unique("run"), head = unique("head"), mine = unique("mine"),
                      next = unique("next"), column = unique("column");
    std::string words;
    for (int64_t k = 0; k < 8; k += 2) {
      words += (words.empty() ? "" : ", ") + std::string("pack2(") + at(value, str(v + k)) + ", " + at(value, str(v + k + 1)) + ")";
    }
    line("{");
    line("  auto* const " + run + " = " + plan.at(v) + ";");
    line("  const int " + head + " = realign_head(" + run + ");");
    line("  const uint4 " + mine + " = make_uint4(" + words + ");");
    line("  const uint4 " + next + " = shuffle_down_uint4(" + mine + ");");
    if (column_checked) line("  const int " + column + " = " + w.indices[rank - 1] + ";");
    const std::string& row_ok = plan.slot_check_rest[static_cast<size_t>(v)];
    // Element j of the run's row from the run's start is in bounds.
    const auto in_bounds = [&](const std::string& j) {
      return all({row_ok, column_checked ? column + " + " + j + " < " + str(bound) : ""});
    };
    const auto element = [&](const std::string& slot_offset) { return at(value, slot_offset); };
    const auto vector_store = [&](const std::string& address, const std::string& bits, const std::string& first,
                                  const std::string& indent) {
      const std::string last = first.empty() ? "7" : first + " + 7";
      const std::string whole = in_bounds(last);
      const std::string store = "*reinterpret_cast<uint4*>(" + address + ") = " + bits + ";";
      if (!column_checked) {
        line(indent + guarded(whole, store));
        return;
      }
      line(indent + "if (" + whole + ") {");
      line(indent + "  " + store);
      line(indent + "} else {");
      const char* fields[] = {"x", "y", "z", "w"};
      for (int k = 0; k < 8; ++k) {
        const std::string j = first.empty() ? str(k) : first + " + " + str(k);
        line(indent + "  " + guarded(in_bounds(j), "*reinterpret_cast<unsigned short*>(" + address + " + " + str(k) +
                                                       ") = static_cast<unsigned short>(" + bits + "." + fields[k / 2] +
                                                       (k % 2 ? " >> 16" : "") + ");"));
      }
      line(indent + "}");
    };
    line("  if (" + head + " == 0) {");
    vector_store(run, mine, "", "    ");
    line("  } else {");
    const std::string first_lane = "(" + tile[1] + ") == 0";
    const std::string last_lane = "(" + tile[1] + ") == " + str(columns - 8);
    line("    if (" + first_lane + ") {");
    for (int64_t k = 0; k < 7; ++k) {
      line("      " + guarded(all({str(k) + " < " + head, in_bounds(str(k))}), run + "[" + str(k) + "] = " + element(str(v + k)) + ";"));
    }
    line("    }");
    line("    if (!(" + last_lane + ")) {");
    const std::string shifted = unique("shifted");
    line("      const uint4 " + shifted + " = realign16(" + mine + ", " + next + ", " + head + ");");
    vector_store(run + " + " + head, shifted, head, "      ");
    line("    } else {");
    for (int64_t k = 1; k < 8; ++k) {
      line("      " + guarded(all({str(k) + " >= " + head, in_bounds(str(k))}), run + "[" + str(k) + "] = " + element(str(v + k)) + ";"));
    }
    line("    }");
    line("  }");
    line("}");
  }
}

// Window loads through a WindowPlan: checks only where an index can reach its bound, and
// unchecked runs of consecutive slots as one load of up to 16 bytes.
bool KernelEmitter::planned_window_load(const Op& op, const Value& result) {
  std::optional<WindowPlan> plan = window_plan(op, result);
  if (!plan) return false;
  const DType dtype = op.buffer->dtype;
  if (result->type.dtype != dtype) invalid(matile::op_label(op) + ": loaded dtype differs from the buffer's");
  if (dtype == DType::I4) {
    planned_int4_load(op, result, *plan);
    return true;
  }
  const std::string other = constant_of(op.constant, dtype);
  const int64_t most = is_narrow_float(dtype) ? 8 : dtype == DType::F32 ? 4 : 1;
  for (int64_t v = 0; v < result->layout.slots(); ++v) {
    const int64_t n = plan->vector(v, most);
    if (n > 1 && dtype == DType::F32) {
      const std::string type = n == 4 ? "float4" : "float2";
      const std::string bits = unique("bits");
      line("const " + type + " " + bits + " = *reinterpret_cast<const " + type + "*>(" + plan->at(v) + ");");
      const char* fields[] = {".x", ".y", ".z", ".w"};
      for (int64_t k = 0; k < n; ++k) line(at(result, str(v + k)) + " = " + bits + fields[k] + ";");
      v += n - 1;
      continue;
    }
    if (n == 2) {
      line("unpack2(*reinterpret_cast<const unsigned*>(" + plan->at(v) + "), " + at(result, str(v)) + ", " +
           at(result, str(v + 1)) + ");");
      ++v;
      continue;
    }
    if (n > 2) {
      const std::string type = n == 8 ? "uint4" : "uint2";
      const std::string bits = unique("bits");
      line("const " + type + " " + bits + " = *reinterpret_cast<const " + type + "*>(" + plan->at(v) + ");");
      const char* fields[] = {".x", ".y", ".z", ".w"};
      for (int64_t k = 0; k < n; k += 2) {
        line("unpack2(" + bits + fields[k / 2] + ", " + at(result, str(v + k)) + ", " + at(result, str(v + k + 1)) + ");");
      }
      v += n - 1;
      continue;
    }
    const std::string& valid = plan->slot_check[static_cast<size_t>(v)];
    const std::string read = "*(" + plan->at(v) + ")";
    line(at(result, str(v)) + " = " + (valid.empty() ? read : valid + " ? " + read + " : " + other) + ";");
  }
  return true;
}

// An int4 window load (the buffer packed two elements a byte, element 2j in the low nibble): a run
// of n consecutive, unchecked slots starting at an even element is n / 2 bytes at a byte offset
// that is a multiple of n / 2, read as one access of up to 16 bytes; each slot is then its
// nibble moved to the top of a 32-bit word and shifted back arithmetically (sign extension).
//   W_1[0..7] <- 8 int4 at element offset e (e % 8 == 0):
//     const unsigned bits = *reinterpret_cast<const unsigned*>(W + (e) / 2);
//     W_1[0] = static_cast<signed char>(static_cast<int>(bits << 28) >> 28);
//     W_1[1] = static_cast<signed char>(static_cast<int>(bits << 24) >> 28); ...
// A lone slot, checked or not, reads its element through int4_at.
void KernelEmitter::planned_int4_load(const Op& op, const Value& result, const WindowPlan& plan) {
  const std::string buffer = buffer_name(op.buffer);
  const std::string other = constant_of(op.constant, DType::I4);
  for (int64_t v = 0; v < result->layout.slots(); ++v) {
    const int64_t n = plan.vector(v, 32);  // 32 elements: 16 bytes
    if (n >= 2) {
      const int64_t bytes = n / 2;
      const char* type = bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : bytes == 4 ? "unsigned"
                         : bytes == 2 ? "unsigned short" : "unsigned char";
      const std::string bits = unique("bits");
      line("const " + std::string(type) + " " + bits + " = *reinterpret_cast<const " + type + "*>(" + buffer +
           " + " + plan.offset(v) + " / 2);");
      const char* fields[] = {".x", ".y", ".z", ".w"};
      std::vector<LoadedByte>& nibbles = loaded_bytes_[result.get()];
      nibbles.resize(static_cast<size_t>(result->layout.slots()));
      for (int64_t k = 0; k < n; ++k) {
        const std::string word = bytes > 4 ? bits + fields[k / 8] : "static_cast<unsigned>(" + bits + ")";
        const int64_t nibble = k % 8;
        line(at(result, str(v + k)) + " = static_cast<signed char>(static_cast<int>(" + word + " << " +
             str(28 - 4 * nibble) + ") >> 28);");
        nibbles[static_cast<size_t>(v + k)] = LoadedByte{word, 0, static_cast<int>(nibble)};
      }
      v += n - 1;
      continue;
    }
    const std::string& valid = plan.slot_check[static_cast<size_t>(v)];
    const std::string read = "nautilus_device::int4_at(" + buffer + ", " + plan.offset(v) + ")";
    line(at(result, str(v)) + " = " + (valid.empty() ? read : valid + " ? " + read + " : " + other) + ";");
  }
}

// Every value a uniform index scalar takes is a multiple of this (1 when unknown).
int64_t KernelEmitter::alignment_of(const Value& value) {
  auto found = alignments_.find(value.get());
  return found == alignments_.end() ? 1 : found->second;
}

void KernelEmitter::global_store(const Op& op) {
  const Value value = matile::stored_value(op);
  const std::vector<Value> gather = matile::gather_indices(op);
  const Value mask = matile::gather_mask(op);
  const std::string buffer = buffer_name(op.buffer);
  const DType dtype = op.buffer->dtype;
  if (value->type.dtype != dtype) invalid(matile::op_label(op) + ": stored dtype differs from the buffer's");
  if (planned_window_store(op, value)) return;
  for_slots(value->layout.slots(), [&](const std::string& s) {
    std::vector<std::string> indices;
    std::string valid;
    if (op.access.form == matile::GlobalAccess::Form::Window) {
      WindowIndex w = window(op, coordinates(value, s, matile::op_label(op)));
      indices = w.indices;
      valid = w.valid;
    } else {
      for (const Value& index : gather) indices.push_back(at(index, s));
      if (mask) valid = at(mask, s);
    }
    // Replicated holders store the same value; one of them is enough.
    auto [thread_writes, slot_writes] = single_writer(value->layout, s);
    for (const std::string& condition : {thread_writes, slot_writes}) {
      if (!condition.empty()) valid = valid.empty() ? condition : condition + " && " + valid;
    }
    const std::string store = buffer + "[" + flat_offset(op.buffer, indices) + "] = " + at(value, s) + ";";
    if (valid.empty()) {
      line(store);
    } else {
      line("if (" + valid + ") {");
      line("  " + store);
      line("}");
    }
  });
}

void KernelEmitter::async_copy(const Op& op) {
  const SharedAlloc& alloc = alloc_of(op.shared);
  const int64_t vector = op.vector_elements;
  // int4 is packed two elements a byte in global and in shared memory: a vector of 32 elements
  // is 16 bytes, at half its element offset.
  const bool packed = alloc.dtype == DType::I4;
  if (global_bytes(alloc.dtype, vector) != 16) invalid(matile::op_label(op) + ": cp.async vectors must be 16 bytes");
  if (op.access.form != matile::GlobalAccess::Form::Window) {
    unsupported(matile::op_label(op) + ": cp.async from a gather");
  }
  const std::vector<int64_t>& tile = op.tile_shape;
  const int last = static_cast<int>(tile.size()) - 1;
  const size_t rank = op.buffer->shape.size();
  if (op.access.tile_axes.size() != rank || rank == 0 ||
      op.access.tile_axes[rank - 1] != last) {
    unsupported(matile::op_label(op) + ": the copied vectors must run along the buffer's last axis");
  }
  const LayoutInfo& info = layout_info(op.copy_layout, tile, matile::op_label(op));
  const int64_t copy_threads = info.coords.threads;
  const int64_t vectors = op.copy_layout.values() / vector;
  const std::string buffer = buffer_name(op.buffer);
  const std::string destination = shared_name(alloc);
  // A tile whose rows are less than a 128-byte line of a longer buffer row (an int4 weight tile
  // of 128 k: 64 bytes a row) asks the L2 for whole lines: the 70B-class int4 decode read 64-byte
  // halves of lines as DRAM accesses of their own at 45% of the bandwidth, 52.0 µs against 36.8
  // with the hint (H200, bench/NOTES.md); tiles of 128-byte rows or more (int8 weights, attention's
  // keys) measured the same either way, and a 256-byte fetch slowed them (57.3 -> 59.6, 121.7 ->
  // 132.4 µs).
  const int64_t row_bytes = global_bytes(alloc.dtype, tile[static_cast<size_t>(last)]);
  const char* copy = row_bytes < 128 && op.buffer->shape[rank - 1] > tile[static_cast<size_t>(last)]
                         ? "cp_async_16_line("
                         : "cp_async_16(";
  std::vector<std::string> guards;
  if (op.predicate) guards.push_back(name_of(op.predicate));
  if (copy_threads < kernel_.threads()) guards.push_back("tid < " + str(copy_threads));
  if (!guards.empty()) {
    std::string condition;
    for (const std::string& g : guards) condition += (condition.empty() ? "" : " && ") + g;
    line("if (" + condition + ") {");
    ++indent_;
  }
  // Vector j starts at slot j * vector; the copies are unrolled here, each with constant slot
  // coordinates, so every address is a hoisted per-thread part plus a constant.
  SplitCoords split;
  split.threads = copy_threads;
  split.thread_exprs = info.thread_vars;
  split.thread_value = [&info](int64_t t, size_t axis) {
    return evaluate_terms(info.coords.thread_terms[axis], t);
  };
  // Per tile axis, the largest thread part (for the bounds the window can reach).
  std::vector<int64_t> thread_max(tile.size(), 0);
  for (int64_t t = 0; t < copy_threads; ++t) {
    for (size_t a = 0; a < tile.size(); ++a) thread_max[a] = std::max(thread_max[a], split.thread_value(t, a));
  }
  // The uniform part of the flat source index (the window's offsets) and the per-thread part.
  int64_t elements = 1;
  for (int64_t extent : op.buffer->shape) elements *= extent;
  const bool narrow = elements < (int64_t{1} << 31);
  std::vector<int64_t> buffer_stride(rank, 1);
  for (size_t j = rank - 1; j-- > 0;) buffer_stride[j] = buffer_stride[j + 1] * op.buffer->shape[j + 1];
  std::string uniform, per_thread;
  for (size_t j = 0; j < rank; ++j) {
    const std::string factor = buffer_stride[j] == 1 ? "" : " * " + str(buffer_stride[j]);
    if (op.access.offsets[j]) {
      uniform += (uniform.empty() ? "" : " + ") + name_of(op.access.offsets[j]) + factor;
    }
    const int a = op.access.tile_axes[j];
    if (a >= 0 && info.thread_vars[static_cast<size_t>(a)] != "0") {
      per_thread += (per_thread.empty() ? "" : " + ") + info.thread_vars[static_cast<size_t>(a)] + factor;
    }
  }
  std::string start;  // the flat index of the thread's first element (32-bit when it fits)
  if (narrow) {
    const std::string thread_name =
        per_thread.empty() ? "" : hoisted("int", buffer + "_thread", per_thread);
    start = uniform.empty() ? (thread_name.empty() ? "0" : thread_name)
                            : thread_name.empty() ? uniform : uniform + " + " + thread_name;
    if (start != "0" && start != thread_name) {
      const std::string start_name = unique(buffer + "_start");
      line("const int " + start_name + " = " + start + ";");
      start = start_name;
    }
  }
  for (int64_t j = 0; j < vectors; ++j) {
    split.constants.clear();
    for (size_t a = 0; a < tile.size(); ++a) {
      split.constants.push_back(evaluate_terms(info.coords.slot_terms[a], j * vector));
    }
    // Buffer index j: offset + thread part + constant. Checked only where it can reach the
    // bound: along the last axis the vector's end, elsewhere its index.
    std::vector<std::string> indices;
    std::string others;
    bool last_checked = false;
    int64_t constant_flat = 0;
    for (size_t b = 0; b < rank; ++b) {
      const int a = op.access.tile_axes[b];
      std::string index = op.access.offsets[b] ? name_of(op.access.offsets[b]) : "";
      int64_t reach = 0;
      if (a >= 0) {
        const size_t axis = static_cast<size_t>(a);
        const int64_t constant = split.constants[axis];
        const std::string& thread_part = info.thread_vars[axis];
        std::string coordinate = thread_part == "0" ? "" : thread_part;
        if (constant) coordinate += (coordinate.empty() ? "" : " + ") + str(constant);
        if (coordinate.empty()) coordinate = "0";
        index = index.empty() ? coordinate : index + " + " + coordinate;
        reach = thread_max[axis] + constant;
        constant_flat += constant * buffer_stride[b];
      }
      if (index.empty()) index = "0";
      indices.push_back(index);
      const std::optional<IndexRange> offset = range_given(op.access.offsets[b], op.predicate);
      const int64_t end = b + 1 == rank ? vector : 1;  // elements from the index on that must fit
      const bool in_bounds = offset && offset->hi + reach + end <= op.access.bounds[b];
      if (b + 1 == rank) {
        last_checked = !in_bounds;
      } else if (!in_bounds) {
        others += (others.empty() ? "" : " && ") + parenthesized(index) + " < " + str(op.access.bounds[b]);
      }
    }
    line("// vector " + str(j) + ": tile slot " + str(j * vector));
    const std::string destination_address = shared_address_of(op.shared, split);
    std::string pointer;
    if (packed) {
      const std::string flat = narrow ? (start == "0" ? "" : start) : flat_offset(op.buffer, indices);
      const int64_t constant = narrow ? constant_flat : 0;
      pointer = flat.empty() ? buffer : "(" + buffer + " + (" + flat + ") / 2)";
      if (constant) pointer += " + " + str(constant / 2);
    } else if (narrow) {
      pointer = start == "0" ? buffer : "(" + buffer + " + " + start + ")";
      if (constant_flat) pointer += " + " + str(constant_flat);
    } else {
      pointer = buffer + " + (" + flat_offset(op.buffer, indices) + ")";
    }
    if (others.empty() && !last_checked) {
      line(copy + destination_address + ", " + pointer + ", 16);");
      continue;
    }
    line("{");
    ++indent_;
    const std::string count = last_checked ? "max(0, min(" + str(vector) + ", " + str(op.access.bounds[rank - 1]) +
                                                 " - (" + indices[rank - 1] + ")))"
                                           : str(vector);
    line("const int valid = " + (others.empty() ? count : "(" + others + ") ? " + count + " : 0") + ";");
    line(copy + destination_address + ", valid > 0 ? " + pointer + " : " + buffer + ", " +
         (packed ? "valid / 2" : "valid * " + std::to_string(dtype_bytes(alloc.dtype))) + ");");
    --indent_;
    line("}");
  }
  if (!guards.empty()) {
    --indent_;
    line("}");
  }
}

// How many elements from slot v on one ld.shared reads at once: a power of two up to 16 bytes
// whose slots lie at consecutive offsets of the allocation in every thread, the first a multiple
// of the count, inside one group of elements the swizzle keeps together (its base) and one stage.
// A staged epilogue's row-wise read of a swizzled tile reads 16 bytes per access this way.
int64_t KernelEmitter::shared_vector(const Op& op, const Value& result, int64_t v) {
  const SharedAlloc& alloc = alloc_of(op.shared);
  const int bytes = dtype_bytes(alloc.dtype);
  const size_t rank = alloc.shape.size();
  if (op.shared.transposed || rank != result->type.shape.size() || op.shared.offsets.size() != rank) return 1;
  if (alloc.dtype != result->type.dtype || !(is_narrow_float(alloc.dtype) || alloc.dtype == DType::F32)) return 1;
  const layout::Swizzle& swizzle = alloc.layout.swizzle;
  return consecutive_run(op, result, v, 16 / bytes, [&](int64_t n) {
    return v % n == 0 && (swizzle.is_identity() || (int64_t{1} << swizzle.base) % n == 0);
  });
}

// matile::consecutive_shared_run at the allocation's strides (a hierarchical one is Unsupported).
int64_t KernelEmitter::consecutive_run(const Op& op, const Value& result, int64_t v, int64_t longest,
                                       const std::function<bool(int64_t)>& allowed) {
  const SharedAlloc& alloc = alloc_of(op.shared);
  return matile::consecutive_shared_run(alloc, op.shared, shared_strides(alloc), result->layout, result->type.shape, v,
                                        longest, allowed);
}

// The default element-wise form (Kernel::grouped_shared_reads off): runs of neighbouring slots at
// consecutive offsets as one wide read each (shared_vector), every other slot at its own
// swizzled offset.
void KernelEmitter::element_shared_load(const Op& op) {
  const Value& result = op.results[0];
  const SharedAlloc& alloc = alloc_of(op.shared);
  const std::string source = shared_name(alloc);
  declare(result);
  if (shared_vector(op, result, 0) > 1) {
    // Runs of consecutive slots as one wide read each (the first slot's address is aligned).
    const bool f32 = result->type.dtype == DType::F32;
    for (int64_t v = 0; v < result->layout.slots();) {
      const int64_t n = shared_vector(op, result, v);
      const std::string address =
          "&" + source + "[" + shared_offset(op.shared, coordinates(result, str(v), matile::op_label(op))) + "]";
      if (n == 1) {
        line(at(result, str(v)) + " = *(" + address + ");");
        v += 1;
        continue;
      }
      const int64_t words = n * dtype_bytes(result->type.dtype) / 4;
      const std::string type = f32 ? (words == 4 ? "float4" : words == 2 ? "float2" : "float")
                                   : (words == 4 ? "uint4" : words == 2 ? "uint2" : "unsigned");
      const std::string bits = unique("bits");
      line("const " + type + " " + bits + " = *reinterpret_cast<const " + type + "*>(" + address + ");");
      const char* fields[] = {".x", ".y", ".z", ".w"};
      for (int64_t w = 0; w < words; ++w) {
        const std::string word = words == 1 ? bits : bits + fields[w];
        if (f32) {
          line(at(result, str(v + w)) + " = " + word + ";");
        } else {
          line("unpack2(" + word + ", " + at(result, str(v + 2 * w)) + ", " + at(result, str(v + 2 * w + 1)) + ");");
        }
      }
      v += n;
    }
    return;
  }
  for_slots(result->layout.slots(), [&](const std::string& s) {
    line(at(result, s) + " = " + source + "[" +
         shared_offset(op.shared, coordinates(result, s, matile::op_label(op))) + "];");
  });
}

// Slot `slot`'s tile coordinates in `info`'s layout as a per-thread part and constants.
KernelEmitter::SplitCoords KernelEmitter::slot_coords(const LayoutInfo& info, int64_t slot) {
  SplitCoords split;
  split.threads = info.coords.threads;
  split.thread_exprs = info.thread_vars;
  split.thread_value = [&info](int64_t t, size_t axis) { return evaluate_terms(info.coords.thread_terms[axis], t); };
  for (const auto& terms : info.coords.slot_terms) split.constants.push_back(evaluate_terms(terms, slot));
  return split;
}

// Element `element_in_word` of a 32-bit word of loaded bits, as a value of `dtype`.
std::string KernelEmitter::element_of_bits(DType dtype, const std::string& word, int64_t element_in_word) {
  const int bytes = dtype_bytes(dtype);
  const int64_t shift = 8 * bytes * element_in_word;
  const std::string shifted = shift ? "(" + word + " >> " + str(shift) + ")" : word;
  switch (dtype) {
    case DType::F32: return "__uint_as_float(" + word + ")";
    case DType::BF16: return "__ushort_as_bfloat16(static_cast<unsigned short>(" + shifted + "))";
    case DType::F16: return "__ushort_as_half(static_cast<unsigned short>(" + shifted + "))";
    default: return "static_cast<" + std::string(c_type(dtype)) + ">(" + shifted + ")";
  }
}

// ld.shared of a register tile in the grouped form (Kernel::grouped_shared_reads): one instruction
// per group of slots (matile::shared_read_plan) at the hoisted lane part of its address plus a
// constant:
//   %W_k0 = ld.shared W_smem[%stage][0, 0] : int8[16, 64]   ->
//     W_k0[0] = static_cast<signed char>(ld_shared_s8((W_smem_addr + stage * 8192u + lane_offset_3)));
//     W_k0[1] = static_cast<signed char>(ld_shared_s8((W_smem_addr + stage * 8192u + lane_offset_3) + 64u));
//   (two slots at neighbouring bytes: const unsigned bits = ld_shared_u16(...); and one
//   element of `bits` per slot)
// An int8 tile also records which word and byte each slot came from (loaded_bytes_), for the
// widening cast that follows it (paired_int8_widening).
void KernelEmitter::shared_load(const Op& op) {
  const Value& result = op.results[0];
  if (op.shared_read != matile::SharedRead::Scalar) {
    ldmatrix(op);
    return;
  }
  if (alloc_of(op.shared).dtype == DType::I4) {
    packed_int4_shared_load(op);
    return;
  }
  if (!kernel_.grouped_shared_reads) {
    element_shared_load(op);
    return;
  }
  const SharedAlloc& alloc = alloc_of(op.shared);
  const DType dtype = result->type.dtype;
  const int bytes = dtype_bytes(dtype);
  const matile::SharedReadPlan plan =
      matile::shared_read_plan(alloc, op.shared, result->layout, result->type.shape, dtype);
  if (!plan.reads_together()) {
    element_shared_load(op);
    return;
  }
  const LayoutInfo& info = layout_info(result->layout.tv, result->type.shape, matile::op_label(op));
  declare(result);
  std::vector<LoadedByte> bytes_read(static_cast<size_t>(result->layout.slots()));
  // int8, and int4 held a signed byte an element in shared memory.
  const bool signed_bytes = is_integer_storage(dtype);
  for (const std::vector<int64_t>& group : plan.groups) {
    const std::string address = shared_address_of(op.shared, slot_coords(info, group.front()));
    const int64_t n = static_cast<int64_t>(group.size());
    if (n == 1 && (alloc.dtype != dtype || (bytes != 1 && bytes != 2 && bytes != 4) || dtype == DType::Bool)) {
      // A read that converts (an element read as another type of its width), or of a type
      // without a bits form here, keeps C++'s types.
      line(at(result, str(group.front())) + " = " + shared_name(alloc) + "[" +
           shared_offset(op.shared, coordinates(result, str(group.front()), matile::op_label(op))) + "];");
      continue;
    }
    if (n == 1) {
      const char* reader = bytes == 4 ? "ld_shared_u32" : bytes == 2 ? "ld_shared_u16"
                           : signed_bytes ? "ld_shared_s8" : "ld_shared_u8";
      line(at(result, str(group.front())) + " = " +
           element_of_bits(dtype, std::string(reader) + "(" + address + ")", 0) + ";");
      continue;
    }
    const int64_t total = n * bytes;
    const std::string bits = unique("bits");
    const char* reader = total == 16 ? "ld_shared_v4" : total == 8 ? "ld_shared_v2"
                         : total == 4 ? "ld_shared_u32" : "ld_shared_u16";
    const char* type = total == 16 ? "uint4" : total == 8 ? "uint2" : "unsigned";
    line("const " + std::string(type) + " " + bits + " = " + reader + "(" + address + ");");
    const int64_t per_word = 4 / bytes;
    const char* fields[] = {".x", ".y", ".z", ".w"};
    for (int64_t i = 0; i < n; ++i) {
      const std::string word = total > 4 ? bits + fields[i / per_word] : bits;
      line(at(result, str(group[static_cast<size_t>(i)])) + " = " + element_of_bits(dtype, word, i % per_word) + ";");
      if (signed_bytes) bytes_read[static_cast<size_t>(group[static_cast<size_t>(i)])] = {word, static_cast<int>(i % per_word)};
    }
  }
  for (const auto& [slot, source] : plan.copies) {
    line(at(result, str(slot)) + " = " + at(result, str(source)) + ";");
    if (signed_bytes) bytes_read[static_cast<size_t>(slot)] = bytes_read[static_cast<size_t>(source)];
  }
  if (signed_bytes) loaded_bytes_[result.get()] = std::move(bytes_read);
}

// A register tile read from a packed int4 allocation (two elements a byte, as cp.async copied
// them from global memory): each run of slots at consecutive element offsets, starting at a
// multiple of its length in every thread, is one ld.shared of half as many bytes (up to 16, 32
// elements), and each slot its nibble sign-extended from the word's top, as planned_int4_load
// does for global memory; the nibbles' words are recorded for the widening cast that follows
// (paired_int4_widening).
//   %W = ld.shared W_smem[%stage][0, 0] : int4[128, 128]  (a lane's 32 neighbouring k)  ->
//     const uint4 bits = ld_shared_v4((W_smem_addr + stage * 8192u + lane_offset));
//     W[0] = static_cast<signed char>(static_cast<int>(bits.x << 28) >> 28); ...
// A slot that is no such run's (a lone element, an odd start) is Unsupported: the lowering
// stages only tiles read along their packed axis in pairs or longer runs.
void KernelEmitter::packed_int4_shared_load(const Op& op) {
  const Value& result = op.results[0];
  const SharedAlloc& alloc = alloc_of(op.shared);
  const size_t rank = alloc.shape.size();
  if (op.shared.transposed || rank != result->type.shape.size() || op.shared.offsets.size() != rank) {
    unsupported(matile::op_label(op) + ": an int4 tile is read along its packed axis");
  }
  const LayoutInfo& info = layout_info(result->layout.tv, result->type.shape, matile::op_label(op));
  const int64_t slots = result->layout.slots();
  const auto run_at = [&](int64_t v) {
    return consecutive_run(op, result, v, 32, [](int64_t) { return true; });
  };
  declare(result);
  std::vector<LoadedByte>& nibbles = loaded_bytes_[result.get()];
  nibbles.resize(static_cast<size_t>(slots));
  const char* fields[] = {".x", ".y", ".z", ".w"};
  for (int64_t v = 0; v < slots;) {
    const int64_t n = run_at(v);
    if (n < 2) {
      unsupported(matile::op_label(op) + ": slot " + str(v) + " of an int4 tile is not in a run of neighbouring "
                  "elements (packed two a byte, it is read a byte or more at a time)");
    }
    const int64_t bytes = n / 2;
    const std::string bits = unique("bits");
    const std::string address = shared_address_of(op.shared, slot_coords(info, v));
    const char* reader = bytes == 16 ? "ld_shared_v4" : bytes == 8 ? "ld_shared_v2" : bytes == 4 ? "ld_shared_u32"
                         : bytes == 2 ? "ld_shared_u16" : "ld_shared_u8";
    const char* type = bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : "unsigned";
    line("const " + std::string(type) + " " + bits + " = " + reader + "(" + address + ");");
    for (int64_t k = 0; k < n; ++k) {
      const std::string word = bytes > 4 ? bits + fields[k / 8] : bits;
      const int64_t nibble = k % 8;
      line(at(result, str(v + k)) + " = static_cast<signed char>(static_cast<int>(" + word + " << " +
           str(28 - 4 * nibble) + ") >> 28);");
      nibbles[static_cast<size_t>(v + k)] = LoadedByte{word, 0, static_cast<int>(nibble)};
    }
    v += n;
  }
}

// ldmatrix.x4 as the interpreter executes it: lane 8j + r supplies the address of row r of
// matrix j; the matrices of one issue and the slots they fill follow the fragment layout.
// Every issue's row address is the lane's part (hoisted) plus a constant per (mi, k) / (k, q).
void KernelEmitter::ldmatrix(const Op& op) {
  const Value& result = op.results[0];
  const RegisterLayout& layout = result->layout;
  const bool trans = op.shared_read == matile::SharedRead::LdMatrixX4Trans;
  const int64_t R = result->type.shape[0], C = result->type.shape[1];
  const int wm = layout.warps_m, wn = layout.warps_n;
  const SharedAlloc& alloc = alloc_of(op.shared);
  if (dtype_bytes(alloc.dtype) != 2) invalid(matile::op_label(op) + ": ldmatrix reads 16-bit elements");
  uses_warp_ = true;
  declare(result);
  const std::string helper = trans ? "ldmatrix_x4_trans" : "ldmatrix_x4";
  const std::string out = name_of(result);
  SplitCoords coords;
  coords.threads = role_threads_;
  std::vector<std::string> issues;
  if (layout.kind == LayoutKind::MmaA) {
    auto expected = matile::mma_a_layout(R, C, wm, wn);
    if (!expected || *expected != layout) invalid(matile::op_label(op) + ": ldmatrix into a non-fragment layout");
    const int64_t mt = matile::mma_m_atoms(R, wm), kt = C / 16;
    // Lane 8j + r: rows m0 + 8*(j%2) + r (or m0 + 8*(j%2)), columns k0 + 8*(j/2) (+ r).
    coords.thread_exprs = {"(warp % " + std::to_string(wm) + ") * " + str(mt * 16) +
                               " + 8 * ((lane / 8) % 2)" + (trans ? "" : " + lane % 8"),
                           "8 * (lane / 16)" + std::string(trans ? " + lane % 8" : "")};
    coords.thread_value = [=](int64_t t, size_t axis) -> int64_t {
      const int64_t lane = t % 32, warp = t / 32;
      if (axis == 0) return (warp % wm) * mt * 16 + 8 * ((lane / 8) % 2) + (trans ? 0 : lane % 8);
      return 8 * (lane / 16) + (trans ? lane % 8 : 0);
    };
    line("// row addresses: swizzle((lane_row + 16 * mi) * stride + lane_col + 16 * k), the lane's");
    line("// part hoisted, one constant per (mi, k)");
    for (int64_t k = 0; k < kt; ++k) {
      for (int64_t mi = 0; mi < mt; ++mi) {
        coords.constants = {16 * mi, 16 * k};
        const std::string slot = str(8 * (mi + mt * k));
        line(helper + "(&" + out + "[" + slot + "], &" + out + "[" + slot + " + 4], " +
             shared_address_of(op.shared, coords) + ");");
      }
    }
  } else if (layout.kind == LayoutKind::MmaB) {
    auto expected = matile::mma_b_layout(R, C, wm, wn);
    if (!expected || *expected != layout) invalid(matile::op_label(op) + ": ldmatrix into a non-fragment layout");
    const int64_t kt = R / 16, nt = C / (8 * wn);
    if (nt % 2 != 0) unsupported(matile::op_label(op) + ": ldmatrix.x4 of B needs an even number of n atoms per warp");
    // Lane 8j + r: rows k0 + 8*(j%2) (+ r), columns n0 + 8*(j/2) (+ r).
    coords.thread_exprs = {"8 * ((lane / 8) % 2)" + std::string(trans ? " + lane % 8" : ""),
                           "(warp / " + std::to_string(wm) + ") * " + str(nt * 8) + " + 8 * (lane / 16)" +
                               (trans ? "" : " + lane % 8")};
    coords.thread_value = [=](int64_t t, size_t axis) -> int64_t {
      const int64_t lane = t % 32, warp = t / 32;
      if (axis == 0) return 8 * ((lane / 8) % 2) + (trans ? lane % 8 : 0);
      return (warp / wm) * nt * 8 + 8 * (lane / 16) + (trans ? 0 : lane % 8);
    };
    line("// row addresses: swizzle((lane_row + 16 * k) * stride + lane_col + 16 * q), the lane's");
    line("// part hoisted, one constant per (k, q)");
    for (int64_t k = 0; k < kt; ++k) {
      for (int64_t q = 0; q < nt / 2; ++q) {
        coords.constants = {16 * k, 16 * q};
        line(helper + "(&" + out + "[" + str(4 * (k + kt * (2 * q))) + "], &" + out + "[" +
             str(4 * (k + kt * (2 * q + 1))) + "], " + shared_address_of(op.shared, coords) + ");");
      }
    }
  } else {
    invalid(matile::op_label(op) + ": ldmatrix result is not an mma A or B fragment");
  }
}

void KernelEmitter::shared_store(const Op& op) {
  const Value& value = op.operands[0];
  const std::string target = shared_name(alloc_of(op.shared));
  if (shared_vector(op, value, 0) > 1) {
    // Runs of consecutive slots as one wide write each, as shared_load reads them: a tile staged
    // for the CUDA-core dot was stored 2 bytes per instruction, four rows of a warp on one bank.
    const bool f32 = value->type.dtype == DType::F32;
    for (int64_t v = 0; v < value->layout.slots();) {
      const int64_t n = shared_vector(op, value, v);
      const std::string address =
          "&" + target + "[" + shared_offset(op.shared, coordinates(value, str(v), matile::op_label(op))) + "]";
      if (n == 1) {
        line("*(" + address + ") = " + at(value, str(v)) + ";");
        v += 1;
        continue;
      }
      const int64_t words = n * dtype_bytes(value->type.dtype) / 4;
      std::vector<std::string> parts;
      for (int64_t w = 0; w < words; ++w) {
        parts.push_back(f32 ? at(value, str(v + w))
                            : "pack2(" + at(value, str(v + 2 * w)) + ", " + at(value, str(v + 2 * w + 1)) + ")");
      }
      const std::string type = f32 ? (words == 4 ? "float4" : words == 2 ? "float2" : "float")
                                   : (words == 4 ? "uint4" : words == 2 ? "uint2" : "unsigned");
      std::string joined;
      for (const std::string& part : parts) joined += (joined.empty() ? "" : ", ") + part;
      line("*reinterpret_cast<" + type + "*>(" + address + ") = " +
           (words == 1 ? joined : "make_" + type + "(" + joined + ")") + ";");
      v += n;
    }
    return;
  }
  for_slots(value->layout.slots(), [&](const std::string& s) {
    line(target + "[" + shared_offset(op.shared, coordinates(value, s, matile::op_label(op))) + "] = " +
         at(value, s) + ";");
  });
}

}  // namespace nautilus::codegen::detail
