// TMA boxes of shared-memory tiles: for every swizzle mode x major-ness x several tile shapes,
// the boxes are simulated the way the copy engine writes them (dense, inner dimension first,
// then the swizzle XOR on the address bits, written out here) and must put every tile element
// exactly once where the tile's layout says; plus TMA's limits as errors.
#include "core/layout/tma.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "core/layout/printer.h"
#include "core/layout/wgmma.h"

namespace nautilus::layout {
namespace {

const SwizzleMode kModes[] = {SwizzleMode::None, SwizzleMode::B32, SwizzleMode::B64,
                              SwizzleMode::B128};

// The copy engine's swizzle on a shared-memory byte address (CUtensorMapSwizzle 1..3): 16-byte
// chunk bits [4, 4+B) XORed with bits [7, 7+B).
int64_t engine_swizzle(int tensor_map_swizzle, int64_t address) {
  const int64_t mask = (int64_t{1} << tensor_map_swizzle) - 1;
  return address ^ (((address >> 7) & mask) << 4);
}

// Simulates every box of `plan`; each tile element must be written once, where the layout puts
// it. Returns the number of elements written.
int64_t expect_boxes_fill_the_tile(const ComposedLayout& tile, const TmaTilePlan& plan,
                                   int64_t tile_start) {
  const int64_t e = plan.element_bytes;
  const int inner = plan.inner_mode, outer = 1 - inner;
  EXPECT_EQ(tile_start % plan.shared_alignment_bytes, 0);
  EXPECT_LE(plan.box_dims[0], 256);
  EXPECT_LE(plan.box_dims[1], 256);
  EXPECT_EQ(plan.box_dims[0] * e % 16, 0);
  if (plan.swizzle != SwizzleMode::None) {
    EXPECT_EQ(plan.box_dims[0] * e, swizzle_span_bytes(plan.swizzle));
  }
  EXPECT_EQ(plan.global_stride_bytes % 16, 0);
  std::map<std::pair<int64_t, int64_t>, int> writes;
  for (const TmaBox& box : plan.boxes) {
    EXPECT_EQ(box.shared_offset_bytes % 128, 0);
    EXPECT_EQ(box.map_coordinate[0], box.tile_coordinate[inner]);
    EXPECT_EQ(box.map_coordinate[1], box.tile_coordinate[outer]);
    for (int64_t i1 = 0; i1 < plan.box_dims[1]; ++i1) {
      for (int64_t i0 = 0; i0 < plan.box_dims[0]; ++i0) {
        std::array<int64_t, 2> c = box.tile_coordinate;
        c[inner] += i0;
        c[outer] += i1;
        const int64_t address = engine_swizzle(
            plan.tensor_map_swizzle,
            tile_start + box.shared_offset_bytes + (i0 + plan.box_dims[0] * i1) * e);
        const int64_t wanted = tile_start + e * tile.evaluate(tuple_of(c[0], c[1])).value();
        if (address != wanted) {
          ADD_FAILURE() << to_string(tile) << ": box at (" << box.tile_coordinate[0] << ","
                        << box.tile_coordinate[1] << ") writes element (" << c[0] << "," << c[1]
                        << ") to byte " << address << ", the layout holds it at " << wanted;
          return 0;
        }
        ++writes[{c[0], c[1]}];
      }
    }
  }
  const int64_t size = tile.layout.size();
  EXPECT_EQ(static_cast<int64_t>(writes.size()), size) << to_string(tile);
  for (const auto& [element, count] : writes) {
    EXPECT_EQ(count, 1) << element.first << "," << element.second;
    EXPECT_LT(element.first, tile.layout.mode(0).size());
    EXPECT_LT(element.second, tile.layout.mode(1).size());
  }
  EXPECT_EQ(plan.tile_bytes, size * e);
  EXPECT_EQ(plan.box_bytes * static_cast<int64_t>(plan.boxes.size()), plan.tile_bytes);
  return static_cast<int64_t>(writes.size());
}

TEST(TmaBoxes, EveryCanonicalWgmmaTileIsFilledExactlyOnceWhereItsLayoutSays) {
  int64_t tiles = 0, elements = 0;
  for (OperandMajor major : {OperandMajor::K, OperandMajor::MN}) {
    for (int e : {1, 2}) {
      if (major == OperandMajor::MN && e != 2) continue;
      for (SwizzleMode mode : kModes) {
        const IntTuple atom = wgmma_shared_atom_shape(major, mode, e).value();
        for (int64_t mn_atoms : {1, 2, 8}) {
          for (int64_t k_atoms : {1, 2, 4}) {
            const int64_t mn = atom.mode(0).value() * mn_atoms;
            const int64_t k = atom.mode(1).value() * k_atoms;
            if (mn > 512 || k > 512) continue;
            const ComposedLayout tile = wgmma_shared_layout(major, mode, e, mn, k).value();
            // The operand in global memory: K-major is row-major (mn, k) with k contiguous,
            // MN-major has mn contiguous; both with a leading dimension of 4096 elements.
            const GlobalTensor global =
                major == OperandMajor::K ? GlobalTensor{{8192, 4096}, {4096, 1}}
                                         : GlobalTensor{{4096, 8192}, {1, 4096}};
            Result<TmaTilePlan> plan = plan_tma_tile(tile, e, global);
            ASSERT_TRUE(plan.ok()) << plan.error().message;
            EXPECT_EQ(plan->inner_mode, major == OperandMajor::K ? 1 : 0);
            EXPECT_EQ(plan->global_stride_bytes, 4096 * e);
            EXPECT_EQ(plan->tensor_map_swizzle, static_cast<int>(mode));
            elements += expect_boxes_fill_the_tile(tile, *plan, 5 * 1024);
            ++tiles;
          }
        }
      }
    }
  }
  EXPECT_EQ(tiles, 3 * 3 * 4 * 3);
  EXPECT_GT(elements, 100'000);
}

TEST(TmaBoxes, ABf16Sw128TileOf128ColumnsNeedsTwoBoxesOf64) {
  const ComposedLayout tile =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 64, 128).value();
  EXPECT_EQ(to_string(tile), "Sw<3,3,3> o (64,(64,2)):(64,(1,4096))");
  const TmaTilePlan plan = plan_tma_tile(tile, 2, {{4096, 4096}, {4096, 1}}).value();
  EXPECT_EQ(to_string(plan),
            "inner mode 1; global dims {4096, 4096}; global strides {8192 B}; box {64, 64}; "
            "swizzle SW128 (CUtensorMapSwizzle 3); 2 boxes of 8192 B\n"
            "  box 0 at (0,0) -> shared byte 0\n"
            "  box 1 at (0,64) -> shared byte 8192\n");
  EXPECT_EQ(plan.shared_alignment_bytes, 1024);
  EXPECT_EQ(plan.tile_bytes, 16384);
}

TEST(TmaBoxes, MnMajorBTileIsOneBoxPerSwizzleSpanOfColumns) {
  // B of N = 128 stored row-major (k, n) in global memory: n is contiguous, the tile's mode 0.
  const ComposedLayout tile =
      wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B128, 2, 128, 64).value();
  const TmaTilePlan plan = plan_tma_tile(tile, 2, {{4096, 4096}, {1, 4096}}).value();
  EXPECT_EQ(plan.inner_mode, 0);
  EXPECT_EQ(plan.box_dims, (std::array<int64_t, 2>{64, 64}));
  ASSERT_EQ(plan.boxes.size(), 2u);
  EXPECT_EQ(plan.boxes[1].tile_coordinate, (std::array<int64_t, 2>{64, 0}));
  EXPECT_EQ(plan.boxes[1].shared_offset_bytes, 8192);
}

TEST(TmaBoxes, BoxExtentsStayWithinTheEngineLimits) {
  // 512 rows of a 64-wide SW128 tile: two boxes of 256 rows.
  const ComposedLayout tall =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 512, 64).value();
  const TmaTilePlan plan = plan_tma_tile(tall, 2, {{4096, 64}, {64, 1}}).value();
  EXPECT_EQ(plan.box_dims, (std::array<int64_t, 2>{64, 256}));
  EXPECT_EQ(plan.boxes.size(), 2u);
  expect_boxes_fill_the_tile(tall, plan, 0);
  // An unswizzled row-major tile of 512 columns: rows are not at a 256-element pitch, so each box
  // is one row segment of 256.
  const ComposedLayout wide{Swizzle{0, 3, 3}, Layout(tuple_of(4, 512), tuple_of(512, 1))};
  const TmaTilePlan segments = plan_tma_tile(wide, 2, {{64, 4096}, {4096, 1}}).value();
  EXPECT_EQ(segments.box_dims, (std::array<int64_t, 2>{256, 1}));
  EXPECT_EQ(segments.boxes.size(), 8u);
  expect_boxes_fill_the_tile(wide, segments, 0);
}

void expect_rejected(const Result<TmaTilePlan>& plan, const std::string& reason) {
  ASSERT_FALSE(plan.ok()) << to_string(*plan);
  EXPECT_NE(plan.error().message.find(reason), std::string::npos) << plan.error().message;
}

TEST(TmaBoxes, WhatTheEngineCannotDoIsRejectedWithTheReason) {
  const ComposedLayout tile =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 64, 64).value();
  // A leading dimension of 100 bf16 is 200 bytes, not a multiple of 16.
  expect_rejected(plan_tma_tile(tile, 2, {{4096, 100}, {100, 1}}), "200 bytes");
  expect_rejected(plan_tma_tile(tile, 2, {{4096, 100}, {100, 2}}), "neither global stride is 1");
  // The global tensor is contiguous along mn, the K-major tile along k.
  expect_rejected(plan_tma_tile(tile, 2, {{4096, 4096}, {1, 4096}}), "not contiguous");
  // A swizzled row shorter than the span.
  const ComposedLayout narrow{Swizzle{3, 3, 3}, Layout(tuple_of(64, 32), tuple_of(32, 1))};
  expect_rejected(plan_tma_tile(narrow, 2, {{4096, 4096}, {4096, 1}}), "exactly 128 bytes");
  // Inner runs of 4 bytes cannot make a 16-byte box row.
  const ComposedLayout pairs{Swizzle{0, 3, 3},
                             Layout(tuple_of(64, tuple_of(2, 8)), tuple_of(2, tuple_of(1, 128)))};
  expect_rejected(plan_tma_tile(pairs, 2, {{4096, 4096}, {4096, 1}}), "not a multiple of 16");
  // Boxes that would land off a 128-byte boundary: rows of 72 elements (144 bytes).
  const ComposedLayout padded{Swizzle{0, 3, 3}, Layout(tuple_of(64, 64), tuple_of(72, 1))};
  expect_rejected(plan_tma_tile(padded, 2, {{4096, 4096}, {4096, 1}}), "not a multiple of 128");
  // A broadcast layout puts two elements at one address.
  const ComposedLayout broadcast{Swizzle{0, 3, 3},
                                 Layout(tuple_of(2, 64), tuple_of(0, 1))};
  expect_rejected(plan_tma_tile(broadcast, 2, {{4096, 4096}, {4096, 1}}), "share");
  expect_rejected(plan_tma_tile(tile, 3, {{4096, 4096}, {4096, 1}}), "1, 2, 4 or 8 bytes");
  expect_rejected(plan_tma_tile(tile, 2, {{int64_t{1} << 33, 64}, {64, 1}}), "2^32");
}

// docs/layout.md, "Worked example: the operands of a 128x128x64 bf16 tile".
TEST(TmaBoxes, AnFp8Sw128TileOf128ColumnsIsOneBox) {
  // The fp8 GEMM's K-major A tile: 128 elements of k are the swizzle's 128 bytes, one box.
  const ComposedLayout tile =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 1, 128, 128).value();
  const TmaTilePlan plan = plan_tma_tile(tile, 1, {{8192, 8192}, {8192, 1}}).value();
  EXPECT_EQ(to_string(plan),
            "inner mode 1; global dims {8192, 8192}; global strides {8192 B}; box {128, 128}; "
            "swizzle SW128 (CUtensorMapSwizzle 3); 1 boxes of 16384 B\n"
            "  box 0 at (0,0) -> shared byte 0\n");
  EXPECT_EQ(plan.tile_bytes, 16384);
  // A k extent of 1040 bytes keeps TMA's 16-byte stride rule; 1000 does not.
  EXPECT_TRUE(plan_tma_tile(tile, 1, {{1000, 1040}, {1040, 1}}).ok());
  expect_rejected(plan_tma_tile(tile, 1, {{1000, 1000}, {1000, 1}}), "1000 bytes");
}

TEST(TmaBoxes, WorkedExampleOfTheDocs) {
  const ComposedLayout a =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 128, 64).value();
  EXPECT_EQ(to_string(a), "Sw<3,3,3> o (128,64):(64,1)");
  const TmaTilePlan plan = plan_tma_tile(a, 2, {{8192, 8192}, {8192, 1}}).value();
  EXPECT_EQ(plan.box_dims, (std::array<int64_t, 2>{64, 128}));
  EXPECT_EQ(plan.boxes.size(), 1u);
  EXPECT_EQ(plan.tile_bytes, 16384);
  EXPECT_EQ(to_string(wgmma_block_offsets(a, 2, OperandMajor::K, 64).value()), "(2,4):(8192,32)");
  const int64_t start = 4096;
  for (int64_t g = 0; g < 2; ++g) {
    for (int64_t k = 0; k < 4; ++k) {
      const WgmmaDescriptor d = wgmma_descriptor(a, 2, OperandMajor::K, start, 64, g, k).value();
      EXPECT_EQ(d.start_address, start + 8192 * g + 32 * k);
      EXPECT_EQ(d.leading_byte_offset, 16);
      EXPECT_EQ(d.stride_byte_offset, 1024);
      EXPECT_EQ(d.encode() >> 62, 1u);
    }
  }
  const TVLayout acc =
      tile_over_thread_groups(wgmma_accumulator(128).value(), 2, 1, tuple_of(128, 128)).value();
  EXPECT_EQ(acc.threads(), 256);
  EXPECT_EQ(acc.values(), 64);
}

}  // namespace
}  // namespace nautilus::layout
