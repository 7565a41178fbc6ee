// rematerialize: golden before/after, exact interpreter equivalence on several assets, a wrong
// recomputation caught, and the failure reasons.
#include "core/sched/rematerialize.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"
#include "tests/sched/stage_test_util.h"

namespace nautilus::sched {
namespace {

using namespace scalar;
using testing::apply_decisions;
using testing::failure_reason;
using testing::lower_asset;

TEST(Rematerialize, AttentionRecomputesPInTheOutputSumGolden) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=3", "N=7", "D=4"});
  auto after = testing::expect_golden_schedule(attention, "sched/rematerialize_attention.txt", {},
                                               {"rematerialize(P, O_sum)"});
  const std::string text = print_program(*after);
  EXPECT_NE(after->find_buffer("P"), nullptr);  // L still reads the stored P
  EXPECT_NE(text.find("L[b, h, m] = L[b, h, m] + P[b, h, m, n]"), std::string::npos) << text;
  EXPECT_NE(text.find("O_sum[b, h, m, d] + exp(S[b, h, m, n] - Mx[b, h, m]) * f32(V[b, h, n, d])"),
            std::string::npos)
      << text;
}

TEST(Rematerialize, SeveralAssetsAndSchedules) {
  testing::expect_cases_same_results({
      {"softmax", {"R=5", "C=33"}, {"rematerialize(E, Y)"}},
      {"softmax", {"R=5", "C=33"}, {"rematerialize(E, Y_sum)", "tile(Y, r=2, c=8)"}},
      {"causal_attention",
       {"B=1", "H=2", "M=5", "N=5", "D=4"},
       {"rematerialize(P, L)", "tile(O_sum, m=2, n=2)"}},
      {"gqa_attention", {"B=1", "H=4", "KH=2", "M=3", "N=6", "D=4"}, {"rematerialize(P, O_sum)"}},
      // After fusion: P computed per row tile and recomputed in the sum under the same loop.
      {"attention",
       {"B=1", "H=1", "M=5", "N=6", "D=4"},
       {"tile(O_sum, m=2)", "compute_at(L, O_sum, m_o)", "compute_at(P, O_sum, m_o)",
        "rematerialize(P, O_sum)"}},
  });
}

TEST(Rematerialize, AWrongRecomputationIsCaught) {
  auto attention = lower_asset("attention", {"B=1", "H=1", "M=3", "N=7", "D=4"});
  auto after = apply_decisions(attention.program, {"rematerialize(P, O_sum)"});
  EXPECT_EQ(testing::worst_output_error(attention, after), 0.0);
  // exp2 instead of exp: what a careless rewrite of the recomputed expression would give.
  struct ToExp2 : Mutator {
    Expr mutate_Unary(const Unary& node, const Expr& self) override {
      Expr rebuilt = Mutator::mutate_Unary(node, self);
      const Unary& u = *rebuilt->as<Unary>();
      return u.op == UnaryOp::Exp ? unary(UnaryOp::Exp2, u.a) : rebuilt;
    }
  };
  auto broken = testing::rewrite_block(after, "O_sum", [](const Block& block) {
    ToExp2 to_exp2;
    return make_block(block.name, block.iter_vars, block.bindings, block.predicate, block.init,
                      to_exp2.mutate(block.body), block.provenance);
  });
  EXPECT_GT(testing::worst_output_error(attention, broken), 1e-2);
}

TEST(Rematerialize, FailureReasons) {
  auto attention = lower_asset("attention", {"B=1", "H=1", "M=3", "N=7", "D=4"});
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(Nope, O_sum)"),
            "program attention has no tensor Nope");
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(Q, S)"),
            "tensor Q is an input; there is nothing to recompute");
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(P, Nope)"),
            "program attention has no block Nope; its blocks are S, Mx, P, L, O_sum, O");
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(Mx, P)"),
            "block Mx is a reduction; only elementwise tensors can be recomputed inside an "
            "expression");
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(P, Mx)"),
            "block Mx does not read P");
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(P, P)"),
            "block P is the producer of P");
  EXPECT_EQ(failure_reason(attention.program, "rematerialize(P, O_sum, L)"),
            "rematerialize(TENSOR, CONSUMER): takes 1 positional argument after the target, "
            "got 2");
  auto softmax = lower_asset("softmax", {"R=3", "C=5"});
  auto recomputed = apply_decisions(softmax.program, {"rematerialize(E, Y)"});
  EXPECT_EQ(failure_reason(recomputed, "rematerialize(E, Y_sum)"),
            "block Y_sum is the only reader of E; inline(E) recomputes it there and drops the "
            "stored tensor");
}

TEST(Rematerialize, RunningValuesAreRefused) {
  // for i: for j: { M[i] = max(M[i], X[i, j]); P[i, j] = exp(X[i, j] - M[i]) } reads the
  // running max: recomputing P later would see the final max instead.
  namespace hand = testing::hand;
  const Buffer x = hand::input("X", {2, 3});
  const Buffer m = hand::temp("M", {2});
  const Buffer p = hand::temp("P", {2, 3});
  const Buffer c = hand::output("C", {2});
  const Buffer d = hand::output("D", {2, 3});
  const Var i = make_var("i"), j = make_var("j");
  auto iter = [](const char* name, int64_t extent, IterKind kind) {
    return IterVar{make_var(name), extent, kind};
  };
  const IterVar mi = iter("i", 2, IterKind::Spatial), mj = iter("j", 3, IterKind::Reduce);
  const Stmt max_block = make_block(
      "M", {mi, mj}, {var_ref(i), var_ref(j)}, nullptr,
      make_store(m, {var_ref(mi.var)}, float_imm(-std::numeric_limits<double>::infinity(), DType::F32)),
      make_store(m, {var_ref(mi.var)},
                 binary(BinaryOp::Max, load(m, {var_ref(mi.var)}),
                        load(x, {var_ref(mi.var), var_ref(mj.var)}))));
  const IterVar pi = iter("i", 2, IterKind::Spatial), pj = iter("j", 3, IterKind::Spatial);
  const Stmt p_block = make_block(
      "P", {pi, pj}, {var_ref(i), var_ref(j)}, nullptr, nullptr,
      make_store(p, {var_ref(pi.var), var_ref(pj.var)},
                 unary(UnaryOp::Exp, binary(BinaryOp::Sub, load(x, {var_ref(pi.var), var_ref(pj.var)}),
                                            load(m, {var_ref(pi.var)})))));
  const Stmt fused = make_for(i, 2, make_for(j, 3, make_seq({max_block, p_block})));
  const Stmt sum = hand::nest("C", c, [&](const testing::hand::Iters& at) {
    return load(p, {at[0], int_imm(0)});
  });
  const Stmt copy = hand::nest("D", d, [&](const testing::hand::Iters& at) {
    return load(p, {at[0], at[1]});
  });
  const ProgramPtr program = hand::program({x, c, d}, {m, p}, {fused, sum, copy});
  EXPECT_EQ(failure_reason(program, "rematerialize(P, C)"),
            "loop j around block P iterates a reduction of block M, so M is still changing "
            "there; recomputing P in C would read another value");
}

}  // namespace
}  // namespace nautilus::sched
