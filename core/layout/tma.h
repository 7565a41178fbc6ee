// TMA (cp.async.bulk.tensor) boxes that fill a shared-memory tile, derived from its layout.
//
// A 2-D tensor map copies *boxes*: a box of (b0, b1) elements of a global tensor, b0 along the
// tensor's contiguous dimension, lands in shared memory densely, b0 first (element (i0, i1) at
// byte (i0 + b0*i1)*e from where the box lands), and the engine then applies its swizzle mode to
// the shared-memory address bits -- the same XOR the layout's swizzle applies to offsets when
// the tile starts at a multiple of the swizzle's repeat. plan_tma_tile() reads off a tile's
// ComposedLayout the largest boxes that are dense in that sense, checks every element, and gives
// the plain description the runner needs for cuTensorMapEncodeTiled (dimensions, strides, box,
// swizzle: a tensor map per tile shape) and the emitter needs for the copies (one per box: its
// coordinates relative to the tile's origin and its shared-memory offset).
//
// Example: a 64x128 bf16 K-major SW128 tile (wgmma.h) of a row-major 4096x4096 A:
//   tile   Sw<3,3,3> o (64,(64,2)):(64,(1,4096))      (mn, k) -> element offset
//   plan_tma_tile(tile, 2, {{4096, 4096}, {4096, 1}}):
//     inner mode 1; global dims {4096, 4096}; global strides {8192 B}; box {64, 64};
//     swizzle SW128 (CUtensorMapSwizzle 3); 2 boxes of 8192 B
//       box 0 at (0,0) -> shared byte 0
//       box 1 at (0,64) -> shared byte 8192
// The inner box is 64 elements, not 128, because a box's inner extent may not exceed the swizzle
// span (128 bytes); the layout says where the second box goes.
//
// TMA's rules, reported as errors: the global tensor's contiguous dimension has stride 1 and the
// other a stride that is a multiple of 16 bytes (and below 2^40); dimensions are below 2^32; a
// box's inner extent is a multiple of 16 bytes and, when swizzled, exactly the swizzle span (the
// engine's pitch for swizzled rows); box extents are at most 256; each box lands at a multiple
// of 128 bytes; the swizzle is one of the four modes. A tile whose layout is not dense along the
// tensor's contiguous dimension cannot be filled by boxes at all.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/layout/result.h"
#include "core/layout/swizzle.h"

namespace nautilus::layout {

// A 2-D global tensor seen with the tile's coordinates: mode i of the tile is mode i of the
// tensor. Strides are in elements; exactly one of them must be 1.
struct GlobalTensor {
  std::array<int64_t, 2> shape{};
  std::array<int64_t, 2> strides{};
};

struct TmaBox {
  std::array<int64_t, 2> tile_coordinate{};  // (mode 0, mode 1) of its first element in the tile
  std::array<int64_t, 2> map_coordinate{};   // the same, innermost first (the copy's {c0, c1})
  int64_t shared_offset_bytes = 0;           // where it lands, from the tile's start
  bool operator==(const TmaBox&) const = default;
};

// What cuTensorMapEncodeTiled and the copies need, all in the tensor map's order (innermost
// dimension first). Interleave is always CU_TENSOR_MAP_INTERLEAVE_NONE and element strides 1.
struct TmaTilePlan {
  int element_bytes = 2;
  int inner_mode = 1;                        // the tile mode that is the map's dimension 0
  std::array<int64_t, 2> global_dims{};      // globalDim
  int64_t global_stride_bytes = 0;           // globalStrides[0]: dimension 1's stride
  std::array<int64_t, 2> box_dims{};         // boxDim
  std::array<int64_t, 2> element_strides{1, 1};
  SwizzleMode swizzle = SwizzleMode::None;
  int tensor_map_swizzle = 0;                // CUtensorMapSwizzle: 0 none, 1 32B, 2 64B, 3 128B
  int64_t box_bytes = 0;
  int64_t tile_bytes = 0;                    // all boxes together: the mbarrier's expect_tx
  int64_t shared_alignment_bytes = 128;      // the tile's shared start must be a multiple
  std::vector<TmaBox> boxes;                 // inner-mode boxes first, then along the other mode
  // A tile of a tensor of higher rank (one head of K[b, h, n, d]): the tensor's other axes, as
  // further map dimensions after the tile's two with a box extent of 1, innermost first. Filled
  // by the caller (plan_tma_tile plans the 2-D tile); each copy gives their coordinates after
  // the tile's.
  std::vector<int64_t> outer_dims;
  std::vector<int64_t> outer_stride_bytes;
};

// The boxes that fill `tile` (a ComposedLayout over the tile's (mode 0, mode 1) coordinates in
// element units, as wgmma_shared_layout returns) from `global`. Fails with the reason when TMA
// cannot fill the tile (see the rules above).
// @post every tile element (i, j) is written by exactly one box, at shared byte
//       tile_start + e * tile((i, j)) once the engine has swizzled the address, for any
//       tile_start that is a multiple of shared_alignment_bytes
Result<TmaTilePlan> plan_tma_tile(const ComposedLayout& tile, int element_bytes,
                                  const GlobalTensor& global);

// One line per field and one per box, as in the example above.
std::string to_string(const TmaTilePlan& plan);

}  // namespace nautilus::layout
