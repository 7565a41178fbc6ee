#include "core/layout/swizzle.h"

#include <algorithm>
#include <bit>
#include <string>

#include "core/layout/printer.h"

namespace nautilus::layout {

namespace {

int64_t field_mask(int bits, int position) { return ((int64_t{1} << bits) - 1) << position; }

// Lowest bit above the field that the swizzle rewrites (the zzz field).
int rewritten_top(const Swizzle& s) { return s.base + s.bits + (s.shift < 0 ? -s.shift : 0); }

}  // namespace

Result<Swizzle> Swizzle::make(int bits, int base, int shift) {
  const Swizzle s{bits, base, shift};
  const int distance = shift < 0 ? -shift : shift;
  if (bits < 0 || base < 0) return layout_error(to_string(s) + ": B and M must be >= 0");
  if (distance < bits) {
    return layout_error(to_string(s) + ": |S| must be >= B so that the XORed fields are disjoint");
  }
  if (base + distance + bits > 62) return layout_error(to_string(s) + ": touches bits above 62");
  return s;
}

int64_t Swizzle::operator()(int64_t offset) const {
  if (shift >= 0) return offset ^ ((offset & field_mask(bits, base + shift)) >> shift);
  return offset ^ ((offset & field_mask(bits, base)) << -shift);
}

Result<Swizzle> to_element_units(const Swizzle& byte_swizzle, int element_bytes) {
  if (element_bytes < 1 || !std::has_single_bit(static_cast<unsigned>(element_bytes))) {
    return layout_error("element size " + std::to_string(element_bytes) +
                        " bytes is not a power of two");
  }
  const int log_bytes = std::countr_zero(static_cast<unsigned>(element_bytes));
  if (byte_swizzle.is_identity()) {
    return Swizzle{0, std::max(0, byte_swizzle.base - log_bytes), byte_swizzle.shift};
  }
  if (byte_swizzle.base < log_bytes) {
    return layout_error(to_string(byte_swizzle) + " moves bits inside a " +
                        std::to_string(element_bytes) + "-byte element");
  }
  return Swizzle{byte_swizzle.bits, byte_swizzle.base - log_bytes, byte_swizzle.shift};
}

const char* swizzle_mode_name(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None: return "none";
    case SwizzleMode::B32: return "SW32";
    case SwizzleMode::B64: return "SW64";
    case SwizzleMode::B128: return "SW128";
  }
  return "?";
}

int swizzle_span_bytes(SwizzleMode mode) { return 16 << byte_swizzle(mode).bits; }

int64_t swizzle_repeat_bytes(SwizzleMode mode) {
  return mode == SwizzleMode::None ? 16 : 8 * int64_t{swizzle_span_bytes(mode)};
}

Swizzle byte_swizzle(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None: return kSwizzleNone;
    case SwizzleMode::B32: return kSwizzle32B;
    case SwizzleMode::B64: return kSwizzle64B;
    case SwizzleMode::B128: return kSwizzle128B;
  }
  return kSwizzleNone;
}

Result<SwizzleMode> swizzle_mode_of(const Swizzle& element_swizzle, int element_bytes) {
  if (element_swizzle.is_identity()) return SwizzleMode::None;
  for (SwizzleMode mode : {SwizzleMode::B32, SwizzleMode::B64, SwizzleMode::B128}) {
    Result<Swizzle> in_elements = to_element_units(byte_swizzle(mode), element_bytes);
    if (in_elements && *in_elements == element_swizzle) return mode;
  }
  return layout_error(to_string(element_swizzle) + " on " + std::to_string(element_bytes) +
                      "-byte elements is none of the hardware swizzles (SW32, SW64, SW128: "
                      "Sw<1..3,4,3> on bytes)");
}

int64_t ComposedLayout::cosize() const {
  if (swizzle.is_identity()) return layout.cosize();
  const int64_t block = int64_t{1} << rewritten_top(swizzle);
  return (layout.cosize() + block - 1) / block * block;
}

Result<int64_t> ComposedLayout::evaluate(const IntTuple& coordinate) const {
  Result<int64_t> offset = layout.evaluate(coordinate);
  if (!offset) return offset;
  return swizzle(*offset);
}

}  // namespace nautilus::layout
