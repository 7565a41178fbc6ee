// Element types shared by every IR level.
//
// Tensor element types are the spec language's (f32, f16, bf16). `Index` is the integer type of
// loop variables and index arithmetic, `Bool` the type of comparisons, and `F64` exists only for
// the float64 reference interpreter and the `.npy` files it writes.
//
// Interpreters hold every value as a double and emulate narrower types by rounding with
// `round_to`: f32 via the hardware float conversion, f16 and bf16 by round-to-nearest-even on the
// bit pattern, exactly what the GPU conversion instructions do.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nautilus {

enum class DType { Bool, Index, F16, BF16, F32, F64 };

const char* dtype_name(DType dtype);
std::optional<DType> parse_tensor_dtype(std::string_view name);  // f32, f16, bf16 only
bool is_float(DType dtype);
int dtype_bytes(DType dtype);
// The type arithmetic on two operands is done in: equal types stay, anything else is f32.
DType promote(DType a, DType b);

// Rounds `value` to the nearest value representable in `dtype` (ties to even); Index truncates
// toward zero, Bool maps to 0/1. Overflow gives ±inf as on the GPU.
double round_to(DType dtype, double value);

// Largest acceptable normwise relative error, max|out - ref| / max|ref|, of an output of this
// dtype computed in f32 with f32 accumulation, against the float64 reference.
double tolerance(DType dtype);

// Bit patterns: IEEE binary16 and bfloat16 from and to binary32, rounding to nearest with ties
// to even (overflow to infinity, NaN stays NaN), as the GPU's cvt instructions do. The runner's
// buffers and the .npy files use these.
uint16_t float_to_half_bits(float value);
float half_bits_to_float(uint16_t bits);
uint16_t float_to_bfloat16_bits(float value);
float bfloat16_bits_to_float(uint16_t bits);

}  // namespace nautilus
