#include "tests/profiler/profiler_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace nautilus::profiler::testing {

namespace fs = std::filesystem;

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  if (const char* old = std::getenv(name)) {
    had_value_ = true;
    old_value_ = old;
  }
  if (value != nullptr) {
    ::setenv(name, value, 1);
  } else {
    ::unsetenv(name);
  }
}

ScopedEnv::~ScopedEnv() {
  if (had_value_) {
    ::setenv(name_.c_str(), old_value_.c_str(), 1);
  } else {
    ::unsetenv(name_.c_str());
  }
}

std::string runner_path() {
  const char* forced = std::getenv("NAUTILUS_RUNNER");
  return forced != nullptr && *forced ? forced : NAUTILUS_RUNNER_PATH;
}

std::string fake_libcuda_path() {
  const char* forced = std::getenv("NAUTILUS_FAKE_LIBCUDA");
  return forced != nullptr && *forced ? forced : NAUTILUS_FAKE_LIBCUDA;
}

void write_test_package(const std::string& dir, const std::vector<codegen::KernelArgument>& buffers,
                        const std::vector<PackageKernel>& kernels, const nlohmann::json& launch_extra,
                        codegen::GpuArch arch, const std::string& cubin, const std::string& source) {
  codegen::KernelPackage package;
  package.spec_name = "test";
  package.sizes = {{"M", 37}, {"N", 29}};
  package.arch = arch;
  package.nvrtc_version = "13.0";
  package.source = source;
  package.cubins[arch] = std::vector<uint8_t>(cubin.begin(), cubin.end());
  package.buffers = buffers;
  for (const PackageKernel& kernel : kernels) {
    codegen::KernelLaunch launch;
    launch.name = kernel.name;
    launch.grid = {2, 1, 1};
    launch.block = {128, 1, 1};
    launch.dynamic_shared_bytes = kernel.dynamic_shared_bytes;
    for (const std::string& name : kernel.arguments) {
      for (const codegen::KernelArgument& buffer : buffers) {
        if (buffer.name == name) launch.arguments.push_back(buffer);
      }
    }
    package.kernels.push_back(launch);
  }
  auto written = codegen::write_package(package, dir);
  ASSERT_TRUE(written.ok()) << written.error().message;
  if (launch_extra.empty()) return;
  const std::string launch_path = dir + "/launch.json";
  std::ifstream in(launch_path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::ordered_json launch = nlohmann::ordered_json::parse(text.str());
  for (auto& [key, value] : launch_extra.items()) launch[key] = value;
  std::ofstream(launch_path) << launch.dump(2) << "\n";
}

std::vector<codegen::KernelArgument> copy_buffers(DType dtype) {
  return {{"X", {37, 29}, dtype, "input"}, {"Y", {37, 29}, dtype, "output"}};
}

std::string write_script(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.file(name);
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  ::chmod(path.c_str(), 0755);
  return path;
}

}  // namespace nautilus::profiler::testing
