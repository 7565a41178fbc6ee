// compute_at: golden before/after, interpreter equivalence on several assets at sizes the tiles
// do not divide, and every failure reason.
#include "core/sched/compute_at.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using namespace testing::hand;
using testing::apply_decisions;
using testing::expect_same_outputs;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;
using scalar::binary;
using scalar::BinaryOp;
using scalar::load;

TEST(ComputeAt, GemmAccumulatorAtOutputTileGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  testing::expect_golden_schedule(gemm, "sched/compute_at_gemm.txt", {"tile(C, m=4)"},
                                  {"compute_at(C_sum, C, m_o)"});
}

TEST(ComputeAt, OverhangingTilesArePredicated) {
  auto gemm = lower_asset("gemm", {"M=13", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"tile(C, m=4, n=3)", "compute_at(C_sum, C, n_o)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(text.find("block C_sum(m = m_o * 4 + m, n = n_o * 3 + n; reduce k = k) if m_o * 4 + m "
                      "< 13 and n_o * 3 + n < 10:"),
            std::string::npos)
      << text;
  expect_same_results(gemm, after);
}

TEST(ComputeAt, SeveralAssets) {
  testing::expect_cases_same_results({
    {"softmax",
     {"R=7", "C=33"},
     {"compute_at(Y_sum, Y, r)", "compute_at(E, Y, r)", "compute_at(Mx, Y, r)"}},
    {"rmsnorm", {"T=7", "H=17"}, {"tile(Y, t=3)", "compute_at(R, Y, t_o)",
                                  "compute_at(R_sum, Y, t_o)"}},
    {"layernorm",
     {"T=7", "H=17"},
     {"tile(Y, t=2, h=5)", "compute_at(Var, Y, t_o)", "compute_at(Var_sum, Y, t_o)",
      "compute_at(Mu, Y, t_o)", "compute_at(Mu_sum, Y, t_o)"}},
    {"gated_mlp",
     {"T=5", "H=16", "F=24"},
     {"tile(Y_sum, t=2, e=4, f=8)", "compute_at(G, Y_sum, e_o)",
      "compute_at(U, Y_sum, e_o)"}},
    {"gqa_attention",
     {"B=1", "H=4", "KH=2", "M=7", "N=10", "D=4"},
     {"inline(P)", "tile(O_sum, m=3, n=4)", "compute_at(L, O_sum, m_o)",
      "compute_at(Mx, O_sum, m_o)", "compute_at(S, O_sum, m_o)"}},
    {"batched_gemm",
     {"Z=3", "M=6", "N=5", "K=16"},
     {"tile(C, z=2, m=4)", "compute_at(C_sum, C, m_o)"}},
    {"logsumexp",
     {"R=7", "C=33"},
     {"compute_at(Lse_sum, Lse, r)", "compute_at(Mx, Lse, r)"}},
  });
}

TEST(ComputeAt, ProducerWithMovingPartsInSeveralDimensions) {
  // S computed at O_sum's m_o loop, then at its own... the loops down to LOOP give one row tile.
  auto attention = lower_asset("attention", {"B=2", "H=1", "M=7", "N=10", "D=4"});
  auto after = apply_decisions(
      attention.program, {"inline(P)", "tile(O_sum, b=1, m=2, d=3)", "compute_at(L, O_sum, m_o)",
                          "compute_at(Mx, O_sum, m_o)", "compute_at(S, O_sum, m_o)"});
  expect_same_results(attention, after);
}

TEST(ComputeAt, ReadsThatCombineIterationVariables) {
  // After split_k_update the partial sums read the scores at `n + n_s * 6` (the split's keys):
  // the scores of each key tile are computed inside it, split by split (FlashDecoding's fused
  // partial kernel).
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=3", "N=12", "D=4"});
  auto fused = apply_decisions(
      attention.program, {"rolling_update(O_sum, n, tile=3)", "split_k_update(O_sum_acc, n, splits=2)",
                          "compute_at(S, O_sum_acc_part, n_o)"});
  expect_same_outputs(attention, fused, 1e-9);
}

TEST(ComputeAt, InputsWrittenEarlierInTheSameIteration) {
  // With S, Mx and L all under m_o, computing Mx there again reads S from the same iteration.
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=9", "N=6", "D=4"});
  auto fused = apply_decisions(
      attention.program, {"inline(P)", "tile(O_sum, m=4, n=2)", "compute_at(L, O_sum, m_o)",
                          "compute_at(Mx, O_sum, m_o)", "compute_at(S, O_sum, m_o)",
                          "compute_at(Mx, O_sum, m_o)"});
  expect_same_results(attention, fused);

  // Softmax row by row, from the first producer on: E's input Mx is already in the loop.
  auto softmax = lower_asset("softmax", {"R=5", "C=9"});
  auto rows = apply_decisions(softmax.program,
                              {"compute_at(Y_sum, Y, r)", "compute_at(E, Y, r)",
                               "compute_at(Mx, Y, r)"});
  expect_same_results(softmax, rows);
}

TEST(ComputeAt, UnderAReductionLoop) {
  // Gated MLP: each iteration of Y_sum's reduction over f computes the gate and up projections
  // it reads, so the hidden activations are never stored whole.
  auto mlp = lower_asset("gated_mlp", {"T=3", "H=4", "F=6"});
  expect_same_results(mlp, apply_decisions(mlp.program, {"compute_at(G, Y_sum, f)",
                                                         "compute_at(U, Y_sum, f)"}));
}

TEST(ComputeAt, ScoresPerKeyTileGolden) {
  // Attention after rolling_update: S is computed one key tile at a time inside the key-tile
  // loop, before the running max reads it; no whole row of S is computed at once.
  auto attention = lower_asset("attention", {"B=1", "H=1", "M=5", "N=7", "D=4"});
  scalar::ProgramPtr after;
  testing::expect_golden("sched/compute_at_key_tiles.txt",
                testing::before_after(attention,
                                      {"inline(P)", "rolling_update(O_sum, n, tile=3)",
                                       "tile(O_sum_acc, m=2)", "reverse_compute_at(O, O_sum, m_o)"},
                                      {"compute_at(S, Mx, n_o)"}, &after));
  // rolling_update reorders the sums' rounding, so compare within f32 tolerance.
  expect_same_results(attention, after, 1e-5);
}

TEST(ComputeAt, FailureReasons) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=8", "N=6", "D=4"});
  auto tiled = apply_decisions(attention.program, {"inline(P)", "tile(O_sum, m=4, n=2)"});
  EXPECT_EQ(failure_reason(tiled, "compute_at(S, O_sum, m_o)"),
            "block Mx reads S outside loop m_o of block O_sum; every reader of S must be under "
            "that loop (move Mx there first)");
  EXPECT_EQ(failure_reason(tiled, "compute_at(S, S, m)"), "block S cannot be computed at itself");
  EXPECT_EQ(failure_reason(tiled, "compute_at(S, O_sum, q)"),
            "block O_sum has no loop q; its loops are b, h, m_o, n_o, m_i, d, n_i");
  EXPECT_EQ(failure_reason(tiled, "compute_at(S, O, m)"),
            "block Mx reads S outside loop m of block O; every reader of S must be under that loop "
            "(move Mx there first)");
  EXPECT_EQ(failure_reason(tiled, "compute_at(O, O_sum, m_o)"),
            "tensor O is an output; compute_at would compute only the parts of it that blocks "
            "read");
  EXPECT_EQ(failure_reason(tiled, "compute_at(Q, O, m)"),
            "program attention has no block Q; its blocks are S, Mx, L, O_sum, O");


  auto x = input("X", {3});
  auto a = temp("A", {3});
  auto y = output("Y", {3, 3});
  auto y1 = output("Y", {3});
  auto twice = [&](const Iters& v) {
    return binary(BinaryOp::Mul, load(x, {v[0]}), scalar::float_imm(2.0, DType::F32));
  };

  // Y[i, j] = A[i] * A[j]: under loop i, one reader needs row i and the other all of A.
  auto both = testing::hand::program(
      {x, y}, {a},
      {nest("A", a, twice), nest("Y", y, [&](const Iters& v) {
         return binary(BinaryOp::Mul, load(a, {v[0]}), load(a, {v[1]}));
       })});
  EXPECT_EQ(failure_reason(both, "compute_at(A, Y, i)"),
            "block Y reads different parts of dimension 0 of A in one iteration of loop i of block "
            "Y (i + [0, 1) and [0, 3))");

  // Y[i] = A[(i + 1) % 3]: not an affine index.
  auto shifted = testing::hand::program(
      {x, y1}, {a},
      {nest("A", a, twice), nest("Y", y1, [&](const Iters& v) {
         return load(a, {binary(BinaryOp::Mod, binary(BinaryOp::Add, v[0], scalar::int_imm(1)),
                                scalar::int_imm(3))});
       })});
  EXPECT_EQ(failure_reason(shifted, "compute_at(A, Y, i)"),
            "block Y reads A at index (i + 1) % 3; compute_at needs reads at affine indices of "
            "iteration variables");

  // A written in reverse: not the plain form.
  auto reversed = testing::hand::program(
      {x, y1}, {a},
      {nest("A", a, twice,
            [](const Iters& v) {
              return Iters{binary(BinaryOp::Sub, scalar::int_imm(2), v[0])};
            }),
       nest("Y", y1, [&](const Iters& v) { return load(a, {v[0]}); })});
  EXPECT_EQ(failure_reason(reversed, "compute_at(A, Y, i)"),
            "block A stores to A at index 2 - i; compute_at and reverse_compute_at follow only "
            "blocks whose every store is X[i, j, ...] = ... with its spatial iteration "
            "variables");

  auto unread = testing::hand::program({x, y1}, {a}, {nest("A", a, twice), nest("Y", y1, twice)});
  EXPECT_EQ(failure_reason(unread, "compute_at(A, Y, i)"),
            "no block reads A, which block A writes; there is no place to compute it at");

  // A = 2 R, with R's writer W after C's loop, or inside it in the same statement as C.
  auto r = temp("R", {3});
  auto from_r = [&](const Iters& v) {
    return binary(BinaryOp::Mul, load(r, {v[0]}), scalar::float_imm(2.0, DType::F32));
  };
  auto late = testing::hand::program(
      {x, y1}, {a, r},
      {nest("A", a, from_r), nest("Y", y1, [&](const Iters& v) { return load(a, {v[0]}); }),
       nest("W", r, twice)});
  EXPECT_EQ(failure_reason(late, "compute_at(A, Y, i)"),
            "block W writes R, which block A reads, after loop i of block Y; A cannot move there");
  {
    using namespace scalar;
    Var i = make_var("i"), wi = make_var("i"), yi = make_var("i");
    Stmt fused = make_for(
        i, 3,
        make_seq({make_block("W", {{wi, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(r, {var_ref(wi)}, twice({var_ref(wi)}))),
                  make_block("Y", {{yi, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(y1, {var_ref(yi)}, load(a, {var_ref(yi)})))}));
    Var j = make_var("j");
    auto same_statement = testing::hand::program(
        {x, y1}, {a, r}, {nest("A", a, from_r), make_for(j, 1, fused)});
    EXPECT_EQ(failure_reason(same_statement, "compute_at(A, Y, j)"),
              "block W writes R, which block A reads, inside loop j of block Y no earlier than the "
              "readers of A; A cannot move there");
  }

  // A[i] = sum(k) R[k], where R's writer runs in the same loop i but writes only R[i] there.
  {
    using namespace scalar;
    Var ai = make_var("i"), ak = make_var("k"), li = make_var("i"), lk = make_var("k");
    Stmt reduction = make_for(
        li, 3,
        make_for(lk, 3,
                 make_block("A", {{ai, 3, IterKind::Spatial}, {ak, 3, IterKind::Reduce}},
                            {var_ref(li), var_ref(lk)}, nullptr,
                            make_store(a, {var_ref(ai)}, float_imm(0.0, DType::F32)),
                            make_store(a, {var_ref(ai)},
                                       binary(BinaryOp::Add, load(a, {var_ref(ai)}),
                                              load(r, {var_ref(ak)}))))));
    Var i = make_var("i"), wi = make_var("i"), yi = make_var("i");
    Stmt fused = make_for(
        i, 3,
        make_seq({make_block("W", {{wi, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(r, {var_ref(wi)}, twice({var_ref(wi)}))),
                  make_block("Y", {{yi, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(y1, {var_ref(yi)}, load(a, {var_ref(yi)})))}));
    auto partial = testing::hand::program({x, y1}, {a, r}, {reduction, fused});
    EXPECT_EQ(failure_reason(partial, "compute_at(A, Y, i)"),
              "block A reads [0, 3) of dimension 0 of R in one iteration of loop i, where block W "
              "writes i + [0, 1); block A cannot read R in the same iteration");
  }

  auto two_writers = testing::hand::program(
      {x, y1}, {a},
      {nest("A", a, twice), nest("A2", a, twice),
       nest("Y", y1, [&](const Iters& v) { return load(a, {v[0]}); })});
  EXPECT_EQ(failure_reason(two_writers, "compute_at(A, Y, i)"),
            "tensor A is written by blocks A and A2; only a tensor with one producer can move");
}

}  // namespace
}  // namespace nautilus::sched
