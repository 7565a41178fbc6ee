// Host tensors (core/support/tensor.h: doubles tagged with a dtype) to and from the bytes a GPU
// kernel reads and writes.
//
// Kernel buffers are row-major and contiguous: f32 as IEEE binary32, f16 as IEEE binary16, bf16
// as the upper 16 bits of binary32, all little endian; fp8e4m3 and fp8e5m2 as one OCP FP8 byte,
// int8 as a two's complement byte, int4 as two's complement nibbles two to a byte (element 2j
// in the low nibble of byte j, the last byte's high nibble 0 for an odd count). Encoding rounds each value to the dtype first (ties to even,
// overflow to infinity for the 16/32-bit floats, saturation for the 8-bit types, as the GPU's
// conversions do), so a tensor from
// random_tensor, whose values are already representable, encodes exactly and decodes back to the
// same doubles: the CPU reference and the GPU see bit-identical inputs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/support/tensor.h"

namespace nautilus::profiler {

// Bytes of a buffer of `element_count` elements of `dtype`; nullopt for a dtype that is not a
// kernel buffer type (bool, index, f64) or a count whose size overflows.
std::optional<uint64_t> buffer_bytes(DType dtype, int64_t element_count);

// The device bytes of `tensor` (f32, f16 or bf16); an empty vector for any other dtype.
std::vector<uint8_t> encode_tensor(const TensorData& tensor);

// The tensor of `shape` and `dtype` held in `bytes`; nullopt when the size does not match.
std::optional<TensorData> decode_tensor(const std::vector<uint8_t>& bytes,
                                        const std::vector<int64_t>& shape, DType dtype);

}  // namespace nautilus::profiler
