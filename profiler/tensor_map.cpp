// Encoding TMA tensor maps through the driver (see tensor_map.h).
#include "profiler/tensor_map.h"

#include <vector>

namespace nautilus::profiler {

int tensor_map_data_type(DType dtype) {
  switch (dtype) {
    case DType::F16: return 6;   // CU_TENSOR_MAP_DATA_TYPE_FLOAT16
    case DType::BF16: return 9;  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
    case DType::F8E4M3:
    case DType::F8E5M2:
    case DType::I8:
    case DType::I4: return 0;    // CU_TENSOR_MAP_DATA_TYPE_UINT8: TMA copies the bytes
    default: return 7;           // CU_TENSOR_MAP_DATA_TYPE_FLOAT32
  }
}

uint64_t tensor_map_tensor_bytes(const codegen::TensorMap& map, DType dtype) {
  int64_t elements = 1;
  for (int64_t extent : map.dims) elements *= extent;
  return static_cast<uint64_t>(global_bytes(dtype, elements));
}

bool needs_small_tensor_workaround(int driver_version, uint64_t tensor_bytes) {
  return driver_version > 0 && driver_version <= 13010 && tensor_bytes < (uint64_t{128} << 10);
}

cu::Result encode_tensor_map(cu::TensorMapEncodeTiledFn encoder, const codegen::TensorMap& map,
                             DType dtype, cu::DevicePtr base, int driver_version,
                             TensorMapBytes* out) {
  const size_t rank = map.rank();
  std::vector<unsigned long long> dims(map.dims.begin(), map.dims.end());
  std::vector<unsigned long long> strides(map.strides_bytes.begin(), map.strides_bytes.end());
  std::vector<unsigned> box(map.box.begin(), map.box.end());
  std::vector<unsigned> element_strides(map.element_strides.begin(), map.element_strides.end());
  // The enumerators of codegen's TensorMapSwizzle / L2Promotion / OobFill follow cuda.h's order
  // (NONE, 32B/64B, ...), so their index is the driver's value.
  const int swizzle = static_cast<int>(map.swizzle);
  const int l2_promotion = static_cast<int>(map.l2_promotion);
  const int oob_fill = static_cast<int>(map.oob_fill);
  constexpr int kInterleaveNone = 0;
  void* address = reinterpret_cast<void*>(static_cast<uintptr_t>(base + static_cast<uint64_t>(map.offset_bytes)));
  *out = TensorMapBytes{};
  cu::Result r = encoder(out->words.data(), tensor_map_data_type(dtype), static_cast<unsigned>(rank),
                         address, dims.data(), strides.empty() ? nullptr : strides.data(),
                         box.data(), element_strides.data(), kInterleaveNone, swizzle,
                         l2_promotion, oob_fill);
  if (r != cu::kSuccess) return r;
  if (needs_small_tensor_workaround(driver_version, tensor_map_tensor_bytes(map, dtype))) {
    out->words[kSmallTensorWorkaroundWord] &= ~(uint64_t{1} << kSmallTensorWorkaroundBit);
  }
  return cu::kSuccess;
}

}  // namespace nautilus::profiler
