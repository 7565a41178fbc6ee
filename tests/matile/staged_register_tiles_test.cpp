// Tiles the consumers of a warp-specialized kernel read in registers join the TMA ring
// (stage_register_tiles, lower_hopper.cpp): the gated MLP's down projection computes its A
// operand silu(G) * U from f32 tiles of G and U. The producer copies them with Wd's tile, and the
// consumers read them from the ring slot, instead of a global load that each iteration waits for.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/matile/printer.h"
#include "core/matile/visitor.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::expect_stage_matches_reference;

std::vector<std::string> gated_mlp_schedule(int f_tile) {
  return {"tile(Y_sum, t=128, e=256, f=" + std::to_string(f_tile) + ")",
          "tile(U, t=128, f=256, h=64)",
          "tile(G, t=128, f=256, h=64)",
          "reverse_compute_at(Y, Y_sum, e_o)",
          "bind(G, t_o=grid.y, f_o=grid.x)",
          "bind(U, t_o=grid.y, f_o=grid.x)",
          "bind(Y_sum, e_o=grid.y, t_o=grid.x)",
          "warp_spec(G, consumers=2, stages=3)",
          "warp_spec(U, consumers=2, stages=3)",
          "warp_spec(Y_sum, consumers=2, stages=3)",
          "persistent(Y_sum)"};
}

int count_ops(const Region& region, OpKind kind, const std::string& buffer) {
  int count = 0;
  for_each_op(region, [&](const Op& op) {
    if (op.kind != kind) return;
    if (kind == OpKind::GlobalLoad && op.buffer && op.buffer->name == buffer) ++count;
    if (kind != OpKind::GlobalLoad) ++count;
  });
  return count;
}

TEST(StagedRegisterTiles, TheDownProjectionReadsGAndUFromTheRing) {
  // Sizes that are no tile multiples: TMA zero-fills past the buffers' ends.
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gated_mlp.nt", gated_mlp_schedule(32), {"T=200", "H=296", "F=104"}, "sm_90a");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Kernel& down = *compilation.ma_module->kernels.back();
  const std::string text = print_kernel(down);
  EXPECT_NE(text.find("tma.load G_ring"), std::string::npos) << text;
  EXPECT_NE(text.find("tma.load U_ring"), std::string::npos) << text;
  EXPECT_NE(text.find("ld.shared G_ring"), std::string::npos) << text;
  EXPECT_NE(text.find("ld.shared U_ring"), std::string::npos) << text;
  EXPECT_EQ(count_ops(*down.body, OpKind::GlobalLoad, "G"), 0) << text;
  EXPECT_EQ(count_ops(*down.body, OpKind::GlobalLoad, "U"), 0) << text;
  for (uint64_t seed : {1, 2}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed);
}

TEST(StagedRegisterTiles, ATileWiderThanOneSwizzlePanelStaysAGlobalLoadAndSaysWhy) {
  // f 64: a row of 64 f32 is 256 bytes, two 128-byte swizzle panels.
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gated_mlp.nt", gated_mlp_schedule(64), {"T=200", "H=296", "F=104"}, "sm_90a");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Kernel& down = *compilation.ma_module->kernels.back();
  EXPECT_GT(count_ops(*down.body, OpKind::GlobalLoad, "G"), 0);
  bool noted = false;
  for (const std::string& note : down.notes) {
    noted = noted || (note.find("%G (G) stays a global load in the consumers") != std::string::npos &&
                      note.find("swizzle panels") != std::string::npos);
  }
  EXPECT_TRUE(noted) << print_kernel(down);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 1);
}

TEST(StagedRegisterTiles, ARingThatWouldNotFitKeepsTheGlobalLoads) {
  // 6 stages of G, U (16 KB each) and Wd (16 KB) exceed a CTA's 227 KB: G joins (6 x 32 KB),
  // U does not (6 x 48 KB).
  std::vector<std::string> schedule = gated_mlp_schedule(32);
  schedule[9] = "warp_spec(Y_sum, consumers=2, stages=6)";
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gated_mlp.nt", schedule, {"T=200", "H=296", "F=104"}, "sm_90a");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Kernel& down = *compilation.ma_module->kernels.back();
  EXPECT_EQ(count_ops(*down.body, OpKind::GlobalLoad, "G"), 0);
  EXPECT_GT(count_ops(*down.body, OpKind::GlobalLoad, "U"), 0);
  bool noted = false;
  for (const std::string& note : down.notes) {
    noted = noted || note.find("%U (U) stays a global load in the consumers: 6 stages of 48 KB") != std::string::npos;
  }
  EXPECT_TRUE(noted) << print_kernel(down);
  EXPECT_EQ(down.register_tiles_without_room, 1);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 1);
}

// An attention score bias read in registers after QKᵀ's issue, in the overlapped (overlap=1)
// consumer loop: its ring slot is released with V's, by the next iteration, after the bias was
// read. The interpreter checks the ring's races at sizes that are no tile multiples.
TEST(StagedRegisterTiles, AnAttentionScoreBiasJoinsTheRingOfAnOverlappedLoop) {
  const driver::Compilation compilation = compile_for_arch(
      "bench/variants/sliding_window_bias.nt",
      {"rolling_update(O_sum, n, tile=64)", "tile(O_sum_acc, m=128)", "compute_at(S, L, n_o)",
       "compute_at(S_sum, S, n_o)", "reverse_compute_at(O, O_sum, m_o)",
       "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "skip_masked(S, n_o)",
       "warp_spec(O_sum_acc, consumers=2, stages=3, overlap=1)"},
      {"B=1", "H=4", "KH=1", "M=200", "N=200", "D=64", "W=72"}, "sm_90a");
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.back();
  const std::string text = print_kernel(kernel);
  EXPECT_NE(text.find("tma.load Bias_ring"), std::string::npos) << text;
  EXPECT_NE(text.find("ld.shared Bias_ring"), std::string::npos) << text;
  EXPECT_EQ(count_ops(*kernel.body, OpKind::GlobalLoad, "Bias"), 0) << text;
  for (uint64_t seed : {1, 2}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed);
}

}  // namespace
}  // namespace nautilus::matile
