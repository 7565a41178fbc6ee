// factor: the new tensor and block, interpreter equivalence, and every failure reason.
#include "core/sched/factor.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_outputs;
using testing::failure_reason;
using testing::lower_asset;

// The gated MLP's down projection recomputes silu(G) * U for every column of Y; factored out
// along e, it is computed once per (t, f) as A, and the update multiplies A by Wd alone.
TEST(Factor, TheGateOfADownProjectionBecomesATensorOfItsOwn) {
  const testing::LoweredAsset mlp = lower_asset("gated_mlp", {"T=7", "H=16", "F=24"});
  ASSERT_TRUE(mlp.program);
  const scalar::ProgramPtr factored = apply_decisions(mlp.program, {"factor(Y_sum, A, e)"});
  const std::string text = scalar::print_program(*factored);
  EXPECT_NE(text.find("alloc A : f32[7, 24] global"), std::string::npos) << text;
  EXPECT_NE(text.find("block A(t = t, f = f):\n      A[t, f] = G[t, f] * sigmoid(G[t, f]) * U[t, f]"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Y_sum[t, e] = Y_sum[t, e] + A[t, f] * f32(Wd[f, e])"), std::string::npos) << text;
  EXPECT_LT(text.find("block A("), text.find("block Y_sum("));
  // The factors keep their order, so the products round exactly as before.
  expect_same_outputs(mlp, factored);

  // Factored, then the rest of a schedule: still the same outputs.
  const scalar::ProgramPtr scheduled = apply_decisions(
      mlp.program, {"factor(Y_sum, A, e)", "tile(A, t=4, f=8)", "compute_at(G, A, f_o)", "compute_at(U, A, f_o)",
                    "tile(G, h=8)", "tile(U, h=8)", "compute_with(U, G, h_o)", "tile(Y_sum, t=4, e=8, f=8)"});
  expect_same_outputs(mlp, scheduled);
}

// Along t the factor is Wd alone (valid, if of no use); the reduce axis is not spatial; a sum of
// one factor has nothing to split.
TEST(Factor, FailureReasons) {
  const testing::LoweredAsset mlp = lower_asset("gated_mlp", {"T=7", "H=16", "F=24"});
  ASSERT_TRUE(mlp.program);
  const scalar::ProgramPtr along_t = apply_decisions(mlp.program, {"factor(Y_sum, W, t)"});
  const std::string along_t_text = scalar::print_program(*along_t);
  EXPECT_NE(along_t_text.find("W[e, f] = f32(Wd[f, e])"), std::string::npos) << along_t_text;
  EXPECT_EQ(failure_reason(mlp.program, "factor(Y_sum, A, f)"),
            "block Y_sum has no spatial iteration variable f; its spatial ones are t, e");
  EXPECT_EQ(failure_reason(mlp.program, "factor(Y, A, e)"),
            "block Y is not a sum `B[...] = B[...] + e`; factor takes the factors of a sum's update");
  EXPECT_EQ(failure_reason(mlp.program, "factor(Y_sum, G, e)"),
            "program gated_mlp already has a tensor or block named G; name the factor anew");
  const testing::LoweredAsset softmax = lower_asset("softmax", {"R=7", "C=33"});
  ASSERT_TRUE(softmax.program);
  EXPECT_EQ(failure_reason(softmax.program, "factor(Y_sum, A, r)"),
            "the update of block Y_sum has no factor that reads a tensor without depending on r "
            "beside one that depends on it; there is nothing to factor out");
  // G computed inside Y_sum's nest: the factor would read it before it is written.
  const scalar::ProgramPtr fused = apply_decisions(mlp.program, {"tile(Y_sum, t=4, e=8, f=8)", "compute_at(G, Y_sum, e_o)"});
  EXPECT_EQ(failure_reason(fused, "factor(Y_sum, A, e)"),
            "block G writes G, which the factor reads, in the nest of block Y_sum or after it; the "
            "factor is computed before that nest");
}

}  // namespace
}  // namespace nautilus::sched
