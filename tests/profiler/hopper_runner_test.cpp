// The runner's Hopper plumbing on the fake driver (no GPU): tensor maps encoded through
// cuGetProcAddress -> cuTensorMapEncodeTiled and passed by value, 64-byte aligned, in parameter
// order; the small-tensor workaround for drivers up to 13.1; maps encoded again when a buffer
// moves; cluster launches through cuLaunchKernelEx; and the errors when a driver or device lacks
// what the package needs. The fake TMA kernel reads its input only through the map it is given,
// and faults on the bit the workaround must clear, so a wrong address, dims, strides, parameter
// order or alignment fails validation or the launch.
#include <gtest/gtest.h>

#include "core/codegen/package.h"
#include "profiler/gpu_session.h"
#include "profiler/runner.h"
#include "profiler/tensor_map.h"
#include "tests/profiler/profiler_test_util.h"

namespace nautilus::profiler {
namespace {

using codegen::GpuArch;
using codegen::KernelArgument;
using codegen::KernelLaunch;
using codegen::KernelPackage;
using testing::ScopedEnv;
using testing::TempDir;
using testing::fake_libcuda_path;

// X: input bf16 [37, 64] (rows of 128 bytes, a 4.6 KiB tensor), Y: output of the same shape.
const KernelArgument kX{"X", {37, 64}, DType::BF16, "input"};
const KernelArgument kY{"Y", {37, 64}, DType::BF16, "output"};

// A package of one kernel `name` taking `arguments`; optional cluster dims.
void write_package(const std::string& dir, const std::string& name,
                   std::vector<KernelArgument> arguments,
                   std::optional<std::array<int64_t, 3>> cluster = std::nullopt,
                   int64_t dynamic_shared_bytes = 0) {
  KernelPackage package;
  package.spec_name = "hopper";
  package.arch = GpuArch::Sm90a;
  package.source = "// no source\n";
  package.cubins[GpuArch::Sm90a] = {'f', 'a', 'k', 'e'};
  package.buffers = {kX, kY};
  KernelLaunch kernel;
  kernel.name = name;
  kernel.grid = {2, 1, 1};
  kernel.block = {128, 1, 1};
  kernel.cluster = cluster;
  kernel.dynamic_shared_bytes = dynamic_shared_bytes;
  kernel.arguments = std::move(arguments);
  package.kernels = {kernel};
  auto written = codegen::write_package(package, dir);
  ASSERT_TRUE(written.ok()) << written.error().message;
}

KernelArgument mapped_x(codegen::TensorMapSwizzle swizzle = codegen::TensorMapSwizzle::B128) {
  KernelArgument x = kX;
  x.tensor_map = codegen::row_major_tensor_map(kX, {64, 37}, swizzle);
  return x;
}

RunnerOptions options_for(const std::string& package, const std::string& reference) {
  RunnerOptions options;
  options.package_dir = package;
  options.reference_dir = reference;
  options.driver_library = fake_libcuda_path();
  options.warmup = 1;
  options.repetitions = 3;
  options.timeout_seconds = 5;
  return options;
}

class HopperRunner : public ::testing::Test {
 protected:
  void SetUp() override {
    package_ = dir_.file("pkg");
    reference_ = dir_.file("ref");
    write_package(reference_, "fake_copy", {kX, kY});
  }
  TempDir dir_;
  std::string package_, reference_;
};

TEST_F(HopperRunner, TensorMapReachesTheKernelAndValidates) {
  // 100 KiB of dynamic shared memory: the fake refuses more than 48 KiB unless the runner set
  // the kernel's max dynamic shared memory attribute.
  write_package(package_, "fake_tma_copy", {mapped_x(), kY}, std::nullopt, 100 << 10);
  RunnerOutcome outcome = run_runner(options_for(package_, reference_));
  ASSERT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["validation"]["status"], "passed");
  EXPECT_EQ(outcome.report["validation"]["max_relative_error"], 0.0);
  EXPECT_EQ(outcome.report["timing"]["kernels"][0]["dynamic_shared_memory"], 100 << 10);
}

TEST_F(HopperRunner, ParametersStayInOrder) {
  // The kernel reads parameter 0 as the map and writes parameter 1: the other order is a
  // pointer where the map should be, and the fake's decoder refuses it or reads garbage.
  write_package(package_, "fake_tma_copy", {kY, mapped_x()});
  RunnerOutcome outcome = run_runner(options_for(package_, reference_));
  EXPECT_NE(outcome.report["status"], "ok") << outcome.report.dump(2);
}

TEST_F(HopperRunner, SmallTensorWorkaroundAppliesUpToDriver13010) {
  // The fake, like drivers up to 13.1, sets bit 21 of word 1 for tensors under 128 KiB and its
  // TMA faults on it: the run passes only because the runner clears the bit.
  for (const char* version : {"12080", "13000", "13010", "13020"}) {
    ScopedEnv driver("NAUTILUS_FAKE_CUDA_DRIVER_VERSION", version);
    write_package(package_, "fake_tma_copy", {mapped_x(), kY});
    RunnerOutcome outcome = run_runner(options_for(package_, reference_));
    EXPECT_EQ(outcome.report["status"], "ok") << version << "\n" << outcome.report.dump(2);
  }
}

TEST(TensorMapEncoding, WorkaroundClearsBit21OfWord1ForSmallTensorsOnOldDrivers) {
  EXPECT_TRUE(needs_small_tensor_workaround(13010, (128 << 10) - 1));
  EXPECT_FALSE(needs_small_tensor_workaround(13010, 128 << 10));
  EXPECT_TRUE(needs_small_tensor_workaround(12000, 4096));
  EXPECT_FALSE(needs_small_tensor_workaround(13020, 4096));
  EXPECT_FALSE(needs_small_tensor_workaround(0, 4096));  // unknown driver: leave the map alone

  DriverLoadError error;
  auto driver = CudaDriver::load(fake_libcuda_path(), &error);
  ASSERT_NE(driver, nullptr) << error.message;
  ASSERT_EQ(driver->init(0), cu::kSuccess);
  std::string why;
  cu::TensorMapEncodeTiledFn encoder = driver->tensor_map_encoder(&why);
  ASSERT_NE(encoder, nullptr) << why;
  const codegen::TensorMap map = codegen::row_major_tensor_map(kX, {64, 37});
  alignas(16) static unsigned char memory[37 * 64 * 2];
  const cu::DevicePtr base = reinterpret_cast<uintptr_t>(memory);
  TensorMapBytes bytes;
  // The fake reports driver 13000 and sets the bit; a runner told 13000 clears it, one told a
  // newer driver leaves it.
  ASSERT_EQ(encode_tensor_map(encoder, map, DType::BF16, base, 13000, &bytes), cu::kSuccess);
  EXPECT_EQ((bytes.words[1] >> 21) & 1, 0u);
  EXPECT_EQ(bytes.words[0], base);
  ASSERT_EQ(encode_tensor_map(encoder, map, DType::BF16, base, 13020, &bytes), cu::kSuccess);
  EXPECT_EQ((bytes.words[1] >> 21) & 1, 1u);
  // The data type is BFLOAT16 (9) and the swizzle none, as the fake records them.
  EXPECT_EQ(bytes.words[1] & 0xff, 9u);
  EXPECT_EQ(tensor_map_data_type(DType::F16), 6);
  EXPECT_EQ(tensor_map_data_type(DType::F32), 7);
  EXPECT_EQ(tensor_map_tensor_bytes(map, DType::BF16), 37u * 64 * 2);
}

TEST(KernelParameters, MapsArePassedByValue64ByteAlignedInOrder) {
  KernelParameters parameters;
  TensorMapBytes first, second;
  for (size_t i = 0; i < 16; ++i) {
    first.words[i] = 100 + i;
    second.words[i] = 200 + i;
  }
  parameters.add_pointer(0x1000);
  parameters.add_tensor_map(first);
  parameters.add_pointer(0x2000);
  parameters.add_tensor_map(second);
  ASSERT_EQ(parameters.size(), 4u);
  void** values = parameters.values();
  EXPECT_EQ(*static_cast<cu::DevicePtr*>(values[0]), 0x1000u);
  EXPECT_EQ(*static_cast<cu::DevicePtr*>(values[2]), 0x2000u);
  for (size_t i : {1u, 3u}) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(values[i]) % 64, 0u) << i;
    EXPECT_EQ(parameters.value(i).second, 128u);
  }
  EXPECT_EQ(*static_cast<TensorMapBytes*>(values[1]), first);
  EXPECT_EQ(*static_cast<TensorMapBytes*>(values[3]), second);
  EXPECT_EQ(parameters.value(0).second, 8u);
}

TEST(TensorMapCache, MapsAreEncodedAgainWhenTheBufferMoves) {
  DriverLoadError error;
  auto driver = CudaDriver::load(fake_libcuda_path(), &error);
  ASSERT_NE(driver, nullptr) << error.message;
  ASSERT_EQ(driver->init(0), cu::kSuccess);
  GpuError open_error;
  auto session = GpuSession::open(driver, 0, &open_error);
  ASSERT_NE(session, nullptr) << open_error.message;
  EXPECT_EQ(session->driver_version(), 13000);
  cu::DevicePtr first = 0, second = 0;
  ASSERT_FALSE(session->allocate(37 * 64 * 2, &first));
  ASSERT_FALSE(session->allocate(37 * 64 * 2, &second));
  const codegen::TensorMap map = codegen::row_major_tensor_map(kX, {64, 37});
  TensorMapCache cache;
  const TensorMapBytes* bytes = nullptr;
  ASSERT_FALSE(cache.get(*session, 0, 0, map, DType::BF16, first, &bytes));
  EXPECT_EQ(bytes->words[0], first);
  ASSERT_FALSE(cache.get(*session, 0, 0, map, DType::BF16, first, &bytes));
  EXPECT_EQ(cache.encodes(), 1);  // same buffer: the map is reused
  ASSERT_FALSE(cache.get(*session, 0, 0, map, DType::BF16, second, &bytes));
  EXPECT_EQ(cache.encodes(), 2);  // the buffer moved: encoded again
  EXPECT_EQ(bytes->words[0], second);
  ASSERT_FALSE(cache.get(*session, 0, 1, map, DType::BF16, second, &bytes));
  EXPECT_EQ(cache.encodes(), 3);  // another argument has its own map
}

TEST_F(HopperRunner, DriverWithoutTensorMapsIsALoadErrorNamingTheArgument) {
  ScopedEnv missing("NAUTILUS_FAKE_CUDA_NO_TENSOR_MAP", "1");
  write_package(package_, "fake_tma_copy", {mapped_x(), kY});
  RunnerOutcome outcome = run_runner(options_for(package_, reference_));
  EXPECT_EQ(outcome.report["status"], "load_error") << outcome.report.dump(2);
  EXPECT_EQ(outcome.exit_code, 4);
  const auto& error = outcome.report["errors"][0];
  EXPECT_EQ(error["kernel"], "fake_tma_copy");
  EXPECT_EQ(error["phase"], "load");
  const std::string message = error["message"];
  EXPECT_NE(message.find("kernel fake_tma_copy: tensor map of argument X: "
                         "cuGetProcAddress(cuTensorMapEncodeTiled, 12000) failed"),
            std::string::npos)
      << message;
}

TEST_F(HopperRunner, PreHopperDevicesRefuseTensorMapsAndClusters) {
  ScopedEnv ampere("NAUTILUS_FAKE_CUDA_COMPUTE", "80");
  write_package(package_, "fake_cluster_copy", {kX, kY}, std::array<int64_t, 3>{2, 1, 1});
  RunnerOutcome outcome = run_runner(options_for(package_, reference_));
  EXPECT_EQ(outcome.report["status"], "load_error") << outcome.report.dump(2);
  EXPECT_NE(outcome.report["errors"][0]["message"].get<std::string>().find(
                "need compute capability 9.0 or later; the device has 8.0"),
            std::string::npos);
}

TEST_F(HopperRunner, ClusterLaunchGoesThroughLaunchKernelEx) {
  write_package(package_, "fake_cluster_copy", {kX, kY}, std::array<int64_t, 3>{2, 1, 1});
  RunnerOutcome outcome = run_runner(options_for(package_, reference_));
  ASSERT_EQ(outcome.report["status"], "ok") << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["timing"]["kernels"][0]["cluster"], nlohmann::ordered_json({2, 1, 1}));

  // The same kernel without its cluster reads a peer that is not there: a fault, reported as an
  // illegal address naming the kernel.
  write_package(package_, "fake_cluster_copy", {kX, kY});
  outcome = run_runner(options_for(package_, reference_));
  EXPECT_EQ(outcome.report["status"], "launch_error") << outcome.report.dump(2);
  EXPECT_EQ(outcome.report["errors"][0]["cuda_error_name"], "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ(outcome.report["errors"][0]["kernel"], "fake_cluster_copy");
}

TEST(GpuSessionLaunch, ClusterTheDriverRefusesIsALaunchError) {
  // The package reader refuses clusters that do not divide the grid; the session still reports
  // the driver's own refusal with the cluster it asked for.
  DriverLoadError error;
  auto driver = CudaDriver::load(fake_libcuda_path(), &error);
  ASSERT_NE(driver, nullptr) << error.message;
  ASSERT_EQ(driver->init(0), cu::kSuccess);
  ASSERT_NE(driver->launch_kernel_ex, nullptr);
  GpuError open_error;
  auto session = GpuSession::open(driver, 0, &open_error);
  ASSERT_NE(session, nullptr) << open_error.message;
  cu::Module module = nullptr;
  ASSERT_FALSE(session->load_module({'f', 'a', 'k', 'e'}, &module));
  cu::Function function = nullptr;
  ASSERT_FALSE(session->get_function(module, "fake_copy", 0, &function, nullptr));
  cu::DevicePtr x = 0, y = 0;
  ASSERT_FALSE(session->allocate(64, &x));
  ASSERT_FALSE(session->allocate(64, &y));
  KernelParameters parameters;
  parameters.add_pointer(x);
  parameters.add_pointer(y);
  LaunchShape shape{{3, 1, 1}, {32, 1, 1}, std::array<int64_t, 3>{2, 1, 1}, 0};
  std::optional<GpuError> failure = session->launch(function, shape, parameters);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->cuda_error_name, "CUDA_ERROR_INVALID_CLUSTER_SIZE");
  EXPECT_NE(failure->message.find("cuLaunchKernelEx(cluster 2x1x1)"), std::string::npos)
      << failure->message;
  shape.grid = {4, 1, 1};
  EXPECT_FALSE(session->launch(function, shape, parameters).has_value());
}

}  // namespace
}  // namespace nautilus::profiler
