#include "core/support/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nautilus {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Bool: return "bool";
    case DType::Index: return "index";
    case DType::F16: return "f16";
    case DType::BF16: return "bf16";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
  }
  return "?";
}

std::optional<DType> parse_tensor_dtype(std::string_view name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  return std::nullopt;
}

bool is_float(DType dtype) {
  return dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F32 || dtype == DType::F64;
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 1;
    case DType::Index: return 8;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
  }
  return 0;
}

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::F64 || b == DType::F64) return DType::F64;
  return DType::F32;
}

namespace {

// Rounds an f32 bit pattern to a narrower float with `mantissa_bits` explicit mantissa bits and
// `exponent_bits` exponent bits, ties to even, with subnormals and overflow to infinity.
double round_to_narrow(double value, int mantissa_bits, int exponent_bits) {
  if (std::isnan(value) || std::isinf(value) || value == 0.0) return value;
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int min_exponent = 1 - bias;  // exponent of the smallest normal
  const double max_finite =
      std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), bias);
  int exponent;
  std::frexp(value, &exponent);  // value = f * 2^exponent, f in [0.5, 1)
  int unbiased = exponent - 1;   // value = g * 2^unbiased, g in [1, 2)
  if (unbiased < min_exponent) unbiased = min_exponent;  // subnormal spacing is fixed
  const double quantum = std::ldexp(1.0, unbiased - mantissa_bits);
  // nearbyint uses the current rounding mode, which is round-to-nearest-even by default.
  double rounded = std::nearbyint(value / quantum) * quantum;
  if (std::fabs(rounded) > max_finite) {
    // Values at least halfway to the next power of two overflow, as in IEEE conversion.
    return std::copysign(INFINITY, value);
  }
  return rounded;
}

}  // namespace

double round_to(DType dtype, double value) {
  switch (dtype) {
    case DType::Bool: return value != 0.0 ? 1.0 : 0.0;
    case DType::Index: return std::trunc(value);
    case DType::F16: return round_to_narrow(value, 10, 5);
    case DType::BF16: return round_to_narrow(value, 7, 8);
    case DType::F32: return static_cast<double>(static_cast<float>(value));
    case DType::F64: return value;
  }
  return value;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F16: return 5e-3;
    case DType::BF16: return 2e-2;
    case DType::F32: return 1e-4;
    case DType::F64: return 1e-10;
    case DType::Bool:
    case DType::Index: return 0.0;
  }
  return 0.0;
}

uint16_t float_to_half_bits(float value) {
  // Round through the double-based rounding of core/support (ties to even, subnormals, overflow
  // to infinity); the result is then exact in binary16 and only needs re-packing.
  const double rounded = round_to(DType::F16, static_cast<double>(value));
  const uint16_t sign = std::signbit(rounded) ? 0x8000 : 0;
  if (std::isnan(rounded)) return static_cast<uint16_t>(sign | 0x7e00);
  if (std::isinf(rounded)) return static_cast<uint16_t>(sign | 0x7c00);
  const double magnitude = std::fabs(rounded);
  if (magnitude == 0.0) return sign;
  int exponent = 0;
  const double fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent
  const int biased = exponent - 1 + 15;                      // [1, 2) mantissa form
  if (biased <= 0) {
    // Subnormal: the value is a multiple of 2^-24.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::ldexp(magnitude, 24)));
  }
  const auto mantissa = static_cast<uint16_t>(std::ldexp(fraction * 2.0 - 1.0, 10));
  return static_cast<uint16_t>(sign | (biased << 10) | mantissa);
}

float half_bits_to_float(uint16_t bits) {
  const bool negative = (bits & 0x8000) != 0;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                              : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), -24);
  } else {
    magnitude = std::ldexp(1.0 + static_cast<double>(mantissa) / 1024.0, exponent - 15);
  }
  return static_cast<float>(negative ? -magnitude : magnitude);
}

uint16_t float_to_bfloat16_bits(float value) {
  const auto bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x0040);  // stay a NaN
  // Round to nearest, ties to even, on the 16 discarded bits (overflow carries into the
  // exponent and yields infinity, as the GPU's cvt.rn.bf16.f32 does).
  const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bfloat16_bits_to_float(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

}  // namespace nautilus
