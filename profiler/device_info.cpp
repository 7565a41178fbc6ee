#include "profiler/device_info.h"

#include <array>
#include <cstddef>

#include "profiler/cuda_driver.h"

namespace nautilus::profiler {
namespace {

NoGpu no_gpu(NoGpuReason reason, std::string message) { return NoGpu{reason, std::move(message)}; }

// Reads every property of device `ordinal`; returns nullopt with `failure` set on the first
// driver error (a device that cannot be described is not usable for timing either).
std::optional<DeviceInfo> describe_device(const CudaDriver& driver, int ordinal,
                                          std::string* failure) {
  cu::Device device = 0;
  if (cu::Result r = driver.device_get(&device, ordinal); r != cu::kSuccess) {
    *failure = "cuDeviceGet(" + std::to_string(ordinal) + "): " + driver.error_text(r);
    return std::nullopt;
  }

  DeviceInfo info;
  info.ordinal = ordinal;

  // Names are at most 256 bytes in every driver; the buffer is zeroed and one byte is kept back
  // so the result is terminated even if a driver fills the whole length.
  std::array<char, 257> name{};
  if (cu::Result r = driver.device_get_name(name.data(), static_cast<int>(name.size() - 1), device);
      r != cu::kSuccess) {
    *failure = "cuDeviceGetName(" + std::to_string(ordinal) + "): " + driver.error_text(r);
    return std::nullopt;
  }
  info.name = name.data();

  std::size_t memory = 0;
  if (cu::Result r = driver.device_total_mem(&memory, device); r != cu::kSuccess) {
    *failure = "cuDeviceTotalMem(" + std::to_string(ordinal) + "): " + driver.error_text(r);
    return std::nullopt;
  }
  info.total_memory_bytes = memory;

  struct Field {
    cu::Attribute attribute;
    int DeviceInfo::*member;
    const char* name;
  };
  static constexpr Field kFields[] = {
      {cu::Attribute::ComputeCapabilityMajor, &DeviceInfo::compute_major, "compute capability"},
      {cu::Attribute::ComputeCapabilityMinor, &DeviceInfo::compute_minor, "compute capability"},
      {cu::Attribute::MultiprocessorCount, &DeviceInfo::sm_count, "SM count"},
      {cu::Attribute::ClockRateKHz, &DeviceInfo::sm_clock_khz, "clock rate"},
      {cu::Attribute::MemoryClockRateKHz, &DeviceInfo::memory_clock_khz, "memory clock rate"},
      {cu::Attribute::GlobalMemoryBusWidthBits, &DeviceInfo::memory_bus_width_bits,
       "memory bus width"},
      {cu::Attribute::L2CacheSizeBytes, &DeviceInfo::l2_cache_bytes, "L2 cache size"},
      {cu::Attribute::MaxSharedMemoryPerBlockOptin,
       &DeviceInfo::shared_memory_per_block_optin_bytes, "shared memory per block (opt-in)"},
      {cu::Attribute::MaxSharedMemoryPerMultiprocessor, &DeviceInfo::shared_memory_per_sm_bytes,
       "shared memory per SM"},
      {cu::Attribute::MaxRegistersPerMultiprocessor, &DeviceInfo::registers_per_sm,
       "registers per SM"},
      {cu::Attribute::MaxThreadsPerMultiprocessor, &DeviceInfo::max_threads_per_sm,
       "threads per SM"},
      {cu::Attribute::WarpSize, &DeviceInfo::warp_size, "warp size"},
      {cu::Attribute::PciDomainId, &DeviceInfo::pci_domain, "PCI domain"},
      {cu::Attribute::PciBusId, &DeviceInfo::pci_bus, "PCI bus"},
  };
  for (const Field& field : kFields) {
    int value = 0;
    cu::Result r = driver.device_get_attribute(&value, static_cast<int>(field.attribute), device);
    if (r != cu::kSuccess) {
      *failure = std::string("cuDeviceGetAttribute(") + field.name + ", device " +
                 std::to_string(ordinal) + "): " + driver.error_text(r);
      return std::nullopt;
    }
    info.*field.member = value;
  }
  return info;
}

}  // namespace

const char* no_gpu_reason_name(NoGpuReason reason) {
  switch (reason) {
    case NoGpuReason::LibraryNotFound: return "library_not_found";
    case NoGpuReason::DriverIncomplete: return "driver_incomplete";
    case NoGpuReason::InitFailed: return "init_failed";
    case NoGpuReason::NoDevices: return "no_devices";
    case NoGpuReason::QueryFailed: return "query_failed";
  }
  return "unknown";
}

std::string DeviceInfo::arch() const {
  return "sm_" + std::to_string(compute_major) + std::to_string(compute_minor);
}

double DeviceInfo::peak_memory_bandwidth_bytes_per_s() const {
  return 2.0 * static_cast<double>(memory_clock_khz) * 1000.0 *
         static_cast<double>(memory_bus_width_bits) / 8.0;
}

DeviceQuery query_devices() { return query_devices(CudaDriver::kSystemLibrary); }

DeviceQuery query_devices(const std::string& library) {
  DeviceQuery query;
  DriverLoadError error;
  std::shared_ptr<const CudaDriver> driver = CudaDriver::load(library, &error);
  if (driver == nullptr) {
    NoGpuReason reason = error.kind == DriverLoadError::Kind::NotFound
                             ? NoGpuReason::LibraryNotFound
                             : NoGpuReason::DriverIncomplete;
    query.no_gpu = no_gpu(reason, std::move(error.message));
    return query;
  }

  // cuDriverGetVersion works before cuInit, so the version is reported even when init fails.
  int version = 0;
  if (driver->driver_get_version(&version) == cu::kSuccess) {
    query.driver_version = version;
  }

  if (cu::Result r = driver->init(0); r != cu::kSuccess) {
    // A driver without devices (e.g. a container with the library but no /dev/nvidia*) answers
    // cuInit with CUDA_ERROR_NO_DEVICE: that is "no devices", not a broken installation.
    NoGpuReason reason = r == cu::kErrorNoDevice ? NoGpuReason::NoDevices : NoGpuReason::InitFailed;
    query.no_gpu = no_gpu(reason, "cuInit failed: " + driver->error_text(r));
    return query;
  }

  int count = 0;
  if (cu::Result r = driver->device_get_count(&count); r != cu::kSuccess) {
    query.no_gpu = no_gpu(NoGpuReason::QueryFailed, "cuDeviceGetCount: " + driver->error_text(r));
    return query;
  }
  if (count <= 0) {
    query.no_gpu = no_gpu(NoGpuReason::NoDevices, "the CUDA driver reports no devices");
    return query;
  }

  for (int ordinal = 0; ordinal < count; ++ordinal) {
    std::string failure;
    std::optional<DeviceInfo> info = describe_device(*driver, ordinal, &failure);
    if (!info) {
      query.devices.clear();
      query.no_gpu = no_gpu(NoGpuReason::QueryFailed, std::move(failure));
      return query;
    }
    query.devices.push_back(std::move(*info));
  }
  return query;
}

std::string format_driver_version(int version) {
  if (version <= 0) {
    return "unknown";
  }
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

nlohmann::ordered_json to_json(const DeviceInfo& device) {
  nlohmann::ordered_json j;
  j["ordinal"] = device.ordinal;
  j["name"] = device.name;
  j["compute_capability"] =
      std::to_string(device.compute_major) + "." + std::to_string(device.compute_minor);
  j["arch"] = device.arch();
  j["sm_count"] = device.sm_count;
  j["total_memory_bytes"] = device.total_memory_bytes;
  j["sm_clock_khz"] = device.sm_clock_khz;
  j["memory_clock_khz"] = device.memory_clock_khz;
  j["memory_bus_width_bits"] = device.memory_bus_width_bits;
  j["peak_memory_bandwidth_bytes_per_s"] = device.peak_memory_bandwidth_bytes_per_s();
  j["l2_cache_bytes"] = device.l2_cache_bytes;
  j["shared_memory_per_block_optin_bytes"] = device.shared_memory_per_block_optin_bytes;
  j["shared_memory_per_sm_bytes"] = device.shared_memory_per_sm_bytes;
  j["registers_per_sm"] = device.registers_per_sm;
  j["max_threads_per_sm"] = device.max_threads_per_sm;
  j["warp_size"] = device.warp_size;
  j["pci_domain"] = device.pci_domain;
  j["pci_bus"] = device.pci_bus;
  return j;
}

nlohmann::ordered_json to_json(const DeviceQuery& query) {
  nlohmann::ordered_json j;
  if (query.driver_version > 0) {
    j["driver_version"] = format_driver_version(query.driver_version);
  } else {
    j["driver_version"] = nullptr;
  }
  if (query.no_gpu) {
    j["no_gpu"] = {{"reason", no_gpu_reason_name(query.no_gpu->reason)},
                   {"message", query.no_gpu->message}};
    return j;
  }
  j["devices"] = nlohmann::ordered_json::array();
  for (const DeviceInfo& device : query.devices) {
    j["devices"].push_back(to_json(device));
  }
  return j;
}

}  // namespace nautilus::profiler
