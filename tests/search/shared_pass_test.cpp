// Reductions that share a pass: a sum over the same axis and the same data as the reductions
// rolling_update fuses joins their loop although it reads none of them (cross-entropy's target
// dot product beside its log-sum-exp), so the data is read once. The fused programs match the
// float64 reference at every stage on random inputs, sums that share nothing stay apart, and
// the search reaches the one-kernel form.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/matile/ir.h"
#include "core/scalar/printer.h"
#include "core/sched/rolling_update.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

// f32 inputs: tolerances tight enough to catch a term missed or counted twice.
constexpr const char* kCrossEntropy = R"(let R = 8192, C = 32000
input X[R, C] : f32
input T[R, C] : f32
Mx[r] = max(c) X[r, c]
output Loss[r] : f32 = Mx[r] + log(sum(c) exp(X[r, c] - Mx[r])) - sum(c) T[r, c] * X[r, c]
)";

// The same at its bench precision (bench/variants/cross_entropy_onehot.nt).
constexpr const char* kCrossEntropyBf16 = R"(let R = 8192, C = 32000
input X[R, C] : bf16
input T[R, C] : bf16
Mx[r] = max(c) X[r, c]
output Loss[r] : f32 = Mx[r] + log(sum(c) exp(X[r, c] - Mx[r])) - sum(c) T[r, c] * X[r, c]
)";

// Two plain sums over one row (sum and sum of squares, the statistics of a one-pass variance).
constexpr const char* kMoments = R"(let R = 64, C = 1000
input X[R, C] : f32
S1[r] = sum(c) X[r, c]
output V[r] : f32 = (sum(c) X[r, c] * X[r, c]) / C - S1[r] * S1[r] / (C * C)
)";

sched::Schedule schedule_of(const std::vector<std::string>& texts) {
  return nautilus::testing::parse_schedule(texts);
}

std::string printed(const sched::Schedule& schedule) {
  std::string text;
  for (const sched::Decision& d : schedule.decisions) text += sched::print_decision(d) + "\n";
  return text;
}

// Top-level loop nests of a scalar program.
size_t nest_count(const scalar::Program& program) {
  const scalar::Seq* seq = program.body->as<scalar::Seq>();
  return seq ? seq->stmts.size() : 1;
}

// rolling_update of the log-sum-exp takes the target dot product into its loop: two nests (the
// fused loop and the loss) instead of three, with a ragged last step (3001 = 11 x 256 + 185).
TEST(SharedPass, TheDotProductJoinsTheLogSumExpLoop) {
  const search::SearchInput input = testing::text_input(kCrossEntropy, {"R=5", "C=3001"});
  const sched::Schedule schedule = schedule_of({"rolling_update(Loss_sum_1, c, tile=256)",
                                                "bind(Loss_sum_1, r=grid.x)",
                                                "reverse_compute_at(Loss, Loss_sum_init, r)"});
  const driver::Compilation compilation = testing::compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string text = scalar::print_program(*compilation.program);
  EXPECT_EQ(nest_count(*compilation.program), 1u) << text;
  // The dot product is updated in the loop over column tiles, beside the running max.
  const size_t step = text.find("for c_o in 0..12");
  const size_t dot = text.find("block Loss_sum(r = r; reduce c = c_o * 256 + c_i)");
  ASSERT_NE(step, std::string::npos) << text;
  ASSERT_NE(dot, std::string::npos) << text;
  EXPECT_LT(step, dot) << text;
  ASSERT_TRUE(compilation.ma_module);
  EXPECT_EQ(compilation.ma_module->kernels.size(), 1u);
  for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
    for (uint64_t seed : {1, 9}) {
      testing::expect_stage_matches_reference(compilation, stage, seed, "cross-entropy, one pass");
    }
  }
}

// The joined sum is a plain one (no repair): split into parallel parts it combines like any sum.
TEST(SharedPass, TheJoinedSumSplitsWithTheRollingLoop) {
  const search::SearchInput input = testing::text_input(kCrossEntropy, {"R=3", "C=2050"});
  const driver::Compilation compilation = testing::compile(
      input, schedule_of({"rolling_update(Loss_sum_1, c, tile=128)",
                          "split_k_update(Loss_sum_1, c, splits=4)", "bind(Loss_sum_1, r=grid.x)"}));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
    testing::expect_stage_matches_reference(compilation, stage, 3, "cross-entropy, split");
  }
}

// Two sums that read nothing but the same row fuse into one loop although neither depends on
// the other (before, rolling_update refused: "nothing to fuse").
TEST(SharedPass, TwoPlainSumsOverOneRowShareTheirLoop) {
  const search::SearchInput input = testing::text_input(kMoments, {"R=4", "C=300"});
  const driver::Compilation compilation = testing::compile(
      input, schedule_of({"rolling_update(V_sum, c, tile=64)", "bind(V_sum, r=grid.x)"}));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string text = scalar::print_program(*compilation.program);
  EXPECT_EQ(text.find("for c in 0..300"), std::string::npos) << "a sum kept its own pass:\n" << text;
  for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
    testing::expect_stage_matches_reference(compilation, stage, 2, "moments");
  }
}

// A sum over the axis that shares no data with the fused reductions, or that reads an
// intermediate the fused loop does not, keeps its own nest.
TEST(SharedPass, SumsThatShareNoDataStayApart) {
  const char* kOtherData = R"(let R = 4, C = 40
input X[R, C] : f32
input T[R, C] : f32
Mx[r] = max(c) X[r, c]
output Loss[r] : f32 = Mx[r] + log(sum(c) exp(X[r, c] - Mx[r])) - sum(c) T[r, c]
)";
  const char* kOtherIntermediate = R"(let R = 4, C = 40
input X[R, C] : f32
input T[R, C] : f32
Q[r, c] = T[r, c] * 2.0
Mx[r] = max(c) X[r, c]
output Loss[r] : f32 = Mx[r] + log(sum(c) exp(X[r, c] - Mx[r])) - sum(c) Q[r, c] * X[r, c]
)";
  for (const char* text : {kOtherData, kOtherIntermediate}) {
    const driver::Compilation plain = testing::compile_text(text);
    ASSERT_TRUE(plain.ok()) << plain.internal_error;
    const sched::ApplyResult fused = sched::apply_rolling_update(
        plain.program, sched::Decision{"rolling_update", "Loss_sum_1", {{"", "c"}}});
    ASSERT_TRUE(fused.ok()) << fused.reason;
    const std::string program = scalar::print_program(*fused.program);
    // Loss_sum keeps its own loop over the whole row.
    EXPECT_NE(program.find("block Loss_sum(r = r; reduce c = c)"), std::string::npos) << program;
    EXPECT_EQ(program.find("Loss_sum_init"), std::string::npos) << program;
  }
}

// At the bench size the search computes the loss in one kernel that reads X and T once; the
// schedule it found reproduces the reference at small sizes.
TEST(SharedPass, SearchComputesCrossEntropyInOnePassOverTheRows) {
  const search::SearchInput input = testing::text_input(kCrossEntropyBf16, {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = printed(result.schedule);
  ASSERT_TRUE(result.estimate);
  ASSERT_EQ(result.estimate->kernels.size(), 1u) << text;
  EXPECT_NE(text.find("rolling_update(Loss_sum_1, c"), std::string::npos) << text;
  // X and T once, the loss once: within 5% of the minimal bytes (2 x 8192 x 32000 x 2 + 8192 x 4).
  const double minimal = 2.0 * 8192 * 32000 * 2 + 8192 * 4;
  EXPECT_LT(result.estimate->kernels[0].global_bytes, 1.05 * minimal) << text;
  const search::SearchInput small = testing::text_input(kCrossEntropyBf16, {"R=3", "C=5000"});
  const driver::Compilation compilation = testing::compile(small, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 7, "searched");
}

}  // namespace
}  // namespace nautilus
