// cache_read(BLOCK, TENSOR, shared|register[, at=LOOP][, readers=all][, tail=global]) — copy the part of TENSOR that BLOCK
// reads into a local buffer of the given memory scope, once per iteration of LOOP, and make
// BLOCK read the copy.
//
// LOOP is a loop around BLOCK (without `at`, the copy covers everything BLOCK reads and runs
// once, before BLOCK's top-level nest). Each dimension of TENSOR that BLOCK reads is, in one
// iteration of LOOP, either fixed or a range offset + [lo, hi) read off BLOCK's bindings
// (region.h; the index may be any affine function of iteration variables, such as the
// n + n_s * 24 of a split_k_update partial); the local buffer TENSOR_shared (TENSOR_reg) keeps the ranges wider than one
// element, and BLOCK's loads become loads of it at the local index (cache_stage.h: x − lo, or
// x mod g − lo for a range that moves with the loop). The copy is a block of its own, inserted
// in LOOP's body right before the statement holding BLOCK, so it runs once per iteration:
//
//   before (gemm after tile(C_sum, m=4, n=4, k=8); M = 12, N = 10, K = 24):
//     for m_o in 0..3:
//       for n_o in 0..3:
//         for k_o in 0..3:
//           for m_i in 0..4: for n_i in 0..4: for k_i in 0..8:
//             block C_sum(m = m_o * 4 + m_i, n = n_o * 4 + n_i; reduce k = k_o * 8 + k_i) if ...:
//               C_sum[m, n] = C_sum[m, n] + f32(A[m, k]) * f32(B[k, n])
//   after cache_read(C_sum, A, shared, at=k_o):
//         for k_o in 0..3:
//           for m in 0..4:
//             for k in 0..8:
//               block A_shared(m = m_o * 4 + m, k = k_o * 8 + k):
//                 A_shared[m mod 4, k mod 8] = A[m, k]
//           for m_i in 0..4: for n_i in 0..4: for k_i in 0..8:
//             block C_sum(...):
//               C_sum[m, n] = C_sum[m, n] + f32(A_shared[m mod 4, k mod 8]) * f32(B[k, n])
//
// With readers=all (which needs at=LOOP) every block under LOOP that reads TENSOR reads the
// one copy, inserted before the first of them: each must read the same part at the same
// indices, and nothing under LOOP may write TENSOR. A row kernel's passes over its row then read
// the row from memory once (the MA lowering holds such a one-dimensional buffer in shared
// memory, matile/lower.h rule 8):
//
//   before (log_softmax's row kernel, C = 32000):   after cache_read(Mx, X, shared, at=r,
//     for r:                                                            readers=all):
//       for c_o: for c_i: block Mx: ... X[r, c]        for r:
//       ...                                              for c: block X_shared: X_shared[c] = X[r, c]
//       for c_o: for c_i: block Y: ... X[r, c]           for c_o: for c_i: block Mx: ... X_shared[c]
//                                                        ...
//                                                        for c_o: for c_i: block Y: ... X_shared[c]
//
// With tail=global (shared scope and readers=all only) the copy may be longer than a CTA's
// shared memory: the buffer is marked `tail=global`, and the MA lowering (rule 8) keeps as many
// leading stages of the row on chip as fit, skips the copy of the others and lets every reader
// read those tail stages from TENSOR itself (softmax over a 128256-wide bf16 row: 55 of 63
// stages of 2048 on chip, the last 8 read twice from global memory, mostly from L2). The
// scalar program is the same either way; only where the tail lives changes.
//
// Values are unchanged: the copy runs after every write of TENSOR that BLOCK's reads see and
// before BLOCK, and holds exactly those elements. Refused, with the reason: a tensor BLOCK does
// not read or also writes, reads at different indices, an index that moves inside the iteration
// but is not affine in the iteration variables, ranges that overlap between iterations (cache_stage.h), a
// write of TENSOR inside the statement that holds BLOCK (the copy would be stale), or one after
// LOOP or later in LOOP's body.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult cache_read(const scalar::ProgramPtr& program, std::string_view block,
                       std::string_view tensor, scalar::MemoryScope scope,
                       std::optional<std::string> at, bool all_readers = false,
                       bool tail_in_global = false);

DecisionKind cache_read_decision();

}  // namespace nautilus::sched
