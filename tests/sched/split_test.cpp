// split: golden before/after, interpreter equivalence, and every failure reason.
#include "core/sched/split.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;

TEST(Split, GemmRowsGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  testing::expect_golden_schedule(gemm, "sched/split_gemm.txt", {}, {"split(C_sum, m, 5)"});
}

TEST(Split, DividingFactorAddsNoPredicate) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"split(C_sum, k, 8)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("for k_o in 0..3:\n      for k_i in 0..8:"), std::string::npos) << text;
  EXPECT_NE(text.find("reduce k = k_o * 8 + k_i):"), std::string::npos) << text;
  EXPECT_EQ(text.find(" if "), std::string::npos) << text;
  expect_same_results(gemm, after);
}

TEST(Split, ReductionAxisWithOverhangKeepsInitAndValues) {
  // k = 24 split by 7: init runs at k_o = k_i = 0, the tail iterations are masked.
  auto gemm = lower_asset("gemm", {"M=5", "N=3", "K=24"});
  auto after = apply_decisions(gemm.program, {"split(C_sum, k, 7)"});
  EXPECT_NE(scalar::print_program(*after).find("if k_o * 7 + k_i < 24:"), std::string::npos);
  expect_same_results(gemm, after);
}

TEST(Split, SplitLoopsSplitAgainByLoopName) {
  auto gemm = lower_asset("gemm", {"M=13", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"split(C_sum, m, 4)", "split(C_sum, m_i, 3)",
                                              "split(C_sum, m_o, 2)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("block C_sum(m = m_o_o * 8 + m_o_i * 4 + m_i_o * 3 + m_i_i, n = n; "
                      "reduce k = k) if m_o_o * 8 + m_o_i * 4 + m_i_o * 3 + m_i_i < 13 and "
                      "m_i_o * 3 + m_i_i < 4:"),
            std::string::npos)
      << "the first predicate is rewritten with the later splits:\n"
      << text;
  expect_same_results(gemm, after);
}

TEST(Split, SeveralAssetsAtSizesThatDoNotDivide) {
  testing::expect_cases_same_results({
    {"gemm", {"M=13", "N=10", "K=24"}, {"split(C_sum, m, 4)", "split(C, n, 3)"}},
    {"softmax",
     {"R=7", "C=33"},
     {"split(Mx, c, 8)", "split(E, r, 2)", "split(Y_sum, c2, 5)"}},
    {"attention",
     {"B=1", "H=2", "M=13", "N=20", "D=8"},
     {"split(S, d, 3)", "split(Mx, n, 6)", "split(O_sum, m, 4)", "split(O_sum, n, 7)"}},
    {"layernorm", {"T=6", "H=40"}, {"split(Mu_sum, h, 16)", "split(Y, t, 4)"}},
    {"batched_gemm",
     {"Z=3", "M=6", "N=5", "K=16"},
     {"split(C_sum, z, 2)", "split(C_sum, k, 5)"}},
  });
}

TEST(Split, NewNamesAvoidNamesInScope) {
  // C_sum computed at C's m_o has its own loop m under m_o; splitting it cannot reuse m_o.
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"tile(C, m=4)", "compute_at(C_sum, C, m_o)",
                                              "split(C_sum, m, 2)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("  for m_o2 in 0..2:\n    for m_i in 0..2:"), std::string::npos) << text;
  EXPECT_NE(text.find("block C_sum(m = m_o * 4 + m_o2 * 2 + m_i, n = n"), std::string::npos)
      << text;
  expect_same_results(gemm, after);

  std::set<std::string> taken = {"m_o", "m_o2"};
  EXPECT_EQ(fresh_name("m_o", &taken), "m_o3");
  EXPECT_EQ(fresh_name("n_o", &taken), "n_o");
  EXPECT_TRUE(taken.count("m_o3") && taken.count("n_o"));
}

TEST(Split, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  EXPECT_EQ(failure_reason(gemm.program, "split(D, m, 4)"),
            "program gemm has no block D; its blocks are C_sum, C");
  EXPECT_EQ(failure_reason(gemm.program, "split(C_sum, q, 4)"),
            "block C_sum has no axis or loop q; its axes are m, n, k and its loops m, n, k");
  EXPECT_EQ(failure_reason(gemm.program, "split(C_sum, m, 0)"),
            "split factor of axis m of block C_sum must be positive, got 0");
  EXPECT_EQ(failure_reason(gemm.program, "split(C_sum, m, -3)"),
            "split factor of axis m of block C_sum must be positive, got -3");
  auto split = apply_decisions(gemm.program, {"split(C_sum, m, 4)"});
  EXPECT_EQ(failure_reason(split, "split(C_sum, m, 2)"),
            "iteration variable m of block C_sum is bound to m_o * 4 + m_i, which uses loops m_o "
            "and m_i; name one of the loops");
  auto bound = apply_decisions(split, {"bind(C_sum, m_o=grid.x)"});
  EXPECT_EQ(failure_reason(bound, "split(C_sum, m_o, 2)"),
            "loop m_o is bound to grid.x; split loops before binding them");
}

}  // namespace
}  // namespace nautilus::sched
