// Element-wise MA ops as CUDA (Iota, Full, Unary, Binary, Compare, Logical, Select, Cast): one
// #pragma unroll loop over the result's slots, each slot combining the operands' same slot
// (every operand is in the result's layout, verified). A one-slot result (a uniform scalar,
// mostly index arithmetic) is one const definition, and interval arithmetic bounds each
// uniform index scalar so that window accesses check bounds only where an index can reach
// them. bf16/f16 math goes through float; an f32 -> bf16/f16 cast converts slot pairs with one
// cvt.rn.bf16x2.f32 (or f16x2).
//
//   %34 = exp2 %33_log2 : f32[128] #L1    ->  float v34[4];
//                                             #pragma unroll
//                                             for (int s = 0; s < 4; ++s) {
//                                               v34[s] = exp2_approx(v33_log2[s]);
//                                             }
//   %more = cmp lt %next, %c64 : bool #L0 ->  const bool more = next < c64;
//
// A comparison of two index tiles that are each one per-thread expression plus a constant per
// slot (iotas, broadcasts of uniform scalars, sums of those: the row and column indices of a
// causal or sliding-window mask) moves the per-thread parts to one side, computed once, and
// the constants to the other: one integer compare against an immediate per element instead of
// two index sums and a compare.
//
//   %49 = cmp le %47, %48 : bool[128, 128]  ->  const int v49_delta = (v9_1 + l1_c0) - (v25 + l0_c0);
//     (%47 = v25 + l0_c0 + {0, 1, 0, 1, ...},   constexpr int v49_offsets[64] = {0, 1, -8, -7, ...};
//      %48 = v9_1 + l1_c0 + {0, 0, 8, 8, ...})  v49[s] = v49_offsets[s] <= v49_delta;
#include "core/codegen/kernel_emitter.h"

#include <cstdio>

namespace nautilus::codegen::detail {

std::string KernelEmitter::unary_expression(scalar::UnaryOp unary, const std::string& x,
                                            DType dtype) {
  if (dtype == DType::Index) {
    return unary == scalar::UnaryOp::Abs ? "abs(" + x + ")" : "-" + x;
  }
  const std::string f = to_float(x, dtype);
  std::string value;
  switch (unary) {
    case scalar::UnaryOp::Neg: value = "-" + f; break;
    case scalar::UnaryOp::Exp: value = "expf(" + f + ")"; break;
    case scalar::UnaryOp::Exp2: value = (options_.approximate_exp2 ? "exp2_approx(" : "exp2f(") + f + ")"; break;
    case scalar::UnaryOp::Log: value = "logf(" + f + ")"; break;
    case scalar::UnaryOp::Log2: value = "log2f(" + f + ")"; break;
    case scalar::UnaryOp::Sqrt: value = "sqrtf(" + f + ")"; break;
    case scalar::UnaryOp::Rsqrt: value = "rsqrtf(" + f + ")"; break;
    case scalar::UnaryOp::Tanh: value = "tanhf(" + f + ")"; break;
    case scalar::UnaryOp::Sigmoid:
      value = options_.approximate_exp2 ? "sigmoid_approx(" + f + ")" : "1.0f / (1.0f + expf(-" + f + "))";
      break;
    case scalar::UnaryOp::Abs: value = "fabsf(" + f + ")"; break;
  }
  return from_float(value, dtype);
}

std::string KernelEmitter::binary_expression(scalar::BinaryOp binary, const std::string& a,
                                             const std::string& b, DType dtype) {
  using scalar::BinaryOp;
  if (dtype == DType::Index) {
    switch (binary) {
      case BinaryOp::Add: return a + " + " + b;
      case BinaryOp::Sub: return a + " - " + b;
      case BinaryOp::Mul: return a + " * " + b;
      case BinaryOp::FloorDiv: return "floor_div(" + a + ", " + b + ")";
      case BinaryOp::Mod: return "floor_mod(" + a + ", " + b + ")";
      case BinaryOp::Max: return "max(" + a + ", " + b + ")";
      case BinaryOp::Min: return "min(" + a + ", " + b + ")";
      case BinaryOp::Div: break;
    }
    invalid("division of index values");
  }
  const std::string fa = to_float(a, dtype), fb = to_float(b, dtype);
  std::string value;
  switch (binary) {
    case BinaryOp::Add: value = fa + " + " + fb; break;
    case BinaryOp::Sub: value = fa + " - " + fb; break;
    case BinaryOp::Mul: value = fa + " * " + fb; break;
    case BinaryOp::Div: value = fa + " / " + fb; break;
    case BinaryOp::Max: value = "fmaxf(" + fa + ", " + fb + ")"; break;
    case BinaryOp::Min: value = "fminf(" + fa + ", " + fb + ")"; break;
    case BinaryOp::FloorDiv:
    case BinaryOp::Mod: invalid("floor division of float values");
  }
  return from_float(value, dtype);
}

void KernelEmitter::elementwise(const Op& op) {
  const Value& result = op.results[0];
  const DType dtype = result->type.dtype;
  // A one-slot result (a uniform scalar, mostly index arithmetic) is one const definition.
  const bool scalar_form = result->layout.slots() == 1;
  if (folded_index_tiles_.count(result.get())) {
    record_affine_index(op);
    if (!affine_indices_.count(result.get())) invalid("internal: index tile %" + result->name + " has no affine form");
    return;
  }
  if (scalar_form) {
    names_[result.get()] = unique(result->name);
  } else {
    declare(result);
  }
  if (wgmma_zero_accumulators_.count(result.get())) {
    // Zeroing the registers would cost a move per slot each time (ptxas keeps them when the
    // zero sits in a register: 64 moves per QK^T in a persistent attention kernel's loop).
    line("// not written: the wgmmas that read it start with scale-d 0");
    return;
  }
  if (op.kind == OpKind::Cast && paired_narrowing(op)) return;
  if (op.kind == OpKind::Cast && paired_int8_widening(op)) return;
  if (op.kind == OpKind::Cast && paired_int4_widening(op)) return;
  if (op.kind == OpKind::Compare && affine_compare(op)) return;
  for_slots(result->layout.slots(), [&](const std::string& s) {
    const std::string target = at(result, s);
    auto operand = [&](size_t i) { return at(op.operands[i], s); };
    std::string value;
    switch (op.kind) {
      case OpKind::Iota: value = coordinates(result, s, "iota %" + result->name)[0]; break;
      case OpKind::Full: value = constant_of(op.constant, dtype); break;
      case OpKind::Unary: value = unary_expression(op.unary_op, operand(0), dtype); break;
      case OpKind::Binary:
        value = binary_expression(op.binary_op, operand(0), operand(1), dtype);
        break;
      case OpKind::Compare: {
        const DType in = op.operands[0]->type.dtype;
        const bool as_float = is_narrow_float(in) || is_narrow_storage(in);  // fp8 bytes are not numbers
        value = (as_float ? to_float(operand(0), in) : operand(0)) + " " +
                scalar::compare_op_name(op.compare_op) + " " +
                (as_float ? to_float(operand(1), in) : operand(1));
        break;
      }
      case OpKind::Logical:
        value = operand(0) + (op.logical_op == scalar::LogicalOp::And ? " && " : " || ") + operand(1);
        break;
      case OpKind::Select: value = operand(0) + " ? " + operand(1) + " : " + operand(2); break;
      case OpKind::Cast: {
        const DType from = op.operands[0]->type.dtype;
        if (from == dtype) {
          value = operand(0);
        } else if (dtype == DType::Bool) {
          value = from == DType::Index ? operand(0) + " != 0" : to_float(operand(0), from) + " != 0.0f";
        } else if (from == DType::Bool) {
          value = operand(0) + " ? " + constant_of(1.0, dtype) + " : " + constant_of(0.0, dtype);
        } else if (is_integer_storage(from) && dtype == DType::BF16) {
          value = "nautilus_device::int8_to_bf16(" + operand(0) + ")";  // exact, no rounding step
        } else {
          value = from_float(to_float(operand(0), from), dtype);
        }
        break;
      }
      default: break;
    }
    line(scalar_form ? "const " + std::string(c_type(dtype)) + " " + target + " = " + value + ";"
                     : target + " = " + value + ";");
  });
  if (scalar_form) definitions_[result.get()] = &op;
  if (scalar_form && dtype == DType::Index) track_range(op);
  if (dtype == DType::Index) record_affine_index(op);
}

// The affine form of an index value: recorded for multi-slot tiles by record_affine_index, and
// for a uniform const scalar its own name. Anything else (a loop-carried value that may change
// between its definition and a use) has none.
const KernelEmitter::AffineIndex* KernelEmitter::affine_index(const Value& value) {
  if (!value || value->type.dtype != DType::Index) return nullptr;
  auto found = affine_indices_.find(value.get());
  if (found != affine_indices_.end()) return &found->second;
  if (value->layout.slots() == 1 && definitions_.count(value.get())) {
    return &affine_indices_.emplace(value.get(), AffineIndex{name_of(value), {0}}).first->second;
  }
  return nullptr;
}

// Records the affine form of the multi-slot index tile `op` defines, where it has one: an iota
// (its thread coordinate plus the slot's coordinate), a constant, a broadcast or other slot
// table over an affine tile (register_move records those), a sum or difference of affine tiles.
void KernelEmitter::record_affine_index(const Op& op) {
  const Value& result = op.results[0];
  const int64_t slots = result->layout.slots();
  if (slots == 1 || result->type.dtype != DType::Index) return;
  AffineIndex affine;
  if (op.kind == OpKind::Iota) {
    const LayoutInfo& info = layout_info(result->layout.tv, result->type.shape, "iota %" + result->name);
    affine.base = info.thread_vars[0];
    for (int64_t v = 0; v < slots; ++v) affine.offsets.push_back(evaluate_terms(info.coords.slot_terms[0], v));
  } else if (op.kind == OpKind::Full) {
    affine.base = "0";
    affine.offsets.assign(static_cast<size_t>(slots), static_cast<int64_t>(op.constant));
  } else if (op.kind == OpKind::Binary &&
             (op.binary_op == scalar::BinaryOp::Add || op.binary_op == scalar::BinaryOp::Sub)) {
    const AffineIndex* a = affine_index(op.operands[0]);
    const AffineIndex* b = affine_index(op.operands[1]);
    if (a == nullptr || b == nullptr) return;
    const bool add = op.binary_op == scalar::BinaryOp::Add;
    affine.base = "(" + a->base + (add ? ") + (" : ") - (") + b->base + ")";
    for (int64_t v = 0; v < slots; ++v) {
      affine.offsets.push_back(add ? a->offset(v) + b->offset(v) : a->offset(v) - b->offset(v));
    }
  } else {
    return;
  }
  affine_indices_[result.get()] = std::move(affine);
}

// Whether `value` will have an affine form when it is emitted (the structural side of
// record_affine_index and affine_index, decided before anything is emitted).
bool KernelEmitter::has_affine_form(const Value& value) const {
  if (!value || value->type.dtype != DType::Index) return false;
  auto def = defining_op_.find(value.get());
  if (def == defining_op_.end()) return false;
  const Op& op = *def->second;
  if (value->layout.slots() == 1) return matile::is_elementwise(op.kind);  // a const scalar
  switch (op.kind) {
    case OpKind::Iota:
    case OpKind::Full: return true;
    case OpKind::Binary:
      return (op.binary_op == scalar::BinaryOp::Add || op.binary_op == scalar::BinaryOp::Sub) &&
             has_affine_form(op.operands[0]) && has_affine_form(op.operands[1]);
    case OpKind::Broadcast:
    case OpKind::Permute:
    case OpKind::ExtractSlice: return has_affine_form(op.operands[0]);
    default: return false;
  }
}

bool KernelEmitter::is_affine_compare(const Op& op) const {
  return op.kind == OpKind::Compare && op.results[0]->layout.slots() > 1 &&
         has_affine_form(op.operands[0]) && has_affine_form(op.operands[1]);
}

// Marks the multi-slot index tiles whose every reader is an affine compare or another marked
// tile (readers come after their operands in program order, so one backward walk decides).
void KernelEmitter::find_folded_index_tiles() {
  for (auto op = ops_in_order_.rbegin(); op != ops_in_order_.rend(); ++op) {
    for (const Value& result : (*op)->results) {
      if (!result || result->layout.slots() == 1 || !has_affine_form(result)) continue;
      auto readers = readers_.find(result.get());
      if (readers == readers_.end() || readers->second.empty()) continue;
      bool folded = true;
      for (const Op* reader : readers->second) {
        folded = folded && (is_affine_compare(*reader) ||
                            (reader->results.size() == 1 &&
                             folded_index_tiles_.count(reader->results[0].get())));
      }
      if (folded) folded_index_tiles_.insert(result.get());
    }
  }
}

// A Compare of two affine index tiles as offsets[s] <op> delta (see the header). False when
// either side has no affine form.
bool KernelEmitter::affine_compare(const Op& op) {
  const Value& result = op.results[0];
  const int64_t slots = result->layout.slots();
  if (slots == 1) return false;
  const AffineIndex* a = affine_index(op.operands[0]);
  const AffineIndex* b = affine_index(op.operands[1]);
  if (a == nullptr || b == nullptr) {
    for (const Value& operand : op.operands) {
      if (folded_index_tiles_.count(operand.get())) invalid("internal: index tile %" + operand->name + " was not written out");
    }
    return false;
  }
  const std::string delta = unique(name_of(result) + "_delta");
  line("const int " + delta + " = (" + b->base + ") - (" + a->base + ");");
  std::string entries;
  for (int64_t v = 0; v < slots; ++v) entries += (v ? ", " : "") + str(a->offset(v) - b->offset(v));
  const std::string offsets = unique(name_of(result) + "_offsets");
  line("constexpr int " + offsets + "[" + str(slots) + "] = {" + entries + "};");
  for_slots(slots, [&](const std::string& s) {
    line(at(result, s) + " = " + offsets + "[" + s + "] " + scalar::compare_op_name(op.compare_op) +
         " " + delta + ";");
  });
  return true;
}

// An f32 tile cast to bf16/f16 two slots at a time: one cvt.rn.bf16x2.f32 (or f16x2) per pair
// instead of a conversion per element and a pack before the mma. Each half is rounded to
// nearest even, as the one-element conversion does.
bool KernelEmitter::paired_narrowing(const Op& op) {
  const Value& result = op.results[0];
  const Value& source = op.operands[0];
  const int64_t slots = result->layout.slots();
  const DType dtype = result->type.dtype;
  if (source->type.dtype != DType::F32 || !is_narrow_float(dtype) || slots < 2 || slots % 2 != 0 ||
      source->layout.slots() != slots) {
    return false;
  }
  const bool bf16 = dtype == DType::BF16;
  line("#pragma unroll");
  line("for (int s = 0; s < " + str(slots) + "; s += 2) {");
  line(std::string("  const ") + (bf16 ? "__nv_bfloat162" : "__half2") + " pair = " +
       (bf16 ? "__floats2bfloat162_rn(" : "__floats2half2_rn(") + at(source, "s") + ", " + at(source, "s + 1") + ");");
  line("  " + at(result, "s") + " = pair.x;");
  line("  " + at(result, "s + 1") + " = pair.y;");
  line("}");
  return true;
}

// An int8 -> bf16 cast of a tile that a grouped shared read loaded just before (loaded_bytes_)
// widens slot pairs with int8x2_to_bf16x2 (prelude: one prmt, two lop3 and one bf16x2 fma per
// pair, against an add, a subtraction and a shift per element one by one), taking the bytes
// straight from the words they arrived in. A slot read on its own gives its low byte.
//   %W_bf16_k0 = cast %W_k0 : bf16[16, 128]  ->
//     unpack2(int8x2_to_bf16x2(bits_16, bits_17, 0x4400u), W_bf16_k0[0], W_bf16_k0[1]);
//   (bits_16 and bits_17: the words of k rows 2t and 2t + 1, byte 0 of each)
// The element-wise reads keep the per-element widening: with each byte its own ld.shared.s8,
// pairing them measured slower on the 70B-class decode (98.6 µs against 94.5 for 1 x 64 x 128
// tiles, 104.0 against 94.9 for 1 x 128 x 128; H200, 2026-11-29).
bool KernelEmitter::paired_int8_widening(const Op& op) {
  const Value& result = op.results[0];
  const Value& source = op.operands[0];
  const int64_t slots = result->layout.slots();
  auto loaded = previous_loaded_bytes_.find(source.get());
  if (source->type.dtype != DType::I8 || result->type.dtype != DType::BF16 || slots < 2 || slots % 2 != 0 ||
      source->layout.slots() != slots || loaded == previous_loaded_bytes_.end()) {
    return false;
  }
  auto byte_of = [&](int64_t slot) {
    const LoadedByte& byte = loaded->second[static_cast<size_t>(slot)];
    if (!byte.word.empty()) return byte;
    return LoadedByte{"static_cast<unsigned>(" + at(source, str(slot)) + ")", 0};
  };
  for (int64_t s = 0; s < slots; s += 2) {
    const LoadedByte low = byte_of(s), high = byte_of(s + 1);
    // Result bytes 0 and 2 take the two values' bytes (selectors 0-3 name a's bytes, 4-7 b's);
    // bytes 1 and 3 are masked off.
    const unsigned selector = static_cast<unsigned>(low.byte) * 0x11u + static_cast<unsigned>(4 + high.byte) * 0x1100u;
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%04xu", selector);
    line("unpack2(int8x2_to_bf16x2(" + low.word + ", " + high.word + ", " + hex + "), " + at(result, str(s)) + ", " +
         at(result, str(s + 1)) + ");");
  }
  return true;
}

// An int4 -> bf16 (or f16) cast of a tile read in runs from global memory (planned_int4_load,
// possibly through a register move) widens slot pairs with int4x2_to_bf16x2 (prelude: one
// prmt, one lop3 and one fma per pair, against two shifts, an add, a subtraction and a shift
// per element one by one), taking the nibbles straight from the words they arrived in. An mma
// operand pairs k and k + 1, a byte's two nibbles, as the interleaved k steps of a weight
// W[N, K] read them (layouts.h, interleaved_k):
//   %W_bf16 = cast %W : bf16[128, 128]  ->
//     unpack2(int4x2_to_bf16x2(bits_8.x, (bits_8.x >> 4), 0x4400u), W_bf16[0], W_bf16[1]);
// A slot read on its own gives its own low nibble.
bool KernelEmitter::paired_int4_widening(const Op& op) {
  const Value& result = op.results[0];
  const Value& source = op.operands[0];
  const int64_t slots = result->layout.slots();
  const DType dtype = result->type.dtype;
  auto loaded = previous_loaded_bytes_.find(source.get());
  if (source->type.dtype != DType::I4 || (dtype != DType::BF16 && dtype != DType::F16) || slots < 2 ||
      slots % 2 != 0 || source->layout.slots() != slots || loaded == previous_loaded_bytes_.end()) {
    return false;
  }
  // The word whose byte `byte` holds the slot's nibble in its low four bits.
  auto nibble_of = [&](int64_t slot) -> std::pair<std::string, int> {
    const LoadedByte& loaded_nibble = loaded->second[static_cast<size_t>(slot)];
    if (loaded_nibble.word.empty() || loaded_nibble.nibble < 0) {
      return {"static_cast<unsigned>(" + at(source, str(slot)) + ")", 0};
    }
    const int nibble = loaded_nibble.nibble;
    return {nibble % 2 == 0 ? loaded_nibble.word : "(" + loaded_nibble.word + " >> 4)", nibble / 2};
  };
  const std::string widen = dtype == DType::BF16 ? "int4x2_to_bf16x2(" : "int4x2_to_f16x2(";
  for (int64_t s = 0; s < slots; s += 2) {
    const auto [low_word, low_byte] = nibble_of(s);
    const auto [high_word, high_byte] = nibble_of(s + 1);
    // Result bytes 0 and 2 take the low and the high nibble's bytes (selectors 0-3 name the first
    // word's bytes, 4-7 the second's); bytes 1 and 3 are masked off.
    const unsigned selector = static_cast<unsigned>(low_byte) * 0x11u + static_cast<unsigned>(4 + high_byte) * 0x1100u;
    char hex[16];
    std::snprintf(hex, sizeof hex, "0x%04xu", selector);
    line("unpack2(" + widen + low_word + ", " + high_word + ", " + hex + "), " + at(result, str(s)) + ", " +
         at(result, str(s + 1)) + ");");
  }
  return true;
}

// The range of `value` when `predicate` (a uniform Bool scalar) holds: a comparison of an
// index with a bound narrows that index, and everything computed from it is re-derived.
std::optional<IndexRange> KernelEmitter::range_given(const Value& value, const Value& predicate) {
  std::map<const matile::ValueNode*, IndexRange> narrowed;
  auto def = predicate ? definitions_.find(predicate.get()) : definitions_.end();
  if (def != definitions_.end() && def->second->kind == OpKind::Compare) {
    const Op& compare = *def->second;
    const auto a = range_of(compare.operands[0]), b = range_of(compare.operands[1]);
    if (a && b) {
      switch (compare.compare_op) {
        case scalar::CompareOp::LT: narrowed[compare.operands[0].get()] = {a->lo, std::min(a->hi, b->hi - 1)}; break;
        case scalar::CompareOp::LE: narrowed[compare.operands[0].get()] = {a->lo, std::min(a->hi, b->hi)}; break;
        case scalar::CompareOp::GT: narrowed[compare.operands[1].get()] = {b->lo, std::min(b->hi, a->hi - 1)}; break;
        case scalar::CompareOp::GE: narrowed[compare.operands[1].get()] = {b->lo, std::min(b->hi, a->hi)}; break;
        default: break;
      }
    }
  }
  if (narrowed.empty()) return range_of(value);
  std::function<std::optional<IndexRange>(const Value&, int)> derive =
      [&](const Value& v, int depth) -> std::optional<IndexRange> {
    if (!v) return IndexRange{0, 0};
    auto found = narrowed.find(v.get());
    if (found != narrowed.end()) return found->second;
    auto op = definitions_.find(v.get());
    if (depth > 16 || op == definitions_.end() || op->second->kind != OpKind::Binary) return range_of(v);
    const auto a = derive(op->second->operands[0], depth + 1), b = derive(op->second->operands[1], depth + 1);
    if (!a || !b) return std::nullopt;
    return binary_range(op->second->binary_op, *a, *b);
  };
  return derive(value, 0);
}

// The range of a uniform index scalar defined by `op`, when interval arithmetic bounds it.
void KernelEmitter::track_range(const Op& op) {
  const matile::ValueNode* result = op.results[0].get();
  if (op.kind == OpKind::Full) {
    const auto value = static_cast<int64_t>(op.constant);
    ranges_[result] = {value, value};
    alignments_[result] = value == 0 ? int64_t{1} << 30 : std::abs(value);
    return;
  }
  if (op.kind == OpKind::Binary && op.operands.size() == 2) {
    const int64_t a = alignment_of(op.operands[0]), b = alignment_of(op.operands[1]);
    switch (op.binary_op) {
      case scalar::BinaryOp::Add:
      case scalar::BinaryOp::Sub: alignments_[result] = std::gcd(a, b); break;
      case scalar::BinaryOp::Mul: alignments_[result] = a * b <= (int64_t{1} << 30) ? a * b : a; break;
      default: break;
    }
  }
  auto range_of = [&](size_t i) -> std::optional<IndexRange> {
    auto found = ranges_.find(op.operands[i].get());
    if (found == ranges_.end()) return std::nullopt;
    return found->second;
  };
  if (op.kind == OpKind::Binary && op.operands.size() == 2) {
    const auto a = range_of(0), b = range_of(1);
    if (!a || !b) return;
    if (auto range = binary_range(op.binary_op, *a, *b)) ranges_[result] = *range;
  } else if (op.kind == OpKind::Cast && op.operands[0]->type.dtype == DType::Index) {
    if (auto a = range_of(0)) ranges_[result] = *a;
  }
}

// The largest value of a uniform index scalar, proven case by case over the few grid variables
// it depends on (directly or through a loop's trip count): with each fixed, a loop variable runs
// below its trip count in that CTA. Interval arithmetic alone loses that relation: a split
// reduction's unmasked loop runs fewer whole tiles in the last split (`c_s * 8192 + c_o * 1024`
// with `c_o < (30976 - 8192 * c_s) / 1024 + 1`), and only the case split shows every tile of
// every split in bounds. nullopt when unbounded or when the cases would be too many.
std::optional<int64_t> KernelEmitter::largest_by_grid_cases(const Value& value) {
  constexpr int64_t kMostCases = 64;
  std::vector<const matile::ValueNode*> grid;
  std::set<const matile::ValueNode*> seen;
  std::function<void(const Value&, int)> collect = [&](const Value& v, int depth) {
    if (!v || depth > 32 || !seen.insert(v.get()).second) return;
    if (grid_extents_.count(v.get())) {
      grid.push_back(v.get());
      return;
    }
    auto loop = loop_of_var_.find(v.get());
    if (loop != loop_of_var_.end()) {
      collect(loop->second->trip_count, depth + 1);
      return;
    }
    auto def = definitions_.find(v.get());
    if (def == definitions_.end()) return;
    for (const Value& operand : def->second->operands) collect(operand, depth + 1);
  };
  collect(value, 0);
  int64_t cases = 1;
  for (const matile::ValueNode* g : grid) {
    cases *= grid_extents_.at(g);
    if (cases > kMostCases) return std::nullopt;
  }
  std::map<const matile::ValueNode*, int64_t> fixed;
  std::function<std::optional<IndexRange>(const Value&, int)> derive =
      [&](const Value& v, int depth) -> std::optional<IndexRange> {
    if (!v) return IndexRange{0, 0};
    auto pinned = fixed.find(v.get());
    if (pinned != fixed.end()) return IndexRange{pinned->second, pinned->second};
    if (depth > 32) return range_of(v);
    auto loop = loop_of_var_.find(v.get());
    if (loop != loop_of_var_.end()) {
      const Op& for_op = *loop->second;
      IndexRange r{0, for_op.extent - 1};
      if (for_op.trip_count) {
        if (auto trips = derive(for_op.trip_count, depth + 1)) r.hi = std::min(r.hi, std::max<int64_t>(trips->hi - 1, 0));
      }
      return r;
    }
    auto def = definitions_.find(v.get());
    if (def == definitions_.end()) return range_of(v);
    const Op& op = *def->second;
    if (op.kind == OpKind::Binary && op.operands.size() == 2) {
      const auto a = derive(op.operands[0], depth + 1), b = derive(op.operands[1], depth + 1);
      if (!a || !b) return std::nullopt;
      return binary_range(op.binary_op, *a, *b);
    }
    if (op.kind == OpKind::Cast && op.operands.size() == 1 && op.operands[0]->type.dtype == DType::Index) {
      return derive(op.operands[0], depth + 1);
    }
    return range_of(v);
  };
  std::optional<int64_t> largest;
  for (int64_t c = 0; c < cases; ++c) {
    int64_t rest = c;
    for (const matile::ValueNode* g : grid) {
      fixed[g] = rest % grid_extents_.at(g);
      rest /= grid_extents_.at(g);
    }
    const std::optional<IndexRange> r = derive(value, 0);
    if (!r) return std::nullopt;
    largest = largest ? std::max(*largest, r->hi) : r->hi;
  }
  return largest;
}

std::optional<IndexRange> KernelEmitter::range_of(const Value& value) {
  if (!value) return IndexRange{0, 0};
  auto found = ranges_.find(value.get());
  if (found == ranges_.end()) return std::nullopt;
  return found->second;
}

}  // namespace nautilus::codegen::detail
