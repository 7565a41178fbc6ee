// Element types shared by every IR level.
//
// Tensor element types are the spec language's: f32, f16, bf16, the OCP 8-bit floats fp8e4m3 and
// fp8e5m2, int8, and int4 (signed 4-bit integers packed two to a byte in global memory). `Index` is the integer type of loop variables and index arithmetic, `Bool`
// the type of comparisons, and `F64` exists only for the float64 reference interpreter and the
// `.npy` files it writes.
//
// Interpreters hold every value as a double and emulate narrower types by rounding with
// `round_to`: f32 via the hardware float conversion, f16 and bf16 by round-to-nearest-even on the
// bit pattern, exactly what the GPU conversion instructions do. The 8-bit types are storage
// types only: arithmetic on them is done in f32, and a store rounds to nearest even and
// saturates, as CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...) and cvt.rni.sat.s8.f32 do
// (a value beyond the largest finite one, infinity included, becomes that largest value; NaN
// stays NaN for fp8 and becomes 0 for int8).
//
// int4 is an input type only. In global memory two elements share a byte along the tensor's
// last axis: element 2j in the low nibble of byte j, element 2j + 1 in the high nibble (the
// order GPTQ, AWQ and bitsandbytes pack), so the last axis has an even extent. Kernels read the
// packed bytes from global memory and hold each element as a signed byte in registers and in
// shared memory, which is what dtype_bytes says; global_bytes gives the packed size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nautilus {

// New members go last: the numeric values appear in printed IR keys.
enum class DType { Bool, Index, F16, BF16, F32, F64, F8E4M3, F8E5M2, I8, I4 };

const char* dtype_name(DType dtype);
// The spec language's tensor dtypes: f32, f16, bf16, fp8e4m3, fp8e5m2, int8, int4.
std::optional<DType> parse_tensor_dtype(std::string_view name);
// The list for messages: "f32, f16, bf16, fp8e4m3, fp8e5m2, int8 or int4".
const char* tensor_dtype_list();
// True for every type whose values are real numbers that arithmetic computes in f32 or f64:
// the floats and the narrow storage types (int8 and int4 included: their values are small
// integers that are read, scaled and summed as reals). False for Index and Bool.
bool is_float(DType dtype);
// The narrow storage types (fp8e4m3, fp8e5m2, int8, int4): loaded and converted to f32 in
// registers, where each element is a byte of its own, except the fp8 operands of Hopper's 8-bit
// wgmma (docs/low-precision.md).
bool is_narrow_storage(DType dtype);
// The integer storage types (int8, int4): two's complement, a signed byte an element in registers.
bool is_integer_storage(DType dtype);
// The 8-bit floats (fp8e4m3, fp8e5m2): the operand types of wgmma's k32 form on sm_90a.
bool is_eight_bit_float(DType dtype);
// The largest finite value of a float dtype (fp8e4m3: 448, fp8e5m2: 57344, int8: 127, int4: 7).
double max_finite(DType dtype);
// Bytes of one element in registers and shared memory (int4: 1, a signed byte).
int dtype_bytes(DType dtype);
// Bytes `elements` elements take in global memory: packed for int4 (two to a byte, rounded up),
// elements * dtype_bytes otherwise.
int64_t global_bytes(DType dtype, int64_t elements);
// The type arithmetic on two operands is done in: equal 16-, 32- and 64-bit types stay, an 8-bit
// operand (fp8, int8, int4) computes in f32 (f64 beside an f64), anything else is f32.
DType promote(DType a, DType b);

// Rounds `value` to the nearest value representable in `dtype` (ties to even); Index truncates
// toward zero, Bool maps to 0/1. Overflow gives ±inf for f16, bf16 and f32 as on the GPU; the
// 8-bit types saturate to ±max_finite (infinity included), as the satfinite conversions do, and
// int8 maps NaN to 0; int4 clamps to [-8, 7] and maps NaN to 0.
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
// OCP FP8 bit patterns (`dtype` is F8E4M3 or F8E5M2), rounding and saturating as round_to does.
// NaN encodes as 0x7f (e4m3) or 0x7e (e5m2) with the input's sign, as the CUDA conversion does.
uint8_t float_to_fp8_bits(DType dtype, float value);
float fp8_bits_to_float(DType dtype, uint8_t bits);

}  // namespace nautilus
