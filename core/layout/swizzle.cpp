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
