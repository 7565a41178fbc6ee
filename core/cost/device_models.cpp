#include "core/cost/device_models.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace nautilus::cost {
namespace {

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// "sm_90a" -> "sm_90"; "9.0" -> "sm_90"; "90" -> "sm_90"; anything else unchanged.
std::string normalized_arch(const std::string& text) {
  std::string arch = lower(text);
  if (arch.size() == 3 && std::isdigit(static_cast<unsigned char>(arch[0])) && arch[1] == '.' &&
      std::isdigit(static_cast<unsigned char>(arch[2]))) {
    arch = std::string("sm_") + arch[0] + arch[2];
  } else if (arch.size() == 2 && std::isdigit(static_cast<unsigned char>(arch[0])) &&
             std::isdigit(static_cast<unsigned char>(arch[1]))) {
    arch = "sm_" + arch;
  }
  if (arch.size() == 6 && arch.rfind("sm_", 0) == 0 && arch.back() == 'a') arch.pop_back();
  return arch;
}

// Reads an optional positive number field; false (with the reason) when present but invalid.
bool read_positive(const nlohmann::json& object, const char* key, double* value,
                   std::string* error) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return true;
  if (!it->is_number() || !(it->get<double>() > 0.0) || !std::isfinite(it->get<double>())) {
    *error =
        std::string("device description: ") + key + " must be a positive number, got " + it->dump();
    return false;
  }
  *value = it->get<double>();
  return true;
}

}  // namespace

DeviceModel h100_sxm() {
  DeviceModel d;
  d.name = "NVIDIA H100 80GB HBM3";
  d.arch = "sm_90";
  d.sm_count = 132;
  d.clock_ghz = 1.98;                   // the boost clock the driver reports (sm_clock_khz 1980000)
  // mma.sync m16n8k16 bf16, dense: about two thirds of the peak (FA3 blog, footnote 1, as
  // HOPPER_TWILL_HEXCUTE.md §0.1 quotes it). wgmma reaches the data sheet's dense 989.
  d.tensor_tflops_16bit = 660.0;
  d.wgmma_tensor_tflops_16bit = 989.0;
  d.cuda_core_tflops_f32 = 128 * 2 * 132 * 1.98e9 / 1e12;  // 128 FP32 lanes per SM: 66.9
  d.int32_lanes_per_sm = 64;
  d.sfu_ops_per_clock_per_sm = 16.0;                       // MUFU: 4 per SM sub-partition
  d.dram_bytes_per_s = 3.35e12;                            // HBM3 peak
  d.dram_efficiency = 0.9;                                 // 3.02 TB/s measured (ANCHORS.md)
  d.l2_bytes_per_s = 9.6e12;  // see docs/cost-model.md: requests + fills sustained by our GEMM 4096^3
  d.shared_bytes_per_clock_per_sm = 128.0;  // 32 banks x 4 bytes
  d.global_bytes_per_clock_per_sm = 64.0;
  d.l2_bytes = 50 * 1024 * 1024;
  d.shared_bytes_per_sm = 228 * 1024;
  d.shared_bytes_per_cta_max = 227 * 1024;
  d.shared_bytes_reserved_per_cta = 1024;
  d.registers_per_sm = 65536;
  d.max_registers_per_thread = 255;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_cta = 1024;
  d.max_ctas_per_sm = 32;
  d.schedulers_per_sm = 4;
  d.dram_latency_ns = 600.0;
  d.l2_latency_ns = 250.0;
  d.launch_overhead_us = 2.0;
  return d;
}

// The H200 is the H100's chip (GH100: the same SMs, clocks, tensor cores and 50 MB L2) with
// HBM3e: 4.8 TB/s instead of 3.35. Memory-bound kernels are the ones it changes: at 43% more
// bandwidth per SM, a decode kernel's per-tile instruction chain, hidden behind DRAM on an
// H100, becomes its bound (bench/NOTES.md, 2026-11-28 "decode on the H200").
DeviceModel h200_sxm() {
  DeviceModel d = h100_sxm();
  d.name = "NVIDIA H200";
  d.dram_bytes_per_s = 4.8e12;  // HBM3e peak (the driver reports 4.81 TB/s)
  return d;
}

DeviceModel a100_sxm() {
  DeviceModel d;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.arch = "sm_80";
  d.sm_count = 108;
  d.clock_ghz = 1.41;
  d.tensor_tflops_16bit = 290.0;      // 312 peak; mma.sync is the native path on sm_80
  d.wgmma_tensor_tflops_16bit = 0.0;  // no wgmma before sm_90a
  d.cuda_core_tflops_f32 = 64 * 2 * 108 * 1.41e9 / 1e12;  // 64 FP32 lanes per SM: 19.5
  d.int32_lanes_per_sm = 64;
  d.sfu_ops_per_clock_per_sm = 16.0;
  d.dram_bytes_per_s = 2.039e12;  // HBM2e peak (80 GB part)
  d.dram_efficiency = 0.9;
  d.l2_bytes_per_s = 4.0e12;
  d.shared_bytes_per_clock_per_sm = 128.0;
  d.global_bytes_per_clock_per_sm = 64.0;
  d.l2_bytes = 40 * 1024 * 1024;
  d.shared_bytes_per_sm = 164 * 1024;
  d.shared_bytes_per_cta_max = 163 * 1024;
  d.shared_bytes_reserved_per_cta = 1024;
  d.registers_per_sm = 65536;
  d.max_registers_per_thread = 255;
  d.max_threads_per_sm = 2048;
  d.max_threads_per_cta = 1024;
  d.max_ctas_per_sm = 32;
  d.schedulers_per_sm = 4;
  d.dram_latency_ns = 600.0;
  d.l2_latency_ns = 250.0;
  d.launch_overhead_us = 2.0;
  return d;
}

std::optional<DeviceModel> device_model_for(const std::string& arch_or_name) {
  const std::string text = lower(arch_or_name);
  const std::string arch = normalized_arch(arch_or_name);
  if (contains(text, "h200")) return h200_sxm();
  if (arch == "sm_90" || contains(text, "h100")) return h100_sxm();
  if (arch == "sm_80" || contains(text, "a100")) return a100_sxm();
  return std::nullopt;
}

std::string known_device_models() { return "h100 (sm_90, sm_90a), h200, a100 (sm_80)"; }

std::optional<DeviceModel> device_model_from_json(const nlohmann::json& description,
                                                  std::string* error) {
  std::string ignored;
  if (!error) error = &ignored;
  const nlohmann::json* device = &description;
  if (description.is_object() && description.contains("devices")) {
    const nlohmann::json& devices = description["devices"];
    if (!devices.is_array() || devices.empty()) {
      *error = "device description: \"devices\" lists no device";
      return std::nullopt;
    }
    device = &devices[0];
  }
  if (!device->is_object()) {
    *error = "device description: expected a JSON object, got " + std::string(device->type_name());
    return std::nullopt;
  }
  auto text_field = [&](const char* key) -> std::string {
    auto it = device->find(key);
    return it != device->end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string name = text_field("name");
  std::string arch = text_field("arch");
  if (arch.empty()) arch = text_field("compute_capability");
  std::optional<DeviceModel> preset;
  if (!arch.empty()) preset = device_model_for(arch);
  if (!preset && !name.empty()) preset = device_model_for(name);
  if (!preset) {
    *error = "device description: no cost-model preset for " +
             (arch.empty() && name.empty() ? std::string("a device without arch or name")
                                           : "'" + (arch.empty() ? name : arch) + "'") +
             "; known: " + known_device_models();
    return std::nullopt;
  }
  DeviceModel model = *preset;
  const DeviceModel base = *preset;
  double sm_count = base.sm_count, clock_khz = base.clock_ghz * 1e6, l2 = base.l2_bytes,
         smem_cta = base.shared_bytes_per_cta_max, smem_sm = base.shared_bytes_per_sm,
         registers = base.registers_per_sm, threads = base.max_threads_per_sm,
         dram = base.dram_bytes_per_s;
  if (!read_positive(*device, "sm_count", &sm_count, error) ||
      !read_positive(*device, "sm_clock_khz", &clock_khz, error) ||
      !read_positive(*device, "l2_cache_bytes", &l2, error) ||
      !read_positive(*device, "shared_memory_per_block_optin_bytes", &smem_cta, error) ||
      !read_positive(*device, "shared_memory_per_sm_bytes", &smem_sm, error) ||
      !read_positive(*device, "registers_per_sm", &registers, error) ||
      !read_positive(*device, "max_threads_per_sm", &threads, error) ||
      !read_positive(*device, "peak_memory_bandwidth_bytes_per_s", &dram, error)) {
    return std::nullopt;
  }
  if (!name.empty()) model.name = name;
  model.sm_count = static_cast<int>(std::lround(sm_count));
  model.clock_ghz = clock_khz / 1e6;
  // Throughputs of the whole chip scale with SMs x clock; per-SM-per-clock ones stay.
  const double chip_scale = (model.sm_count * model.clock_ghz) / (base.sm_count * base.clock_ghz);
  model.tensor_tflops_16bit *= chip_scale;
  model.wgmma_tensor_tflops_16bit *= chip_scale;
  model.cuda_core_tflops_f32 *= chip_scale;
  model.l2_bytes_per_s *= model.clock_ghz / base.clock_ghz;
  model.l2_bytes = static_cast<int>(std::min(l2, 2e9));
  model.shared_bytes_per_cta_max = static_cast<int>(smem_cta);
  model.shared_bytes_per_sm = static_cast<int>(std::max(smem_sm, smem_cta));
  model.registers_per_sm = static_cast<int>(registers);
  model.max_threads_per_sm = static_cast<int>(threads);
  model.dram_bytes_per_s = dram;
  return model;
}

}  // namespace nautilus::cost
