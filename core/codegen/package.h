// Kernel packages: everything the runner needs to launch a compiled operator, in one directory.
//
// A package is what `nautilus compile` writes and what the runner (profiler/, a separate process,
// possibly on another machine) reads. It is self-describing: the runner never re-runs the
// compiler, it only reads files.
//
//   DIR/
//     kernel.cu            the CUDA C++ the emitter printed (extern "C" kernels)
//     kernel.sm_80.cubin   one cubin per compiled arch (ELF, loadable with cuModuleLoadData)
//     kernel.sm_80.ptx     the PTX of the same compilation
//     launch.json          what to launch, in order, with which buffers (below)
//     ptxas.txt            the resource table and NVRTC's full log, for people
//     ptxas.json           the same report as data (registers, spills, smem per kernel)
//
// launch.json (format "nautilus-kernel-package", version 1):
//   {
//     "format": "nautilus-kernel-package", "version": 1,
//     "spec": "attention", "sizes": {"B": 1, "H": 2, "M": 128, ...},
//     "arch": "sm_80",                        // the arch the package was compiled for
//     "flops": 2.7e11, "bytes": 5.0e8,        // the operator's work, when known (optional)
//     "compiler": {"nautilus": "0.1.0", "nvrtc": "13.0", "options": ["--gpu-architecture=..."]},
//     "source": "kernel.cu", "cubins": {"sm_80": "kernel.sm_80.cubin"},
//     "buffers": [{"name": "Q", "shape": [1, 2, 128, 64], "dtype": "bf16", "role": "input"}, ...],
//     "kernels": [                            // launched in this order, one stream
//       {"name": "attention_O", "grid": [2, 2, 1], "block": [128, 1, 1],
//        "dynamic_shared_memory": 24576,
//        "arguments": [{"name": "Q", "shape": [...], "dtype": "bf16", "role": "input"}, ...]}
//     ]
//   }
// Buffers are row-major and contiguous; every kernel argument is a device pointer to the buffer
// of that name (inputs, outputs, and intermediates the runner allocates once for all kernels).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/codegen/nvrtc.h"
#include "core/codegen/result.h"
#include "core/support/dtype.h"

namespace nautilus::codegen {

inline constexpr const char* kPackageFormat = "nautilus-kernel-package";
inline constexpr int kPackageVersion = 1;

// A global buffer as a kernel argument: a pointer to a row-major tensor.
struct KernelArgument {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::string role;  // "input", "output" or "intermediate"
  bool operator==(const KernelArgument&) const = default;
};

struct KernelLaunch {
  std::string name;                      // the extern "C" symbol
  std::array<int64_t, 3> grid = {1, 1, 1};
  std::array<int64_t, 3> block = {1, 1, 1};
  int64_t dynamic_shared_bytes = 0;
  std::vector<KernelArgument> arguments;  // in parameter order
  bool operator==(const KernelLaunch&) const = default;
};

struct KernelPackage {
  std::string spec_name;
  std::vector<std::pair<std::string, int64_t>> sizes;  // in the spec's order
  GpuArch arch = GpuArch::Sm80;
  std::string compiler_version;  // the Nautilus version; launch_json writes the running one if empty
  std::string nvrtc_version;
  std::vector<std::string> nvrtc_options;
  std::string source;                                   // kernel.cu
  std::map<GpuArch, std::vector<uint8_t>> cubins;
  std::map<GpuArch, std::string> ptx;
  std::vector<KernelArgument> buffers;  // every global buffer: params, then intermediates
  std::vector<KernelLaunch> kernels;    // launch order
  PtxasReport report;
  std::string ptxas_log;
  // The work of the whole operator (spec::estimate_flops / estimate_compulsory_bytes); 0 when
  // unknown. The runner divides them by the measured time into TFLOP/s and GB/s.
  double flops = 0.0;
  double bytes = 0.0;
};

// launch.json of a package (the files it names are those write_package writes).
nlohmann::ordered_json launch_json(const KernelPackage& package);

// Writes the package into `directory` (created when missing; existing package files are
// replaced, other files are left alone).
Result<bool> write_package(const KernelPackage& package, const std::string& directory);

// Reads a package back: launch.json, the source, every cubin and PTX it names, ptxas.json.
// Fails with a reason naming the file and the field when something is missing or malformed.
Result<KernelPackage> read_package(const std::string& directory);

}  // namespace nautilus::codegen
