// Dot products as CUDA. Mma: the accumulator is copied into the result, then each warp issues
// mma.sync.aligned.m16n8k16 (inline PTX in the prelude) per k step and per (m, n) atom of its
// warp tile, the fragments addressed by constant offsets into the operands' slot arrays.
// FmaDot, the CUDA-core path for what mma.sync cannot do: every accumulator slot is an fmaf
// chain over k in increasing order, reading both operands from shared memory.
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
  auto lb = matile::mma_b_layout(K, N, wm, wn);
  auto lc = matile::mma_c_layout(M, N, wm, wn);
  if (!la || !lb || !lc || a->layout != *la || b->layout != *lb || c->layout != *lc ||
      result->layout != *lc) {
    invalid(matile::op_label(op) + ": operands are not in the mma.sync fragment layouts");
  }
  const int64_t mt = matile::mma_m_atoms(M, wm), kt = K / 16, nt = N / (8 * wn);
  declare(result);
  for_slots(result->layout.slots(), [&](const std::string& s) { line(at(result, s) + " = " + at(c, s) + ";"); });
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
  for_slots(result->layout.slots(), [&](const std::string& s) {
    const std::vector<std::string> c = coordinates(result, s, matile::op_label(op));
    line("{");
    ++indent_;
    line("float sum = " + at(acc, s) + ";");
    line("for (int k = 0; k < " + str(K) + "; ++k) {");
    ++indent_;
    line("sum = fmaf(" + to_float(a_name + "[" + shared_offset(op.shared, {c[0], "k"}) + "]", a_alloc.dtype) +
         ", " + to_float(b_name + "[" + shared_offset(op.shared_b, {"k", c[1]}) + "]", b_alloc.dtype) +
         ", sum);");
    --indent_;
    line("}");
    line(at(result, s) + " = sum;");
    --indent_;
    line("}");
  });
}

}  // namespace nautilus::codegen::detail
