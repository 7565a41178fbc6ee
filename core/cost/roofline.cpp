#include "core/cost/roofline.h"

#include <algorithm>
#include <cstdio>

#include "core/cost/analytical_model.h"
#include "core/spec/reference.h"

namespace nautilus::cost {

RooflineBound math_roofline(const spec::Spec& spec, const DeviceModel& device) {
  RooflineBound roofline;
  roofline.flops = spec::estimate_flops(spec);
  roofline.bytes = spec::estimate_compulsory_bytes(spec);
  double tflops = std::max(device.tensor_tflops_16bit, device.wgmma_tensor_tflops_16bit);
  // Matrices that are all fp8 can multiply on wgmma's 8-bit form, twice as fast.
  bool eight_bit_matrices = false;
  for (int index : spec.inputs) {
    const spec::Tensor& tensor = spec.tensors[static_cast<size_t>(index)];
    if (tensor.shape.size() < 2) continue;
    eight_bit_matrices = is_eight_bit_float(tensor.dtype);
    if (!eight_bit_matrices) break;
  }
  if (eight_bit_matrices && device.wgmma_tensor_tflops_16bit > 0) {
    tflops = device.wgmma_tensor_tflops_16bit * kEightBitWgmmaSpeedup;
  }
  if (tflops > 0.0) roofline.compute_us = roofline.flops / (tflops * 1e12) * 1e6;
  if (device.dram_bytes_per_s > 0.0) roofline.memory_us = roofline.bytes / device.dram_bytes_per_s * 1e6;
  roofline.launch_us = device.launch_overhead_us;
  roofline.bound = roofline.compute_us > roofline.memory_us ? "compute" : "memory";
  roofline.microseconds = std::max(roofline.compute_us, roofline.memory_us) + roofline.launch_us;
  return roofline;
}

std::string describe(const RooflineBound& roofline) {
  char text[160];
  if (roofline.bound == "compute") {
    std::snprintf(text, sizeof text, "%.1f µs (compute: %.3g GFLOP at the tensor-core peak)",
                  roofline.microseconds, roofline.flops / 1e9);
  } else {
    std::snprintf(text, sizeof text, "%.1f µs (memory: %.3g MB at the DRAM peak)",
                  roofline.microseconds, roofline.bytes / 1e6);
  }
  return text;
}

}  // namespace nautilus::cost
