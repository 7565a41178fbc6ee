// regularize: golden before/after, exact interpreter equivalence on several assets, padding
// without the mask caught, and the failure reasons.
#include "core/sched/regularize.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"
#include "tests/sched/stage_test_util.h"

namespace nautilus::sched {
namespace {

using namespace scalar;
using testing::apply_decisions;
using testing::failure_reason;
using testing::lower_asset;

TEST(Regularize, GemmTilePaddedToPowerOfTwoGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = testing::expect_golden_schedule(gemm, "sched/regularize_gemm.txt",
                                               {"split(C_sum, m, 5)"},
                                               {"regularize(C_sum, m_i=8, n=mul16)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("for m_i in 0..8:\n    for n in 0..16:"), std::string::npos) << text;
  EXPECT_NE(text.find("if m_o * 5 + m_i < 12 and m_i < 5 and n < 10:"), std::string::npos)
      << text;
}

TEST(Regularize, SizesByNameAndUnchangedWhenAlreadyRegular) {
  auto softmax = lower_asset("softmax", {"R=5", "C=33"});
  auto after = apply_decisions(softmax.program, {"regularize(Mx, c=pow2, r=mul16)"});
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("for r in 0..16:\n  for c in 0..64:"), std::string::npos) << text;
  auto gemm = lower_asset("gemm", {"M=16", "N=8", "K=32"});
  EXPECT_EQ(apply_decisions(gemm.program, {"regularize(C_sum, m=16, n=pow2)"}), gemm.program);
}

TEST(Regularize, SeveralAssetsAndSchedules) {
  testing::expect_cases_same_results({
      {"gemm", {"M=13", "N=10", "K=23"}, {"tile(C_sum, m=4, n=3, k=7)",
                                           "regularize(C_sum, n_i=4, k_i=8, k_o=pow2)"}},
      {"causal_attention",
       {"B=1", "H=1", "M=6", "N=6", "D=4"},
       {"tile(O_sum, m=3)", "regularize(O_sum, m_i=4, n=8)", "bind(O_sum, b=grid.z, h=grid.y, m_o=grid.x)"}},
      {"softmax", {"R=5", "C=33"}, {"regularize(Y, c=pow2)", "regularize(E, r=8)"}},
      {"layernorm", {"T=3", "H=40"}, {"tile(Y, h=16)", "regularize(Y, h_o=4, t=pow2)"}},
      {"gated_mlp", {"T=5", "H=12", "F=24"}, {"regularize(G, h=16, t=8)"}},
  });
}

TEST(Regularize, TheRollingLoopPaddedBitForBit) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=5", "N=20", "D=6"});
  testing::LoweredAsset rolled = attention;
  rolled.program = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=6)"});
  testing::expect_same_results(
      rolled, apply_decisions(rolled.program, {"regularize(O_sum_acc, n_i=8, d=8, m=mul16)"}));
}

TEST(Regularize, PaddingWithoutTheMaskIsCaught) {
  auto gemm = lower_asset("gemm", {"M=4", "N=3", "K=24"});
  auto padded = apply_decisions(gemm.program, {"regularize(C_sum, k=32)"});
  EXPECT_EQ(testing::worst_output_error(gemm, padded), 0.0);
  // The reduction run over 32 elements with no mask reads past K.
  auto broken = testing::rewrite_block(padded, "C_sum", [](const Block& block) {
    return make_block(block.name, block.iter_vars, block.bindings, nullptr, block.init,
                      block.body, block.provenance);
  });
  EXPECT_GT(testing::worst_output_error(gemm, broken), 1e-2);
}

TEST(Regularize, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  EXPECT_EQ(failure_reason(gemm.program, "regularize(C_sum, m=8)"),
            "loop m runs 12 iterations; it cannot be padded to 8");
  EXPECT_EQ(failure_reason(gemm.program, "regularize(C_sum, m=24)"),
            "size 24 of m is neither a power of two nor a multiple of 16");
  EXPECT_EQ(failure_reason(gemm.program, "regularize(C_sum, m=pow3)"),
            "the size of m is an integer, pow2 or mul16, got pow3");
  EXPECT_EQ(failure_reason(gemm.program, "regularize(C_sum, q=16)"),
            "block C_sum has no axis or loop q; its axes are m, n, k and its loops m, n, k");
  EXPECT_EQ(failure_reason(gemm.program, "regularize(C_sum)"),
            "regularize(BLOCK, AXIS=SIZE, ...): needs at least one keyword argument");
  EXPECT_EQ(failure_reason(gemm.program, "regularize(Nope, m=16)"),
            "program gemm has no block Nope; its blocks are C_sum, C");
}

}  // namespace
}  // namespace nautilus::sched
