// GPU discovery: the "no GPU" outcomes are typed and explained, devices are described fully.
//
// Most tests load the stand-in driver built from profiler/testing/fake_libcuda.cpp, so every
// branch of discovery runs on machines without a GPU. Tests against the system driver accept
// either outcome on any machine, and the real-device test skips when there is no GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "profiler/cuda_driver.h"
#include "profiler/device_info.h"

namespace nautilus::profiler {
namespace {

// Sets an environment variable for the lifetime of a scope (the fake driver reads them per call).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) { ::setenv(name, value, 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

TEST(CudaDriver, MissingLibraryIsReportedNotFatal) {
  DriverLoadError error;
  EXPECT_EQ(CudaDriver::load("libnautilus-no-such-driver.so.1", &error), nullptr);
  EXPECT_EQ(error.kind, DriverLoadError::Kind::NotFound);
  EXPECT_NE(error.message.find("libnautilus-no-such-driver.so.1"), std::string::npos)
      << error.message;
}

TEST(CudaDriver, LibraryWithoutDriverSymbolsIsIncomplete) {
  // libm is always present and exports none of the driver API.
  DriverLoadError error;
  EXPECT_EQ(CudaDriver::load("libm.so.6", &error), nullptr);
  EXPECT_EQ(error.kind, DriverLoadError::Kind::MissingSymbol);
  EXPECT_NE(error.message.find("cuInit"), std::string::npos) << error.message;
}

TEST(CudaDriver, ResolvesEveryEntryPointOfAFakeDriver) {
  DriverLoadError error;
  auto driver = CudaDriver::load(NAUTILUS_FAKE_LIBCUDA, &error);
  ASSERT_NE(driver, nullptr) << error.message;
  EXPECT_EQ(driver->error_text(100), "no CUDA-capable device is detected (CUDA error 100)");
  EXPECT_EQ(driver->error_text(12345), "unrecognized error (CUDA error 12345)");
}

TEST(DeviceQuery, MissingLibraryMeansNoGpu) {
  DeviceQuery query = query_devices("libnautilus-no-such-driver.so.1");
  ASSERT_FALSE(query.has_gpu());
  EXPECT_EQ(query.no_gpu->reason, NoGpuReason::LibraryNotFound);
  EXPECT_TRUE(query.devices.empty());
  EXPECT_EQ(query.driver_version, 0);
  nlohmann::ordered_json json = to_json(query);
  EXPECT_TRUE(json["driver_version"].is_null());
  EXPECT_EQ(json["no_gpu"]["reason"], "library_not_found");
  EXPECT_FALSE(json.contains("devices"));
}

TEST(DeviceQuery, IncompleteLibraryMeansNoGpu) {
  DeviceQuery query = query_devices("libm.so.6");
  ASSERT_FALSE(query.has_gpu());
  EXPECT_EQ(query.no_gpu->reason, NoGpuReason::DriverIncomplete);
}

TEST(DeviceQuery, InitFailureCarriesTheDriverErrorString) {
  ScopedEnv env("NAUTILUS_FAKE_CUDA_INIT_ERROR", "999");
  DeviceQuery query = query_devices(NAUTILUS_FAKE_LIBCUDA);
  ASSERT_FALSE(query.has_gpu());
  EXPECT_EQ(query.no_gpu->reason, NoGpuReason::InitFailed);
  EXPECT_EQ(query.no_gpu->message, "cuInit failed: unknown error (CUDA error 999)");
  // The version is read before cuInit, so it is known even when init fails.
  EXPECT_EQ(query.driver_version, 13000);
}

TEST(DeviceQuery, InitWithoutDeviceMeansNoDevices) {
  ScopedEnv env("NAUTILUS_FAKE_CUDA_INIT_ERROR", "100");
  DeviceQuery query = query_devices(NAUTILUS_FAKE_LIBCUDA);
  ASSERT_FALSE(query.has_gpu());
  EXPECT_EQ(query.no_gpu->reason, NoGpuReason::NoDevices);
  EXPECT_NE(query.no_gpu->message.find("no CUDA-capable device"), std::string::npos);
}

TEST(DeviceQuery, ZeroDevicesMeansNoDevices) {
  ScopedEnv env("NAUTILUS_FAKE_CUDA_DEVICES", "0");
  DeviceQuery query = query_devices(NAUTILUS_FAKE_LIBCUDA);
  ASSERT_FALSE(query.has_gpu());
  EXPECT_EQ(query.no_gpu->reason, NoGpuReason::NoDevices);
  EXPECT_EQ(to_json(query)["no_gpu"]["reason"], "no_devices");
}

TEST(DeviceQuery, AttributeFailureIsAQueryFailureWithNoPartialList) {
  ScopedEnv env("NAUTILUS_FAKE_CUDA_ATTRIBUTE_ERROR", "1");
  DeviceQuery query = query_devices(NAUTILUS_FAKE_LIBCUDA);
  ASSERT_FALSE(query.has_gpu());
  EXPECT_EQ(query.no_gpu->reason, NoGpuReason::QueryFailed);
  EXPECT_TRUE(query.devices.empty());
  EXPECT_NE(query.no_gpu->message.find("cuDeviceGetAttribute"), std::string::npos)
      << query.no_gpu->message;
}

TEST(DeviceQuery, DescribesEveryDevice) {
  ScopedEnv env("NAUTILUS_FAKE_CUDA_DEVICES", "2");
  DeviceQuery query = query_devices(NAUTILUS_FAKE_LIBCUDA);
  ASSERT_TRUE(query.has_gpu()) << query.no_gpu->message;
  ASSERT_EQ(query.devices.size(), 2u);
  EXPECT_EQ(query.driver_version, 13000);

  const DeviceInfo& d = query.devices[1];
  EXPECT_EQ(d.ordinal, 1);
  EXPECT_EQ(d.name, "Nautilus Fake GPU 1");
  EXPECT_EQ(d.compute_major, 9);
  EXPECT_EQ(d.compute_minor, 0);
  EXPECT_EQ(d.arch(), "sm_90");
  EXPECT_EQ(d.sm_count, 132);
  EXPECT_EQ(d.total_memory_bytes, uint64_t{80} << 30);
  EXPECT_EQ(d.sm_clock_khz, 1980000);
  EXPECT_EQ(d.memory_clock_khz, 2619000);
  EXPECT_EQ(d.memory_bus_width_bits, 5120);
  EXPECT_EQ(d.l2_cache_bytes, 50 << 20);
  EXPECT_EQ(d.shared_memory_per_block_optin_bytes, 227 << 10);
  EXPECT_EQ(d.shared_memory_per_sm_bytes, 228 << 10);
  EXPECT_EQ(d.registers_per_sm, 65536);
  EXPECT_EQ(d.max_threads_per_sm, 2048);
  EXPECT_EQ(d.warp_size, 32);
  EXPECT_EQ(d.pci_bus, 0x19);
  // H100 SXM's datasheet bandwidth is 3.35 TB/s: 2 x 2619 MHz x 5120 bit / 8.
  EXPECT_NEAR(d.peak_memory_bandwidth_bytes_per_s(), 3.352e12, 1e9);
}

TEST(DeviceQuery, JsonListsDevicesInAStableOrder) {
  DeviceQuery query = query_devices(NAUTILUS_FAKE_LIBCUDA);
  ASSERT_TRUE(query.has_gpu()) << query.no_gpu->message;
  nlohmann::ordered_json json = to_json(query);
  EXPECT_EQ(json["driver_version"], "13.0");
  EXPECT_FALSE(json.contains("no_gpu"));
  ASSERT_EQ(json["devices"].size(), 1u);
  const auto& device = json["devices"][0];
  EXPECT_EQ(device.begin().key(), "ordinal");
  EXPECT_EQ(device["name"], "Nautilus Fake GPU 0");
  EXPECT_EQ(device["compute_capability"], "9.0");
  EXPECT_EQ(device["arch"], "sm_90");
  EXPECT_EQ(device["sm_count"], 132);
  EXPECT_EQ(device["shared_memory_per_block_optin_bytes"], 227 << 10);
}

TEST(DeviceQuery, FormatsDriverVersions) {
  EXPECT_EQ(format_driver_version(13000), "13.0");
  EXPECT_EQ(format_driver_version(12040), "12.4");
  EXPECT_EQ(format_driver_version(0), "unknown");
}

// The system driver: on a machine without a GPU (CI, this project's build machines) the answer is
// a clean "no GPU"; on a GPU machine every device must be fully described.
TEST(SystemDriver, AnswersCleanlyEitherWay) {
  DeviceQuery query = query_devices();
  if (!query.has_gpu()) {
    EXPECT_TRUE(query.devices.empty());
    EXPECT_FALSE(query.no_gpu->message.empty());
    EXPECT_EQ(query.no_gpu->message.find('\n'), std::string::npos) << "message must be one line";
  } else {
    EXPECT_FALSE(query.devices.empty());
  }
}

TEST(SystemDriver, RealDevicesAreFullyDescribed) {
  DeviceQuery query = query_devices();
  if (!query.has_gpu()) {
    GTEST_SKIP() << "no GPU: " << query.no_gpu->message;
  }
  EXPECT_GE(query.driver_version, 1000);
  for (const DeviceInfo& d : query.devices) {
    SCOPED_TRACE(d.name);
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.compute_major, 3);
    EXPECT_GT(d.sm_count, 0);
    EXPECT_GT(d.total_memory_bytes, uint64_t{1} << 30);
    EXPECT_GT(d.sm_clock_khz, 0);
    EXPECT_GT(d.memory_clock_khz, 0);
    EXPECT_GT(d.memory_bus_width_bits, 0);
    EXPECT_GT(d.l2_cache_bytes, 0);
    EXPECT_GE(d.shared_memory_per_block_optin_bytes, 48 << 10);
    EXPECT_EQ(d.warp_size, 32);
  }
}

}  // namespace
}  // namespace nautilus::profiler
