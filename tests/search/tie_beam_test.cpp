// The tie beam (core/search/search.cpp, Searcher::select_beam): candidates whose estimates are
// tied with the beam's cut stay in the search in a second beam instead of being dropped by noise.
//
// Sliding-window attention (bench/variants/sliding_window_bias.nt at its own sizes) is the case
// that needs it: before S is fused, a 28.6 s unfused intermediate dominates every estimate, so
// the query tiles of 64 and 128 rows differ by microseconds of noise at the tiling phase. With a
// beam of three the cut fell between them and the search ended on 64-row tiles with one consumer
// warpgroup (estimated 615 µs, measured 622 µs on an H100), where 128-row tiles with two
// consumers (estimated 370 µs, measured 482 µs) were one tile size away.
//
// Also here: the choice among near ties once a completion's persistent CTAs are settled (compiled
// and estimated as such only for the chosen node).
#include <algorithm>
#include <string>

#include <gtest/gtest.h>

#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

TEST(TieBeam, TiedTileSizesBothPassTheTilingPhase) {
  std::string error;
  search::SearchInput input;
  input.file =
      SourceFile::read(testing::source_path("bench/variants/sliding_window_bias.nt"), &error);
  ASSERT_TRUE(input.file) << error;
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;

  // Some candidates went to the tie beam and some were dropped by it.
  const bool tie_beam_pruned = std::any_of(
      result.nodes.begin(), result.nodes.end(), [](const search::SearchNode& node) {
        return node.reason.rfind("below the tie beam", 0) == 0;
      });
  EXPECT_TRUE(tie_beam_pruned);

  // Both query tiles pass the tiling phase (the tie beam keeps them): nodes under either are
  // expanded past it. The fusion phase then tells them apart: 64-row tiles leave one consumer
  // warpgroup, whose softmax issues at a lone warp's rate (docs/cost-model.md).
  bool expanded_under[2] = {false, false};
  for (const search::SearchNode& node : result.nodes) {
    if (node.status != search::NodeStatus::Expanded || node.phase == search::Phase::Tiling) continue;
    for (const sched::Decision& d : node.schedule.decisions) {
      if (d.kind != "tile" || d.target != "O_sum_acc") continue;
      const std::string text = sched::print_decision(d);
      if (text.find("m=64") != std::string::npos) expanded_under[0] = true;
      if (text.find("m=128") != std::string::npos) expanded_under[1] = true;
    }
  }
  EXPECT_TRUE(expanded_under[0]);
  EXPECT_TRUE(expanded_under[1]);
  const std::vector<search::LeafSchedule> leaves = search::complete_leaves(result);
  ASSERT_FALSE(leaves.empty());
  const double best_leaf = leaves.front().estimate_us;
  ASSERT_TRUE(result.estimate);
  std::string leaf_list;
  for (const search::LeafSchedule& leaf : leaves) {
    leaf_list += std::to_string(leaf.estimate_us) + ":";
    for (const sched::Decision& d : leaf.schedule.decisions) leaf_list += " " + sched::print_decision(d);
    leaf_list += "\n";
  }
  EXPECT_LE(result.estimate->microseconds, best_leaf * 1.01) << leaf_list;
  std::string chosen;
  for (const sched::Decision& d : result.schedule.decisions) chosen += sched::print_decision(d) + "\n";
  EXPECT_NE(chosen.find("tile(O_sum_acc, m=128)"), std::string::npos) << chosen;
  EXPECT_NE(chosen.find("consumers=2"), std::string::npos) << chosen;
}

TEST(TieBeam, AChoiceMadeAgainKeepsTheSettledScheduleOfEveryNode) {
  // Causal attention at B 2 H 32 S 8192 d 64 on the H100 model: the chosen leaf's completion
  // derives persistent CTAs, which the lowering refuses for its three consumers (the tile
  // loop's early stop takes registers past their 160), so settling drops them and re-estimates
  // the node; the choice then moves to another node and may come back. The schedule handed out
  // is always one that compiles.
  const search::SearchInput input = testing::asset_input(
      "causal_attention", {"B=2", "H=32", "M=8192", "N=8192", "D=64"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  std::string chosen;
  for (const sched::Decision& d : result.schedule.decisions) chosen += sched::print_decision(d) + "\n";
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  EXPECT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error << "\n" << chosen;
}

}  // namespace
}  // namespace nautilus
