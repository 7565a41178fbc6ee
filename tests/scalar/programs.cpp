#include "tests/scalar/programs.h"

#include <cmath>
#include <string_view>

namespace nautilus::scalar::test_ir {

Stmt nest(const std::vector<Loop>& loops, Stmt body, Provenance provenance) {
  for (size_t i = loops.size(); i-- > 0;) {
    body = make_for(loops[i].var, loops[i].extent, std::move(body), provenance);
  }
  return body;
}

Gemm make_gemm_buffers(int64_t M, int64_t N, int64_t K) {
  return {M,
          N,
          K,
          make_buffer("A", {M, K}, DType::F32, MemoryScope::Global, BufferRole::Input),
          make_buffer("B", {K, N}, DType::F32, MemoryScope::Global, BufferRole::Input),
          make_buffer("C", {M, N}, DType::F32, MemoryScope::Global, BufferRole::Output)};
}

Stmt gemm_block(const Gemm& gemm, Expr bm, Expr bn, Expr bk, Expr predicate) {
  Var m = make_var("m"), n = make_var("n"), k = make_var("k");
  Stmt init = make_store(gemm.C, {v(m), v(n)}, f32(0.0));
  Stmt body = make_store(gemm.C, {v(m), v(n)},
                         add(at(gemm.C, {v(m), v(n)}),
                             mul(at(gemm.A, {v(m), v(k)}), at(gemm.B, {v(k), v(n)}))));
  return make_block("C", {spatial(m, gemm.M), spatial(n, gemm.N), reduce(k, gemm.K)},
                    {std::move(bm), std::move(bn), std::move(bk)}, std::move(predicate),
                    std::move(init), std::move(body));
}

Program gemm_program(const Gemm& gemm, Stmt body) {
  return Program{"gemm", {gemm.A, gemm.B, gemm.C}, {}, std::move(body)};
}

Program gemm_plain(int64_t M, int64_t N, int64_t K) {
  Gemm gemm = make_gemm_buffers(M, N, K);
  Var m = make_var("m"), n = make_var("n"), k = make_var("k");
  return gemm_program(gemm, nest({{m, M}, {n, N}, {k, K}}, gemm_block(gemm, v(m), v(n), v(k))));
}

Program gemm_split_k(int64_t M, int64_t N, int64_t K) {
  Gemm gemm = make_gemm_buffers(M, N, K);
  Var m = make_var("m"), n = make_var("n"), ko = make_var("ko"), ki = make_var("ki");
  Expr k = add(mul(v(ko), i64(8)), v(ki));
  return gemm_program(gemm, nest({{m, M}, {n, N}, {ko, K / 8}, {ki, 8}},
                                 gemm_block(gemm, v(m), v(n), k)));
}

Program gemm_reduction_outermost(int64_t M, int64_t N, int64_t K) {
  Gemm gemm = make_gemm_buffers(M, N, K);
  Var m = make_var("m"), n = make_var("n"), k = make_var("k");
  return gemm_program(gemm, nest({{k, K}, {m, M}, {n, N}}, gemm_block(gemm, v(m), v(n), v(k))));
}

Program gemm_split_predicated(int64_t M, int64_t N, int64_t K) {
  Gemm gemm = make_gemm_buffers(M, N, K);
  Var mo = make_var("mo"), mi = make_var("mi"), ko = make_var("ko"), ki = make_var("ki");
  Var n = make_var("n");
  Expr m_index = add(mul(v(mo), i64(8)), v(mi));
  Expr k_index = add(mul(v(ko), i64(8)), v(ki));
  Expr predicate = logical(LogicalOp::And, lt(m_index, i64(M)), lt(k_index, i64(K)));
  const int64_t m_tiles = (M + 7) / 8, k_tiles = (K + 7) / 8;
  return gemm_program(gemm, nest({{mo, m_tiles}, {ko, k_tiles}, {n, N}, {mi, 8}, {ki, 8}},
                                 gemm_block(gemm, m_index, v(n), k_index, predicate)));
}

const char* const kSoftmaxSpec =
    "# Softmax over rows\n"
    "input X[R, C] : f32\n"
    "Mx[r] = max(c) X[r, c]\n"
    "E[r, c] = exp(X[r, c] - Mx[r])\n"
    "L[r] = sum(c) E[r, c]\n"
    "output Y[r, c] : f32 = E[r, c] / L[r]\n";

namespace {

// Provenance of spec statement `statement` whose line starts with `line_prefix`.
Provenance provenance_of(const SourceFile* source, int statement, std::string_view line_prefix) {
  if (!source) return {statement, {}};
  const size_t begin = source->text().find(line_prefix);
  const size_t end = source->text().find('\n', begin);
  return {statement, SourceRange::at(static_cast<uint32_t>(begin), static_cast<uint32_t>(end))};
}

}  // namespace

Program softmax_program(int64_t R, int64_t C, const SourceFile* source) {
  const Provenance px = provenance_of(source, 0, "input X");
  const Provenance pmx = provenance_of(source, 1, "Mx[r]");
  const Provenance pe = provenance_of(source, 2, "E[r, c]");
  const Provenance pl = provenance_of(source, 3, "L[r]");
  const Provenance py = provenance_of(source, 4, "output Y");
  auto global = [](const char* name, std::vector<int64_t> shape, BufferRole role,
                   Provenance provenance) {
    return make_buffer(name, std::move(shape), DType::F32, MemoryScope::Global, role, provenance);
  };
  Buffer X = global("X", {R, C}, BufferRole::Input, px);
  Buffer Y = global("Y", {R, C}, BufferRole::Output, py);
  Buffer Mx = global("Mx", {R}, BufferRole::Intermediate, pmx);
  Buffer E = global("E", {R, C}, BufferRole::Intermediate, pe);
  Buffer L = global("L", {R}, BufferRole::Intermediate, pl);

  std::vector<Stmt> nests;
  {  // Mx[r] = max(c) X[r, c]
    Var lr = make_var("r"), lc = make_var("c"), r = make_var("r"), c = make_var("c");
    Stmt block = make_block(
        "Mx", {spatial(r, R), reduce(c, C)}, {v(lr), v(lc)}, nullptr,
        make_store(Mx, {v(r)}, float_imm(-INFINITY, DType::F32), pmx),
        make_store(Mx, {v(r)}, max_of(at(Mx, {v(r)}), at(X, {v(r), v(c)})), pmx), pmx);
    nests.push_back(nest({{lr, R}, {lc, C}}, block, pmx));
  }
  {  // E[r, c] = exp(X[r, c] - Mx[r])
    Var lr = make_var("r"), lc = make_var("c"), r = make_var("r"), c = make_var("c");
    Stmt block = make_block(
        "E", {spatial(r, R), spatial(c, C)}, {v(lr), v(lc)}, nullptr, nullptr,
        make_store(E, {v(r), v(c)}, unary(UnaryOp::Exp, sub(at(X, {v(r), v(c)}), at(Mx, {v(r)}))),
                   pe),
        pe);
    nests.push_back(nest({{lr, R}, {lc, C}}, block, pe));
  }
  {  // L[r] = sum(c) E[r, c]
    Var lr = make_var("r"), lc = make_var("c"), r = make_var("r"), c = make_var("c");
    Stmt block = make_block("L", {spatial(r, R), reduce(c, C)}, {v(lr), v(lc)}, nullptr,
                            make_store(L, {v(r)}, f32(0.0), pl),
                            make_store(L, {v(r)}, add(at(L, {v(r)}), at(E, {v(r), v(c)})), pl),
                            pl);
    nests.push_back(nest({{lr, R}, {lc, C}}, block, pl));
  }
  {  // Y[r, c] = E[r, c] / L[r]
    Var lr = make_var("r"), lc = make_var("c"), r = make_var("r"), c = make_var("c");
    Stmt block = make_block("Y", {spatial(r, R), spatial(c, C)}, {v(lr), v(lc)}, nullptr,
                            nullptr,
                            make_store(Y, {v(r), v(c)}, div(at(E, {v(r), v(c)}), at(L, {v(r)})),
                                       py),
                            py);
    nests.push_back(nest({{lr, R}, {lc, C}}, block, py));
  }
  return Program{"softmax", {X, Y}, {Mx, E, L}, make_seq(std::move(nests))};
}

}  // namespace nautilus::scalar::test_ir
