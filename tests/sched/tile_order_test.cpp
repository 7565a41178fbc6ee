// The tile_order decision (core/sched/tile_order.h): it prints and parses, writes the launch
// attributes `group` and `reverse` on the nest (scalar printer and JSON), changes no result, and
// refuses with a reason. The grouped order's execution is tested in tests/matile/tile_order_test.cpp.
#include <gtest/gtest.h>

#include <string>

#include "core/scalar/printer.h"
#include "core/sched/decision.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

TEST(TileOrderDecision, PrintsParsesAndWritesTheLaunchAttribute) {
  const Decision decision = *parse_decision("tile_order( C_sum , group = 8 )", nullptr);
  EXPECT_EQ(print_decision(decision), "tile_order(C_sum, group=8)");
  const testing::LoweredAsset asset = testing::lower_asset("gemm", {"M=40", "N=24", "K=8"});
  const scalar::ProgramPtr program = testing::apply_decisions(
      asset.program, {"tile(C_sum, m=8, n=8)", "reverse_compute_at(C, C_sum, n_o)",
                      "bind(C_sum, m_o=grid.y, n_o=grid.x)", "tile_order(C_sum, group=3)"});
  ASSERT_TRUE(program);
  const std::string text = scalar::print_program(*program);
  EXPECT_NE(text.find("[grid.y] launch(warps=4, stages=2, group=3)"), std::string::npos) << text;
  EXPECT_NE(scalar::program_to_json(*program).dump().find("\"group\":3"), std::string::npos);
  // Nothing is computed differently.
  testing::expect_same_results(asset, program);
  // group=1 restores the plain order (no attribute printed).
  const scalar::ProgramPtr plain = testing::apply_decisions(program, {"tile_order(C_sum, group=1)"});
  EXPECT_EQ(scalar::print_program(*plain).find("group="), std::string::npos);
}

TEST(TileOrderDecision, RefusalsSayWhy) {
  const testing::LoweredAsset asset = testing::lower_asset("gemm", {"M=40", "N=24", "K=8"});
  const scalar::ProgramPtr tiled = testing::apply_decisions(
      asset.program, {"tile(C_sum, m=8, n=8)", "reverse_compute_at(C, C_sum, n_o)"});
  const scalar::ProgramPtr one_axis = testing::apply_decisions(tiled, {"bind(C_sum, m_o=grid.x)"});
  EXPECT_NE(testing::failure_reason(one_axis, "tile_order(C_sum, group=4)")
                .find("tile_order: the kernel of block C_sum binds no loop to grid.y"),
            std::string::npos);
  EXPECT_NE(testing::failure_reason(tiled, "tile_order(C_sum, group=4)").find("grid.x or grid.y"),
            std::string::npos);
  const scalar::ProgramPtr bound =
      testing::apply_decisions(tiled, {"bind(C_sum, m_o=grid.y, n_o=grid.x)"});
  EXPECT_EQ(testing::failure_reason(bound, "tile_order(C_sum, group=0)"),
            "tile_order: group must be between 1 and 65535, got 0");
  EXPECT_NE(testing::failure_reason(bound, "tile_order(C_sum)").find("tile_order(BLOCK, group=G, reverse=LOOP): needs"),
            std::string::npos);
  EXPECT_NE(testing::failure_reason(bound, "tile_order(C_sum, rows=4)").find("unknown keyword 'rows'"),
            std::string::npos);
  EXPECT_NE(testing::failure_reason(bound, "tile_order(Q, group=4)").find("Q"), std::string::npos);
}

TEST(TileOrderDecision, ReverseNamesAGridLoopAndKeepsTheGroup) {
  const testing::LoweredAsset asset = testing::lower_asset("gemm", {"M=40", "N=24", "K=8"});
  const scalar::ProgramPtr program = testing::apply_decisions(
      asset.program, {"tile(C_sum, m=8, n=8)", "reverse_compute_at(C, C_sum, n_o)",
                      "bind(C_sum, m_o=grid.y, n_o=grid.x)", "tile_order(C_sum, group=3)",
                      "tile_order(C_sum, reverse=m_o)", "tile_order(C_sum, reverse=m_o)"});
  ASSERT_TRUE(program);
  const std::string text = scalar::print_program(*program);
  EXPECT_NE(text.find("launch(warps=4, stages=2, group=3, reverse=m_o)"), std::string::npos) << text;
  EXPECT_NE(scalar::program_to_json(*program).dump().find("\"reversed\":[\"m_o\"]"),
            std::string::npos);
  testing::expect_same_results(asset, program);

  const scalar::ProgramPtr tiled = testing::apply_decisions(
      asset.program, {"tile(C_sum, m=8, n=8)", "reverse_compute_at(C, C_sum, n_o)",
                      "bind(C_sum, m_o=grid.x)"});
  EXPECT_NE(testing::failure_reason(tiled, "tile_order(C_sum, reverse=n_o)")
                .find("loop n_o of block C_sum is not bound to a grid axis"),
            std::string::npos);
  EXPECT_NE(testing::failure_reason(tiled, "tile_order(C_sum, reverse=q)").find("has no loop q"),
            std::string::npos);
  EXPECT_NE(testing::failure_reason(tiled, "tile_order(C_sum, reverse=3)")
                .find("reverse names a loop, got 3"),
            std::string::npos);
}

}  // namespace
}  // namespace nautilus::sched
