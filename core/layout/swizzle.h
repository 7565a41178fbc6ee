// XOR swizzles and swizzled layouts for shared memory.
//
// Swizzle(B, M, S) is CuTe's Swizzle<B,M,S>: a bit permutation of offsets that XORs the B bits
// at [M+S, M+S+B) (the "yyy" bits) into the B bits at [M, M+B) (the "zzz" bits):
//
//     offset:  ... yyy ... zzz mmmm      (mmmm = the M low bits, left alone)
//     result:  ... yyy ... (zzz ^ yyy) mmmm
//
// A negative S swaps the roles: the bits at [M, M+B) are XORed into [M+|S|, M+|S|+B). With
// |S| >= B the two fields are disjoint, so the swizzle is an involution (sw(sw(x)) == x) and a
// bijection on every aligned block of 2^(M+|S|+B) offsets; B == 0 is the identity.
//
// Units. A swizzle acts on whatever unit its offsets count. The named presets are in *bytes*,
// the unit Hopper TMA and wgmma descriptors use: SW128 = Swizzle(3,4,3) permutes the eight
// 16-byte chunks of each 128-byte row by the row index mod 8 (rows of 128 bytes, bits [7,10));
// SW64 = Swizzle(2,4,3) and SW32 = Swizzle(1,4,3) permute four and two chunks of 64- and
// 32-byte rows. A layout counts *elements*, so a swizzle is rebased to element units with
// to_element_units() before it is composed with one: for bf16 (2 bytes) SW128 becomes
// Swizzle(3,3,3) -- Hexcute's Swizzle(bits, 7 - log2(element bits), 3) -- and a 16-byte chunk
// is 8 elements.
#pragma once

#include <cstdint>

#include "core/layout/layout.h"
#include "core/layout/result.h"

namespace nautilus::layout {

struct Swizzle {
  int bits = 0;   // B: width of the XORed fields
  int base = 0;   // M: low bits left untouched
  int shift = 0;  // S: distance from the zzz field up to the yyy field

  // Checked construction: B >= 0, M >= 0, |S| >= B and every touched bit below bit 62.
  static Result<Swizzle> make(int bits, int base, int shift);

  // The permuted offset. Offsets are non-negative.
  // @post Swizzle(3,4,3)(0x90) == 0x90 ^ 0x10 == 0x80   (row 1, chunk 1 -> chunk 0)
  int64_t operator()(int64_t offset) const;

  bool is_identity() const { return bits == 0; }

  bool operator==(const Swizzle&) const = default;
};

// Byte-unit presets (see "Units" above).
inline constexpr Swizzle kSwizzleNone{0, 4, 3};
inline constexpr Swizzle kSwizzle32B{1, 4, 3};
inline constexpr Swizzle kSwizzle64B{2, 4, 3};
inline constexpr Swizzle kSwizzle128B{3, 4, 3};

// The four swizzle modes of Hopper's TMA engine and wgmma descriptors. Both swizzle 16-byte
// chunks of W-byte rows (W = the span) by the row index, on absolute shared-memory addresses;
// None is the "interleave" type, whose rows are single 16-byte chunks. The TMA mode of a tile
// must equal the mode of the wgmma descriptors that read it: both come from the same
// ComposedLayout (wgmma.h, tma.h).
enum class SwizzleMode { None, B32, B64, B128 };
const char* swizzle_mode_name(SwizzleMode mode);  // "none", "SW32", "SW64", "SW128"
// W: 16, 32, 64, 128.
int swizzle_span_bytes(SwizzleMode mode);
// The aligned block over which the pattern repeats, 8 rows of W bytes: 256, 512, 1024 (16 for
// None). A swizzled tile must start at a multiple of it for the layout's swizzle, which acts on
// offsets from the tile's start, to be the hardware's, which acts on addresses.
int64_t swizzle_repeat_bytes(SwizzleMode mode);
// The byte-unit preset of a mode: kSwizzleNone, kSwizzle32B, kSwizzle64B, kSwizzle128B.
Swizzle byte_swizzle(SwizzleMode mode);
// The mode of a swizzle given in units of `element_bytes`-byte elements (as ComposedLayouts hold
// it); fails with the reason for any swizzle that is not one of the four.
// swizzle_mode_of(Swizzle(3,3,3), 2) == SwizzleMode::B128
Result<SwizzleMode> swizzle_mode_of(const Swizzle& element_swizzle, int element_bytes);

// The same permutation expressed on elements of `element_bytes` bytes (a power of two):
// M decreases by log2(element_bytes). Fails when the swizzle would move bits inside one
// element (M < log2(element_bytes)) or the size is not a power of two.
// to_element_units(kSwizzle128B, 2) == Swizzle(3,3,3)
Result<Swizzle> to_element_units(const Swizzle& byte_swizzle, int element_bytes);

// swizzle o layout: the layout maps a coordinate to an offset (in the swizzle's units), then
// the swizzle permutes the offset. Shared-memory tiles are ComposedLayouts; an unswizzled one
// has the identity swizzle.
// @post C(c) == swizzle(layout(c))
// Sw<3,3,3> o (8,64):(64,1) maps (row 1, col 8) to 1*64 + (8 ^ 8) == 64
struct ComposedLayout {
  Swizzle swizzle;
  Layout layout;

  int64_t size() const { return layout.size(); }
  // The memory extent to allocate: cosize(layout) rounded up to the aligned block inside which
  // the swizzle moves offsets (2^(M+B) for S > 0, 2^(M+|S|+B) for S < 0).
  int64_t cosize() const;
  int64_t operator()(int64_t index) const { return swizzle(layout(index)); }
  Result<int64_t> evaluate(const IntTuple& coordinate) const;

  bool operator==(const ComposedLayout&) const = default;
};

}  // namespace nautilus::layout
