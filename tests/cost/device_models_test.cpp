// Device presets, the lookup by architecture or name, and the override from the runner's device
// description (profiler/device_info.h to_json field names).
#include "core/cost/device_models.h"

#include <gtest/gtest.h>

#include "core/cost/analytical_model.h"
#include "tests/cost/cost_test_util.h"

namespace nautilus::cost {
namespace {

TEST(DeviceModels, PresetsDescribeTheChips) {
  const DeviceModel h100 = h100_sxm();
  EXPECT_EQ(h100.arch, "sm_90");
  EXPECT_EQ(h100.sm_count, 132);
  // The MA IR issues mma.sync, which reaches about two thirds of the wgmma data-sheet peak.
  EXPECT_GT(h100.wgmma_tensor_tflops_16bit, h100.tensor_tflops_16bit);
  EXPECT_NEAR(h100.tensor_tflops_16bit, 660, 1);
  EXPECT_EQ(h100.shared_bytes_per_cta_max, 227 * 1024);
  const DeviceModel a100 = a100_sxm();
  EXPECT_EQ(a100.arch, "sm_80");
  EXPECT_EQ(a100.sm_count, 108);
  EXPECT_EQ(a100.wgmma_tensor_tflops_16bit, 0.0);
  EXPECT_LT(a100.tensor_tflops_16bit, h100.tensor_tflops_16bit);
  EXPECT_LT(a100.dram_bytes_per_s, h100.dram_bytes_per_s);
}

TEST(DeviceModels, LookupByArchitectureOrName) {
  for (const char* h100 :
       {"sm_90", "sm_90a", "9.0", "90", "NVIDIA H100 80GB HBM3", "h100", "H100 PCIe"}) {
    const auto model = device_model_for(h100);
    ASSERT_TRUE(model) << h100;
    EXPECT_EQ(model->arch, "sm_90") << h100;
  }
  for (const char* a100 : {"sm_80", "8.0", "NVIDIA A100-SXM4-80GB", "a100"}) {
    const auto model = device_model_for(a100);
    ASSERT_TRUE(model) << a100;
    EXPECT_EQ(model->arch, "sm_80") << a100;
  }
  for (const char* unknown : {"sm_75", "RTX 4090", "", "sm_9"})
    EXPECT_FALSE(device_model_for(unknown)) << unknown;
  EXPECT_NE(known_device_models().find("h100"), std::string::npos);
}

// A device as `nautilus devices --json` describes it: an H100 PCIe (114 SMs, 1.755 GHz, 2 TB/s).
nlohmann::json h100_pcie() {
  return nlohmann::json::parse(R"({
    "ordinal": 0, "name": "NVIDIA H100 PCIe", "compute_capability": "9.0", "arch": "sm_90",
    "sm_count": 114, "total_memory_bytes": 85031714816, "sm_clock_khz": 1755000,
    "memory_clock_khz": 1593000, "memory_bus_width_bits": 5120,
    "peak_memory_bandwidth_bytes_per_s": 2039040000000.0, "l2_cache_bytes": 52428800,
    "shared_memory_per_block_optin_bytes": 232448, "shared_memory_per_sm_bytes": 233472,
    "registers_per_sm": 65536, "max_threads_per_sm": 2048, "warp_size": 32,
    "pci_domain": 0, "pci_bus": 1})");
}

TEST(DeviceModels, TheRunnersDescriptionOverridesThePreset) {
  std::string error;
  const auto model = device_model_from_json(h100_pcie(), &error);
  ASSERT_TRUE(model) << error;
  const DeviceModel preset = h100_sxm();
  EXPECT_EQ(model->name, "NVIDIA H100 PCIe");
  EXPECT_EQ(model->sm_count, 114);
  EXPECT_DOUBLE_EQ(model->clock_ghz, 1.755);
  EXPECT_DOUBLE_EQ(model->dram_bytes_per_s, 2039040000000.0);
  EXPECT_EQ(model->shared_bytes_per_cta_max, 232448);
  // Whole-chip throughputs scale with SMs x clock.
  EXPECT_NEAR(model->tensor_tflops_16bit, preset.tensor_tflops_16bit * (114 * 1.755) / (132 * 1.98),
              1e-9);
  EXPECT_NEAR(model->cuda_core_tflops_f32,
              preset.cuda_core_tflops_f32 * (114 * 1.755) / (132 * 1.98), 1e-9);
  // The whole query document works too (its first device).
  nlohmann::json query = {{"driver_version", "13.0"},
                          {"devices", nlohmann::json::array({h100_pcie()})}};
  const auto from_query = device_model_from_json(query, &error);
  ASSERT_TRUE(from_query) << error;
  EXPECT_EQ(from_query->sm_count, 114);
  // The smaller chip is predicted slower on the same program.
  const auto module = testing::compile_ma("attention", {"B=4", "H=16", "M=2048", "N=2048"},
                                          testing::hand_schedule("attention"));
  ASSERT_TRUE(module);
  const double sxm = make_analytical_model(preset)->estimate(*module).microseconds;
  const double pcie = make_analytical_model(*model)->estimate(*module).microseconds;
  const double a100 = make_analytical_model(a100_sxm())->estimate(*module).microseconds;
  EXPECT_LT(sxm, pcie);
  EXPECT_LT(pcie, a100);
}

TEST(DeviceModels, BadDescriptionsSayWhy) {
  std::string error;
  nlohmann::json bad = h100_pcie();
  bad["sm_count"] = -3;
  EXPECT_FALSE(device_model_from_json(bad, &error));
  EXPECT_NE(error.find("sm_count must be a positive number, got -3"), std::string::npos) << error;
  bad = h100_pcie();
  bad["sm_clock_khz"] = "fast";
  EXPECT_FALSE(device_model_from_json(bad, &error));
  EXPECT_NE(error.find("sm_clock_khz"), std::string::npos) << error;
  bad = h100_pcie();
  bad["arch"] = "sm_75";
  bad["compute_capability"] = "7.5";
  bad["name"] = "Tesla T4";
  EXPECT_FALSE(device_model_from_json(bad, &error));
  EXPECT_NE(error.find("no cost-model preset for 'sm_75'"), std::string::npos) << error;
  EXPECT_FALSE(device_model_from_json(nlohmann::json::array({1, 2}), &error));
  EXPECT_NE(error.find("expected a JSON object"), std::string::npos) << error;
  EXPECT_FALSE(
      device_model_from_json(nlohmann::json{{"devices", nlohmann::json::array()}}, &error));
  EXPECT_NE(error.find("lists no device"), std::string::npos) << error;
  EXPECT_FALSE(device_model_from_json(nlohmann::json::object(), &error));
  EXPECT_NE(error.find("without arch or name"), std::string::npos) << error;
}

}  // namespace
}  // namespace nautilus::cost
