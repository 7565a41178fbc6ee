#include "profiler/kernel_binary.h"

#include "core/codegen/nvrtc.h"

namespace nautilus::profiler {

using codegen::GpuArch;

const char* binary_source_name(KernelBinary::Source source) {
  switch (source) {
    case KernelBinary::Source::Cubin: return "cubin";
    case KernelBinary::Source::Nvrtc: return "nvrtc";
    case KernelBinary::Source::PtxJit: return "ptx_jit";
  }
  return "unknown";
}

std::optional<GpuArch> fitting_cubin(const codegen::KernelPackage& package, int major, int minor) {
  if (major == 9 && minor == 0 && package.cubins.count(GpuArch::Sm90a) != 0) {
    return GpuArch::Sm90a;
  }
  if (major == 8 && package.cubins.count(GpuArch::Sm80) != 0) return GpuArch::Sm80;
  return std::nullopt;
}

BinaryResult kernel_binary_for_device(const codegen::KernelPackage& package, int major, int minor,
                                      bool use_nvrtc) {
  const std::string device_arch = "sm_" + std::to_string(major) + std::to_string(minor);
  BinaryResult result;
  if (major < 8) {
    result.error = BinaryError{BinaryError::Kind::NoBinary,
                               "the GPU is " + device_arch +
                                   "; kernel packages need sm_80 or newer (mma.sync, cp.async)",
                               ""};
    return result;
  }

  if (std::optional<GpuArch> arch = fitting_cubin(package, major, minor)) {
    KernelBinary binary;
    binary.source = KernelBinary::Source::Cubin;
    binary.arch = codegen::arch_name(*arch);
    binary.image = package.cubins.at(*arch);
    binary.note = "the package's " + binary.arch + " cubin runs on " + device_arch;
    result.binary = std::move(binary);
    return result;
  }

  std::string nvrtc_missing;
  if (use_nvrtc) {
    const auto& nvrtc = codegen::Nvrtc::shared();
    if (nvrtc.ok()) {
      // sm_90 devices get the "a" feature set the emitter's Hopper code needs; other archs are
      // named directly (NVRTC takes the last --gpu-architecture it is given).
      codegen::NvrtcOptions options;
      const bool hopper = major == 9 && minor == 0;
      const std::string target = hopper ? "sm_90a" : device_arch;
      options.arch = hopper ? GpuArch::Sm90a : GpuArch::Sm80;
      if (!hopper) options.extra_options.push_back("--gpu-architecture=" + target);
      auto compiled = (*nvrtc)->compile(package.source, "kernel.cu", options);
      if (!compiled.ok()) {
        result.error = BinaryError{BinaryError::Kind::Compile,
                                   "NVRTC could not compile kernel.cu for " + target + ": " +
                                       compiled.error().message,
                                   compiled.error().log};
        return result;
      }
      KernelBinary binary;
      binary.source = KernelBinary::Source::Nvrtc;
      binary.arch = target;
      binary.image = compiled->cubin;
      binary.compile_ms = compiled->milliseconds;
      binary.note = "no cubin in the package runs on " + device_arch +
                    "; kernel.cu compiled with NVRTC for " + target;
      result.binary = std::move(binary);
      return result;
    }
    nvrtc_missing = nvrtc.error().message;
  } else {
    nvrtc_missing = "NVRTC not used";
  }

  if (auto ptx = package.ptx.find(GpuArch::Sm80); ptx != package.ptx.end()) {
    KernelBinary binary;
    binary.source = KernelBinary::Source::PtxJit;
    binary.arch = "sm_80";
    binary.image.assign(ptx->second.begin(), ptx->second.end());
    binary.image.push_back('\0');
    binary.note = "no cubin in the package runs on " + device_arch + " and " + nvrtc_missing +
                  "; the driver JIT-compiles the sm_80 PTX";
    result.binary = std::move(binary);
    return result;
  }
  result.error = BinaryError{BinaryError::Kind::NoBinary,
                             "no cubin in the package runs on " + device_arch +
                                 ", it has no sm_80 PTX, and " + nvrtc_missing,
                             ""};
  return result;
}

}  // namespace nautilus::profiler
