// TMA tensor maps on the host: a package's codegen::TensorMap encoded through the driver into
// the 128-byte CUtensorMap a kernel takes as a `const __grid_constant__` parameter.
//
// The map is opaque: only cuTensorMapEncodeTiled writes it, from the buffer's device address and
// the view and box of the package. Two facts of the driver shape this file:
//   - the map must be 64-byte aligned (where it is encoded, and as the kernel parameter: the
//     runner keeps it in TensorMapBytes, aligned, and hands that storage to the launch);
//   - drivers up to 13.1 (version 13010) encode maps of small tensors (under 128 KiB) with a
//     bit that makes TMA fail occasionally; CUTLASS clears it after encoding, and so does
//     `encode` here (see needs_small_tensor_workaround).
// A map holds the buffer's address, so it is encoded again whenever the buffer moves
// (TensorMapCache in gpu_session.h).
#pragma once

#include <array>
#include <cstdint>

#include "core/codegen/package.h"
#include "profiler/cuda_driver.h"

namespace nautilus::profiler {

// The CUtensorMap: 16 words of 64 bits, 64-byte aligned.
struct alignas(64) TensorMapBytes {
  std::array<uint64_t, 16> words{};
  bool operator==(const TensorMapBytes&) const = default;
};
static_assert(sizeof(TensorMapBytes) == 128, "CUtensorMap is 128 bytes");

// CUtensorMapDataType of a tensor dtype: FLOAT32 (7), FLOAT16 (6), BFLOAT16 (9).
int tensor_map_data_type(DType dtype);

// The bytes of the tensor a map views: the product of its dims times the element size.
uint64_t tensor_map_tensor_bytes(const codegen::TensorMap& map, DType dtype);

// True when a map encoded by driver `driver_version` (cuDriverGetVersion: 13010 for 13.1) over a
// tensor of `tensor_bytes` needs bit 21 of its word 1 cleared: drivers up to 13010 set it for
// tensors under 128 KiB, and TMA through such a map fails now and then (a driver bug NVIDIA's
// CUTLASS works around the same way).
bool needs_small_tensor_workaround(int driver_version, uint64_t tensor_bytes);
inline constexpr int kSmallTensorWorkaroundWord = 1;
inline constexpr int kSmallTensorWorkaroundBit = 21;

// Encodes `map` over the buffer of `dtype` at device address `base` with `encoder`; on failure
// returns the driver's error code (and leaves `out` unspecified).
cu::Result encode_tensor_map(cu::TensorMapEncodeTiledFn encoder, const codegen::TensorMap& map,
                             DType dtype, cu::DevicePtr base, int driver_version,
                             TensorMapBytes* out);

}  // namespace nautilus::profiler
