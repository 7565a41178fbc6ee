// Helpers shared by the runner and client tests: scoped environment variables, temporary
// directories, hand-written kernel packages, and where the runner and the fake driver are.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/codegen/package.h"
#include "tests/common/temp_dir.h"

namespace nautilus::profiler::testing {

// Sets (or, with nullptr, unsets) an environment variable for the lifetime of a scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool had_value_ = false;
  std::string old_value_;
};

// A fresh directory under the temporary directory, removed with its contents at scope exit.
class TempDir : public nautilus::testing::TempDir {
 public:
  TempDir() : nautilus::testing::TempDir("nautilus-profiler") {}
};

// The runner executable and the fake libcuda built with the tests. Both can be overridden by
// NAUTILUS_RUNNER / NAUTILUS_FAKE_LIBCUDA (to run the test binary on another machine).
std::string runner_path();
std::string fake_libcuda_path();

// One kernel of a hand-written package: its symbol and the buffers it takes, in order.
struct PackageKernel {
  std::string name;
  std::vector<std::string> arguments;
  int64_t dynamic_shared_bytes = 0;
};

// A package in `dir` with the given buffers and kernels; arch sm_90a, an sm_90a "cubin" holding
// `cubin` (any bytes do for the fake driver) and `source` as kernel.cu. `launch_extra` is merged
// into launch.json at the top level (e.g. {"flops": ...}). Fails the test on write errors.
void write_test_package(const std::string& dir, const std::vector<codegen::KernelArgument>& buffers,
                        const std::vector<PackageKernel>& kernels,
                        const nlohmann::json& launch_extra = nlohmann::json::object(),
                        codegen::GpuArch arch = codegen::GpuArch::Sm90a,
                        const std::string& cubin = "fake cubin",
                        const std::string& source = "// no source\n");

// The buffers X: input f32[37, 29] and Y: output f32[37, 29] (37*29 elements: no tile multiple).
std::vector<codegen::KernelArgument> copy_buffers(DType dtype = DType::F32);

// Writes an executable shell script `name` into `dir` and returns its path.
std::string write_script(const TempDir& dir, const std::string& name, const std::string& body);

}  // namespace nautilus::profiler::testing
