#include "core/support/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>

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

}  // namespace nautilus
