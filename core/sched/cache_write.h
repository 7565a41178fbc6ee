// cache_write(BLOCK, shared|register[, at=LOOP]) — compute the tensor BLOCK writes in a local
// buffer of the given memory scope during each iteration of LOOP, and store it to the tensor
// once at the end of the iteration (or not at all when nothing else reads it).
//
// BLOCK writes a tensor X in the plain form X[spatial iteration variables] (region.h,
// store_indexing). Every block under LOOP (without `at`: in BLOCK's top-level statement) that
// reads or writes X — the accumulator itself, an init block, a rescale, an epilogue fused after
// it — is redirected to X_reg (X_shared). X must be written nowhere else. In one iteration of
// LOOP those blocks must access one part offset + [lo, hi) of each dimension (region.h), parts
// of different iterations must not overlap, and every loop down to LOOP must move the part (else
// its iterations would share elements, e.g. LOOP inside the reduction loop of X); the local
// buffer holds that part (cache_stage.h). A write-back block X[x] = X_reg[local x] is appended
// to LOOP's body when X is an output or a block outside LOOP reads it; otherwise X disappears
// (an accumulator that lives in registers only).
//
//   before (gemm after tile(C_sum, m=4, n=4, k=8) and reverse_compute_at(C, C_sum, n_o)):
//     for m_o in 0..3:
//       for n_o in 0..3:
//         for k_o in 0..3:
//           for m_i in 0..4: for n_i in 0..4: for k_i in 0..8:
//             block C_sum(m = m_o * 4 + m_i, n = n_o * 4 + n_i; reduce k = k_o * 8 + k_i) ...:
//               C_sum[m, n] = C_sum[m, n] + f32(A[m, k]) * f32(B[k, n])
//         for m in 0..4: for n in 0..4:
//           block C(m = m_o * 4 + m, n = n_o * 4 + n) ...:  C[m, n] = bf16(C_sum[m, n])
//   after cache_write(C_sum, register, at=n_o):
//             block C_sum(...):
//               C_sum_reg[m mod 4, n mod 4] = C_sum_reg[m mod 4, n mod 4] + f32(A[m, k]) * ...
//           block C(...):  C[m, n] = bf16(C_sum_reg[m mod 4, n mod 4])
//     (C_sum is no longer stored: C, its only reader, is under n_o)
//
// Values are unchanged: every element of X is accessed in one iteration only, written there
// before it is read, and the local buffer maps the iteration's part one to one. Refused, with the
// reason: a block that does not store in the plain form, writes of X outside LOOP, accesses at
// indices that are not affine in the iteration variables or at different parts, parts that overlap between
// iterations or do not move with a loop, and (when a write-back is needed) no block that writes
// the whole part.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

ApplyResult cache_write(const scalar::ProgramPtr& program, std::string_view block,
                        scalar::MemoryScope scope, std::optional<std::string> at);

DecisionKind cache_write_decision();

}  // namespace nautilus::sched
