// The cost model on decode attention (bench/variants/mqa_decode.nt: B 32, H 32, one query row,
// 8192 keys, d 128, one shared K/V head), against what the H200 measured on 2026-11-28
// (bench/NOTES.md, "decode on the H200"): a streaming read of 134.7 MB whose split kernel is
// bound by its per-tile instruction chain once DRAM delivers 4.8 TB/s. Measured, total µs:
//   8 splits, 2 warps (each its own 16 heads), 64-key tiles, 3 stages   35.0
//   8 splits, 4 warps (sharing rows), 64-key tiles, 3 stages            40.5
//   4 splits, 4 warps, 128-key tiles, 3 stages (the H100 model's pick)  44.9
//   8 splits, 1 warp per 16 heads, 32-key tiles, 4 stages               53.9
// The H200 preset ranks them in that order; the H100 preset, whose DRAM hides the chains,
// cannot tell the first three apart by more than the combine kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pipeline.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::cost {
namespace {

struct DecodeForm {
  int splits, heads, key_tile, warps, stages;
};

std::vector<std::string> decode_schedule(const DecodeForm& f) {
  const std::string stages = std::to_string(f.stages);
  return {"rolling_update(O_sum, n, tile=" + std::to_string(f.key_tile) + ")",
          "split_k_update(Mx, n, splits=" + std::to_string(f.splits) + ")",
          "compute_at(S, Mx_part, n_o)",
          "bind(O_sum_acc, b=grid.y, h=grid.x)",
          "reverse_compute_at(O, O_sum, h)",
          "tile(O_sum_acc_part, h=" + std::to_string(f.heads) + ")",
          "bind(O_sum_acc_part, n_s=grid.z, b=grid.y, h_o=grid.x)",
          "launch(O_sum_acc_part, warps=" + std::to_string(f.warps) + ", stages=" + stages + ")",
          "pipeline(O_sum_acc_part, stages=" + stages + ")"};
}

double estimate_us(const DeviceModel& device, const DecodeForm& form) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      "bench/variants/mqa_decode.nt", decode_schedule(form), {}, options);
  EXPECT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  if (!compilation.ma_module) return 0.0;
  const CostEstimate estimate = make_analytical_model(device)->estimate(*compilation.ma_module);
  EXPECT_TRUE(estimate.feasible) << estimate.infeasible_reason;
  return estimate.microseconds;
}

TEST(DecodeCost, TheH200RanksTheDecodeFormsAsMeasured) {
  const std::vector<DecodeForm> measured_order = {
      {8, 32, 64, 2, 3}, {8, 32, 64, 4, 3}, {4, 32, 128, 4, 3}, {8, 16, 32, 1, 4}};
  const DeviceModel h200 = h200_sxm();
  double previous = 0.0;
  for (const DecodeForm& form : measured_order) {
    const double us = estimate_us(h200, form);
    EXPECT_GT(us, previous) << "splits " << form.splits << ", warps " << form.warps;
    previous = us;
  }
  // The fastest within 10% of its measured 35.0 µs: a chain-bound estimate, not DRAM's 28 µs.
  EXPECT_NEAR(estimate_us(h200, measured_order[0]), 35.0, 3.5);
}

TEST(DecodeCost, OnTheH100DramHidesTheChainsThatSeparateThemOnTheH200) {
  const DeviceModel h100 = h100_sxm();
  const double two_warps = estimate_us(h100, {8, 32, 64, 2, 3});
  const double four_warps = estimate_us(h100, {8, 32, 64, 4, 3});
  // 134.7 MB at 90% of 3.35 TB/s: both are DRAM-bound, within a few percent.
  EXPECT_NEAR(two_warps, four_warps, 0.03 * four_warps);
  EXPECT_GT(two_warps, 134.7 / (0.9 * 3.35));
}

// The 70B-class int8 decode (M 1, K 8192, N 28672; assets/specs/int8_weight_gemm.nt), three
// tiles measured on the H200 (2026-11-29, bench/RESULTS.md): 1 x 128 x 128 on 4 warps 57.1 µs
// (224 CTAs), 1 x 256 x 128 on 4 warps 67.6 (112 CTAs on 132 SMs), 1 x 64 x 128 on 2 warps 69.2.
// A grid on 112 of the 132 SMs reaches (112/132)^0.6 of the DRAM bandwidth, so the 256-column
// tile ranks behind the 128-column one, which keeps the whole chip (the hardware gives each SM
// one of the 224 CTAs before any gets a second).
double int8_decode_us(int columns, int warps) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  const std::vector<std::string> schedule = {
      "tile(Y_sum, m=1, n=" + std::to_string(columns) + ", k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
      "bind(Y_sum, m_o=grid.y, n_o=grid.x)",
      "launch(Y_sum, warps=" + std::to_string(warps) + ", stages=3, reads=grouped)"};
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      "assets/specs/int8_weight_gemm.nt", schedule, {"M=1", "N=28672", "K=8192", "KG=64"}, options);
  EXPECT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  if (!compilation.ma_module) return 0.0;
  const CostEstimate estimate = make_analytical_model(h200_sxm())->estimate(*compilation.ma_module);
  EXPECT_TRUE(estimate.feasible) << estimate.infeasible_reason;
  EXPECT_EQ(estimate.kernels.size(), 1u);
  return estimate.microseconds;
}

TEST(DecodeCost, AGridOnFewerSmsThanTheDeviceReachesLessDramBandwidth) {
  const double tile128 = int8_decode_us(128, 4);
  const double tile256 = int8_decode_us(256, 4);
  EXPECT_LT(tile128, tile256);
  // Both stream the same 235 MB: the 112-CTA grid is DRAM-bound at the reach of its SMs.
  EXPECT_NEAR(tile256 / tile128, std::pow(132.0 / 112.0, 0.6), 0.05);
  // The 128-column tile within 10% of its measured 57.1 µs.
  EXPECT_NEAR(tile128, 57.1, 5.7);
}

TEST(DeviceModels, TheH200IsTheH100WithHbm3e) {
  const auto h200 = device_model_for("NVIDIA H200");
  ASSERT_TRUE(h200);
  EXPECT_EQ(h200->name, "NVIDIA H200");
  EXPECT_DOUBLE_EQ(h200->dram_bytes_per_s, 4.8e12);
  EXPECT_EQ(h200->sm_count, h100_sxm().sm_count);
  EXPECT_EQ(device_model_for("h200")->name, "NVIDIA H200");
  EXPECT_EQ(device_model_for("sm_90")->name, h100_sxm().name);  // the architecture alone: H100
}

}  // namespace
}  // namespace nautilus::cost
