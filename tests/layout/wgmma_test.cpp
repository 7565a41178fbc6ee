// wgmma layouts: the register fragments against the PTX ISA's fragment formulas (written out
// again here), the canonical shared-memory tiles, and the descriptors derived from them --
// decoded from their 64 bits and read back with the hardware's address arithmetic (written out
// here independently of wgmma_descriptor_address) for every element of every block of every
// tile of a domain of swizzle modes x major-ness x element sizes x tile shapes.
#include "core/layout/wgmma.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/layout/printer.h"

namespace nautilus::layout {
namespace {

using RowCol = std::pair<int64_t, int64_t>;

RowCol row_col(const TVLayout& tv, int64_t thread, int64_t value) {
  const IntTuple e = tv.element(thread, value);
  return {e.mode(0).value(), e.mode(1).value()};
}

void expect_covers_tile_once(const TVLayout& tv) {
  std::map<RowCol, int> holders;
  for (int64_t t = 0; t < tv.threads(); ++t) {
    for (int64_t v = 0; v < tv.values(); ++v) ++holders[row_col(tv, t, v)];
  }
  const int64_t rows = product(tv.tile.mode(0)), cols = product(tv.tile.mode(1));
  EXPECT_EQ(static_cast<int64_t>(holders.size()), rows * cols) << to_string(tv);
  for (const auto& [element, count] : holders) {
    EXPECT_EQ(count, 1) << to_string(tv) << " element " << element.first << "," << element.second;
  }
}

// PTX ISA, "Register Fragments and Shared Memory Matrix Layouts" for wgmma: the m64nNk16 f32
// accumulator. Thread t is lane t%32 of warp t/32 of the warpgroup.
RowCol ptx_accumulator_element(int64_t thread, int64_t i) {
  const int64_t warp = thread / 32, lane = thread % 32;
  const int64_t group = lane / 4, in_group = lane % 4;
  const int64_t row = 16 * warp + group + 8 * ((i / 2) % 2);
  const int64_t col = 8 * (i / 4) + 2 * in_group + (i % 2);
  return {row, col};
}

TEST(WgmmaRegisters, AccumulatorMatchesThePtxFragmentForEveryN) {
  for (int64_t n = 8; n <= 256; n += 8) {
    Result<TVLayout> acc = wgmma_accumulator(n);
    ASSERT_TRUE(acc.ok()) << acc.error().message;
    ASSERT_EQ(acc->threads(), 128);
    ASSERT_EQ(acc->values(), n / 2);
    for (int64_t t = 0; t < 128; ++t) {
      for (int64_t i = 0; i < n / 2; ++i) {
        ASSERT_EQ(row_col(*acc, t, i), ptx_accumulator_element(t, i))
            << "N " << n << " thread " << t << " d" << i;
      }
    }
    expect_covers_tile_once(*acc);
  }
  EXPECT_EQ(to_string(wgmma_accumulator(64).value()),
            "((4,8,4),(2,2,8)):((128,1,16),(64,8,512)) on (64,64)");
  EXPECT_EQ(to_string(wgmma_accumulator(8).value()),
            "((4,8,4),(2,2)):((128,1,16),(64,8)) on (64,8)");
}

TEST(WgmmaRegisters, AccumulatorRejectsNOutsideTheInstruction) {
  for (int64_t n : {0, 4, 12, 260, 264}) {
    Result<TVLayout> acc = wgmma_accumulator(n);
    ASSERT_FALSE(acc.ok()) << n;
    EXPECT_NE(acc.error().message.find("N = " + std::to_string(n)), std::string::npos);
  }
}

TEST(WgmmaRegisters, RegisterAOperandMatchesThePtxFragment) {
  const TVLayout a = wgmma_a_registers();
  EXPECT_EQ(to_string(a), "((4,8,4),(2,2,2)):((128,1,16),(64,8,512)) on (64,16)");
  for (int64_t t = 0; t < 128; ++t) {
    const int64_t warp = t / 32, group = (t % 32) / 4, in_group = t % 4;
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t row = 16 * warp + group + 8 * ((i / 2) % 2);
      const int64_t col = 2 * in_group + (i % 2) + 8 * (i / 4);
      ASSERT_EQ(row_col(a, t, i), RowCol(row, col)) << "thread " << t << " a" << i;
    }
  }
  expect_covers_tile_once(a);
}

// A converted bf16 accumulator slice of 16 columns is the A fragment of the next RS wgmma (the
// P.V trick of attention): same thread, same value order.
TEST(WgmmaRegisters, AccumulatorSliceOfSixteenColumnsIsTheRegisterAOperand) {
  const TVLayout acc = wgmma_accumulator(64).value();
  const TVLayout a = wgmma_a_registers();
  for (int64_t slice = 0; slice < 4; ++slice) {
    for (int64_t t = 0; t < 128; ++t) {
      for (int64_t i = 0; i < 8; ++i) {
        const RowCol d = row_col(acc, t, 8 * slice + i);
        const RowCol ai = row_col(a, t, i);
        ASSERT_EQ(d, RowCol(ai.first, ai.second + 16 * slice)) << t << " " << i;
      }
    }
  }
}

TEST(WgmmaRegisters, TwoConsumerWarpgroupsOverM128) {
  const TVLayout acc = wgmma_accumulator(64).value();
  Result<TVLayout> two = tile_over_thread_groups(acc, 2, 1, tuple_of(128, 64));
  ASSERT_TRUE(two.ok()) << two.error().message;
  EXPECT_EQ(to_string(*two), "((4,8,8),(2,2,8)):((256,1,16),(128,8,1024)) on (128,64)");
  ASSERT_EQ(two->threads(), 256);
  for (int64_t t = 0; t < 256; ++t) {
    for (int64_t i = 0; i < 32; ++i) {
      const RowCol in_group = ptx_accumulator_element(t % 128, i);
      ASSERT_EQ(row_col(*two, t, i), RowCol(in_group.first + 64 * (t / 128), in_group.second));
    }
  }
  expect_covers_tile_once(*two);
}

// The @post of tile_over_thread_groups over a grid of groups and repeats, both directions.
TEST(WgmmaRegisters, ThreadGroupsAndRepeatsPlaceEveryAtomBlock) {
  const TVLayout atom = wgmma_accumulator(16).value();
  for (auto [gm, gn] : {std::pair{1, 1}, std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    for (auto [rows, cols] : {std::pair{128, 32}, std::pair{256, 64}}) {
      Result<TVLayout> tiled = tile_over_thread_groups(atom, gm, gn, tuple_of(rows, cols));
      if (rows % (64 * gm) != 0 || cols % (16 * gn) != 0) {
        EXPECT_FALSE(tiled.ok());
        continue;
      }
      ASSERT_TRUE(tiled.ok()) << tiled.error().message;
      ASSERT_EQ(tiled->threads(), 128 * gm * gn);
      const int64_t repeats_m = rows / (64 * gm);
      for (int64_t t = 0; t < tiled->threads(); ++t) {
        const int64_t g = t / 128, gi = g % gm, gj = g / gm;
        for (int64_t v = 0; v < tiled->values(); ++v) {
          const int64_t b = v / 8, bi = b % repeats_m, bj = b / repeats_m;
          const RowCol base = row_col(atom, t % 128, v % 8);
          ASSERT_EQ(row_col(*tiled, t, v),
                    RowCol(base.first + 64 * (gi + gm * bi), base.second + 16 * (gj + gn * bj)));
        }
      }
      expect_covers_tile_once(*tiled);
    }
  }
  EXPECT_FALSE(tile_over_thread_groups(atom, 2, 1, tuple_of(64, 16)).ok());
  // The accumulator itself is four m16n8 mma.sync accumulators stacked along M.
  EXPECT_EQ(tile_over_thread_groups(mma_m16n8k16_c(), 4, 1, tuple_of(64, 8)).value(),
            wgmma_accumulator(8).value());
}

// ---- Shared-memory layouts and descriptors ----------------------------------------------------

const SwizzleMode kModes[] = {SwizzleMode::None, SwizzleMode::B32, SwizzleMode::B64,
                              SwizzleMode::B128};

int span_of(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None: return 16;
    case SwizzleMode::B32: return 32;
    case SwizzleMode::B64: return 64;
    case SwizzleMode::B128: return 128;
  }
  return 0;
}

// The hardware's swizzle on a shared-memory byte address: 16-byte chunk bits [4, 4+B) XORed
// with the 128-byte row bits [7, 7+B), B = log2(W/16).
int64_t hardware_swizzle(SwizzleMode mode, int64_t address) {
  const int bits = mode == SwizzleMode::B128 ? 3 : mode == SwizzleMode::B64 ? 2
                   : mode == SwizzleMode::B32  ? 1 : 0;
  const int64_t mask = (int64_t{1} << bits) - 1;
  return address ^ (((address >> 7) & mask) << 4);
}

// The descriptor's 64 bits decoded by hand (PTX ISA, "Matrix Descriptor Format") and element
// (mn, k) of the block addressed as the ISA's canonical layouts say.
int64_t hardware_address(uint64_t bits, OperandMajor major, int e, int64_t mn, int64_t k) {
  const int64_t start = static_cast<int64_t>(bits & 0x3FFF) * 16;
  const int64_t lbo = static_cast<int64_t>((bits >> 16) & 0x3FFF) * 16;
  const int64_t sbo = static_cast<int64_t>((bits >> 32) & 0x3FFF) * 16;
  const uint64_t type = bits >> 62;
  const SwizzleMode mode = type == 1   ? SwizzleMode::B128
                           : type == 2 ? SwizzleMode::B64
                           : type == 3 ? SwizzleMode::B32
                                       : SwizzleMode::None;
  EXPECT_EQ((bits >> 49) & 7, 0u) << "base offset";
  const int64_t w = span_of(mode), t = 16 / e;
  int64_t offset = 0;
  if (major == OperandMajor::K) {
    // ((8,m),(T,2k)):((1T,SBO),(1,LBO)) or ((8,m),(T,2k)):((W/e,SBO),(1,T)), in elements
    offset = mode == SwizzleMode::None
                 ? ((mn % 8) * t + (k % t)) * e + (mn / 8) * sbo + (k / t) * lbo
                 : ((mn % 8) * (w / e) + k) * e + (mn / 8) * sbo;
  } else {
    // ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)) or ((T,W/16,m),(8,k)):((1,T,LBO),(W/e,SBO))
    offset = mode == SwizzleMode::None
                 ? ((mn % t) + (k % 8) * t) * e + (mn / t) * sbo + (k / 8) * lbo
                 : ((mn % (w / e)) + (k % 8) * (w / e)) * e + (mn / (w / e)) * lbo +
                       (k / 8) * sbo;
  }
  return hardware_swizzle(mode, start + offset);
}

// Every element of every block of `tile` read through its descriptor equals the layout.
// Returns the number of elements checked.
int64_t expect_descriptors_read_the_layout(const ComposedLayout& tile, int e, OperandMajor major,
                                           int64_t mn_extent, int64_t tile_start) {
  const int64_t mn = tile.layout.mode(0).size(), k = tile.layout.mode(1).size();
  const int64_t k_extent = 32 / e;
  Result<Layout> offsets = wgmma_block_offsets(tile, e, major, mn_extent);
  EXPECT_TRUE(offsets.ok()) << offsets.error().message;
  if (!offsets) return 0;
  const int64_t first_start =
      wgmma_descriptor(tile, e, major, tile_start, mn_extent).value().start_address;
  int64_t checked = 0;
  for (int64_t kb = 0; kb < k / k_extent; ++kb) {
    for (int64_t mb = 0; mb < mn / mn_extent; ++mb) {
      Result<WgmmaDescriptor> d = wgmma_descriptor(tile, e, major, tile_start, mn_extent, mb, kb);
      EXPECT_TRUE(d.ok()) << d.error().message;
      if (!d) return checked;
      EXPECT_EQ(d->start_address, first_start + offsets->evaluate(tuple_of(mb, kb)).value())
          << "block " << mb << "," << kb << " of " << to_string(tile);
      const uint64_t bits = d->encode();
      EXPECT_EQ(WgmmaDescriptor::decode(bits), *d);
      for (int64_t kk = 0; kk < k_extent; ++kk) {
        for (int64_t m = 0; m < mn_extent; ++m) {
          const int64_t want =
              tile_start + e * tile.evaluate(tuple_of(mb * mn_extent + m, kb * k_extent + kk)).value();
          const int64_t got = hardware_address(bits, major, e, m, kk);
          if (got != want) {
            ADD_FAILURE() << to_string(tile) << " " << operand_major_name(major) << " block ("
                          << mb << "," << kb << ") element (" << m << "," << kk << "): descriptor "
                          << to_string(*d) << " reads byte " << got << ", the layout says "
                          << want;
            return checked;
          }
          EXPECT_EQ(wgmma_descriptor_address(*d, major, e, m, kk), want);
          ++checked;
        }
      }
    }
  }
  return checked;
}

struct Case {
  OperandMajor major;
  int element_bytes;
};

TEST(WgmmaShared, DescriptorsOfEveryCanonicalTileReadEveryElementWhereTheLayoutPutsIt) {
  int64_t checked = 0, tiles = 0;
  for (Case c : {Case{OperandMajor::K, 2}, Case{OperandMajor::MN, 2}, Case{OperandMajor::K, 1},
                 Case{OperandMajor::K, 4}}) {
    for (SwizzleMode mode : kModes) {
      const IntTuple atom = wgmma_shared_atom_shape(c.major, mode, c.element_bytes).value();
      const int64_t atom_mn = atom.mode(0).value(), atom_k = atom.mode(1).value();
      const int64_t k_extent = 32 / c.element_bytes;
      // The smallest tile, a 64-row A, and a 256-row tile (B up to N = 256, or four A blocks).
      std::set<int64_t> mn_sizes = {atom_mn, 64, 256};
      for (int64_t mn : mn_sizes) {
        for (int64_t k_atoms : {1, 3}) {
          const int64_t k = std::max(atom_k * k_atoms, k_extent * k_atoms);
          if (k % atom_k != 0 || k % k_extent != 0) continue;
          Result<ComposedLayout> tile = wgmma_shared_layout(c.major, mode, c.element_bytes, mn, k);
          ASSERT_TRUE(tile.ok()) << tile.error().message;
          // The canonical tile is a permutation of [0, mn*k): it allocates nothing twice.
          std::set<int64_t> offsets;
          for (int64_t i = 0; i < mn * k; ++i) offsets.insert((*tile)(i));
          ASSERT_EQ(static_cast<int64_t>(offsets.size()), mn * k) << to_string(*tile);
          ASSERT_EQ(*offsets.rbegin(), mn * k - 1) << to_string(*tile);
          // Every block size the operand can have: A's 64 rows and N = 8..256 columns of B.
          for (int64_t mn_extent = 8; mn_extent <= mn; mn_extent += 8) {
            if (mn % mn_extent != 0) continue;
            const bool spans_rows = c.major == OperandMajor::K ||
                                    mn_extent % (span_of(mode) / c.element_bytes) == 0;
            if (!spans_rows) {
              EXPECT_FALSE(wgmma_descriptor(*tile, c.element_bytes, c.major, 0, mn_extent).ok());
              continue;
            }
            checked += expect_descriptors_read_the_layout(*tile, c.element_bytes, c.major,
                                                          mn_extent, 3 * 1024);
            ++tiles;
          }
        }
      }
    }
  }
  EXPECT_GT(tiles, 100);
  EXPECT_GT(checked, 1'000'000);
}

TEST(WgmmaShared, PrintedCanonicalTiles) {
  EXPECT_EQ(to_string(wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 64, 64).value()),
            "Sw<3,3,3> o (64,64):(64,1)");
  EXPECT_EQ(
      to_string(wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 128, 128).value()),
      "Sw<3,3,3> o (128,(64,2)):(64,(1,8192))");
  EXPECT_EQ(to_string(wgmma_shared_layout(OperandMajor::K, SwizzleMode::None, 2, 64, 32).value()),
            "Sw<0,3,3> o (64,(8,4)):(8,(1,512))");
  EXPECT_EQ(
      to_string(wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B128, 2, 128, 64).value()),
      "Sw<3,3,3> o ((64,2),64):((1,4096),64)");
  EXPECT_EQ(to_string(wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B32, 2, 64, 16).value()),
            "Sw<1,3,3> o ((16,4),16):((1,256),16)");
}

TEST(WgmmaShared, KnownDescriptors) {
  // A 64x64 bf16 K-major SW128 tile at 0x400: SBO = 8 rows of 128 bytes; LBO is the 16-byte
  // step between the two chunks of a k16 slice (the hardware ignores it when swizzled).
  const ComposedLayout a = wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 64, 64).value();
  const WgmmaDescriptor d = wgmma_descriptor(a, 2, OperandMajor::K, 0x400, 64).value();
  EXPECT_EQ(to_string(d), "start 0x400 LBO 16 SBO 1024 base 0 SW128");
  EXPECT_EQ(d.encode(), (uint64_t{1} << 62) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 16) |
                            (0x400 >> 4));
  // k16 slice 3 starts 96 bytes in; the next 64-row block of a 128-row tile 8 KiB further.
  EXPECT_EQ(wgmma_descriptor(a, 2, OperandMajor::K, 0x400, 64, 0, 3).value().start_address,
            0x400 + 96);
  const ComposedLayout tall =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 128, 128).value();
  EXPECT_EQ(to_string(wgmma_block_offsets(tall, 2, OperandMajor::K, 64).value()),
            "(2,(4,2)):(8192,(32,16384))");
  // Interleaved K-major: core matrices of 128 contiguous bytes; SBO steps 8 rows, LBO steps k.
  const ComposedLayout inter =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::None, 2, 64, 32).value();
  EXPECT_EQ(to_string(wgmma_descriptor(inter, 2, OperandMajor::K, 0, 64).value()),
            "start 0x0 LBO 1024 SBO 128 base 0 none");
  // MN-major SW128 B of N = 128: LBO steps the second 64 columns, SBO the next 8 k-rows.
  const ComposedLayout b =
      wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B128, 2, 128, 64).value();
  EXPECT_EQ(to_string(wgmma_descriptor(b, 2, OperandMajor::MN, 0, 128).value()),
            "start 0x0 LBO 8192 SBO 1024 base 0 SW128");
}

// Layouts that are not the ones wgmma_shared_layout builds but that wgmma can still read: the
// descriptor follows their strides.
TEST(WgmmaShared, OtherReadableLayoutsGetTheirOwnOffsets) {
  // MN-major SW128 atoms stacked along mn first (the order of CuTe's tile_to_shape).
  const ComposedLayout mn_first{Swizzle{3, 3, 3},
                                Layout(tuple_of(tuple_of(64, 2), tuple_of(8, 8)),
                                       tuple_of(tuple_of(1, 512), tuple_of(64, 1024)))};
  EXPECT_EQ(to_string(wgmma_descriptor(mn_first, 2, OperandMajor::MN, 0, 128).value()),
            "start 0x0 LBO 1024 SBO 2048 base 0 SW128");
  EXPECT_GT(expect_descriptors_read_the_layout(mn_first, 2, OperandMajor::MN, 128, 0), 0);
  // Interleaved K-major core matrices stacked along k first.
  const ComposedLayout k_first{Swizzle{0, 1, 3},
                               Layout(tuple_of(tuple_of(8, 8), tuple_of(8, 4)),
                                      tuple_of(tuple_of(8, 256), tuple_of(1, 64)))};
  EXPECT_EQ(to_string(wgmma_descriptor(k_first, 2, OperandMajor::K, 0, 64).value()),
            "start 0x0 LBO 128 SBO 512 base 0 none");
  EXPECT_GT(expect_descriptors_read_the_layout(k_first, 2, OperandMajor::K, 64, 0), 0);
}

void expect_rejected(const Result<WgmmaDescriptor>& d, const std::string& reason) {
  ASSERT_FALSE(d.ok()) << to_string(*d);
  EXPECT_NE(d.error().message.find(reason), std::string::npos) << d.error().message;
}

TEST(WgmmaShared, LayoutsWgmmaCannotReadAreRejectedWithTheReason) {
  const ComposedLayout sw128 =
      wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 64, 64).value();
  expect_rejected(wgmma_descriptor(sw128, 2, OperandMajor::K, 512, 64), "not a multiple of 1024");
  expect_rejected(wgmma_descriptor(sw128, 2, OperandMajor::K, 0, 64, 1, 0), "outside the tile");
  expect_rejected(wgmma_descriptor(sw128, 2, OperandMajor::K, 0, 48), "multiple of 8 that divides");
  // The same row-major tile without its swizzle: rows 128 bytes apart is SW128's geometry.
  const ComposedLayout plain{Swizzle{0, 1, 3}, sw128.layout};
  expect_rejected(wgmma_descriptor(plain, 2, OperandMajor::K, 0, 64),
                  "the rows of a core matrix are 128 bytes apart, not 16");
  // SW64's swizzle on SW128's geometry.
  const ComposedLayout mismatched{Swizzle{2, 3, 3}, sw128.layout};
  expect_rejected(wgmma_descriptor(mismatched, 2, OperandMajor::K, 0, 64),
                  "128 bytes apart, not 64");
  // A swizzle that is none of the hardware's.
  const ComposedLayout odd{Swizzle{3, 3, 4}, sw128.layout};
  expect_rejected(wgmma_descriptor(odd, 2, OperandMajor::K, 0, 64), "none of the hardware");
  // Read as MN-major, the K-major tile has k contiguous, not mn.
  expect_rejected(wgmma_descriptor(sw128, 2, OperandMajor::MN, 0, 64), "not canonical");
  // MN-major SW128 needs whole 64-element rows of mn: a B of N = 32 cannot be read.
  const ComposedLayout b = wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B128, 2, 64, 16).value();
  expect_rejected(wgmma_descriptor(b, 2, OperandMajor::MN, 0, 32), "128-byte rows of mn");
  // 8-bit operands are K-major only; 3-byte elements do not exist.
  expect_rejected(wgmma_descriptor(sw128, 1, OperandMajor::MN, 0, 64), "16-bit only");
  EXPECT_FALSE(wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 3, 64, 64).ok());
  EXPECT_FALSE(wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 2, 60, 64).ok());
  EXPECT_FALSE(wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B64, 2, 64, 12).ok());
  // A k chunk that is not contiguous (k steps by 2 elements).
  const ComposedLayout strided{Swizzle{0, 1, 3},
                               Layout(tuple_of(64, 16), tuple_of(32, 2))};
  expect_rejected(wgmma_descriptor(strided, 2, OperandMajor::K, 0, 64), "not canonical");
  // An LBO beyond the 14-bit field: k chunks 256 KiB apart.
  const ComposedLayout far{Swizzle{0, 1, 3},
                           Layout(tuple_of(tuple_of(8, 8), tuple_of(8, 2)),
                                  tuple_of(tuple_of(8, 64), tuple_of(1, 131072)))};
  expect_rejected(wgmma_descriptor(far, 2, OperandMajor::K, 0, 64), "LBO of 262144 bytes");
}

// The fp8 operand tiles of the warp-specialized GEMM (lower_hopper.cpp's ring_layout): 1-byte
// elements, K-major, 128 bytes = 128 elements of k per swizzled row; one wgmma m64nNk32 reads 32
// of them, so the four k32 slices of a 128-wide tile start 32 bytes apart inside the atom, and
// the descriptor's strides are the bf16 tile's in bytes (SBO: 8 rows of 128 bytes).
TEST(WgmmaShared, EightBitKMajorTilesOfTheFp8GemmRing) {
  EXPECT_EQ(wgmma_k_extent(1), 32);
  const ComposedLayout a = wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 1, 128, 128).value();
  EXPECT_EQ(to_string(a), "Sw<3,4,3> o (128,128):(128,1)");
  EXPECT_EQ(to_string(wgmma_descriptor(a, 1, OperandMajor::K, 0, 64).value()),
            "start 0x0 LBO 16 SBO 1024 base 0 SW128");
  // Mode 0: the second warpgroup's 64 rows, 8 KiB further; mode 1: the k32 slices, 32 bytes apart.
  EXPECT_EQ(to_string(wgmma_block_offsets(a, 1, OperandMajor::K, 64).value()), "(2,4):(8192,32)");
  EXPECT_EQ(wgmma_descriptor(a, 1, OperandMajor::K, 0xc000, 64, 1, 3).value().start_address,
            0xc000 + 8192 + 96);
  // B of N = 256 over k 256: two swizzle atoms along k, the second after all 256 rows of the first.
  const ComposedLayout b = wgmma_shared_layout(OperandMajor::K, SwizzleMode::B128, 1, 256, 256).value();
  EXPECT_EQ(to_string(b), "Sw<3,4,3> o (256,(128,2)):(128,(1,32768))");
  EXPECT_EQ(to_string(wgmma_block_offsets(b, 1, OperandMajor::K, 256).value()), "(1,(4,2)):(0,(32,32768))");
  // Every element of these tiles, and of the SW64 / SW32 tiles a k of 64 or 32 takes, is read
  // through the descriptors where the layout puts it.
  int64_t checked = 0;
  checked += expect_descriptors_read_the_layout(a, 1, OperandMajor::K, 64, 0x4000);
  checked += expect_descriptors_read_the_layout(b, 1, OperandMajor::K, 256, 0x4000);
  for (const auto& [mode, k] : {std::pair{SwizzleMode::B64, int64_t{64}}, std::pair{SwizzleMode::B32, int64_t{32}}}) {
    const ComposedLayout tile = wgmma_shared_layout(OperandMajor::K, mode, 1, 128, k).value();
    checked += expect_descriptors_read_the_layout(tile, 1, OperandMajor::K, 64, 0x4000);
    checked += expect_descriptors_read_the_layout(tile, 1, OperandMajor::K, 128, 0x4000);
  }
  EXPECT_EQ(checked, 128 * 128 + 256 * 256 + 2 * (128 * 64 + 128 * 32));
  // 8-bit operands have no MN-major form: wgmma's 8-bit instructions have no transpose.
  EXPECT_FALSE(wgmma_shared_layout(OperandMajor::MN, SwizzleMode::B128, 1, 128, 128).ok());
  expect_rejected(wgmma_descriptor(a, 1, OperandMajor::MN, 0, 64), "16-bit only");
}

TEST(WgmmaShared, DescriptorBitsRoundTrip) {
  for (SwizzleMode mode : kModes) {
    const WgmmaDescriptor d{0x3FFF0, 0x12340, 0x00560, 0, mode};
    EXPECT_EQ(WgmmaDescriptor::decode(d.encode()), d);
  }
  EXPECT_EQ((WgmmaDescriptor{0, 0, 0, 0, SwizzleMode::B32}.encode() >> 62), 3u);
  EXPECT_EQ((WgmmaDescriptor{0, 0, 0, 0, SwizzleMode::B64}.encode() >> 62), 2u);
}

}  // namespace
}  // namespace nautilus::layout
