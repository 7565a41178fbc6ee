// reverse_compute_at: golden before/after, interpreter equivalence, and every failure reason.
#include "core/sched/reverse_compute_at.h"

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
using scalar::load;

TEST(ReverseComputeAt, GemmCastAtAccumulatorTileGolden) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  testing::expect_golden_schedule(gemm, "sched/reverse_compute_at_gemm.txt",
                                  {"tile(C_sum, m=4, n=5, k=8)"},
                                  {"reverse_compute_at(C, C_sum, n_o)"});
}

TEST(ReverseComputeAt, SeveralAssets) {
  testing::expect_cases_same_results({
    {"gemm", {"M=13", "N=10", "K=24"}, {"tile(C_sum, m=4, n=3)",
                                        "reverse_compute_at(C, C_sum, n_o)"}},
    // The whole softmax row by row: each consumer follows the row it needs.
    {"softmax",
     {"R=7", "C=33"},
     {"reverse_compute_at(E, Mx, r)", "reverse_compute_at(Y_sum, E, r)",
      "reverse_compute_at(Y, Y_sum, r)"}},
    {"attention",
     {"B=1", "H=2", "M=13", "N=10", "D=4"},
     {"tile(O_sum, m=4, n=4)", "reverse_compute_at(O, O_sum, m_o)"}},
    {"rmsnorm", {"T=7", "H=17"}, {"tile(R_sum, t=2)", "reverse_compute_at(R, R_sum, t_o)",
                                  "reverse_compute_at(Y, R, t_o)"}},
    {"batched_gemm",
     {"Z=3", "M=6", "N=5", "K=16"},
     {"tile(C_sum, z=2, n=2)", "reverse_compute_at(C, C_sum, n_o)"}},
  });
}

TEST(ReverseComputeAt, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto tiled = apply_decisions(gemm.program, {"tile(C_sum, m=4, n=5, k=8)"});
  EXPECT_EQ(failure_reason(tiled, "reverse_compute_at(C, C_sum, k_o)"),
            "loop k_o iterates reduction axis k of block C_sum; C can only be computed under loops "
            "over spatial axes, where the values of C_sum are final");
  EXPECT_EQ(failure_reason(tiled, "reverse_compute_at(C, C_sum, q)"),
            "block C_sum has no loop q; its loops are m_o, n_o, k_o, m_i, n_i, k_i");
  EXPECT_EQ(failure_reason(tiled, "reverse_compute_at(C, C, m)"),
            "block C cannot be computed at itself");

  // Overlapping parts: m = m_o * 5 + m_i_o * 3 + m_i_i spans 6 rows per m_o, the tile is 5.
  auto uneven = apply_decisions(gemm.program, {"split(C_sum, m, 5)", "split(C_sum, m_i, 3)"});
  EXPECT_EQ(failure_reason(uneven, "reverse_compute_at(C, C_sum, m_o)"),
            "the parts of dimension 0 of C_sum that iterations of loop m_o of block C_sum write "
            "overlap (m_o * 5 + [0, 6)); C could read elements a later iteration writes");

  auto softmax = lower_asset("softmax", {"R=5", "C=9"});
  EXPECT_EQ(failure_reason(softmax.program, "reverse_compute_at(Y, E, r)"),
            "block Y_sum writes Y_sum, which block Y reads, after loop r of block E; Y cannot move "
            "there");
  EXPECT_EQ(failure_reason(softmax.program, "reverse_compute_at(Y_sum, Mx, r)"),
            "block Y_sum does not read Mx, which block Mx writes");
  auto tiled_e = apply_decisions(softmax.program, {"tile(E, c=4)"});
  EXPECT_EQ(failure_reason(tiled_e, "reverse_compute_at(Y_sum, E, c_o)"),
            "reduction axis c2 of block Y_sum would only cover c_o * 4 + [0, 4) in one iteration "
            "of loop c_o of block E");

  auto x = input("X", {3});
  auto a = temp("A", {3});
  auto b = temp("B", {3});
  auto y = output("Y", {3});
  auto y2 = output("Y", {3, 3});
  auto twice = [&](const Iters& v) {
    return binary(BinaryOp::Mul, load(x, {v[0]}), scalar::float_imm(2.0, DType::F32));
  };
  auto read_a = [&](const Iters& v) { return load(a, {v[0]}); };

  // B's reader Z runs inside A's loop i, before C (which writes B) could get there.
  {
    using namespace scalar;
    Var i = make_var("i"), ai = make_var("i"), zi = make_var("i");
    Stmt fused = make_for(
        i, 3,
        make_seq({make_block("A", {{ai, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(a, {var_ref(ai)}, twice({var_ref(ai)}))),
                  make_block("Z", {{zi, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(y, {var_ref(zi)}, load(b, {var_ref(zi)})))}));
    auto early = testing::hand::program({x, y}, {a, b}, {fused, nest("C", b, read_a)});
    EXPECT_EQ(failure_reason(early, "reverse_compute_at(C, A, i)"),
              "block Z reads B, which block C writes, before loop i of block A ends; C cannot move "
              "there");
  }

  // Y[i, j] = A[i] + B[j], with B written next to A in loop i: in iteration i, Y's row i needs
  // all of B but only B[i] is there.
  {
    using namespace scalar;
    Var i = make_var("i"), ai = make_var("i"), bi = make_var("i");
    Stmt fused = make_for(
        i, 3,
        make_seq({make_block("A", {{ai, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(a, {var_ref(ai)}, twice({var_ref(ai)}))),
                  make_block("B", {{bi, 3, IterKind::Spatial}}, {var_ref(i)}, nullptr, nullptr,
                             make_store(b, {var_ref(bi)}, twice({var_ref(bi)})))}));
    auto partial = testing::hand::program(
        {x, y2}, {a, b},
        {fused, nest("Y", y2, [&](const Iters& v) {
           return binary(BinaryOp::Add, load(a, {v[0]}), load(b, {v[1]}));
         })});
    EXPECT_EQ(failure_reason(partial, "reverse_compute_at(Y, A, i)"),
              "block Y reads [0, 3) of dimension 0 of B in one iteration of loop i, where block B "
              "writes i + [0, 1); block Y cannot read B in the same iteration");
  }

  auto shifted = testing::hand::program(
      {x, y}, {a}, {nest("A", a, twice), nest("Y", y, [&](const Iters& v) {
                      return load(a, {binary(BinaryOp::Mod,
                                             binary(BinaryOp::Add, v[0], scalar::int_imm(1)),
                                             scalar::int_imm(3))});
                    })});
  EXPECT_EQ(failure_reason(shifted, "reverse_compute_at(Y, A, i)"),
            "block Y reads A at index (i + 1) % 3; reverse_compute_at needs reads indexed directly "
            "by iteration variables");

  // Y[i, j] = A[i] + A[j]: in iteration i only A[i] is ready, and i and j would both follow
  // loop i: only the diagonal of Y would be computed.
  auto both = testing::hand::program(
      {x, y2}, {a}, {nest("A", a, twice), nest("Y", y2, [&](const Iters& v) {
                       return binary(BinaryOp::Add, load(a, {v[0]}), load(a, {v[1]}));
                     })});
  EXPECT_EQ(failure_reason(both, "reverse_compute_at(Y, A, i)"),
            "iteration variables i and j of block Y would both follow loop i, so only some of "
            "their combinations would be computed");

  // Y[i] = A[i] + A2... a variable indexing two dimensions with different parts.
  auto a2 = temp("A2", {3, 3});
  auto square = testing::hand::program(
      {x, y}, {a2},
      {nest("A2", a2, [&](const Iters& v) { return twice({v[0]}); }),
       nest("Y", y, [&](const Iters& v) { return load(a2, {v[0], v[0]}); })});
  EXPECT_EQ(failure_reason(square, "reverse_compute_at(Y, A2, i)"),
            "iteration variable i of block Y indexes parts i + [0, 1) and [0, 3) of A2");

  auto two_writers = testing::hand::program(
      {x, y}, {a}, {nest("A", a, twice), nest("A2", a, twice), nest("Y", y, read_a)});
  EXPECT_EQ(failure_reason(two_writers, "reverse_compute_at(Y, A, i)"),
            "tensor A is written by blocks A and A2; only a tensor whose writers all complete "
            "the same part in each iteration of loop i of block A can be consumed inside its "
            "loops");

  auto two_outputs = testing::hand::program(
      {x, y}, {a}, {nest("A", a, twice), nest("Y", y, read_a), nest("Y2", y, read_a)});
  EXPECT_EQ(failure_reason(two_outputs, "reverse_compute_at(Y, A, i)"),
            "tensor Y is written by blocks Y and Y2; block Y cannot move alone");
}

}  // namespace
}  // namespace nautilus::sched
