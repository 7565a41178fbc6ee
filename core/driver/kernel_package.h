// The kernel package of a compilation (core/codegen/package.h): the MA module printed as CUDA by
// the emitter, compiled by NVRTC for each requested arch, with the buffers and launches the
// runner needs. `nautilus compile`, `nautilus schedule --measure` and the studio's Profiler panel
// all build packages here.
//
//   build_kernel_package(compilation, compilation.ma_module, {Sm90a, Sm80})
//     -> { source: kernel.cu, cubins/ptx per arch, report (ptxas: registers, spills),
//          buffers: Q K V (inputs) O (output), kernels: attention_O grid (32,16,2) block 128 }
#pragma once

#include <vector>

#include "core/codegen/package.h"
#include "core/codegen/result.h"
#include "core/driver/pipeline.h"
#include "core/matile/ir.h"

namespace nautilus::driver {

// The first arch of `archs` is the package's main one (launch.json's "arch", the ptxas report).
// Failures keep codegen's kinds: Compilation (NVRTC rejected the emitted CUDA, with its log) and
// InvalidInput (the emitter does not trust the MA module) are compiler bugs; NvrtcNotFound,
// Unsupported (including "no MA tile IR") and the others are the machine's or the input's.
struct PackageOptions {
  // exp2 first on the SFU alone (codegen::EmitOptions::approximate_exp2), the guarded exp2f only
  // where a kernel spills with it; false: exp2f everywhere (`nautilus compile --exp2 guarded`,
  // for comparisons).
  bool approximate_exp2 = true;
};

// The start of the package note that says a kernel fell back to exp2 with its denormal guard
// (the register check reads it: such a kernel fits but runs slower).
inline constexpr const char* kGuardedExp2Note = "exp2 as exp2f, with its denormal guard";

codegen::Result<codegen::KernelPackage> build_kernel_package(
    const Compilation& compilation, const matile::ModulePtr& ma_module,
    const std::vector<codegen::GpuArch>& archs, const PackageOptions& options = {});

}  // namespace nautilus::driver
