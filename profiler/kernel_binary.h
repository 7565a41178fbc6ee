// Which machine code of a kernel package runs on the local GPU, and producing it.
//
// A package carries cubins (SASS) for the archs it was compiled for, their PTX, and the CUDA
// source. SASS runs only on the GPU generation it was built for: a cubin for sm_80 runs on every
// compute capability 8.x, one for sm_90a only on exactly 9.0. The choice, in order:
//   1. a cubin that fits (sm_90a before sm_80, so an H100 gets its Hopper build);
//   2. kernel.cu compiled with NVRTC for the device's own arch (e.g. sm_100 or sm_120);
//   3. when NVRTC is not installed, the package's sm_80 PTX, compiled by the driver's JIT
//      (PTX for compute_80 runs on every later GPU).
// GPUs older than sm_80 get no binary: the emitter's mma.sync/cp.async code needs Ampere.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/codegen/package.h"

namespace nautilus::profiler {

struct KernelBinary {
  enum class Source { Cubin, Nvrtc, PtxJit };
  Source source = Source::Cubin;
  std::string arch;             // "sm_90a" (cubin / NVRTC target) or "sm_80" (the PTX's arch)
  std::vector<uint8_t> image;   // for cuModuleLoadData (PTX is NUL-terminated)
  double compile_ms = 0.0;      // NVRTC time, 0 otherwise
  std::string note;             // why this source was chosen, one line
};

const char* binary_source_name(KernelBinary::Source source);  // "cubin", "nvrtc", "ptx_jit"

// The package's cubin that runs on compute capability major.minor, if any.
std::optional<codegen::GpuArch> fitting_cubin(const codegen::KernelPackage& package, int major,
                                              int minor);

struct BinaryError {
  enum class Kind { NoBinary, Compile };
  Kind kind = Kind::NoBinary;
  std::string message;  // one line
  std::string log;      // NVRTC's log for Compile
};

// The binary to load on a device of compute capability major.minor (see the order above).
// `use_nvrtc` false skips step 2 (tests of the PTX fallback).
struct BinaryResult {
  std::optional<KernelBinary> binary;
  std::optional<BinaryError> error;
};
BinaryResult kernel_binary_for_device(const codegen::KernelPackage& package, int major, int minor,
                                      bool use_nvrtc = true);

}  // namespace nautilus::profiler
