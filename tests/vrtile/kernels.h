// Hand-built VR tile modules of the asset specs, in the shape the compiler produces them: one
// CTA per output tile, a For over the reduction tiles carrying its running values, and masked
// loads and stores where an extent is not a multiple of its tile. Each takes its buffers from
// the scalar program of the same spec, so the interpreters of both levels run on one TensorMap.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/vrtile/ir.h"

namespace nautilus::vrtile::test_kernels {

// gemm.nt, C = A B: grid (m_o, n_o) over BM×BN tiles of C; a For over K in BK steps carries the
// f32 accumulator; C is cast to bf16 and stored.
ModulePtr tiled_gemm(const scalar::Program& program, int64_t BM, int64_t BN, int64_t BK);

// softmax.nt: grid over BR-row blocks; a For over BC-column tiles carries the running max and
// the running sum (online softmax: the sum is rescaled by exp(max_old - max_new)); a second For
// over the column tiles writes Y = exp(X - max) / sum.
ModulePtr online_softmax(const scalar::Program& program, int64_t BR, int64_t BC);

// attention.nt, FlashAttention forward: grid (b, h, m_o) over BM-row query tiles; the Q tile is
// loaded once; one For over BN-key tiles carries the running max, the running sum and the f32
// output accumulator (each rescaled by exp(max_old - max_new)); the division by the sum happens
// once after the loop (delayed normalization). Keys past N are masked to -inf before the max.
ModulePtr flash_attention(const scalar::Program& program, int64_t BM, int64_t BN);

// Building blocks of the kernels above, shared with the naive kernels of tests/rewrite.

// The buffer `name` of `program`; throws std::invalid_argument when there is none.
Buffer program_buffer(const scalar::Program& program, const std::string& name);

int64_t ceil_div(int64_t a, int64_t b);

TileType f32(std::vector<int64_t> shape);

// One tile of an axis: the indices tile_var * tile + iota (iota = [0, 1, ..., tile - 1]) and the
// mask of those below `extent`, which is null when the extent is a multiple of the tile (no tail
// to mask).
struct TileRange {
  Value indices;
  Value in_bounds;
};
TileRange tile_range(Builder& b, const Value& tile_var, const Value& iota, int64_t tile,
                     int64_t extent, const std::string& name);

}  // namespace nautilus::vrtile::test_kernels
