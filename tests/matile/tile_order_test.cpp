// The grouped tile order (the tile_order decision, core/sched/tile_order.h): the launch-order
// map is a bijection for every grid and group (core/support/launch_order.h); the MA kernel
// carries the group (the decision's own tests: tests/sched/tile_order_test.cpp), the VR and MA
// interpreters run a grouped GEMM (sm_90a warp-specialized and sm_80) at ragged sizes against
// the float64 reference; the CUDA emitter maps blockIdx through the same formula; the cost model
// charges a grouped large GEMM fewer DRAM bytes, and a grid of less than a wave the same bytes. A
// reversed axis (reverse=LOOP): the launch order walks it from its last coordinate, a causal
// attention launched longest tiles first matches the reference, and the model ranks it faster.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pipeline.h"
#include "core/matile/printer.h"
#include "core/support/launch_order.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::expect_stage_matches_reference;

driver::Compilation compile(const std::vector<std::string>& decisions,
                            const std::vector<std::string>& sizes, const std::string& arch,
                            driver::Stage last = driver::Stage::MATile) {
  driver::CompileOptions options;
  options.last_stage = last;
  options.matile.arch = arch;
  return nautilus::testing::compile_scheduled("assets/specs/gemm.nt", decisions, sizes, options);
}

std::vector<std::string> warp_specialized_gemm(int group) {
  return {"tile(C_sum, m=128, n=256, k=64)", "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=3)",
          "tile_order(C_sum, group=" + std::to_string(group) + ")"};
}

std::vector<std::string> ampere_gemm(int group) {
  return {"tile(C_sum, m=32, n=32, k=16)", "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)",
          "tile_order(C_sum, group=" + std::to_string(group) + ")"};
}

TEST(LaunchOrder, EveryGroupVisitsEveryGridPointOnce) {
  for (int64_t x = 1; x <= 6; ++x) {
    for (int64_t y = 1; y <= 9; ++y) {
      for (int64_t z = 1; z <= 2; ++z) {
        for (int64_t group = 1; group <= 10; ++group) {
          std::set<std::vector<int64_t>> seen;
          for (int64_t launched = 0; launched < x * y * z; ++launched) {
            const std::vector<int64_t> point = grid_point_in_launch_order(launched, {x, y, z}, group);
            ASSERT_EQ(point.size(), 3u);
            ASSERT_TRUE(point[0] >= 0 && point[0] < x && point[1] >= 0 && point[1] < y &&
                        point[2] >= 0 && point[2] < z);
            seen.insert(point);
          }
          EXPECT_EQ(static_cast<int64_t>(seen.size()), x * y * z)
              << "grid " << x << " x " << y << " x " << z << ", group " << group;
        }
      }
    }
  }
}

TEST(LaunchOrder, GroupsWalkBandsColumnByColumnAndGroupOneIsThePlainOrder) {
  // The example of launch_order.h: X = 3, Y = 5, G = 2; the last band has one row.
  const std::vector<std::vector<int64_t>> expected = {
      {0, 0}, {0, 1}, {1, 0}, {1, 1}, {2, 0}, {2, 1}, {0, 2}, {0, 3},
      {1, 2}, {1, 3}, {2, 2}, {2, 3}, {0, 4}, {1, 4}, {2, 4}};
  for (int64_t launched = 0; launched < 15; ++launched) {
    EXPECT_EQ(grid_point_in_launch_order(launched, {3, 5}, 2), expected[static_cast<size_t>(launched)])
        << "CTA " << launched;
    EXPECT_EQ(grid_point_in_launch_order(launched, {3, 5}, 1),
              (std::vector<int64_t>{launched % 3, launched / 3}));
  }
  // One axis: nothing to group.
  EXPECT_EQ(grid_point_in_launch_order(4, {7}, 4), std::vector<int64_t>{4});
}

TEST(TileOrder, AWarpSpecializedGemmWithRaggedBandsMatchesTheReference) {
  // 6 rows of 128-row tiles on grid.y (the last one ragged), 2 columns of 256 (the second
  // ragged): groups of 4 and 5 leave a short last band (6 = 4 + 2 = 5 + 1).
  for (int group : {4, 5}) {
    const driver::Compilation compilation =
        compile(warp_specialized_gemm(group), {"M=650", "N=312", "K=24"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_EQ(kernel.tile_group, group);
    EXPECT_NE(print_kernel(kernel).find("grid(n_o: 2, m_o: 6) group(" + std::to_string(group) + ")"),
              std::string::npos);
    EXPECT_NE(module_to_json(*compilation.ma_module).dump().find("\"tile_group\":" + std::to_string(group)),
              std::string::npos);
    if (group == 4) expect_stage_matches_reference(compilation, driver::Stage::VRTile, 5, "group 4");
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 5, "group " + std::to_string(group));
  }
}

TEST(TileOrder, AnAmpereGemmWithRaggedBandsMatchesTheReference) {
  // 5 x 3 tiles of 32 x 32 (M = 150, N = 70: both edges ragged), groups of 2 and 4.
  for (int group : {2, 4}) {
    const driver::Compilation compilation = compile(ampere_gemm(group), {"M=150", "N=70", "K=40"}, "sm_80");
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    EXPECT_EQ(compilation.ma_module->kernels.at(0)->tile_group, group);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 9, "group " + std::to_string(group));
  }
}

TEST(TileOrder, TheEmitterMapsBlockIdxThroughTheBands) {
  const driver::Compilation ragged =
      compile(ampere_gemm(2), {"M=150", "N=70", "K=40"}, "sm_80", driver::Stage::Cuda);
  ASSERT_TRUE(ragged.cuda) << ragged.diagnostics->render_all();
  const std::string& source = ragged.cuda->source;
  EXPECT_NE(source.find("const int launched = blockIdx.y * 3 + blockIdx.x;"), std::string::npos) << source;
  EXPECT_NE(source.find("const int band_rows = min(2, 5 - band * 2);"), std::string::npos);
  EXPECT_NE(source.find("const int n_o = in_band / band_rows;"), std::string::npos);
  EXPECT_NE(source.find("const int m_o = band * 2 + in_band % band_rows;"), std::string::npos);
  EXPECT_EQ(ragged.cuda->kernels.at(0).grid[0], 3);
  EXPECT_EQ(ragged.cuda->kernels.at(0).grid[1], 5);
  // Bands that divide the rows need no per-band row count.
  const driver::Compilation even =
      compile(ampere_gemm(5), {"M=150", "N=70", "K=40"}, "sm_80", driver::Stage::Cuda);
  ASSERT_TRUE(even.cuda);
  EXPECT_EQ(even.cuda->source.find("band_rows"), std::string::npos);
  EXPECT_NE(even.cuda->source.find("const int m_o = band * 5 + in_band % 5;"), std::string::npos);
}

TEST(TileOrder, TheCostModelChargesAGroupedLargeGemmFewerDramBytes) {
  // 8192^3 with 128 x 256 tiles: a wave of 132 CTAs in the plain order reads every column panel
  // of A (64 of them) and 3 of B; in bands of 8 rows, 8 of B and 17 of A.
  const std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(cost::h100_sxm());
  double dram[2] = {0, 0}, micros[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> decisions = warp_specialized_gemm(i == 0 ? 1 : 8);
    decisions[2] = "bind(C_sum, n_o=grid.y, m_o=grid.x)";
    const driver::Compilation compilation =
        compile(decisions, {"M=8192", "N=8192", "K=8192"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const cost::CostEstimate estimate = model->estimate(*compilation.ma_module);
    ASSERT_TRUE(estimate.feasible) << estimate.infeasible_reason;
    dram[i] = estimate.kernels.at(0).global_bytes;
    micros[i] = estimate.microseconds;
  }
  EXPECT_LT(dram[1], 0.7 * dram[0]);
  EXPECT_LT(micros[1], micros[0]);
}

TEST(TileOrder, AGridOfLessThanAWaveReadsTheSameBytesInEveryOrder) {
  // 4 x 8 tiles of 128 x 256 over K = 32768: 32 CTAs, fewer than one wave of 132, so every
  // order reads every panel of A (32 MB) and B (128 MB, more than L2) exactly once; a grouped
  // order must not count the partial wave twice.
  const std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(cost::h100_sxm());
  double dram[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    const driver::Compilation compilation = compile(
        warp_specialized_gemm(i == 0 ? 1 : 2), {"M=512", "N=2048", "K=32768"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const cost::CostEstimate estimate = model->estimate(*compilation.ma_module);
    ASSERT_TRUE(estimate.feasible) << estimate.infeasible_reason;
    dram[i] = estimate.kernels.at(0).global_bytes;
  }
  EXPECT_GT(dram[0], 160e6);
  EXPECT_NEAR(dram[1], dram[0], 1e-6 * dram[0]);
}

TEST(LaunchOrder, AReversedAxisIsWalkedFromItsLastCoordinate) {
  // 3 x 4 grid, axis 0 reversed: the first CTA runs x = 2; grouped by 2 with axis 1 reversed,
  // the first runs y = 3; every point is still visited once.
  EXPECT_EQ(grid_point_in_launch_order(0, {3, 4}, 1, 0b01), (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(grid_point_in_launch_order(2, {3, 4}, 1, 0b01), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(grid_point_in_launch_order(0, {3, 4}, 2, 0b10), (std::vector<int64_t>{0, 3}));
  for (uint32_t reversed : {0b01u, 0b10u, 0b11u, 0b100u}) {
    for (int64_t group : {1, 2, 3}) {
      std::set<std::vector<int64_t>> seen;
      for (int64_t i = 0; i < 24; ++i) seen.insert(grid_point_in_launch_order(i, {3, 4, 2}, group, reversed));
      EXPECT_EQ(seen.size(), 24u) << "group " << group << " reversed " << reversed;
    }
  }
}

std::vector<std::string> causal_attention(bool reversed) {
  std::vector<std::string> decisions = {
      "rolling_update(O_sum, n, tile=64)", "compute_at(S, Mx, n_o)", "compute_at(S_sum, S, n_o)",
      "tile(O_sum_acc, m=128)", "reverse_compute_at(O, O_sum, m_o)",
      "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "skip_masked(S, n_o)",
      "warp_spec(O_sum_acc, consumers=2, stages=3)"};
  if (reversed) decisions.push_back("tile_order(O_sum_acc, reverse=m_o)");
  return decisions;
}

driver::Compilation compile_causal(bool reversed, const std::vector<std::string>& sizes,
                                   driver::Stage last = driver::Stage::MATile) {
  driver::CompileOptions options;
  options.last_stage = last;
  options.matile.arch = "sm_90a";
  return nautilus::testing::compile_scheduled("assets/specs/causal_attention.nt",
                                              causal_attention(reversed), sizes, options);
}

TEST(TileOrder, CausalAttentionWithItsLongestQueryTilesFirstMatchesTheReference) {
  // 3 query tiles of 128 rows (the last ragged) per head: the CTA launched first runs m_o = 2.
  const std::vector<std::string> sizes = {"B=1", "H=2", "M=300", "N=300", "D=64"};
  const driver::Compilation compilation = compile_causal(true, sizes);
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(kernel.reversed_axes, 1u);
  EXPECT_NE(print_kernel(kernel).find("grid(m_o: 3 reversed, h: 2, b: 1)"), std::string::npos)
      << print_kernel(kernel);
  expect_stage_matches_reference(compilation, driver::Stage::VRTile, 3, "reversed m_o");
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 3, "reversed m_o");
  const driver::Compilation cuda = compile_causal(true, sizes, driver::Stage::Cuda);
  ASSERT_TRUE(cuda.cuda) << cuda.diagnostics->render_all();
  EXPECT_NE(cuda.cuda->source.find("const int m_o = 2 - static_cast<int>(blockIdx.x);"),
            std::string::npos)
      << cuda.cuda->source;
}

TEST(TileOrder, TheCostModelPrefersTheLongestCausalTilesFirst) {
  // B 1, H 16, S 16384: 2048 CTAs of 2 to 129 key tiles; in the plain order each head's
  // longest tiles come last and the last head's end the kernel on a few SMs.
  const std::unique_ptr<cost::CostModel> model = cost::make_analytical_model(cost::h100_sxm());
  double micros[2] = {0, 0};
  for (int reversed = 0; reversed < 2; ++reversed) {
    const driver::Compilation compilation =
        compile_causal(reversed == 1, {"B=1", "H=16", "M=16384", "N=16384", "D=128"});
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    const cost::CostEstimate estimate = model->estimate(*compilation.ma_module);
    ASSERT_TRUE(estimate.feasible) << estimate.infeasible_reason;
    micros[reversed] = estimate.microseconds;
  }
  EXPECT_LT(micros[1], 0.99 * micros[0]);
}

}  // namespace
}  // namespace nautilus::matile
