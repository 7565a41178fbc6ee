// VR tile kernels written the way a direct lowering of the math produces them, before any
// expression rewrite: f32 casts before every dot, the 1/sqrt(D) scale applied to the score tile,
// constants built inside the loop, repeated subexpressions, and normalization in one of three
// places. They read the buffers of attention.nt, so the float64 reference of the spec checks
// them and everything the rewrites make of them.
#pragma once

#include <cstdint>

#include "core/scalar/ir.h"
#include "core/vrtile/ir.h"

namespace nautilus::rewrite::test_kernels {

enum class Normalization {
  AfterLoop,   // o = acc / l once after the loop (the rolling_update form)
  EveryStep,   // acc kept normalized: acc' = (acc·l·alpha + P V) / l' (FlashAttention-1)
  SecondLoop,  // a first loop finds max and sum, a second sums (P / l) V (two-pass softmax)
};

// attention.nt: grid (b, h, m_o) over BM-row query tiles, a For over BN-key tiles.
vrtile::ModulePtr naive_attention(const scalar::Program& program, int64_t BM, int64_t BN,
                                  Normalization normalization);

}  // namespace nautilus::rewrite::test_kernels
