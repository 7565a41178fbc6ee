// inline: golden before/after, interpreter equivalence, and every failure reason.
#include "core/sched/inline.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using namespace testing::hand;
using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;
using scalar::binary;
using scalar::BinaryOp;
using scalar::Expr;
using scalar::load;

Expr twice(Expr e) {
  return binary(BinaryOp::Mul, std::move(e), scalar::float_imm(2.0, DType::F32));
}

TEST(Inline, SoftmaxExponentialsGolden) {
  auto softmax = lower_asset("softmax", {"R=7", "C=33"});
  const scalar::ProgramPtr after =
      testing::expect_golden_schedule(softmax, "sched/inline_softmax.txt", {}, {"inline(E)"});
  EXPECT_EQ(after->find_buffer("E"), nullptr);
}

TEST(Inline, EveryElementwiseIntermediateOfEveryAsset) {
  testing::expect_cases_same_results({
    {"attention", {"B=1", "H=2", "M=7", "N=9", "D=4"}, {"inline(P)"}},
    {"causal_attention", {"B=1", "H=2", "M=7", "N=7", "D=4"}, {"inline(P)"}},
    {"gqa_attention", {"B=1", "H=4", "KH=2", "M=5", "N=6", "D=4"}, {"inline(P)"}},
    {"softmax", {"R=5", "C=9"}, {"inline(E)"}},
    {"layernorm", {"T=5", "H=9"}, {"inline(Mu)", "inline(Var)"}},
    {"rmsnorm", {"T=5", "H=9"}, {"inline(R)"}},
  });
}

TEST(Inline, AfterTilingAndIntoTiledConsumers) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=13", "N=9", "D=4"});
  auto after = apply_decisions(attention.program,
                               {"tile(P, m=4, n=4)", "tile(L, m=4, n=2)", "inline(P)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("L[b, h, m] + exp(S[b, h, m, n] - Mx[b, h, m])"), std::string::npos) << text;
  EXPECT_EQ(text.find("block P"), std::string::npos);
  expect_same_results(attention, after);
}

TEST(Inline, TransposedStoreSubstitutesByDimension) {
  // T[j, i] = 2 X[i, j]; Y[i, j] = T[i, j]  ==>  Y[i, j] = 2 X[j, i].
  auto x = input("X", {3, 3});
  auto t = temp("T", {3, 3});
  auto y = output("Y", {3, 3});
  auto program = testing::hand::program(
      {x, y}, {t},
      {nest("T", t, [&](const Iters& v) { return twice(load(x, {v[0], v[1]})); },
            [](const Iters& v) { return Iters{v[1], v[0]}; }),
       nest("Y", y, [&](const Iters& v) { return load(t, {v[0], v[1]}); })});
  auto after = apply_decisions(program, {"inline(T)"});
  EXPECT_NE(scalar::print_program(*after).find("Y[i, j] = X[j, i] * 2.0f"), std::string::npos)
      << scalar::print_program(*after);
}

TEST(Inline, FailureReasons) {
  auto softmax = lower_asset("softmax", {"R=5", "C=9"});
  EXPECT_EQ(failure_reason(softmax.program, "inline(Z)"), "program softmax has no tensor Z");
  EXPECT_EQ(failure_reason(softmax.program, "inline(X)"),
            "tensor X is an input; only intermediate tensors can be inlined");
  EXPECT_EQ(failure_reason(softmax.program, "inline(Y)"),
            "tensor Y is an output; only intermediate tensors can be inlined");
  EXPECT_EQ(failure_reason(softmax.program, "inline(Mx)"),
            "block Mx is a reduction (reduce c); only elementwise blocks can be inlined");

  auto x = input("X", {4});
  auto a = temp("A", {4});
  auto t = temp("T", {4});
  auto y = output("Y", {4});
  auto read_a = [&](const Iters& v) { return load(a, {v[0]}); };
  auto read_x = [&](const Iters& v) { return load(x, {v[0]}); };

  auto unwritten = testing::hand::program({x, y}, {a}, {nest("Y", y, read_a)});
  EXPECT_EQ(failure_reason(unwritten, "inline(A)"), "no block writes tensor A");

  auto two_writers = testing::hand::program(
      {x, y}, {a}, {nest("A", a, read_x), nest("A2", a, read_x), nest("Y", y, read_a)});
  EXPECT_EQ(failure_reason(two_writers, "inline(A)"),
            "tensor A is written by blocks A and A2; only a tensor with one producer can be "
            "inlined");

  auto shifted = testing::hand::program(
      {x, y}, {a},
      {nest("A", a, read_x,
            [](const Iters& v) {
              return Iters{binary(BinaryOp::Mod, binary(BinaryOp::Add, v[0], scalar::int_imm(1)),
                                  scalar::int_imm(4))};
            }),
       nest("Y", y, read_a)});
  EXPECT_EQ(failure_reason(shifted, "inline(A)"),
            "block A is not a single store A[iteration variables] = expression; it cannot be "
            "inlined");

  auto self_reading = testing::hand::program(
      {x, y}, {a}, {nest("A", a, [&](const Iters& v) { return twice(load(a, {v[0]})); }),
                    nest("Y", y, read_a)});
  EXPECT_EQ(failure_reason(self_reading, "inline(A)"),
            "block A reads A itself; it cannot be inlined");

  auto written_later = testing::hand::program(
      {x, y}, {a, t},
      {nest("A", a, [&](const Iters& v) { return load(t, {v[0]}); }), nest("T", t, read_x),
       nest("Y", y, read_a)});
  EXPECT_EQ(failure_reason(written_later, "inline(A)"),
            "tensor T, which block A reads, is written by block T after it; inlining A would read "
            "it at another time");
}

}  // namespace
}  // namespace nautilus::sched
