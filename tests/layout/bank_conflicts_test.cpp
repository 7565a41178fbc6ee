// Shared-memory bank conflicts: the per-instruction wavefront model on hand-made address sets,
// and the swizzle choice it exists for -- ldmatrix reading a 64x64 bf16 tile conflicts 8-way
// unswizzled and not at all with SW128.
#include "core/layout/bank_conflicts.h"

#include <gtest/gtest.h>

#include "core/layout/printer.h"

namespace nautilus::layout {
namespace {

std::vector<int64_t> lanes(int count, int64_t stride_bytes) {
  std::vector<int64_t> addresses;
  for (int lane = 0; lane < count; ++lane) addresses.push_back(lane * stride_bytes);
  return addresses;
}

TEST(BankConflicts, FourByteAccesses) {
  // Consecutive words: one wavefront.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 4), 4).value(), (BankConflicts{1, 1, 1}));
  // Stride of two words: lanes l and l+16 share a bank: 2-way.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 8), 4)->wavefronts, 2);
  // Stride of 32 words: all lanes in bank 0: 32-way.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 128), 4)->conflicts(), 31);
  // Every lane reading the same word is a broadcast, not a conflict.
  EXPECT_EQ(count_bank_conflicts(std::vector<int64_t>(32, 256), 4)->wavefronts, 1);
  // Two-byte accesses to the two halves of one word: one word, one wavefront.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 2), 2)->wavefronts, 1);
  // A partial warp counts only its active lanes.
  EXPECT_EQ(count_bank_conflicts(lanes(8, 128), 4)->wavefronts, 8);
  EXPECT_EQ(count_bank_conflicts({}, 4).value(), (BankConflicts{0, 0, 0}));
}

TEST(BankConflicts, WideAccessesAreServedInPhases) {
  // 8 bytes: two half-warp phases, each 16 lanes x 8 bytes = 128 bytes: conflict-free.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 8), 8).value(), (BankConflicts{1, 2, 2}));
  // 16 bytes: four quarter-warp phases.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 16), 16).value(), (BankConflicts{1, 4, 4}));
  // 16 bytes at a 128-byte stride: the 8 lanes of a phase hit the same 4 banks.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 128), 16).value(), (BankConflicts{1, 32, 4}));
  // 16 bytes at a 64-byte stride: the 8 lanes of a phase fall in two groups of 4 banks, four
  // distinct words each: 4 wavefronts per phase.
  EXPECT_EQ(count_bank_conflicts(lanes(32, 64), 16)->wavefronts, 16);
}

TEST(BankConflicts, PhasesNameTheirConflictingBanksAndSkipInactiveLanes) {
  // 16-byte accesses are served a quarter-warp (8 lanes) at a time. Lanes 0-7 read 8 rows of
  // 128 bytes: every row's chunk is in banks 0-3, 8 wavefronts. Lanes 8-15 are inactive. Lanes
  // 16-23 read consecutive chunks: one wavefront, no conflicting bank.
  std::vector<std::optional<int64_t>> addresses(24);
  for (int lane = 0; lane < 8; ++lane) addresses[static_cast<size_t>(lane)] = lane * 128;
  for (int lane = 16; lane < 24; ++lane) addresses[static_cast<size_t>(lane)] = 4096 + (lane - 16) * 16;
  const auto phases = bank_phases(addresses, 16);
  ASSERT_TRUE(phases) << phases.error().message;
  ASSERT_EQ(phases->size(), 2u) << "the inactive phase is not served";
  EXPECT_EQ((*phases)[0].phase, 0);
  EXPECT_EQ((*phases)[0].wavefronts, 8);
  EXPECT_EQ((*phases)[0].conflicting_banks, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ((*phases)[1].phase, 2);
  EXPECT_EQ((*phases)[1].wavefronts, 1);
  EXPECT_TRUE((*phases)[1].conflicting_banks.empty());
  // The per-instruction count is the phases' sum.
  std::vector<int64_t> active;
  for (int lane = 0; lane < 8; ++lane) active.push_back(lane * 128);
  EXPECT_EQ(count_bank_conflicts(active, 16)->wavefronts, 8);
  // A misaligned active lane fails; an inactive one is not looked at.
  addresses[9] = 3;
  EXPECT_FALSE(bank_phases(addresses, 16));
  addresses[9].reset();
  EXPECT_TRUE(bank_phases(addresses, 16));
}

TEST(BankConflicts, InvalidRequests) {
  EXPECT_FALSE(count_bank_conflicts(lanes(32, 16), 32).ok());
  EXPECT_FALSE(count_bank_conflicts(lanes(33, 4), 4).ok());
  EXPECT_FALSE(count_bank_conflicts({0, 4, 6}, 4).ok());  // misaligned
  EXPECT_FALSE(count_bank_conflicts({0, -16}, 16).ok());
  EXPECT_NE(count_bank_conflicts({0, 8}, 16).error().message.find("lane 1"), std::string::npos);
}

const Layout kRowMajor64x64 = make_layout_right(tuple_of(64, 64));

TEST(BankConflicts, LdmatrixOnA64x64Bf16TileNeedsTheSwizzle) {
  // 16 ldmatrix.x4 cover the tile; each phase reads one 16-byte column chunk of 8 rows.
  const TVLayout ldmatrix = tile_tv_layout(ldmatrix_x4_addresses(), tuple_of(64, 64)).value();
  const Result<BankConflicts> plain =
      count_bank_conflicts(ComposedLayout{Swizzle{}, kRowMajor64x64}, 2, ldmatrix, 8);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->instructions, 16);
  EXPECT_EQ(plain->ideal_wavefronts, 64);
  EXPECT_EQ(plain->wavefronts, 512);  // 128-byte rows: all 8 rows of a phase in the same banks
  EXPECT_EQ(plain->conflicts(), 448);

  const Swizzle sw128 = to_element_units(kSwizzle128B, 2).value();
  const Result<BankConflicts> swizzled =
      count_bank_conflicts(ComposedLayout{sw128, kRowMajor64x64}, 2, ldmatrix, 8);
  ASSERT_TRUE(swizzled.ok()) << swizzled.error().message;
  EXPECT_EQ(swizzled->wavefronts, 64);
  EXPECT_EQ(swizzled->conflicts(), 0);

  // The narrower swizzles halve the conflicts step by step.
  const Swizzle sw64 = to_element_units(kSwizzle64B, 2).value();
  const Swizzle sw32 = to_element_units(kSwizzle32B, 2).value();
  EXPECT_EQ(count_bank_conflicts(ComposedLayout{sw64, kRowMajor64x64}, 2, ldmatrix, 8)->wavefronts,
            128);
  EXPECT_EQ(count_bank_conflicts(ComposedLayout{sw32, kRowMajor64x64}, 2, ldmatrix, 8)->wavefronts,
            256);
}

TEST(BankConflicts, RowMajorCopyIsConflictFreeEitherWay) {
  // cp.async of 16-byte chunks along rows: each quarter-warp writes one whole 128-byte row.
  const TVLayout copy = copy_row_major_16b(64, 64, 2, 128).value();
  for (const Swizzle& sw : {Swizzle{}, to_element_units(kSwizzle128B, 2).value()}) {
    const Result<BankConflicts> r =
        count_bank_conflicts(ComposedLayout{sw, kRowMajor64x64}, 2, copy, 8);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->instructions, 16);  // 4 warps x 4 vectors per thread
    EXPECT_EQ(r->conflicts(), 0) << to_string(sw);
  }
}

TEST(BankConflicts, VectorsMustBeContiguousInSharedMemory) {
  // A column-major tile stores each row chunk with a stride: not a 16-byte vector.
  const TVLayout copy = copy_row_major_16b(64, 64, 2, 128).value();
  const Result<BankConflicts> r = count_bank_conflicts(
      ComposedLayout{Swizzle{}, make_layout_left(tuple_of(64, 64))}, 2, copy, 8);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("not contiguous"), std::string::npos) << r.error().message;
  // A swizzle that moves single elements breaks 16-byte vectors too.
  EXPECT_FALSE(
      count_bank_conflicts(ComposedLayout{Swizzle{3, 0, 3}, kRowMajor64x64}, 2, copy, 8).ok());
  // Shapes must match the tile, and vectors must divide the values.
  EXPECT_FALSE(count_bank_conflicts(ComposedLayout{Swizzle{}, make_layout_right(tuple_of(32, 128))},
                                    2, copy, 8)
                   .ok());
  EXPECT_FALSE(
      count_bank_conflicts(ComposedLayout{Swizzle{}, make_layout_right(IntTuple(4096))}, 2, copy, 8)
          .ok());
  EXPECT_FALSE(count_bank_conflicts(ComposedLayout{Swizzle{}, kRowMajor64x64}, 2, copy, 3).ok());
  EXPECT_FALSE(count_bank_conflicts(ComposedLayout{Swizzle{}, kRowMajor64x64}, 2, copy, 16)
                   .ok());  // 32 bytes
}

}  // namespace
}  // namespace nautilus::layout
