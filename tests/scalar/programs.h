// Hand-built scalar IR programs shared by the scalar tests, and short builders that keep them
// readable. Every program here verifies clean (verifier_test checks that).
#pragma once

#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/support/source.h"

namespace nautilus::scalar::test_ir {

// --- expression shorthands -------------------------------------------------------------------
inline Expr v(const Var& var) { return var_ref(var); }
inline Expr i64(int64_t value) { return int_imm(value); }
inline Expr f32(double value) { return float_imm(value, DType::F32); }
inline Expr add(Expr a, Expr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
inline Expr sub(Expr a, Expr b) { return binary(BinaryOp::Sub, std::move(a), std::move(b)); }
inline Expr mul(Expr a, Expr b) { return binary(BinaryOp::Mul, std::move(a), std::move(b)); }
inline Expr div(Expr a, Expr b) { return binary(BinaryOp::Div, std::move(a), std::move(b)); }
inline Expr floordiv(Expr a, Expr b) {
  return binary(BinaryOp::FloorDiv, std::move(a), std::move(b));
}
inline Expr mod(Expr a, Expr b) { return binary(BinaryOp::Mod, std::move(a), std::move(b)); }
inline Expr max_of(Expr a, Expr b) { return binary(BinaryOp::Max, std::move(a), std::move(b)); }
inline Expr lt(Expr a, Expr b) { return compare(CompareOp::LT, std::move(a), std::move(b)); }
inline Expr at(const Buffer& buffer, std::vector<Expr> indices) {
  return load(buffer, std::move(indices));
}
inline IterVar spatial(const Var& var, int64_t extent) { return {var, extent, IterKind::Spatial}; }
inline IterVar reduce(const Var& var, int64_t extent) { return {var, extent, IterKind::Reduce}; }

// Wraps `body` in loops, outermost first: nest({{i, 4}, {j, 8}}, body).
struct Loop {
  Var var;
  int64_t extent;
};
Stmt nest(const std::vector<Loop>& loops, Stmt body, Provenance provenance = {});

// --- GEMM: C[m, n] = sum(k) A[m, k] * B[k, n], all f32 ---------------------------------------
struct Gemm {
  int64_t M, N, K;
  Buffer A, B, C;
};
Gemm make_gemm_buffers(int64_t M, int64_t N, int64_t K);

// The block C(m = bm, n = bn; reduce k = bk) with init C[m, n] = 0 and an optional predicate.
Stmt gemm_block(const Gemm& gemm, Expr bm, Expr bn, Expr bk, Expr predicate = nullptr);
Program gemm_program(const Gemm& gemm, Stmt body);

// for m, n, k: block C(m = m, n = n; reduce k = k).
Program gemm_plain(int64_t M, int64_t N, int64_t K);
// The reduction loop split: for m, n, ko in 0..K/8, ki in 0..8 with k = ko * 8 + ki.
Program gemm_split_k(int64_t M, int64_t N, int64_t K);
// The reduction loop outermost: for k, m, n.
Program gemm_reduction_outermost(int64_t M, int64_t N, int64_t K);
// Both axes m and k split by 8 with ceil-divided outer loops and a predicate for the tails,
// loops ordered mo, ko, n, mi, ki.
Program gemm_split_predicated(int64_t M, int64_t N, int64_t K);

// --- Softmax over rows, four blocks with intermediates Mx, E, L ------------------------------
// Spec text in kSoftmaxSpec; statement i of the spec gives provenance to block i.
extern const char* const kSoftmaxSpec;
Program softmax_program(int64_t R, int64_t C, const SourceFile* source = nullptr);

}  // namespace nautilus::scalar::test_ir
