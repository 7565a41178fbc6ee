// The GPU of the Hopper tests: device 0 through the system's libcuda, when it is an sm_90 part.
// Both Hopper GPU tests (wgmma layouts, the emitted GEMM) skip with the reason this gives when
// there is no driver, no device, or a device of another generation.
#pragma once

#include <memory>
#include <string>

#include "profiler/cuda_driver.h"

namespace nautilus::testing {

struct Sm90Device {
  std::shared_ptr<const profiler::CudaDriver> driver;
  std::string name;         // "NVIDIA H100 80GB HBM3"
  std::string skip_reason;  // empty when the device can run wgmma and TMA
};

// `needs` names what the test needs the generation for ("wgmma", "wgmma and TMA").
inline Sm90Device find_sm90_device(const std::string& needs) {
  Sm90Device found;
  profiler::DriverLoadError load_error;
  found.driver = profiler::CudaDriver::load(profiler::CudaDriver::kSystemLibrary, &load_error);
  if (!found.driver) {
    found.skip_reason = "no GPU: " + load_error.message;
    return found;
  }
  int count = 0;
  if (found.driver->init(0) != profiler::cu::kSuccess ||
      found.driver->device_get_count(&count) != profiler::cu::kSuccess || count == 0) {
    found.skip_reason = "no GPU: the driver reports no device";
    return found;
  }
  profiler::cu::Device device = 0;
  int major = 0;
  char name[256] = {};
  found.driver->device_get(&device, 0);
  found.driver->device_get_attribute(
      &major, static_cast<int>(profiler::cu::Attribute::ComputeCapabilityMajor), device);
  found.driver->device_get_name(name, sizeof(name), device);
  found.name = name;
  if (major != 9) {
    found.skip_reason = needs + " need an sm_90 GPU; device 0 is " + found.name + " (sm_" +
                        std::to_string(major) + "x)";
  }
  return found;
}

}  // namespace nautilus::testing
