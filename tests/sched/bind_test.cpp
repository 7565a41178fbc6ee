// bind: golden before/after, printing and JSON of grid loops, the verifier's grid rules, and
// every failure reason.
#include "core/sched/bind.h"

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

const std::vector<std::string> kAttention = {"B=1", "H=2", "M=12", "N=20", "D=8"};

TEST(Bind, TiledCastNestGolden) {
  auto attention = lower_asset("attention", kAttention);
  testing::expect_golden_schedule(attention, "sched/bind_attention.txt", {"tile(O, m=4)"},
                                  {"bind(O, b=grid.z, h=grid.y, m_o=grid.x)"});
}

TEST(Bind, GridLoopsPrintTheirDimensionInTextDotAndJson) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = apply_decisions(
      gemm.program, {"tile(C_sum, m=4, n=5)", "bind(C_sum, m_o=grid.y, n_o=grid.x)"});
  const std::string text = scalar::print_program(*after);
  EXPECT_NE(
      text.find("for m_o in 0..3 [grid.y]:\n  for n_o in 0..2 [grid.x]:\n    for m_i in 0..4:"),
      std::string::npos)
      << text;
  EXPECT_NE(scalar::program_to_dot(*after).find("for m_o in 0..3 [grid.y], n_o in 0..2 [grid.x]"),
            std::string::npos);
  const auto json = scalar::program_to_json(*after);
  EXPECT_EQ(json["body"]["stmts"][0]["for_kind"], "grid.y");
  EXPECT_EQ(json["body"]["stmts"][0]["body"]["for_kind"], "grid.x");
  EXPECT_EQ(json["body"]["stmts"][0]["body"]["body"]["for_kind"], "serial");
  expect_same_results(gemm, after);
}

TEST(Bind, RebindingAndUnbinding) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto bound = apply_decisions(gemm.program, {"bind(C, m=grid.x, n=grid.y)"});
  // The kinds it already has: the same program.
  ApplyResult same = apply_decision(bound, *parse_decision("bind(C, m=grid.x)", nullptr));
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same.program, bound);
  // Back to serial, innermost first or both at once.
  auto serial = apply_decisions(bound, {"bind(C, n=serial)", "bind(C, m=serial)"});
  EXPECT_EQ(scalar::print_program(*serial), scalar::print_program(*gemm.program));
  auto swapped = apply_decisions(bound, {"bind(C, m=grid.y, n=grid.x)"});
  EXPECT_NE(scalar::print_program(*swapped).find("for m in 0..12 [grid.y]:"), std::string::npos);
}

TEST(Bind, FusedNestBindsWhenEveryBlockIsSpatialInTheLoop) {
  auto gemm = lower_asset("gemm", {"M=12", "N=10", "K=24"});
  auto after = apply_decisions(gemm.program, {"tile(C, m=4)", "compute_at(C_sum, C, m_o)",
                                              "bind(C, m_o=grid.x)"});
  expect_same_results(gemm, after);
}

TEST(Bind, FailureReasons) {
  auto attention = lower_asset("attention", kAttention);
  auto tiled = apply_decisions(attention.program, {"tile(O_sum, m=4, n=8)"});
  EXPECT_EQ(failure_reason(tiled, "bind(O_sum, b=grid.z, h=grid.y, n_o=grid.x)"),
            "loop n_o iterates a reduction axis of block O_sum; only spatial loops can be bound to "
            "the grid");
  EXPECT_EQ(failure_reason(tiled, "bind(O_sum, m_o=grid.x)"),
            "loop m_o is inside serial loop h; only the outermost loops of a nest can be bound to "
            "the grid (bind h too, or reorder)");
  EXPECT_EQ(failure_reason(tiled, "bind(O_sum, b=grid.x, h=grid.x)"),
            "loops b and h are both bound to grid.x");
  EXPECT_EQ(failure_reason(tiled, "bind(O_sum, q=grid.x)"),
            "block O_sum has no loop q; its loops are b, h, m_o, n_o, m_i, d, n_i");
  auto bound = apply_decisions(tiled, {"bind(O_sum, b=grid.z, h=grid.y)"});
  EXPECT_EQ(failure_reason(bound, "bind(O_sum, b=serial)"),
            "loop h is inside serial loop b; only the outermost loops of a nest can be bound to "
            "the grid (bind b too, or reorder)");

  // R computed at Y's h loop does not depend on h: every CTA of a grid h would compute it.
  auto rmsnorm = lower_asset("rmsnorm", {"T=6", "H=8"});
  auto fused = apply_decisions(rmsnorm.program, {"compute_at(R, Y, h)"});
  EXPECT_EQ(failure_reason(fused, "bind(Y, t=grid.x, h=grid.y)"),
            "block R does not depend on loop h; bound to the grid, every CTA would compute all of "
            "it");
  expect_same_results(rmsnorm, apply_decisions(fused, {"bind(Y, t=grid.x)"}));
}

// Programs with grid loops where the verifier forbids them (bind never builds these).
TEST(Bind, VerifierRejectsGridLoopsInsideSerialLoopsOrBoundTwice) {
  using namespace scalar;
  Buffer out = make_buffer("Y", {2, 3}, DType::F32, MemoryScope::Global, BufferRole::Output);
  auto program = [&](ForKind outer, ForKind inner) {
    Var i = make_var("i"), j = make_var("j"), bi = make_var("i"), bj = make_var("j");
    Stmt store = make_store(out, {var_ref(bi), var_ref(bj)}, float_imm(1.0, DType::F32));
    Stmt block = make_block("Y", {{bi, 2, IterKind::Spatial}, {bj, 3, IterKind::Spatial}},
                            {var_ref(i), var_ref(j)}, nullptr, nullptr, store);
    return Program{"grid", {out}, {},
                   make_for(i, 2, make_for(j, 3, block, {}, inner), {}, outer)};
  };
  EXPECT_TRUE(verify(program(ForKind::GridY, ForKind::GridX)).empty());
  EXPECT_EQ(verify(program(ForKind::Serial, ForKind::GridX)),
            (std::vector<std::string>{
                "program body: loop j is bound to grid.x inside serial loop i; grid loops must "
                "enclose every serial loop and block"}));
  EXPECT_EQ(verify(program(ForKind::GridX, ForKind::GridX)),
            (std::vector<std::string>{
                "program body: loop j is bound to grid.x, which an enclosing loop is already "
                "bound to"}));
}

}  // namespace
}  // namespace nautilus::sched
