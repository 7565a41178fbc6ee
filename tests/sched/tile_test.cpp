// tile: golden before/after, the loop order it promises, interpreter equivalence on every asset,
// and its failure reasons.
#include "core/sched/tile.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/sched/loop_nest.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;

// The loop names of `block`'s nest, outermost first.
std::vector<std::string> loop_order(const scalar::ProgramPtr& program, const std::string& block) {
  std::vector<std::string> names;
  for (const scalar::For* loop : find_block(program->body, block)->loops()) {
    names.push_back(loop->var->name);
  }
  return names;
}

TEST(Tile, AttentionOutputAccumulatorGolden) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=12", "N=20", "D=8"});
  const scalar::ProgramPtr after = testing::expect_golden_schedule(
      attention, "sched/tile_attention.txt", {}, {"tile(O_sum, m=4, n=8)"});
  EXPECT_EQ(loop_order(after, "O_sum"),
            (std::vector<std::string>{"b", "h", "m_o", "n_o", "m_i", "d", "n_i"}));
}

TEST(Tile, OuterLoopsFollowNestOrderNotArgumentOrder) {
  auto gemm = lower_asset("gemm", {"M=13", "N=10", "K=24"});
  auto a = apply_decisions(gemm.program, {"tile(C_sum, k=8, n=4, m=4)"});
  EXPECT_EQ(loop_order(a, "C_sum"),
            (std::vector<std::string>{"m_o", "n_o", "k_o", "m_i", "n_i", "k_i"}));
  auto b = apply_decisions(gemm.program, {"tile(C_sum, m=4, n=4, k=8)"});
  EXPECT_EQ(scalar::print_program(*a), scalar::print_program(*b));
  expect_same_results(gemm, a);
}

TEST(Tile, LoopsOutsideTheBandStay) {
  auto gemm = lower_asset("gemm", {"M=13", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"tile(C_sum, n=3)"});
  EXPECT_EQ(loop_order(after, "C_sum"), (std::vector<std::string>{"m", "n_o", "n_i", "k"}));
  auto two = apply_decisions(gemm.program, {"tile(C_sum, m=5, k=7)"});
  // The band m .. k holds n: m_o, k_o first, then m_i, n, k_i.
  EXPECT_EQ(loop_order(two, "C_sum"),
            (std::vector<std::string>{"m_o", "k_o", "m_i", "n", "k_i"}));
  expect_same_results(gemm, after);
  expect_same_results(gemm, two);
}

// Every block of every asset tiled along every axis, at sizes the tiles do not divide.
struct TileAllCase {
  std::string asset;
  std::vector<std::string> sizes;
};

class TileEveryBlock : public ::testing::TestWithParam<TileAllCase> {};

TEST_P(TileEveryBlock, MatchesTheUnscheduledProgram) {
  const TileAllCase& c = GetParam();
  auto asset = lower_asset(c.asset, c.sizes);
  ASSERT_TRUE(asset.program);
  std::vector<std::string> decisions;
  for (const scalar::Block* block : collect_blocks(asset.program->body)) {
    std::string decision = "tile(" + block->name;
    for (const scalar::IterVar& iter : block->iter_vars) {
      // 3 for spatial and 4 for reduce axes: neither divides most of the sizes below.
      const bool spatial = iter.kind == scalar::IterKind::Spatial;
      decision += ", " + iter.var->name + "=" + (spatial ? "3" : "4");
    }
    decisions.push_back(decision + ")");
  }
  auto after = apply_decisions(asset.program, decisions);
  expect_same_results(asset, after);
}

INSTANTIATE_TEST_SUITE_P(
    Assets, TileEveryBlock,
    ::testing::Values(
        TileAllCase{"attention", {"B=1", "H=2", "M=13", "N=10", "D=5"}},
        TileAllCase{"attention_one_statement", {"B=1", "H=1", "M=5", "N=7", "D=4"}},
        TileAllCase{"batched_gemm", {"Z=2", "M=7", "N=5", "K=9"}},
        TileAllCase{"causal_attention", {"B=1", "H=1", "M=11", "N=11", "D=5"}},
        TileAllCase{"gated_mlp", {"T=5", "H=10", "F=7"}},
        TileAllCase{"gemm", {"M=13", "N=10", "K=23"}},
        TileAllCase{"gqa_attention", {"B=1", "H=4", "KH=2", "M=7", "N=10", "D=5"}},
        TileAllCase{"layernorm", {"T=7", "H=17"}},
        TileAllCase{"logsumexp", {"R=7", "C=33"}},
        TileAllCase{"rmsnorm", {"T=7", "H=17"}},
        TileAllCase{"softmax", {"R=7", "C=33"}}),
    [](const auto& test_info) { return test_info.param.asset; });

TEST(Tile, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  EXPECT_EQ(failure_reason(gemm.program, "tile(C_sum, m=4, q=4)"),
            "block C_sum has no axis or loop q; its axes are m, n, k and its loops m, n, k");
  EXPECT_EQ(failure_reason(gemm.program, "tile(C_sum, m=0)"),
            "split factor of axis m of block C_sum must be positive, got 0");
  EXPECT_EQ(failure_reason(gemm.program, "tile(Q, m=4)"),
            "program gemm has no block Q; its blocks are C_sum, C");
  auto split = apply_decisions(gemm.program, {"split(C_sum, m, 4)"});
  EXPECT_EQ(failure_reason(split, "tile(C_sum, m_i=2, m_o=2, m=2)"),
            "iteration variable m of block C_sum is bound to m_o * 4 + m_i, which uses loops m_o "
            "and m_i; name one of the loops");
  // Text cannot repeat a keyword; the C++ API can.
  EXPECT_EQ(tile(gemm.program, "C_sum", {{"m", 2}, {"m", 3}}).reason,
            "axes m and m of block C_sum are the same loop");
  // Tiling across the two statements of a fused loop is not a perfect nest.
  auto fused = apply_decisions(gemm.program, {"reverse_compute_at(C, C_sum, n)"});
  EXPECT_EQ(failure_reason(fused, "tile(C_sum, m=4, k=8)"),
            "loops m_o and k_i of block C_sum are not perfectly nested: loop n runs several "
            "statements");
}

}  // namespace
}  // namespace nautilus::sched
