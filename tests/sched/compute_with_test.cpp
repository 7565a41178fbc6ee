// compute_with: the merged loop's text, interpreter equivalence at sizes the tiles do not divide,
// and every failure reason.
#include "core/sched/compute_with.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;

// The gate and up projections of a GeGLU MLP computed at one tile of their consumer A, each
// tiled along h alike.
const std::vector<std::string> kGateAndUpAtA = {
    "tile(A, t=4, f=8)", "compute_at(G, A, f_o)", "compute_at(U, A, f_o)", "tile(G, h=16)",
    "tile(U, h=16)"};

TEST(ComputeWith, TheGateAndUpProjectionsShareOneReductionLoop) {
  const testing::LoweredAsset geglu =
      lower_asset("bench/variants/geglu_mlp.nt", {"T=10", "H=40", "F=20"});
  ASSERT_TRUE(geglu.program);
  const scalar::ProgramPtr apart = apply_decisions(geglu.program, kGateAndUpAtA);
  std::vector<std::string> merged_decisions = kGateAndUpAtA;
  merged_decisions.push_back("compute_with(U, G, h_o)");
  const scalar::ProgramPtr merged = apply_decisions(geglu.program, merged_decisions);
  const std::string before = scalar::print_program(*apart);
  const std::string text = scalar::print_program(*merged);
  // One t, f, h_o nest under f_o now runs both blocks; U's own nest is gone.
  const auto count = [](const std::string& program_text, const std::string& what) {
    size_t n = 0;
    for (size_t at = program_text.find(what); at != std::string::npos; at = program_text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(before, "for h_o in 0..3"), 2u) << before;
  EXPECT_EQ(count(text, "for h_o in 0..3"), 1u) << text;
  EXPECT_EQ(count(text, "for t in 0..4"), 1u) << text;
  const size_t loop = text.find("for h_o in 0..3");
  ASSERT_NE(loop, std::string::npos) << text;
  const size_t g = text.find("block G(", loop), u = text.find("block U(", loop),
               a = text.find("block A(", loop);
  ASSERT_NE(g, std::string::npos) << text;
  ASSERT_NE(u, std::string::npos) << text;
  EXPECT_LT(g, u);
  EXPECT_LT(u, a);
  EXPECT_NE(text.find("reduce h = h_o * 16 + h", u), std::string::npos) << text;
  expect_same_results(geglu, merged);

  // Merging the other way round keeps the program order: G's nest came first, so its statements
  // still run first in each iteration.
  std::vector<std::string> reversed = kGateAndUpAtA;
  reversed.push_back("compute_with(G, U, h_o)");
  const scalar::ProgramPtr other_way = apply_decisions(geglu.program, reversed);
  const std::string other_text = scalar::print_program(*other_way);
  EXPECT_LT(other_text.find("block G("), other_text.find("block U(")) << other_text;
  EXPECT_EQ(other_text, text);
  expect_same_results(geglu, other_way);
}

TEST(ComputeWith, FailureReasons) {
  const testing::LoweredAsset geglu =
      lower_asset("bench/variants/geglu_mlp.nt", {"T=10", "H=40", "F=20"});
  ASSERT_TRUE(geglu.program);
  const scalar::ProgramPtr apart = apply_decisions(geglu.program, kGateAndUpAtA);
  // Before any scheduling the top-level nests of G and U are siblings (merging them is valid),
  // but Y_sum's would move up past A, which writes what it reads.
  const std::string between = failure_reason(geglu.program, "compute_with(Y_sum, G, t)");
  EXPECT_EQ(between,
            "a statement between the loops writes A, which the later loop reads; it cannot move "
            "past it")
      << between;
  // G under A's tile and U still at the top: U's nest is not as deep as G's.
  const scalar::ProgramPtr g_only =
      apply_decisions(geglu.program, {"tile(A, t=4, f=8)", "compute_at(G, A, f_o)"});
  EXPECT_EQ(failure_reason(g_only, "compute_with(U, G, h)"),
            "block U has no loop beside loop h of block G (a loop in the same sequence, under the "
            "same loops); compute_with merges two sibling loops: move U next to it first "
            "(compute_at into the same loop)");
  // G's loops from the top down to t pass through A's tile loops, which run A too.
  EXPECT_EQ(failure_reason(g_only, "compute_with(U, G, t)"),
            "the loops of block G down to loop t of block G are not perfectly nested under the "
            "loop they part at; compute_with merges perfect nests");
  // Different extents.
  const scalar::ProgramPtr uneven =
      apply_decisions(geglu.program, {"tile(A, t=4, f=8)", "compute_at(G, A, f_o)",
                                      "compute_at(U, A, f_o)", "tile(G, h=16)", "tile(U, h=8)"});
  EXPECT_EQ(failure_reason(uneven, "compute_with(U, G, h_o)"),
            "loop h_o of block U runs 5 iterations and loop h_o of block G 3; compute_with "
            "merges loops of the same extent (tile both alike)");
  // A reads G: merging A's loop with G's would read G before it is complete.
  const scalar::ProgramPtr tiled_a = apply_decisions(
      geglu.program, {"tile(A, t=4, f=8)", "compute_at(G, A, f_o)", "compute_at(U, A, f_o)"});
  const std::string dependent = failure_reason(tiled_a, "compute_with(A, G, t)");
  EXPECT_NE(dependent.find("writes G, which"), std::string::npos) << dependent;
  EXPECT_NE(dependent.find("compute_with merges independent loops only"), std::string::npos) << dependent;
  EXPECT_EQ(failure_reason(apart, "compute_with(U, G, q)"),
            "block G has no loop q; its loops are t_o, f_o, t, f, h_o, h_i");
}

}  // namespace
}  // namespace nautilus::sched
