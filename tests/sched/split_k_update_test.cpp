// split_k_update: golden before/after (split-K on gemm, FlashDecoding on attention), interpreter
// equivalence on several assets at sizes the splits do not divide, a combine without the repair
// caught, and every failure reason.
#include "core/sched/split_k_update.h"

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"
#include "tests/sched/stage_test_util.h"

namespace nautilus::sched {
namespace {

using namespace scalar;
using testing::apply_decisions;
using testing::expect_same_results;
using testing::failure_reason;
using testing::lower_asset;

// Splitting reassociates the sums; f32 rounding then differs in the last bits.
constexpr double kTolerance = 2e-5;

TEST(SplitKUpdate, GemmSplitKGolden) {
  auto gemm = lower_asset("gemm", {"M=5", "N=3", "K=24"});
  auto after = testing::expect_golden_schedule_within(
      gemm, "sched/split_k_update_gemm.txt", {}, {"split_k_update(C_sum, k, splits=4)"},
      kTolerance);
  const std::string text = print_program(*after);
  EXPECT_NE(text.find("alloc C_sum_part : f32[4, 5, 3] global"), std::string::npos) << text;
  EXPECT_NE(text.find("C_sum[m, n] = C_sum[m, n] + C_sum_part[k_s, m, n]"), std::string::npos)
      << text;
}

TEST(SplitKUpdate, FlashDecodingGolden) {
  auto attention = lower_asset("attention", {"B=1", "H=2", "M=3", "N=20", "D=8"});
  auto after = testing::expect_golden_schedule_within(
      attention, "sched/split_k_update_attention.txt", {"rolling_update(O_sum, n, tile=8)"},
      {"split_k_update(O_sum_acc, n, splits=2)"}, kTolerance);
  const std::string text = print_program(*after);
  // The combine applies rolling_update's rescale once per split, then the delayed normalization.
  for (const char* line :
       {"Mx[b, h, m] = max(Mx[b, h, m], Mx_part[n_s, b, h, m])",
        "L[b, h, m] = L[b, h, m] + L_part[n_s, b, h, m] * exp(Mx_part[n_s, b, h, m] - Mx[b, h, m])",
        "O_sum_acc[b, h, m, d] = O_sum_acc[b, h, m, d] + O_sum_acc_part[n_s, b, h, m, d] * "
        "exp(Mx_part[n_s, b, h, m] - Mx[b, h, m])",
        "O_sum[b, h, m, d] = O_sum_acc[b, h, m, d] / L[b, h, m]",
        "if n_s * 16 + n_o * 8 + n_i < 20 and n_s * 2 + n_o < 3:"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  }
  EXPECT_EQ(after->find_buffer("Mx_prev"), nullptr);  // each split keeps its own copy
  EXPECT_NE(after->find_buffer("Mx_prev_part"), nullptr);
}

TEST(SplitKUpdate, SeveralAssetsAtSizesTheSplitsDoNotDivide) {
  struct Case {
    const char* asset;
    std::vector<std::string> sizes;
    std::vector<std::string> decisions;
  };
  const std::vector<Case> cases = {
      {"gemm", {"M=4", "N=3", "K=23"}, {"split_k_update(C_sum, k, splits=5)"}},
      // The split loop becomes the grid dimension of split-K.
      {"gemm",
       {"M=6", "N=5", "K=20"},
       {"split_k_update(C_sum, k, splits=3)", "reorder(C_sum_part, k_s, m, n)",
        "bind(C_sum_part, k_s=grid.x)", "tile(C_sum, m=4)"}},
      {"batched_gemm", {"Z=2", "M=3", "N=5", "K=13"}, {"split_k_update(C_sum, k, splits=3)"}},
      // After tile: the split runs over k_o, the init over the tile's m_i and n_i before it,
      // and the combine over the same tiles, with the tiles' overhang masked in both.
      {"gemm",
       {"M=6", "N=5", "K=23"},
       {"tile(C_sum, m=4, n=2, k=4)", "split_k_update(C_sum, k, splits=3)"}},
      {"int8_weight_gemm",
       {"M=3", "N=20", "K=256", "KG=2"},
       {"tile(Y_sum, m=4, n=8, k=32)", "split_k_update(Y_sum, k, splits=3)"}},
      // Plain reductions of the unfused attention: a max and a sum that reads finished values.
      {"attention",
       {"B=1", "H=2", "M=3", "N=11", "D=4"},
       {"split_k_update(Mx, n, splits=3)", "split_k_update(O_sum, n, splits=2)"}},
      // Rolling loops stepping one element, or tiles, over extents the splits do not divide.
      {"attention",
       {"B=1", "H=1", "M=2", "N=20", "D=4"},
       {"rolling_update(O_sum, n)", "split_k_update(O_sum_acc, n, splits=3)"}},
      {"causal_attention",
       {"B=1", "H=2", "M=9", "N=9", "D=4"},
       {"rolling_update(O_sum, n, tile=2)", "split_k_update(O_sum_acc, n, splits=3)"}},
      {"gqa_attention",
       {"B=1", "H=4", "KH=2", "M=2", "N=10", "D=4"},
       {"rolling_update(O_sum, n, tile=3)", "split_k_update(L, n, splits=2)"}},
      {"softmax",
       {"R=3", "C=21"},
       {"rolling_update(Y_sum, c2, tile=5)", "split_k_update(Y_sum, c2, splits=2)"}},
      {"logsumexp",
       {"R=4", "C=19"},
       {"rolling_update(Lse_sum, c, tile=4)", "split_k_update(Lse_sum, c, splits=3)"}},
      // Variance as separate sums: merged by addition, no rescale.
      {"layernorm",
       {"T=3", "H=24"},
       {"rolling_update(Var_sum, h, tile=5)", "split_k_update(Var_sum_acc0, h, splits=2)"}},
      {"rmsnorm", {"T=3", "H=40"}, {"split_k_update(R_sum, h, splits=6)"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.asset);
    auto asset = lower_asset(c.asset, c.sizes);
    auto after = apply_decisions(asset.program, c.decisions);
    EXPECT_NE(print_program(*after).find("_part"), std::string::npos);
    expect_same_results(asset, after, kTolerance, {1, 7});
  }
}

TEST(SplitKUpdate, CombineWithoutTheRepairIsCaught) {
  // Merging the partial sums of L by plain addition, as for split-K, ignores that each split
  // measured its exponentials against its own running max.
  auto attention = lower_asset("attention", {"B=1", "H=1", "M=3", "N=16", "D=4"});
  auto split = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=4)",
                                                   "split_k_update(O_sum_acc, n, splits=2)"});
  EXPECT_LE(testing::worst_output_error(attention, split), kTolerance);
  auto broken = testing::rewrite_block(split, "L", [](const Block& block) {
    const Store& store = *block.body->as<Store>();
    const Binary& sum = *store.value->as<Binary>();
    const Expr part_only = sum.b->as<Binary>()->a;  // L_part[n_s, ...] without exp(...)
    return testing::with_block_body(
        block, make_store(store.buffer, store.indices, binary(BinaryOp::Add, sum.a, part_only)));
  });
  EXPECT_GT(testing::worst_output_error(attention, broken), 1e-2);
}

TEST(SplitKUpdate, FailureReasons) {
  auto gemm = lower_asset("gemm", {"M=4", "N=3", "K=20"});
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(D, k, splits=2)"),
            "program gemm has no block D; its blocks are C_sum, C");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, q, splits=2)"),
            "block C_sum has no axis q; its axes are m, n, k");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, m, splits=2)"),
            "axis m of block C_sum is spatial; split_k_update splits a reduction axis");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, k, splits=1)"),
            "splits must be at least 2, got 1");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, k, splits=21)"),
            "loop k has 20 steps, fewer than splits=21");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, k, splits=8)"),
            "splits=8 of the 20 steps of loop k (3 per split) would leave the last split empty; "
            "use splits=7 or fewer");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, k)"),
            "split_k_update(BLOCK, AXIS, splits=S): needs at least one keyword argument");
  EXPECT_EQ(failure_reason(gemm.program, "split_k_update(C_sum, k, parts=2)"),
            "split_k_update(BLOCK, AXIS, splits=S): unknown keyword parts=");
  auto bound = apply_decisions(gemm.program, {"bind(C_sum, m=grid.x)"});
  EXPECT_EQ(failure_reason(bound, "split_k_update(C_sum, k, splits=2)"),
            "loop m is bound to grid.x; apply split_k_update before bind");

  auto attention = lower_asset("attention", {"B=1", "H=1", "M=4", "N=8", "D=4"});
  auto rolled = apply_decisions(attention.program, {"rolling_update(O_sum, n, tile=4)"});
  // Other work moved into the nest before the loop.
  auto with_s = apply_decisions(rolled, {"compute_at(S, Mx, m)"});
  EXPECT_EQ(failure_reason(with_s, "split_k_update(O_sum_acc, n, splits=2)"),
            "block S before loop n_o writes S, which the loop does not update; apply "
            "split_k_update before moving other work into this nest");
  auto tiled = apply_decisions(rolled, {"tile(O_sum_acc, m=2)", "compute_at(S, Mx, m_o)"});
  EXPECT_EQ(failure_reason(tiled, "split_k_update(O_sum_acc, n, splits=2)"),
            "loop n_o is not in a perfect nest of loops with its top-level statement; "
            "split_k_update splits a nest as lowering or rolling_update leaves it");
  // Running statistics without their repair, a repair that is no exponential of differences, a
  // state that does not start at the identity.
  auto no_rescale = testing::rewrite_block(rolled, "L_rescale", [](const Block&) { return nullptr; });
  EXPECT_EQ(failure_reason(no_rescale, "split_k_update(O_sum_acc, n, splits=2)"),
            "block L updates L with values that read Mx, which changes along loop n_o, and "
            "nothing rescales it; its partial results could not be merged (apply rolling_update "
            "for a repaired form)");
  auto odd_rescale = testing::rewrite_block(rolled, "L_rescale", [](const Block& block) {
    const Store& store = *block.body->as<Store>();
    const Binary& product = *store.value->as<Binary>();
    const Expr prev = product.b->as<Unary>()->a->as<Binary>()->a;  // Mx_prev[...]
    return testing::with_block_body(
        block, make_store(store.buffer, store.indices,
                          binary(BinaryOp::Mul, product.a, unary(UnaryOp::Exp, prev))));
  });
  EXPECT_EQ(failure_reason(odd_rescale, "split_k_update(O_sum_acc, n, splits=2)"),
            "the rescale exp(Mx_prev[b, h, m]) of state L is not a product of exponentials of "
            "differences of running values and their copies; it cannot merge partial results");
  auto odd_start = testing::rewrite_block(rolled, "L_init", [](const Block& block) {
    const Store& store = *block.body->as<Store>();
    return testing::with_block_body(
        block, make_store(store.buffer, store.indices, float_imm(1.0, DType::F32)));
  });
  EXPECT_EQ(failure_reason(odd_start, "split_k_update(O_sum_acc, n, splits=2)"),
            "state L starts at 1.0f before loop n_o, not at the identity of its add; the "
            "partial results could not be merged");
}

}  // namespace
}  // namespace nautilus::sched
