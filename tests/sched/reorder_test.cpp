// reorder: golden before/after, interpreter equivalence, identity, and every failure reason.
#include "core/sched/reorder.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;

TEST(Reorder, GemmReductionOutermostGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  // Each element still sums k in increasing order: the results are identical.
  testing::expect_golden_schedule(gemm, "sched/reorder_gemm.txt", {}, {"reorder(C_sum, k, m)"});
}

TEST(Reorder, UnnamedLoopsKeepTheirPlaces) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=5", "N=7", "D=4"});
  auto after = apply_decisions(attention.program, {"reorder(O_sum, n, m)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("    for n in 0..7:\n      for d in 0..4:\n        for m in 0..5:\n"
                      "          block O_sum"),
            std::string::npos)
      << text;
  expect_same_results(attention, after);
}

TEST(Reorder, ReassociatingAReductionStaysWithinRounding) {
  // Swapping the two loops of one reduction changes the order of the f32 sum.
  auto gemm = lower_asset("gemm", {"M=7", "N=6", "K=35"});
  auto after = apply_decisions(gemm.program, {"split(C_sum, k, 8)", "reorder(C_sum, k_i, k_o)"});
  expect_same_results(gemm, after, 1e-6);
}

TEST(Reorder, CurrentOrderIsUnchanged) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  for (const char* decision :
       {"reorder(C_sum, m, n, k)", "reorder(C_sum, n)", "reorder(C_sum, m, k)"}) {
    ApplyResult result = apply_decision(gemm.program, *parse_decision(decision, nullptr));
    ASSERT_TRUE(result.ok()) << result.reason;
    EXPECT_EQ(result.program, gemm.program) << decision;
  }
}

TEST(Reorder, SpatialLoopsAroundAFusedNestMayMove) {
  auto gemm = lower_asset("gemm", {"M=9", "N=10", "K=6"});
  // C_sum computed at C's n loop: the loops m, n enclose both blocks and are spatial for both.
  auto after = apply_decisions(gemm.program, {"compute_at(C_sum, C, n)", "reorder(C, n, m)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("for n in 0..10:\n  for m in 0..9:\n    for k in 0..6:\n"), std::string::npos)
      << text;
  expect_same_results(gemm, after);
}

TEST(Reorder, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  EXPECT_EQ(failure_reason(gemm.program, "reorder(C_sum, k, q)"),
            "block C_sum has no loop q; its loops are m, n, k");
  EXPECT_EQ(failure_reason(gemm.program, "reorder(C_sum, k, k)"), "loop k is named twice");
  EXPECT_EQ(failure_reason(gemm.program, "reorder(X, k, m)"),
            "program gemm has no block X; its blocks are C_sum, C");

  // C consumed inside C_sum's n loop, after the k loop: n's body holds two statements.
  auto fused = apply_decisions(gemm.program, {"reverse_compute_at(C, C_sum, n)"});
  EXPECT_EQ(failure_reason(fused, "reorder(C_sum, k, m)"),
            "loops m and k of block C_sum are not perfectly nested: loop n runs several "
            "statements");

  auto bound = apply_decisions(gemm.program, {"bind(C_sum, m=grid.x)"});
  EXPECT_EQ(failure_reason(bound, "reorder(C_sum, n, m)"),
            "loop m is bound to grid.x; reorder loops before binding them");
}

TEST(Reorder, LoopsAroundSeveralBlocksMustBeSpatialForEach) {
  // Fused by hand: for i, for j: [A(i, j) = 2 X[i, j]; R(i; reduce j) += A[i, j]]. Moving j
  // outside i would interleave R's reduction with other rows' A.
  using namespace scalar;
  Buffer x = make_buffer("X", {3, 4}, DType::F32, MemoryScope::Global, BufferRole::Input);
  Buffer r = make_buffer("R", {3}, DType::F32, MemoryScope::Global, BufferRole::Output);
  Buffer a = make_buffer("A", {3, 4}, DType::F32, MemoryScope::Global, BufferRole::Intermediate);
  Var i = make_var("i"), j = make_var("j");
  Var ai = make_var("i"), aj = make_var("j"), ri = make_var("i"), rj = make_var("j");
  Stmt block_a = make_block(
      "A", {{ai, 3, IterKind::Spatial}, {aj, 4, IterKind::Spatial}}, {var_ref(i), var_ref(j)},
      nullptr, nullptr,
      make_store(a, {var_ref(ai), var_ref(aj)},
                 binary(BinaryOp::Mul, load(x, {var_ref(ai), var_ref(aj)}),
                        float_imm(2.0, DType::F32))));
  Stmt block_r = make_block(
      "R", {{ri, 3, IterKind::Spatial}, {rj, 4, IterKind::Reduce}}, {var_ref(i), var_ref(j)},
      nullptr, make_store(r, {var_ref(ri)}, float_imm(0.0, DType::F32)),
      make_store(r, {var_ref(ri)},
                 binary(BinaryOp::Add, load(r, {var_ref(ri)}),
                        load(a, {var_ref(ri), var_ref(rj)}))));
  Program program{"fused", {x, r}, {a},
                  make_seq({make_for(i, 3, make_for(j, 4, make_seq({block_a, block_r})))})};
  ASSERT_TRUE(verify(program).empty());
  auto shared = std::make_shared<const Program>(std::move(program));
  EXPECT_EQ(failure_reason(shared, "reorder(R, j, i)"),
            "loop j iterates reduction axis j of block R; loops around several blocks can be "
            "reordered only when they iterate spatial axes of each");
}

TEST(Reorder, SpatialBandAroundSeveralBlocksMayMove) {
  // Y_sum computed at Y's r loop, then r split: r_o and r_i enclose both blocks and iterate a
  // spatial axis of each.
  auto softmax = lower_asset("softmax", {"R=5", "C=6"});
  auto swapped = apply_decisions(softmax.program, {"compute_at(Y_sum, Y, r)", "split(Y, r, 2)",
                                                   "reorder(Y, r_i, r_o)"});
  EXPECT_NE(scalar::print_program(*swapped).find("for r_i in 0..2:\n  for r_o in 0..3:\n"),
            std::string::npos);
  expect_same_results(softmax, swapped);
}

}  // namespace
}  // namespace nautilus::sched
