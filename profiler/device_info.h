// GPU discovery: which CUDA devices this machine has, and what they can do.
//
// `query_devices` loads the driver (cuda_driver.h), initializes it and reads each device's
// properties. A machine without a usable GPU is a normal outcome, not an error: the result then
// carries a typed `NoGpu` reason with a one-line message that the CLI prints and the app's
// profiler panel shows, and nothing else in the app is affected.
//
// The properties are what the compiler's cost model and the roofline need (SM count, clocks,
// memory size and bandwidth, L2 size, the opt-in shared memory per block that bounds pipeline
// stages) plus what a user needs to tell devices apart (name, compute capability, PCI address).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nautilus::profiler {

enum class NoGpuReason {
  LibraryNotFound,  // libcuda.so.1 cannot be loaded: no NVIDIA driver installed
  DriverIncomplete, // the library lacks an entry point (very old driver, or not libcuda)
  InitFailed,       // cuInit failed (driver/kernel-module mismatch, no permission, ...)
  NoDevices,        // the driver works but sees no device
  QueryFailed,      // a device property could not be read
};

// Stable lower_snake_case names used in JSON, e.g. "library_not_found".
const char* no_gpu_reason_name(NoGpuReason reason);

struct NoGpu {
  NoGpuReason reason = NoGpuReason::LibraryNotFound;
  std::string message;  // one line, e.g. "cannot load libcuda.so.1: ... No such file ..."
};

struct DeviceInfo {
  int ordinal = 0;  // CUdevice ordinal as seen by this process (after CUDA_VISIBLE_DEVICES)
  std::string name;
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  uint64_t total_memory_bytes = 0;
  int sm_clock_khz = 0;      // typical SM clock
  int memory_clock_khz = 0;  // peak memory clock
  int memory_bus_width_bits = 0;
  int l2_cache_bytes = 0;
  // The most shared memory one block can use once the kernel opts in (cuFuncSetAttribute with
  // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES); bounds tile sizes x pipeline stages.
  int shared_memory_per_block_optin_bytes = 0;
  int shared_memory_per_sm_bytes = 0;
  int registers_per_sm = 0;
  int max_threads_per_sm = 0;
  int warp_size = 0;
  int pci_domain = 0;
  int pci_bus = 0;

  // "sm_90" style architecture name (without the "a" feature suffix).
  std::string arch() const;
  // Theoretical DRAM bandwidth in bytes/s: 2 transfers per memory clock (DDR) x bus width.
  double peak_memory_bandwidth_bytes_per_s() const;
};

// Either `no_gpu` is set and `devices` is empty, or `no_gpu` is empty and there is at least one
// device. `driver_version` is known whenever the library loaded (also with no device).
struct DeviceQuery {
  int driver_version = 0;  // CUDA's encoding: 1000 * major + 10 * minor (13000 = 13.0)
  std::vector<DeviceInfo> devices;
  std::optional<NoGpu> no_gpu;

  bool has_gpu() const { return !no_gpu.has_value(); }
};

// Queries the system driver (libcuda.so.1).
DeviceQuery query_devices();
// Queries the driver in `library` (a SONAME or path); used by tests with a stand-in driver.
DeviceQuery query_devices(const std::string& library);

// "13.0" for 13000; "unknown" for 0.
std::string format_driver_version(int version);

nlohmann::ordered_json to_json(const DeviceInfo& device);
// {"driver_version": ..., "devices": [...]} or {"driver_version": ..., "no_gpu": {reason, message}}
nlohmann::ordered_json to_json(const DeviceQuery& query);

}  // namespace nautilus::profiler
