// Kernel packages: write, read back, and the errors a damaged package gives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include "core/codegen/package.h"

namespace nautilus::codegen {
namespace {

namespace fs = std::filesystem;

KernelPackage sample_package() {
  KernelPackage package;
  package.spec_name = "gemm";
  package.sizes = {{"M", 100}, {"N", 72}, {"K", 40}};  // not alphabetical: order must survive
  package.arch = GpuArch::Sm90a;
  package.compiler_version = "0.1.0";
  package.nvrtc_version = "13.0";
  package.flops = 2.0 * 100 * 72 * 40;
  package.bytes = 2.0 * (100 * 40 + 40 * 72 + 100 * 72);
  package.nvrtc_options = {"--gpu-architecture=sm_90a", "-Xptxas=-v"};
  package.source = "extern \"C\" __global__ void gemm_C(const void* A, const void* B, void* C) {}\n";
  package.cubins[GpuArch::Sm90a] = {0x7f, 'E', 'L', 'F', 0, 1, 2, 255};
  package.ptx[GpuArch::Sm90a] = ".version 9.0\n.target sm_90a\n";
  KernelArgument a{"A", {100, 40}, DType::BF16, "input"};
  KernelArgument b{"B", {40, 72}, DType::BF16, "input"};
  KernelArgument c{"C", {100, 72}, DType::BF16, "output"};
  KernelArgument t{"T", {100}, DType::F32, "intermediate"};
  package.buffers = {a, b, c, t};
  KernelLaunch gemm;
  gemm.name = "gemm_C";
  gemm.grid = {2, 2, 1};
  gemm.block = {128, 1, 1};
  gemm.dynamic_shared_bytes = 16384;
  gemm.arguments = {a, b, c};
  KernelLaunch second;
  second.name = "gemm_T";
  second.arguments = {c, t};
  package.kernels = {gemm, second};
  KernelResources resources;
  resources.name = "gemm_C";
  resources.arch = "sm_90a";
  resources.registers = 96;
  package.report.kernels = {resources};
  package.ptxas_log = "ptxas info    : Used 96 registers\n";
  return package;
}

class PackageTest : public testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("nautilus_package_test_" + std::to_string(::getpid()) + "_" +
                  testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  void rewrite_launch(const std::function<void(nlohmann::ordered_json&)>& edit) {
    std::ifstream in(directory_ / "launch.json");
    nlohmann::ordered_json json = nlohmann::ordered_json::parse(in);
    edit(json);
    std::ofstream(directory_ / "launch.json") << json.dump(2);
  }

  std::string read_error() {
    auto read = read_package(directory_.string());
    EXPECT_FALSE(read.ok());
    return read.error().message;
  }

  fs::path directory_;
};

TEST_F(PackageTest, WritesTheDocumentedFiles) {
  ASSERT_TRUE(write_package(sample_package(), (directory_ / "nested").string()).ok());
  for (const char* file : {"kernel.cu", "kernel.sm_90a.cubin", "kernel.sm_90a.ptx", "launch.json",
                           "ptxas.txt", "ptxas.json"}) {
    EXPECT_TRUE(fs::exists(directory_ / "nested" / file)) << file;
  }
  std::ifstream in(directory_ / "nested" / "launch.json");
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(in);
  EXPECT_EQ(json["format"], "nautilus-kernel-package");
  EXPECT_EQ(json["kernels"][0]["name"], "gemm_C");
  EXPECT_EQ(json["kernels"][0]["dynamic_shared_memory"], 16384);
  EXPECT_EQ(json["kernels"][0]["arguments"][2]["role"], "output");
  EXPECT_EQ(json["compiler"]["nvrtc"], "13.0");
  EXPECT_EQ(fs::file_size(directory_ / "nested" / "kernel.sm_90a.cubin"), 8u);
}

TEST_F(PackageTest, RoundTrip) {
  const KernelPackage written = sample_package();
  ASSERT_TRUE(write_package(written, directory_.string()).ok());
  auto read = read_package(directory_.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->spec_name, written.spec_name);
  EXPECT_EQ(read->sizes, written.sizes);
  EXPECT_EQ(read->arch, written.arch);
  EXPECT_EQ(read->compiler_version, written.compiler_version);
  EXPECT_EQ(read->nvrtc_version, written.nvrtc_version);
  EXPECT_EQ(read->nvrtc_options, written.nvrtc_options);
  EXPECT_EQ(read->source, written.source);
  EXPECT_EQ(read->cubins, written.cubins);
  EXPECT_EQ(read->ptx, written.ptx);
  EXPECT_EQ(read->buffers, written.buffers);
  EXPECT_EQ(read->kernels, written.kernels);
  EXPECT_EQ(read->flops, written.flops);
  EXPECT_EQ(read->bytes, written.bytes);
  EXPECT_EQ(read->report.kernels, written.report.kernels);
}

// 8-bit buffers (a quantized GEMM's operands and its int8 weights) survive launch.json.
TEST_F(PackageTest, EightBitBufferDtypesRoundTrip) {
  KernelPackage written = sample_package();
  written.buffers[0].dtype = DType::F8E4M3;
  written.buffers[1].dtype = DType::I8;
  written.buffers[3].dtype = DType::F8E5M2;
  written.kernels[0].arguments[0].dtype = DType::F8E4M3;
  written.kernels[0].arguments[1].dtype = DType::I8;
  written.kernels[1].arguments[1].dtype = DType::F8E5M2;
  ASSERT_TRUE(write_package(written, directory_.string()).ok());
  std::ifstream in(directory_ / "launch.json");
  EXPECT_EQ(nlohmann::ordered_json::parse(in)["kernels"][0]["arguments"][0]["dtype"], "fp8e4m3");
  auto read = read_package(directory_.string());
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->buffers, written.buffers);
  EXPECT_EQ(read->kernels, written.kernels);
}

TEST_F(PackageTest, MissingDirectoryOrFiles) {
  EXPECT_NE(read_error().find("cannot read"), std::string::npos);
  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  fs::remove(directory_ / "kernel.sm_90a.cubin");
  std::string error = read_error();
  EXPECT_NE(error.find("kernel.sm_90a.cubin"), std::string::npos) << error;
}

TEST_F(PackageTest, MalformedLaunchJsonNamesTheField) {
  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][0]["grid"] = {2, 0, 1}; });
  EXPECT_NE(read_error().find("kernels[0].grid"), std::string::npos);

  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][1]["arguments"][0]["dtype"] = "f64"; });
  EXPECT_NE(read_error().find("kernels[1].arguments[0].dtype 'f64'"), std::string::npos);

  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["kernels"][0]["arguments"][0]["shape"] = {7, 7}; });
  EXPECT_NE(read_error().find("does not match any entry of \"buffers\""), std::string::npos);

  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["arch"] = "sm_90"; });
  EXPECT_NE(read_error().find("'sm_90' is not one of sm_80, sm_90a"), std::string::npos);

  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["version"] = 4; });
  EXPECT_NE(read_error().find("this reader knows versions 1 to 3"), std::string::npos);

  // A workspace (version 3) is bytes; older versions have none.
  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) { json["buffers"][0]["role"] = "scratch"; });
  EXPECT_NE(read_error().find("is not input, output, intermediate or workspace"), std::string::npos);
  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) {
    json["buffers"].push_back({{"name", "counter"}, {"shape", {4}}, {"dtype", "f32"}, {"role", "workspace"}});
  });
  EXPECT_NE(read_error().find("a workspace is bytes: dtype int8, shape [bytes]"), std::string::npos);
  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  rewrite_launch([](auto& json) {
    json["version"] = 2;
    json["buffers"].push_back({{"name", "counter"}, {"shape", {4}}, {"dtype", "int8"}, {"role", "workspace"}});
  });
  EXPECT_NE(read_error().find("role workspace needs package version 3"), std::string::npos);

  ASSERT_TRUE(write_package(sample_package(), directory_.string()).ok());
  std::ofstream(directory_ / "launch.json") << "{ not json";
  EXPECT_NE(read_error().find("not valid JSON"), std::string::npos);
}

TEST_F(PackageTest, UnwritableDirectory) {
  std::ofstream(directory_.string()) << "a file, not a directory";
  auto written = write_package(sample_package(), (directory_ / "sub").string());
  ASSERT_FALSE(written.ok());
  EXPECT_EQ(written.error().kind, CodegenError::Kind::Io);
  fs::remove(directory_);
}

}  // namespace
}  // namespace nautilus::codegen
