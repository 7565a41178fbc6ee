#include "profiler/tensor_bytes.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/support/parallel.h"

namespace nautilus::profiler {

std::optional<uint64_t> buffer_bytes(DType dtype, int64_t element_count) {
  if (!is_float(dtype) || dtype == DType::F64) return std::nullopt;  // the tensor dtypes
  if (element_count < 0) return std::nullopt;
  const auto count = static_cast<uint64_t>(element_count);
  const auto width = static_cast<uint64_t>(dtype_bytes(dtype));
  if (count > std::numeric_limits<uint64_t>::max() / width) return std::nullopt;
  return static_cast<uint64_t>(global_bytes(dtype, element_count));  // int4: two elements a byte
}

namespace {

// int4: element 2j in the low nibble of byte j, 2j + 1 in the high nibble (dtype.h).
std::vector<uint8_t> encode_int4(const TensorData& tensor, uint64_t size) {
  std::vector<uint8_t> bytes(size, 0);
  for (size_t i = 0; i < tensor.values.size(); ++i) {
    const auto nibble = static_cast<uint8_t>(static_cast<int>(round_to(DType::I4, tensor.values[i])) & 0xf);
    bytes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? nibble : nibble << 4);
  }
  return bytes;
}

double int4_value(const std::vector<uint8_t>& bytes, size_t i) {
  const int nibble = (bytes[i / 2] >> (i % 2 == 0 ? 0 : 4)) & 0xf;
  return nibble >= 8 ? nibble - 16 : nibble;
}

}  // namespace

std::vector<uint8_t> encode_tensor(const TensorData& tensor) {
  std::optional<uint64_t> size = buffer_bytes(tensor.dtype, static_cast<int64_t>(tensor.values.size()));
  if (!size) return {};
  if (tensor.dtype == DType::I4) return encode_int4(tensor, *size);
  std::vector<uint8_t> bytes(*size);
  const auto element_bytes = static_cast<size_t>(dtype_bytes(tensor.dtype));
  parallel_chunks(static_cast<int64_t>(tensor.values.size()), [&](int64_t begin, int64_t end) {
    uint8_t* out = bytes.data() + static_cast<size_t>(begin) * element_bytes;
    for (int64_t i = begin; i < end; ++i) {
      // Rounding the double straight to the dtype avoids a double rounding through f32; the
      // float below then holds the value exactly.
      const auto single = static_cast<float>(round_to(tensor.dtype, tensor.values[i]));
      if (tensor.dtype == DType::F32) {
        std::memcpy(out, &single, 4);
        out += 4;
        continue;
      }
      if (tensor.dtype == DType::I8) {
        *out++ = static_cast<uint8_t>(static_cast<int8_t>(single));
        continue;
      }
      if (tensor.dtype == DType::F8E4M3 || tensor.dtype == DType::F8E5M2) {
        *out++ = float_to_fp8_bits(tensor.dtype, single);
        continue;
      }
      const uint16_t half = tensor.dtype == DType::F16 ? float_to_half_bits(single)
                                                       : float_to_bfloat16_bits(single);
      std::memcpy(out, &half, 2);
      out += 2;
    }
  });
  return bytes;
}

std::optional<TensorData> decode_tensor(const std::vector<uint8_t>& bytes,
                                        const std::vector<int64_t>& shape, DType dtype) {
  TensorData tensor;
  tensor.shape = shape;
  tensor.dtype = dtype;
  const int64_t count = tensor.element_count();
  std::optional<uint64_t> size = buffer_bytes(dtype, count);
  if (!size || *size != bytes.size()) return std::nullopt;
  tensor.values.resize(static_cast<size_t>(count));
  if (dtype == DType::I4) {
    for (size_t i = 0; i < tensor.values.size(); ++i) tensor.values[i] = int4_value(bytes, i);
    return tensor;
  }
  const auto element_bytes = static_cast<size_t>(dtype_bytes(dtype));
  parallel_chunks(count, [&](int64_t begin, int64_t end) {
    const uint8_t* in = bytes.data() + static_cast<size_t>(begin) * element_bytes;
    for (int64_t i = begin; i < end; ++i) {
      double& value = tensor.values[static_cast<size_t>(i)];
      if (dtype == DType::I8) {
        value = static_cast<int8_t>(*in++);
        continue;
      }
      if (dtype == DType::F8E4M3 || dtype == DType::F8E5M2) {
        value = fp8_bits_to_float(dtype, *in++);
        continue;
      }
      if (dtype == DType::F32) {
        float single = 0;
        std::memcpy(&single, in, 4);
        in += 4;
        value = single;
        continue;
      }
      uint16_t half = 0;
      std::memcpy(&half, in, 2);
      in += 2;
      value = dtype == DType::F16 ? half_bits_to_float(half) : bfloat16_bits_to_float(half);
    }
  });
  return tensor;
}

}  // namespace nautilus::profiler
