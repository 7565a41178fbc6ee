// Dot products as CUDA. Mma: the accumulator is copied into the result, then each warp issues
// mma.sync.aligned.m16n8k16 (inline PTX in the prelude) per k step and per (m, n) atom of its
// warp tile, the fragments addressed by constant offsets into the operands' slot arrays; a
// swapped Mma (a short A) issues one instruction per pair of B's n8 atoms, B's fragments as the
// instruction's A and A's as its B (mma_m16n8k16_swapped).
// FmaDot, the CUDA-core path for what mma.sync cannot do (an N of 8, f32 operands): every
// accumulator slot is an fmaf chain over k in increasing order, reading both operands from
// shared memory; slots run in groups of up to 4 that share the k loop (their B loads and the
// pipeline), and A is read 16 bytes at a time along k where its rows allow.
//
//   %G = fma_dot G_a[0, 0], G_b[0, 0], %zero   ->  for (int k = 0; k < 256; k += 8) {
//     : f32[64, 8] (4 slots per thread)               const uint4 a0_bits = *(uint4*)&G_a[row0 * 256 + k];
//                                                     ... a1..a3, b0[v] = G_b[(k + v) * 8 + col]
//                                                     for (int v = 0; v < 8; ++v)
//                                                       sum0 = fmaf(a0[v], b0[v], sum0); ... sum3
//                                                   }
//
//   %27_k0 = mma.m16n8k16 %Q_k0, %25_k0,  ->  float v27_k0[64];
//     %27_zero warps(4, 1)                    for (int s = 0; s < 64; ++s) v27_k0[s] = v27_zero[s];
//     : f32[128, 64] #L3                      for (int k = 0; k < 1; ++k)
//                                               for (int mi = 0; mi < 2; ++mi)
//                                                 for (int ni = 0; ni < 8; ++ni)
//                                                   mma_m16n8k16(&v27_k0[4 * (mi + 2 * ni)],
//                                                                &Q_k0[8 * (mi + 2 * k)],
//                                                                &v25_k0[4 * (k + 1 * ni)]);
#include "core/codegen/kernel_emitter.h"

namespace nautilus::codegen::detail {

void KernelEmitter::mma(const Op& op) {
  const Value &a = op.operands[0], &b = op.operands[1], &c = op.operands[2];
  const Value& result = op.results[0];
  const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
  const int wm = op.warps_m, wn = op.warps_n;
  if (a->type.dtype != b->type.dtype || !is_narrow_float(a->type.dtype)) {
    unsupported(matile::op_label(op) + ": mma.sync needs bf16 or f16 operands of one dtype");
  }
  auto la = matile::mma_a_layout(M, K, wm, wn);
  auto lb = matile::mma_b_layout(K, N, wm, wn, b->layout.column_interleave);
  auto lc = op.swapped ? matile::mma_swapped_c_layout(M, N, wn)
                       : matile::mma_c_layout(M, N, wm, wn, b->layout.column_interleave);
  if (!la || !lb || !lc || a->layout != *la || b->layout != *lb || c->layout != *lc ||
      result->layout != *lc) {
    invalid(matile::op_label(op) + ": operands are not in the mma.sync fragment layouts");
  }
  const int64_t mt = matile::mma_m_atoms(M, wm), kt = K / 16, nt = N / (8 * wn);
  declare(result);
  for_slots(result->layout.slots(), [&](const std::string& s) { line(at(result, s) + " = " + at(c, s) + ";"); });
  if (op.swapped) {
    // Instruction j takes B's n8 atoms 2j and 2j + 1 as its rows and A's row(s) as its columns.
    line("// " + matile::instruction_name(op) + ", swapped: per warp " + str(nt / 2) + " instructions, " +
         str(kt) + " k steps");
    line("#pragma unroll");
    line("for (int k = 0; k < " + str(kt) + "; ++k) {");
    line("#pragma unroll");
    line("  for (int j = 0; j < " + str(nt / 2) + "; ++j) {");
    line("    mma_m16n8k16_swapped(&" + name_of(result) + "[4 * j], &" + name_of(b) + "[4 * (k + " + str(kt) +
         " * (2 * j))], &" + name_of(b) + "[4 * (k + " + str(kt) + " * (2 * j + 1))], &" + name_of(a) + "[8 * k]);");
    line("  }");
    line("}");
    return;
  }
  line("// " + matile::instruction_name(op) + ": per warp " + str(mt) + " x " + str(nt) +
       " atoms, " + str(kt) + " k steps");
  line("#pragma unroll");
  line("for (int k = 0; k < " + str(kt) + "; ++k) {");
  line("#pragma unroll");
  line("  for (int mi = 0; mi < " + str(mt) + "; ++mi) {");
  line("#pragma unroll");
  line("    for (int ni = 0; ni < " + str(nt) + "; ++ni) {");
  line("      mma_m16n8k16(&" + name_of(result) + "[4 * (mi + " + str(mt) + " * ni)], &" + name_of(a) +
       "[8 * (mi + " + str(mt) + " * k)], &" + name_of(b) + "[4 * (k + " + str(kt) + " * ni)]);");
  line("    }");
  line("  }");
  line("}");
}

void KernelEmitter::fma_dot(const Op& op) {
  const Value& acc = op.operands[0];
  const Value& result = op.results[0];
  const SharedAlloc& a_alloc = alloc_of(op.shared);
  const SharedAlloc& b_alloc = alloc_of(op.shared_b);
  const int64_t K = op.shared.transposed ? a_alloc.shape[0] - op.shared.offsets[0]
                                         : a_alloc.shape[1] - op.shared.offsets[1];
  declare(result);
  const std::string a_name = shared_name(a_alloc), b_name = shared_name(b_alloc);
  const int64_t slots = result->layout.slots();

  // A row of A is read 16 bytes at a time along k when it is contiguous and aligned there (an
  // unswizzled row-major scratch whose rows and window start are multiples of 16 bytes): one
  // vector load per 8 bf16 instead of 8 loads, each of which the threads of a warp that share
  // the row broadcast. A shared read costs a wavefront per distinct 4-byte bank word group, so
  // the scalar form paid a whole wavefront (or several, when rows of a warp share banks) per
  // multiply-add.
  const int element_bytes = dtype_bytes(a_alloc.dtype);
  int64_t vector = 1;
  if (!op.shared.transposed && a_alloc.layout.swizzle.is_identity() && a_alloc.shape.size() == 2 &&
      !op.shared.stage) {
    const std::vector<int64_t> strides = shared_strides(a_alloc);
    const int64_t candidate = 16 / element_bytes;
    if (strides[1] == 1 && strides[0] % candidate == 0 && op.shared.offsets[1] % candidate == 0 &&
        K % candidate == 0 && a_alloc.byte_offset % 16 == 0) {
      vector = candidate;
    }
  }
  // Slots run in groups that share the k loop: each step loads every slot's A run and each
  // distinct column of B once, then issues the group's multiply-adds, so the group's chains are
  // independent work for the pipeline. Every slot still sums over k in increasing order (the
  // interpreter's order).
  int64_t group = 1;
  for (int64_t g : {4, 2}) {
    if (slots % g == 0) {
      group = g;
      break;
    }
  }
  const std::string label = matile::op_label(op);
  const auto slot_of = [&](int64_t j) {
    return slots == 1 ? std::string("0") : group == slots ? str(j) : "(g * " + str(group) + " + " + str(j) + ")";
  };
  const auto slot_value = [&](const Value& value, int64_t j) {
    return value->layout.slots() == 1 ? name_of(value) : name_of(value) + "[" + slot_of(j) + "]";
  };
  const bool grouped_loop = group != slots;
  if (grouped_loop) {
    line("#pragma unroll");
    line("for (int g = 0; g < " + str(slots / group) + "; ++g) {");
    ++indent_;
  }
  line("{");
  ++indent_;
  std::vector<std::vector<std::string>> coords;
  for (int64_t j = 0; j < group; ++j) {
    coords.push_back(coordinates(result, slot_of(j), label));
    line("float sum" + str(j) + " = " + slot_value(acc, j) + ";");
  }
  // The distinct columns of B the group reads (slots of one thread often share theirs).
  std::vector<std::string> columns;
  std::vector<size_t> column_of;
  for (int64_t j = 0; j < group; ++j) {
    auto found = std::find(columns.begin(), columns.end(), coords[static_cast<size_t>(j)][1]);
    column_of.push_back(static_cast<size_t>(found - columns.begin()));
    if (found == columns.end()) columns.push_back(coords[static_cast<size_t>(j)][1]);
  }
  line("for (int k = 0; k < " + str(K) + "; k += " + str(vector) + ") {");
  ++indent_;
  for (int64_t j = 0; j < group; ++j) {
    const std::string a_index = shared_offset(op.shared, {coords[static_cast<size_t>(j)][0], "k"});
    if (vector > 1) {
      line("const uint4 a" + str(j) + "_bits = *reinterpret_cast<const uint4*>(&" + a_name + "[" +
           a_index + "]);");
      line("const " + std::string(c_type(a_alloc.dtype)) + "* const a" + str(j) +
           " = reinterpret_cast<const " + c_type(a_alloc.dtype) + "*>(&a" + str(j) + "_bits);");
    } else {
      line("const " + std::string(c_type(a_alloc.dtype)) + "* const a" + str(j) + " = &" + a_name +
           "[" + a_index + "];");
    }
  }
  for (size_t c = 0; c < columns.size(); ++c) {
    line("float b" + str(static_cast<int64_t>(c)) + "[" + str(vector) + "];");
    line("#pragma unroll");
    line("for (int v = 0; v < " + str(vector) + "; ++v) {");
    line("  b" + str(static_cast<int64_t>(c)) + "[v] = " +
         to_float(b_name + "[" + shared_offset(op.shared_b, {"k + v", columns[c]}) + "]", b_alloc.dtype) +
         ";");
    line("}");
  }
  line("#pragma unroll");
  line("for (int v = 0; v < " + str(vector) + "; ++v) {");
  ++indent_;
  for (int64_t j = 0; j < group; ++j) {
    line("sum" + str(j) + " = fmaf(" + to_float("a" + str(j) + "[v]", a_alloc.dtype) + ", b" +
         str(static_cast<int64_t>(column_of[static_cast<size_t>(j)])) + "[v], sum" + str(j) + ");");
  }
  --indent_;
  line("}");
  --indent_;
  line("}");
  for (int64_t j = 0; j < group; ++j) line(slot_value(result, j) + " = sum" + str(j) + ";");
  --indent_;
  line("}");
  if (grouped_loop) {
    --indent_;
    line("}");
  }
}

}  // namespace nautilus::codegen::detail
