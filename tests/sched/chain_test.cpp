// Schedules of several decisions: attention tiled, inlined and fused into one nest per output
// tile (FlashAttention's structure before rolling_update), checked against the unscheduled
// program at sizes the tiles divide and at sizes they do not.
#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/sched/decision.h"
#include "core/sched/loop_nest.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_results;
using testing::lower_asset;

// Tile every block, inline P, fuse the row statistics and S under O_sum's m_o loop (consumers
// first), cast each output tile right after it is accumulated, and map the tile loops to the grid.
const std::vector<std::string> kFusedAttention = {
    "tile(S, m=4, n=8)",
    "tile(Mx, m=4)",
    "tile(P, m=4, n=8)",
    "tile(L, m=4)",
    "tile(O_sum, m=4, n=8)",
    "tile(O, m=4)",
    "inline(P)",
    "compute_at(L, O_sum, m_o)",
    "compute_at(Mx, O_sum, m_o)",
    "compute_at(S, O_sum, m_o)",
    "reverse_compute_at(O, O_sum, m_o)",
    "tile(S, n=8)",
    "bind(O_sum, b=grid.z, h=grid.y, m_o=grid.x)",
};

TEST(Chain, FusedAttentionGolden) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=12", "N=20", "D=8"});
  auto after = apply_decisions(attention.program, kFusedAttention);
  std::string text = "## decisions\n";
  for (const std::string& decision : kFusedAttention) text += decision + "\n";
  testing::expect_golden("sched/chain_attention.txt",
                         text + "\n" + scalar::print_program(*after, attention.file.get()));
  // One nest: every block under the grid loops.
  const auto* body = after->body->as<scalar::Seq>();
  ASSERT_NE(body, nullptr);
  EXPECT_EQ(body->stmts.size(), 1u);
  expect_same_results(attention, after);
}

TEST(Chain, FusedAttentionAtSizesTheTilesDoNotDivide) {
  for (const std::vector<std::string>& sizes : std::vector<std::vector<std::string>>{
           {"B=1", "H=2", "M=13", "N=20", "D=8"},
           {"B=2", "H=1", "M=5", "N=11", "D=3"},
           {"B=1", "H=1", "M=3", "N=7", "D=5"},
       }) {
    auto attention = lower_asset("attention", sizes);
    expect_same_results(attention, apply_decisions(attention.program, kFusedAttention));
  }
}

TEST(Chain, CausalAndGroupedQueryAttention) {
  auto causal = lower_asset("causal_attention", {"B=1", "H=2", "M=13", "N=13", "D=4"});
  expect_same_results(causal, apply_decisions(causal.program, kFusedAttention));
  auto gqa = lower_asset("gqa_attention", {"B=1", "H=4", "KH=2", "M=9", "N=10", "D=4"});
  expect_same_results(gqa, apply_decisions(gqa.program, kFusedAttention));
}

TEST(Chain, ScheduleJsonReplaysTheSameProgram) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=13", "N=20", "D=8"});
  Schedule schedule;
  for (const std::string& text : kFusedAttention) {
    schedule.decisions.push_back(*parse_decision(text, nullptr));
  }
  std::string error;
  std::optional<Schedule> replay =
      schedule_from_json(nlohmann::json::parse(schedule_to_json(schedule).dump()), &error);
  ASSERT_TRUE(replay) << error;
  ApplyResult result = apply_schedule(attention.program, *replay);
  ASSERT_TRUE(result.ok()) << result.reason;
  EXPECT_EQ(scalar::print_program(*result.program),
            scalar::print_program(*apply_decisions(attention.program, kFusedAttention)));
}

TEST(Chain, MlpAndNormsFusedPerRowTile) {
  auto mlp = lower_asset("gated_mlp", {"T=5", "H=16", "F=24"});
  expect_same_results(
      mlp, apply_decisions(mlp.program, {"tile(Y_sum, t=2, e=8, f=8)", "compute_at(G, Y_sum, e_o)",
                                         "compute_at(U, Y_sum, e_o)",
                                         "reverse_compute_at(Y, Y_sum, e_o)",
                                         "bind(Y_sum, t_o=grid.x)"}));
  auto layernorm = lower_asset("layernorm", {"T=7", "H=17"});
  expect_same_results(
      layernorm,
      apply_decisions(layernorm.program, {"inline(Mu)", "inline(Var)", "tile(Y, t=2, h=8)",
                                          "compute_at(Var_sum, Y, t_o)",
                                          "compute_at(Mu_sum, Y, t_o)", "bind(Y, t_o=grid.x)"}));
}

}  // namespace
}  // namespace nautilus::sched
