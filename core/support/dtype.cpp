#include "core/support/dtype.h"

#include <algorithm>
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
    case DType::F8E4M3: return "fp8e4m3";
    case DType::F8E5M2: return "fp8e5m2";
    case DType::I8: return "int8";
    case DType::I4: return "int4";
  }
  return "?";
}

std::optional<DType> parse_tensor_dtype(std::string_view name) {
  if (name == "f32") return DType::F32;
  if (name == "f16") return DType::F16;
  if (name == "bf16") return DType::BF16;
  if (name == "fp8e4m3") return DType::F8E4M3;
  if (name == "fp8e5m2") return DType::F8E5M2;
  if (name == "int8") return DType::I8;
  if (name == "int4") return DType::I4;
  return std::nullopt;
}

const char* tensor_dtype_list() { return "f32, f16, bf16, fp8e4m3, fp8e5m2, int8 or int4"; }

bool is_float(DType dtype) { return dtype != DType::Bool && dtype != DType::Index; }

bool is_narrow_storage(DType dtype) {
  return dtype == DType::F8E4M3 || dtype == DType::F8E5M2 || dtype == DType::I8 || dtype == DType::I4;
}

bool is_integer_storage(DType dtype) { return dtype == DType::I8 || dtype == DType::I4; }

bool is_eight_bit_float(DType dtype) { return dtype == DType::F8E4M3 || dtype == DType::F8E5M2; }

double max_finite(DType dtype) {
  switch (dtype) {
    case DType::F16: return 65504.0;
    case DType::BF16: return std::ldexp(2.0 - std::ldexp(1.0, -7), 127);
    case DType::F32: return static_cast<double>(std::numeric_limits<float>::max());
    case DType::F64: return std::numeric_limits<double>::max();
    case DType::F8E4M3: return 448.0;
    case DType::F8E5M2: return 57344.0;
    case DType::I8: return 127.0;
    case DType::I4: return 7.0;
    case DType::Bool: return 1.0;
    case DType::Index: return 9.2233720368547758e18;
  }
  return 0.0;
}

int dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::Bool: return 1;
    case DType::Index: return 8;
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::I8:
    case DType::I4: return 1;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::F32: return 4;
    case DType::F64: return 8;
  }
  return 0;
}

int64_t global_bytes(DType dtype, int64_t elements) {
  if (dtype == DType::I4) return (elements + 1) / 2;
  return elements * dtype_bytes(dtype);
}

DType promote(DType a, DType b) {
  if (is_narrow_storage(a) || is_narrow_storage(b)) return a == DType::F64 || b == DType::F64 ? DType::F64 : DType::F32;
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

// OCP FP8: like round_to_narrow, but e4m3 gives up infinity (its exponent 15 holds normal
// numbers up to 448, and only S.1111.111 is NaN), and both types saturate: a value whose
// rounding exceeds the largest finite one becomes it, infinity included. This is what
// cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (and __nv_cvt_float_to_fp8 with __NV_SATFINITE) do.
double round_to_fp8(double value, int mantissa_bits, int min_exponent, double largest) {
  if (std::isnan(value) || value == 0.0) return value;
  if (std::isinf(value)) return std::copysign(largest, value);
  int exponent;
  std::frexp(value, &exponent);
  int unbiased = exponent - 1;
  if (unbiased < min_exponent) unbiased = min_exponent;
  const double quantum = std::ldexp(1.0, unbiased - mantissa_bits);
  const double rounded = std::nearbyint(value / quantum) * quantum;
  if (std::fabs(rounded) > largest) return std::copysign(largest, value);
  // A value that rounds to zero keeps its sign, as the conversion does.
  return rounded == 0.0 ? std::copysign(0.0, value) : rounded;
}

// int8 as cvt.rni.sat.s8.f32: nearest integer, ties to even, clamped to [-128, 127]; NaN is 0.
double round_to_int8(double value) {
  if (std::isnan(value)) return 0.0;
  const double rounded = std::nearbyint(value);
  if (rounded > 127.0) return 127.0;
  if (rounded < -128.0) return -128.0;
  return rounded == 0.0 ? 0.0 : rounded;  // no negative zero in an integer
}

// int4: nearest integer, ties to even, clamped to [-8, 7]; NaN is 0.
double round_to_int4(double value) {
  if (std::isnan(value)) return 0.0;
  const double rounded = std::clamp(std::nearbyint(value), -8.0, 7.0);
  return rounded == 0.0 ? 0.0 : rounded;
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
    case DType::F8E4M3: return round_to_fp8(value, 3, -6, 448.0);
    case DType::F8E5M2: return round_to_fp8(value, 2, -14, 57344.0);
    case DType::I8: return round_to_int8(value);
    case DType::I4: return round_to_int4(value);
  }
  return value;
}

double tolerance(DType dtype) {
  switch (dtype) {
    case DType::F16: return 5e-3;
    case DType::BF16: return 2e-2;
    case DType::F32: return 1e-4;
    case DType::F64: return 1e-10;
    // An 8-bit output is within half a step of the exact value; a sum computed in another order
    // may round to the neighbouring value, a whole step: e4m3 steps are 1/8 of the value
    // (1/4 for e5m2) at the largest magnitudes. int8 outputs are judged against their largest
    // magnitude, where a step of 1 is small only when values span the type's range.
    case DType::F8E4M3: return 0.125;
    case DType::F8E5M2: return 0.25;
    case DType::I8: return 2e-2;
    case DType::I4: return 0.15;  // never an output (an input type only); one step of 7
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

namespace {

struct Fp8Format {
  int mantissa_bits;
  int bias;
};

Fp8Format fp8_format(DType dtype) {
  return dtype == DType::F8E4M3 ? Fp8Format{3, 7} : Fp8Format{2, 15};
}

}  // namespace

uint8_t float_to_fp8_bits(DType dtype, float value) {
  const Fp8Format format = fp8_format(dtype);
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  if (std::isnan(value)) return static_cast<uint8_t>(sign | (dtype == DType::F8E4M3 ? 0x7f : 0x7e));
  const double magnitude = std::fabs(round_to(dtype, static_cast<double>(value)));
  if (magnitude == 0.0) return sign;
  int exponent = 0;
  const double fraction = std::frexp(magnitude, &exponent);  // magnitude = fraction * 2^exponent
  const int biased = exponent - 1 + format.bias;
  if (biased <= 0) {
    // Subnormal: a multiple of 2^(1 - bias - mantissa_bits).
    const auto units = static_cast<int>(std::ldexp(magnitude, format.bias - 1 + format.mantissa_bits));
    return static_cast<uint8_t>(sign | units);
  }
  const auto mantissa = static_cast<int>(std::ldexp(fraction * 2.0 - 1.0, format.mantissa_bits));
  return static_cast<uint8_t>(sign | (biased << format.mantissa_bits) | mantissa);
}

float fp8_bits_to_float(DType dtype, uint8_t bits) {
  const Fp8Format format = fp8_format(dtype);
  const bool negative = (bits & 0x80) != 0;
  const int exponent_bits = 7 - format.mantissa_bits;
  const int exponent = (bits >> format.mantissa_bits) & ((1 << exponent_bits) - 1);
  const int mantissa = bits & ((1 << format.mantissa_bits) - 1);
  const int all_ones = (1 << exponent_bits) - 1;
  double magnitude;
  if (dtype == DType::F8E4M3 && exponent == all_ones && mantissa == (1 << format.mantissa_bits) - 1) {
    magnitude = std::numeric_limits<double>::quiet_NaN();  // e4m3 has one NaN and no infinity
  } else if (dtype == DType::F8E5M2 && exponent == all_ones) {
    magnitude = mantissa != 0 ? std::numeric_limits<double>::quiet_NaN()
                              : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(mantissa), 1 - format.bias - format.mantissa_bits);
  } else {
    magnitude = std::ldexp(1.0 + std::ldexp(static_cast<double>(mantissa), -format.mantissa_bits),
                           exponent - format.bias);
  }
  return static_cast<float>(negative ? -magnitude : magnitude);
}

}  // namespace nautilus
