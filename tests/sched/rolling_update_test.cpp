// rolling_update: the fused program computes the same outputs as the unfused one (and as the
// float64 reference) for every asset whose reductions depend on each other, and refuses what it
// cannot repair with a reason.
#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/scalar/interpreter.h"
#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "core/sched/rolling_update.h"
#include "core/spec/reference.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::compile_asset;

sched::Decision rolling(const std::string& block, const std::string& axis, int64_t tile = 0) {
  sched::Decision d{"rolling_update", block, {{"", axis}}};
  if (tile > 0) d.args.push_back({"tile", tile});
  return d;
}

driver::ScalarPass as_pass(const sched::Decision& decision) {
  return {"rolling_update", "test", [decision](const scalar::ProgramPtr& program) {
            sched::ApplyResult result = sched::apply_rolling_update(program, decision);
            EXPECT_TRUE(result.ok()) << result.reason;
            return result.ok() ? result.program : program;
          }};
}

struct Case {
  std::string asset;
  std::vector<std::string> sizes;
  std::string block;
  std::string axis;
  int64_t tile;
};

std::ostream& operator<<(std::ostream& out, const Case& c) {
  return out << c.asset << "/" << c.block << "/tile" << c.tile;
}

class RollingUpdateCase : public ::testing::TestWithParam<Case> {};

TEST_P(RollingUpdateCase, MatchesUnfusedProgramAndReference) {
  const Case& c = GetParam();
  auto plain = compile_asset(c.asset, c.sizes);
  auto fused = compile_asset(c.asset, c.sizes, driver::Stage::Scalar,
                             {as_pass(rolling(c.block, c.axis, c.tile))});
  ASSERT_TRUE(fused.ok()) << fused.internal_error;
  EXPECT_TRUE(scalar::verify(*fused.program).empty());
  EXPECT_NE(fused.program, plain.program);
  for (uint64_t seed : {0, 5}) {
    TensorMap inputs = spec::make_random_inputs(*plain.spec, seed);
    auto expected = scalar::interpret(*plain.program, inputs);
    auto actual = scalar::interpret(*fused.program, inputs);
    ASSERT_TRUE(expected.ok) << expected.error;
    ASSERT_TRUE(actual.ok) << actual.error << "\n" << scalar::print_program(*fused.program);
    for (const auto& [name, tensor] : expected.outputs) {
      ErrorReport error = compare_tensors(actual.outputs.at(name), tensor);
      EXPECT_LT(error.max_relative_error, 1e-5) << name << " seed " << seed;
    }
    driver::EvalOptions options;
    options.seed = seed;
    EXPECT_TRUE(driver::evaluate(fused, options).passed());
  }
}

INSTANTIATE_TEST_SUITE_P(
    Assets, RollingUpdateCase,
    ::testing::Values(
        Case{"attention", {"B=1", "H=2", "M=6", "N=20", "D=8"}, "O_sum", "n", 0},
        Case{"attention", {"B=1", "H=2", "M=6", "N=20", "D=8"}, "O_sum", "n", 8},
        Case{"attention", {"B=1", "H=1", "M=5", "N=16", "D=4"}, "L", "n", 4},
        Case{"causal_attention", {"B=1", "H=2", "M=9", "N=9", "D=8"}, "O_sum", "n", 4},
        Case{"gqa_attention", {"B=1", "H=4", "KH=1", "M=3", "N=10", "D=4"}, "O_sum", "n", 3},
        Case{"softmax", {"R=3", "C=21"}, "Y_sum", "c2", 0},
        Case{"softmax", {"R=3", "C=21"}, "Y_sum", "c2", 5},
        Case{"logsumexp", {"R=4", "C=19"}, "Lse_sum", "c", 4},
        Case{"layernorm", {"T=3", "H=24"}, "Var_sum", "h", 8}),
    [](const auto& test_info) {
      const Case& c = test_info.param;
      return c.asset + "_" + c.block + "_tile" + std::to_string(c.tile);
    });

TEST(RollingUpdate, AttentionBecomesOneLoopWithRescaledRunningSums) {
  auto fused = compile_asset("attention", {"B=1", "H=2", "M=6", "N=20", "D=8"},
                             driver::Stage::Scalar, {as_pass(rolling("O_sum", "n", 8))});
  ASSERT_TRUE(fused.ok());
  const scalar::Program& program = *fused.program;
  EXPECT_EQ(program.find_buffer("P"), nullptr);  // inlined into the running sums
  EXPECT_NE(program.find_buffer("Mx_prev"), nullptr);
  EXPECT_NE(program.find_buffer("O_sum_acc"), nullptr);
  std::string text = scalar::print_program(program);
  EXPECT_NE(text.find("exp(Mx_prev[b, h, m] - Mx[b, h, m])"), std::string::npos) << text;
  EXPECT_NE(text.find("O_sum[b, h, m, d] = O_sum_acc[b, h, m, d] / L[b, h, m]"), std::string::npos)
      << text;
  testing::expect_golden("sched/rolling_update_attention.txt", text);
}

TEST(RollingUpdate, VarianceSplitsIntoSumsWithoutRescale) {
  auto fused = compile_asset("layernorm", {"T=3", "H=24"}, driver::Stage::Scalar,
                             {as_pass(rolling("Var_sum", "h"))});
  ASSERT_TRUE(fused.ok());
  std::string text = scalar::print_program(*fused.program);
  EXPECT_EQ(text.find("exp("), std::string::npos) << text;
  EXPECT_NE(text.find("Var_sum_acc0"), std::string::npos) << text;
}

TEST(RollingUpdate, RefusesWithReasons) {
  auto attention = compile_asset("attention", {"B=1", "H=1", "M=4", "N=8", "D=4"});
  auto gemm = compile_asset("gemm", {"M=4", "N=4", "K=4"});
  struct Refusal {
    const driver::Compilation* compilation;
    sched::Decision decision;
    std::string reason;
  };
  std::vector<Refusal> refusals = {
      {&attention, rolling("Nope", "n"), "the program has no block Nope"},
      {&attention, rolling("O_sum", "d"), "must reduce over exactly the axis d"},
      {&attention, rolling("Mx", "n"), "only a sum can be repaired"},
      {&attention, rolling("P", "n"), "it is not a reduction"},
      {&gemm, rolling("C_sum", "k"), "there is nothing to fuse"},
      {&attention, {"rolling_update", "O_sum", {{"", int64_t{3}}}}, "expects rolling_update(BLOCK, AXIS"},
      {&attention, {"rolling_update", "O_sum", {{"", "n"}, {"tile", int64_t{0}}}}, "tile=T"},
  };
  for (const Refusal& r : refusals) {
    sched::ApplyResult result = sched::apply_rolling_update(r.compilation->program, r.decision);
    EXPECT_FALSE(result.ok());
    EXPECT_NE(result.reason.find(r.reason), std::string::npos)
        << sched::print_decision(r.decision) << ": " << result.reason;
  }
}

}  // namespace
}  // namespace nautilus
