// The register check (core/search/register_check.h): ptxas' registers and spills of the search's
// leaves, and the first leaf that fits chosen over a better-estimated one that spills. NVRTC runs
// on the CPU; the tests skip where it is not installed.
#include <gtest/gtest.h>

#include "core/codegen/nvrtc.h"
#include "core/search/register_check.h"
#include "tests/search/search_test_util.h"

namespace nautilus::search {
namespace {

using testing::asset_input;

sched::Schedule fp8_gemm_schedule(const std::string& tile) {
  sched::Schedule schedule;
  for (const std::string& text : {"tile(C_sum, " + tile + ")", std::string("reverse_compute_at(C, C_sum, n_o)"),
                                 std::string("bind(C_sum, n_o=grid.y, m_o=grid.x)")}) {
    sched::DecisionParseError error;
    const std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
    EXPECT_TRUE(decision) << text;
    if (decision) schedule.decisions.push_back(*decision);
  }
  return schedule;
}

// FP8 GEMM with B stored [K, N] widens both operands to bf16 for mma.sync: a 128 x 128 tile with
// a k tile of 128 holds the bytes of several k steps at once and spills under ptxas, a 64 x 128
// x 64 tile fits. Listed first with the better estimate, the spilling leaf is compiled, found to
// spill, and passed over; the model's estimate of the chosen leaf comes with it.
TEST(RegisterCheck, PassesOverALeafThatSpillsForTheNextThatFits) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << codegen::Nvrtc::shared().error().message;
  const SearchInput input = asset_input("fp8_gemm", {"M=1024", "N=1024", "K=1024"});
  const std::vector<LeafSchedule> leaves = {{fp8_gemm_schedule("m=128, n=128, k=128"), 100.0},
                                            {fp8_gemm_schedule("m=64, n=128, k=64"), 110.0}};
  RegisterCheckOptions options;
  options.model = &testing::h100();
  const RegisterCheck check = choose_leaf_that_fits(input, leaves, "sm_90a", options);
  ASSERT_EQ(check.verdicts.size(), 2u);
  EXPECT_EQ(check.verdicts[0].status, RegisterVerdict::Status::Spills) << describe_verdict(check.verdicts[0]);
  EXPECT_GT(check.verdicts[0].spill_bytes, 0);
  EXPECT_EQ(check.verdicts[0].registers, 255);
  EXPECT_EQ(check.verdicts[1].status, RegisterVerdict::Status::Fits) << describe_verdict(check.verdicts[1]);
  EXPECT_GT(check.verdicts[1].estimated_registers, 0);
  ASSERT_TRUE(check.chosen);
  EXPECT_EQ(*check.chosen, 1u);
  EXPECT_FALSE(check.pick_fits);
  ASSERT_TRUE(check.verdicts[1].estimate);
  EXPECT_GT(check.verdicts[1].estimate->microseconds, 0.0);
  ASSERT_EQ(check.lines.size(), 3u);
  EXPECT_NE(check.lines[0].find("bytes spilled"), std::string::npos) << check.lines[0];
  EXPECT_NE(check.lines[1].find("no spill"), std::string::npos) << check.lines[1];
  EXPECT_NE(check.lines[2].find("chose leaf 2"), std::string::npos) << check.lines[2];
  EXPECT_EQ(check.summary, "chose leaf 2, the best-ranked one that compiles without spilling");
}

// When every leaf checked spills, the search's pick stays and the check says so; a leaf that does
// not apply to the spec is reported as not compiling, not as a crash.
TEST(RegisterCheck, KeepsThePickWhenNoLeafFits) {
  if (!codegen::Nvrtc::shared()) GTEST_SKIP() << codegen::Nvrtc::shared().error().message;
  const SearchInput input = asset_input("fp8_gemm", {"M=1024", "N=1024", "K=1024"});
  sched::Schedule wrong;
  sched::DecisionParseError error;
  wrong.decisions.push_back(*sched::parse_decision("tile(NoSuchTensor, m=64)", &error));
  const std::vector<LeafSchedule> leaves = {{fp8_gemm_schedule("m=128, n=128, k=128"), 100.0},
                                            {wrong, 120.0}};
  const RegisterCheck check = choose_leaf_that_fits(input, leaves, "sm_90a");
  EXPECT_FALSE(check.chosen);
  ASSERT_EQ(check.verdicts.size(), 2u);
  EXPECT_EQ(check.verdicts[1].status, RegisterVerdict::Status::Failed);
  EXPECT_NE(describe_verdict(check.verdicts[1]).find("does not compile"), std::string::npos);
  EXPECT_NE(check.lines.back().find("the search's pick stays"), std::string::npos) << check.lines.back();
  EXPECT_NE(check.summary.find("the search's pick stays"), std::string::npos) << check.summary;
}

// A leaf that fits only because the package build fell back to exp2 with its denormal guard
// gives way to a later leaf that fits without it when that one's estimate is within
// kGuardedExp2Cost; beyond that, or when no such leaf follows, the guarded leaf is chosen.
TEST(RegisterCheck, ALeafThatFitsOnlyWithTheGuardedExp2GivesWayToACloseOneWithout) {
  const auto fits = [](bool guarded) {
    RegisterVerdict verdict;
    verdict.status = RegisterVerdict::Status::Fits;
    verdict.kernel = "attention_O";
    verdict.registers = 168;
    verdict.guarded_exp2 = guarded;
    return verdict;
  };
  const std::vector<LeafSchedule> leaves = {{fp8_gemm_schedule("m=128, n=128, k=64"), 100.0},
                                            {fp8_gemm_schedule("m=64, n=128, k=64"), 105.0},
                                            {fp8_gemm_schedule("m=64, n=64, k=64"), 130.0}};
  const auto by_position = [&](std::vector<RegisterVerdict> verdicts) {
    return [&leaves, verdicts](const sched::Schedule& schedule) {
      for (size_t i = 0; i < leaves.size(); ++i) {
        if (leaves[i].schedule.decisions == schedule.decisions) return verdicts[i];
      }
      return RegisterVerdict{};
    };
  };
  // The second leaf, 5% behind and without the guard, is taken.
  RegisterCheck check =
      choose_leaf_by_verdicts(leaves, "sm_90a", {}, by_position({fits(true), fits(false), fits(false)}));
  ASSERT_TRUE(check.chosen);
  EXPECT_EQ(*check.chosen, 1u);
  EXPECT_NE(check.lines[0].find("denormal guard"), std::string::npos) << check.lines[0];
  EXPECT_NE(check.summary.find("chose leaf 2"), std::string::npos) << check.summary;
  // Only a leaf 30% behind fits without it: the guarded pick stays, and the check says why.
  check = choose_leaf_by_verdicts(leaves, "sm_90a", {},
                                  by_position({fits(true), fits(true), fits(false)}));
  ASSERT_TRUE(check.chosen);
  EXPECT_EQ(*check.chosen, 0u);
  EXPECT_NE(check.summary.find("only with the guarded exp2"), std::string::npos) << check.summary;
  // A pick that fits without the guard is kept as before.
  check = choose_leaf_by_verdicts(leaves, "sm_90a", {}, by_position({fits(false), fits(false), fits(false)}));
  ASSERT_TRUE(check.chosen);
  EXPECT_EQ(*check.chosen, 0u);
  EXPECT_TRUE(check.pick_fits);
  EXPECT_TRUE(check.summary.empty()) << check.summary;
}

}  // namespace
}  // namespace nautilus::search
