// Swizzles: the XOR definition bit by bit, bijection and involution over whole domains, the
// byte-unit presets and their element-unit forms, and swizzled (composed) layouts.
#include "core/layout/swizzle.h"

#include <gtest/gtest.h>

#include <set>

#include "core/layout/printer.h"

namespace nautilus::layout {
namespace {

// The definition written out bit by bit: for each k < B, bit M+k ^= bit M+S+k (S > 0), or
// bit M+|S|+k ^= bit M+k (S < 0).
int64_t reference_swizzle(int b, int m, int s, int64_t x) {
  int64_t y = x;
  for (int k = 0; k < b; ++k) {
    const int from = s > 0 ? m + s + k : m + k;
    const int to = s > 0 ? m + k : m - s + k;
    y ^= ((x >> from) & 1) << to;
  }
  return y;
}

TEST(Swizzle, MatchesTheBitDefinitionAndIsAnInvolutiveBijection) {
  int checked = 0;
  for (int b = 0; b <= 3; ++b) {
    for (int m = 0; m <= 4; ++m) {
      for (int s : {-5, -4, -3, -2, -1, 1, 2, 3, 4, 5}) {
        const Result<Swizzle> sw = Swizzle::make(b, m, s);
        if ((s < 0 ? -s : s) < b) {
          EXPECT_FALSE(sw.ok()) << b << m << s;
          continue;
        }
        ASSERT_TRUE(sw.ok()) << sw.error().message;
        // The natural domain: every offset below the highest bit touched, plus one more block.
        const int64_t domain = int64_t{1} << (m + (s < 0 ? -s : s) + b + 1);
        std::set<int64_t> images;
        for (int64_t x = 0; x < domain; ++x) {
          const int64_t y = (*sw)(x);
          ASSERT_EQ(y, reference_swizzle(b, m, s, x)) << to_string(*sw) << " at " << x;
          ASSERT_EQ((*sw)(y), x) << to_string(*sw);  // involution
          ASSERT_LT(y, domain);
          images.insert(y);
        }
        ASSERT_EQ(static_cast<int64_t>(images.size()), domain) << to_string(*sw);  // bijection
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 150);
}

TEST(Swizzle, InvalidParameters) {
  EXPECT_FALSE(Swizzle::make(-1, 4, 3).ok());
  EXPECT_FALSE(Swizzle::make(1, -1, 3).ok());
  EXPECT_FALSE(Swizzle::make(3, 4, 2).ok());
  EXPECT_FALSE(Swizzle::make(3, 40, 30).ok());
  EXPECT_NE(Swizzle::make(3, 4, 2).error().message.find("|S| must be >= B"), std::string::npos);
}

TEST(Swizzle, PresetsPermuteSixteenByteChunksOfRows) {
  EXPECT_EQ(kSwizzle128B, (Swizzle{3, 4, 3}));
  EXPECT_EQ(kSwizzle64B, (Swizzle{2, 4, 3}));
  EXPECT_EQ(kSwizzle32B, (Swizzle{1, 4, 3}));
  EXPECT_TRUE(kSwizzleNone.is_identity());
  EXPECT_EQ(kSwizzle128B(0x90), 0x80);
  // SW128 on byte addresses: in row r of 128 bytes, chunk c moves to c ^ (r % 8).
  for (int64_t row = 0; row < 16; ++row) {
    for (int64_t chunk = 0; chunk < 8; ++chunk) {
      for (int64_t byte = 0; byte < 16; ++byte) {
        const int64_t address = row * 128 + chunk * 16 + byte;
        ASSERT_EQ(kSwizzle128B(address), row * 128 + (chunk ^ (row % 8)) * 16 + byte);
      }
    }
  }
  // SW64: 64-byte rows, chunk c of 4 moves to c ^ ((r / 2) % 4) -- address bits [7,9).
  for (int64_t address = 0; address < 1024; ++address) {
    const int64_t row = address / 64, chunk = (address / 16) % 4;
    ASSERT_EQ(kSwizzle64B(address), row * 64 + (chunk ^ ((row / 2) % 4)) * 16 + address % 16);
  }
  // SW32: 32-byte rows, chunk c of 2 moves to c ^ ((r / 4) % 2) -- address bit 7.
  for (int64_t address = 0; address < 1024; ++address) {
    const int64_t row = address / 32, chunk = (address / 16) % 2;
    ASSERT_EQ(kSwizzle32B(address), row * 32 + (chunk ^ ((row / 4) % 2)) * 16 + address % 16);
  }
}

TEST(Swizzle, ElementUnits) {
  EXPECT_EQ(to_element_units(kSwizzle128B, 2).value(), (Swizzle{3, 3, 3}));  // bf16 / f16
  EXPECT_EQ(to_element_units(kSwizzle128B, 4).value(), (Swizzle{3, 2, 3}));  // f32
  EXPECT_EQ(to_element_units(kSwizzle64B, 1).value(), (Swizzle{2, 4, 3}));   // fp8
  EXPECT_TRUE(to_element_units(kSwizzleNone, 2)->is_identity());
  EXPECT_FALSE(to_element_units(kSwizzle128B, 32).ok());  // would move bits inside an element
  EXPECT_FALSE(to_element_units(kSwizzle128B, 3).ok());
  // The element-unit swizzle of element offsets equals the byte swizzle of byte addresses.
  for (int bytes : {1, 2, 4, 8, 16}) {
    const Swizzle in_elements = to_element_units(kSwizzle128B, bytes).value();
    for (int64_t e = 0; e < 4096 / bytes; ++e) {
      ASSERT_EQ(in_elements(e) * bytes, kSwizzle128B(e * bytes)) << bytes;
    }
  }
}

TEST(Swizzle, ComposedLayout) {
  const ComposedLayout tile{Swizzle{3, 3, 3}, parse_layout("(8,64):(64,1)").value()};
  EXPECT_EQ(tile.size(), 512);
  EXPECT_EQ(tile.evaluate(tuple_of(1, 8)).value(), 64);
  EXPECT_FALSE(tile.evaluate(tuple_of(1, 2, 3)).ok());
  // A bijection on the 512-element atom: each row keeps its 64 elements, chunks permuted.
  std::set<int64_t> offsets;
  for (int64_t r = 0; r < 8; ++r) {
    for (int64_t c = 0; c < 64; ++c) {
      const int64_t o = tile.evaluate(tuple_of(r, c)).value();
      ASSERT_EQ(o, tile(r + 8 * c));
      ASSERT_EQ(o / 64, r);
      ASSERT_EQ(o % 8, c % 8);
      ASSERT_EQ((o % 64) / 8, (c / 8) ^ r);
      offsets.insert(o);
    }
  }
  EXPECT_EQ(offsets.size(), 512u);
  EXPECT_EQ(tile.cosize(), 512);
  // cosize rounds up to the block the swizzle permutes within; the identity never moves data.
  EXPECT_EQ((ComposedLayout{Swizzle{3, 3, 3}, parse_layout("60:1").value()}).cosize(), 64);
  EXPECT_EQ((ComposedLayout{Swizzle{0, 3, 3}, parse_layout("60:1").value()}).cosize(), 60);
  EXPECT_EQ((ComposedLayout{Swizzle{2, 0, -3}, parse_layout("60:1").value()}).cosize(), 64);
}

}  // namespace
}  // namespace nautilus::layout
