// Query tiles of three consumer warpgroups (core/search/candidates.cpp): besides the powers of
// two, the search tiles a reused spatial axis of a nest that reduces in several blocks (attention)
// by 192 rows, and a 192-row tile is warp-specialized with three consumers of 64 rows each
// (FlashAttention-3's d 64 form), never one or two, which its wgmma rows would refuse. A plain
// GEMM is not tiled by 192 (measured slower on the H100).
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

TEST(WarpgroupTiles, A192RowAttentionTileIsEstimatedWithThreeConsumers) {
  const search::SearchInput input =
      testing::asset_input("attention", {"B=8", "H=32", "M=2048", "N=2048", "D=64"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;

  int three_consumers = 0;
  for (const search::SearchNode& node : result.nodes) {
    const std::string decision = node.decision ? sched::print_decision(*node.decision) : "";
    if (decision.rfind("warp_spec(", 0) != 0) continue;
    // No warp_spec decision asks a 192-row tile for fewer consumers than its rows need.
    EXPECT_EQ(node.reason.find("192 rows"), std::string::npos) << decision << ": " << node.reason;
    if (decision.find("consumers=3") != std::string::npos) ++three_consumers;
  }
  bool estimated_leaf = false;
  for (const search::LeafSchedule& leaf : search::complete_leaves(result)) {
    std::string text;
    for (const sched::Decision& d : leaf.schedule.decisions) text += sched::print_decision(d) + "\n";
    if (text.find("tile(O_sum_acc, m=192)") != std::string::npos &&
        text.find("consumers=3") != std::string::npos) {
      estimated_leaf = true;
    }
  }
  EXPECT_GT(three_consumers, 0);
  EXPECT_TRUE(estimated_leaf) << "no complete schedule with 192-row tiles and three consumers";
}

// Without wgmma (the A100's model, sm_80) a 192-row tile would be an mma.sync kernel of 48 rows
// per warp, which spilled: such nodes are dropped with the reason, and no leaf has one.
TEST(WarpgroupTiles, WithoutThreeConsumersA192RowTileIsDropped) {
  const std::unique_ptr<cost::CostModel> a100 = cost::make_analytical_model(cost::a100_sxm());
  const search::SearchInput input =
      testing::asset_input("attention", {"B=2", "H=8", "M=2048", "N=2048", "D=64"});
  const search::SearchResult result = testing::run(input, {}, *a100);
  ASSERT_TRUE(result.ok) << result.error;
  int dropped = 0;
  for (const search::SearchNode& node : result.nodes) {
    if (node.reason.find("a 192-row tile takes three consumer warpgroups") != std::string::npos) ++dropped;
  }
  EXPECT_GT(dropped, 0);
  for (const search::LeafSchedule& leaf : search::complete_leaves(result)) {
    for (const sched::Decision& d : leaf.schedule.decisions) {
      EXPECT_EQ(sched::print_decision(d).find("m=192"), std::string::npos);
    }
  }
}

TEST(WarpgroupTiles, AGemmIsNotTiledBy192) {
  const search::SearchInput input = testing::asset_input("gemm", {"M=1024", "N=1024", "K=1024"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  for (const search::SearchNode& node : result.nodes) {
    if (!node.decision || node.decision->kind != "tile") continue;
    const std::string decision = sched::print_decision(*node.decision);
    EXPECT_EQ(decision.find("=192"), std::string::npos) << decision;
  }
}

}  // namespace
}  // namespace nautilus
