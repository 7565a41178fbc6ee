// Helpers of the codegen tests that take a spec end to end: every stage's interpreter against the
// float64 reference, and the emitted CUDA through NVRTC for every architecture.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/codegen/nvrtc.h"
#include "core/driver/pipeline.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::testing {

// NVRTC compiles `source` for every architecture (nothing is checked when NVRTC is not installed).
inline void expect_compiles_for_every_arch(const std::string& source, const std::string& name) {
  const codegen::Result<std::shared_ptr<const codegen::Nvrtc>>& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc) return;
  for (codegen::GpuArch arch : codegen::all_archs()) {
    codegen::NvrtcOptions options;
    options.arch = arch;
    const codegen::Result<codegen::CompiledProgram> compiled = (*nvrtc)->compile(source, name, options);
    EXPECT_TRUE(compiled) << name << " " << codegen::arch_name(arch) << ": " << compiled.error().message;
  }
}

// The scalar, VR and MA interpreters on two seeds each, against the float64 reference.
inline void expect_every_stage_matches(const driver::Compilation& compilation, const std::string& what) {
  for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
    for (uint64_t seed : {1, 2}) {
      expect_stage_matches_reference(compilation, stage, seed,
                                                        what + " " + driver::stage_name(stage) + " ");
    }
  }
}

// The kernels of an emitted module, without the prelude (which defines every helper, used or not).
inline std::string kernels_of(const std::string& source) {
  const size_t at = source.find("extern \"C\" __global__");
  return at == std::string::npos ? "" : source.substr(at);
}

}  // namespace nautilus::testing
