// The GPUs the cost model knows: presets with each chip's ceilings, a lookup by architecture or
// device name, and the override from the runner's device description.
//
// Where the numbers come from (docs/cost-model.md has the table):
//   - SM counts, clocks, memory sizes, register files and shared-memory limits: NVIDIA's data
//     sheets and the CUDA occupancy limits of the compute capability.
//   - Tensor ceilings, one per instruction path. `tensor_tflops_16bit` is what mma.sync.m16n8k16
//     (the Mma op) can reach, not the data-sheet peak: on an H100 about 660 TFLOP/s dense bf16,
//     two thirds of the peak (HOPPER_TWILL_HEXCUTE.md §0.1, from the FlashAttention-3 blog);
//     `wgmma_tensor_tflops_16bit` is warpgroup MMA's (the Wgmma op, sm_90a), the data sheet's
//     989 (ANCHORS.md: "about 990"). On an A100 mma.sync is the native path: 312 TFLOP/s peak,
//     about 290 reachable, and there is no wgmma (0).
//   - DRAM: the data-sheet peak with `dram_efficiency` 0.9 (ANCHORS.md measured 3.02 TB/s for
//     a device-to-device copy on an H100 whose peak is 3.35 TB/s).
//
// `device_model_from_json` takes one device object of the runner's description
// (profiler/device_info.h `to_json`: sm_count, sm_clock_khz, l2_cache_bytes,
// shared_memory_per_block_optin_bytes, shared_memory_per_sm_bytes, registers_per_sm,
// max_threads_per_sm, peak_memory_bandwidth_bytes_per_s, name, arch) or a whole query document
// ({"devices": [...]}, the first device). It starts from the preset of the device's
// architecture and overrides what the description measures; the per-SM and per-clock throughputs
// are rescaled to the reported SM count and clock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/cost/cost_model.h"

namespace nautilus::cost {

DeviceModel h100_sxm();  // sm_90, 132 SMs, HBM3
DeviceModel h200_sxm();  // the H100 with HBM3e (4.8 TB/s)
DeviceModel a100_sxm();  // sm_80, 108 SMs, HBM2e (80 GB)

// By architecture ("sm_90", "sm_90a", "sm_80", "90", "8.0") or by device name ("NVIDIA H100 80GB
// HBM3", "h100", "A100-SXM4-80GB", "a100"), case-insensitive; nullopt when unknown.
std::optional<DeviceModel> device_model_for(const std::string& arch_or_name);
// The names device_model_for accepts, for help texts: "h100 (sm_90), a100 (sm_80)".
std::string known_device_models();

// A preset overridden by the runner's description (see above). Returns nullopt with `error` set
// ("device description: sm_count must be a positive integer, got \"x\"") when the JSON is not a
// device description or names an architecture without a preset.
std::optional<DeviceModel> device_model_from_json(const nlohmann::json& description,
                                                  std::string* error);

}  // namespace nautilus::cost
