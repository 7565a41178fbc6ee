// Row kernels: a row's statistics and its output in one CTA per row. The output steps over the
// row in the tiles the rolled reduction stepped in (a spatial loop over tiles inside the CTA is
// a serial loop of tilize), the search reaches that form from the spec (the consumers follow the
// rolled reduction into its row loop), and the cost model reads the row's second pass from L2.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/matile/ir.h"
#include "core/search/row_on_chip.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

constexpr const char* kLogSoftmax = R"(let R = 8192, C = 32000
input X[R, C] : bf16
Mx[r]  = max(c) X[r, c]
Lse[r] = log(sum(c) exp(X[r, c] - Mx[r]))
output Y[r, c] : f32 = X[r, c] - Mx[r] - Lse[r]
)";

sched::Schedule schedule_of(const std::vector<std::string>& texts) {
  return nautilus::testing::parse_schedule(texts);
}

const std::vector<std::string> kRowKernel = {
    "rolling_update(Lse_sum, c, tile=64)", "reverse_compute_at(Lse, Lse_sum, r)",
    "reverse_compute_at(Y, Lse, r)",       "tile(Y, c=64)",
    "bind(Lse_sum, r=grid.x)"};

// The output's loop over column tiles runs inside the CTA (before, tilize refused the block:
// its index `c_o * 64 + c_i` was a sum of two tile axes). 300 columns: the last tile partial.
TEST(RowKernel, OutputSteppedInTilesAfterTheStatisticsMatchesTheReference) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {"R=3", "C=300"});
  const driver::Compilation compilation = testing::compile(input, schedule_of(kRowKernel));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  ASSERT_TRUE(compilation.ma_module);
  ASSERT_EQ(compilation.ma_module->kernels.size(), 1u);
  for (driver::Stage stage : {driver::Stage::VRTile, driver::Stage::MATile}) {
    testing::expect_stage_matches_reference(compilation, stage, 5, "row kernel");
  }
}

// The same with the reduction's rows in tiles of 2 and rows of 40 columns (a single partial
// step): the output's tile loop is serial inside a CTA of two rows.
TEST(RowKernel, TwoRowsPerCtaAndAShortRowMatchTheReference) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {"R=5", "C=200"});
  const driver::Compilation compilation = testing::compile(
      input, schedule_of({"rolling_update(Lse_sum, c, tile=64)", "tile(Lse_sum, r=2)",
                          "reverse_compute_at(Lse, Lse_sum, r_o)",
                          "reverse_compute_at(Y, Lse, r_o)", "tile(Y, c=64)",
                          "bind(Lse_sum, r_o=grid.x)"}));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  ASSERT_EQ(compilation.ma_module->kernels.size(), 1u);
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 6, "two rows");
}

// At the vocabulary size the search fuses the output into the rolled row reduction (one
// kernel, the output stepped like the reduction); that schedule reproduces the reference at
// small sizes.
TEST(RowKernel, SearchFusesLogSoftmaxIntoOneRowKernel) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  std::string text;
  for (const sched::Decision& d : result.schedule.decisions) text += sched::print_decision(d) + "\n";
  ASSERT_TRUE(result.estimate);
  ASSERT_EQ(result.estimate->kernels.size(), 1u) << text;
  EXPECT_NE(text.find("rolling_update(Lse_sum, c"), std::string::npos) << text;
  EXPECT_NE(text.find("tile(Y, c="), std::string::npos) << text;
  const search::SearchInput small = testing::text_input(kLogSoftmax, {"R=3", "C=5000"});
  const driver::Compilation compilation = testing::compile(small, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 7, "searched");
}

// The row kernel reads each row twice (statistics, then output). With few enough CTAs that
// everything they move at once fits in L2 (128 rows: 128 x 256 KB), only the first read comes
// from DRAM: the model's DRAM bytes are the minimal ones (X once, Y once) while its L2 requests
// count X twice.
TEST(RowKernel, TheSecondPassOverARowIsReadFromL2WhenTheCtasFitIt) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {"R=128", "C=32000"});
  const driver::Compilation compilation = testing::compile(
      input, schedule_of({"rolling_update(Lse_sum, c, tile=2048)",
                          "reverse_compute_at(Lse, Lse_sum, r)", "reverse_compute_at(Y, Lse, r)",
                          "tile(Y, c=2048)", "bind(Lse_sum, r=grid.x)",
                          "launch(Lse_sum, warps=8)"}));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const cost::CostEstimate estimate = testing::h100().estimate(*compilation.ma_module);
  ASSERT_EQ(estimate.kernels.size(), 1u);
  const double x_bytes = 128.0 * 32000 * 2, y_bytes = 128.0 * 32000 * 4;
  // Partial last steps count as full tiles (32768 columns): within 3%.
  EXPECT_NEAR(estimate.kernels[0].global_bytes, x_bytes + y_bytes, 0.03 * (x_bytes + y_bytes));
  EXPECT_GT(estimate.kernels[0].l2_bytes, 2 * x_bytes + y_bytes);
}

// The DRAM bytes the model charges the one-kernel log-softmax (a row's statistics, then its
// output, in one CTA) of R rows of C columns.
double row_kernel_dram_bytes(const std::string& rows, const std::string& columns) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {"R=" + rows, "C=" + columns});
  const driver::Compilation compilation = testing::compile(
      input, schedule_of({"rolling_update(Lse_sum, c, tile=2048)",
                          "reverse_compute_at(Lse, Lse_sum, r)", "reverse_compute_at(Y, Lse, r)",
                          "tile(Y, c=2048)", "bind(Lse_sum, r=grid.x)",
                          "launch(Lse_sum, warps=8)"}));
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  if (!compilation.ok()) return 0.0;
  const cost::CostEstimate estimate = testing::h100().estimate(*compilation.ma_module);
  EXPECT_EQ(estimate.kernels.size(), 1u);
  return estimate.kernels.empty() ? 0.0 : estimate.kernels[0].global_bytes;
}

// At 8192 rows the CTAs running at once move (statistics, output rows of f32) far more than L2
// holds: most of the second pass comes from DRAM again, as measured on the H100 (DRAM read
// 1.05 GB for a 0.52 GB input).
TEST(RowKernel, TheSecondPassComesFromDramWhenTheCtasMoveMoreThanL2) {
  const double x_bytes = 8192.0 * 32000 * 2, y_bytes = 8192.0 * 32000 * 4;
  EXPECT_GT(row_kernel_dram_bytes("8192", "32000"), x_bytes + y_bytes + 0.5 * x_bytes);
}

// Rows too long for the CTAs running at once to keep in L2 are read twice from DRAM in the
// share that does not fit.
TEST(RowKernel, RowsThatDoNotFitL2TogetherAreReadAgainFromDram) {
  const double x_bytes = 8192.0 * 1048576 * 2, y_bytes = 8192.0 * 1048576 * 4;
  EXPECT_GT(row_kernel_dram_bytes("8192", "1048576"), x_bytes + y_bytes + 0.5 * x_bytes);
}

// The search keeps the row on chip (cache_read ... readers=all, the copy stepped like the
// passes): the model charges X once from DRAM at 8192 rows, where the two-pass row kernel reads
// most of it twice; and the searched schedule reproduces the reference at a ragged row length.
TEST(RowKernel, SearchKeepsTheRowOnChipAndTheModelReadsItOnce) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = sched::print_decisions(result.schedule.decisions, "\n");
  EXPECT_NE(text.find("readers=all)"), std::string::npos) << text;
  EXPECT_NE(text.find("tile(X_shared, c=2048)"), std::string::npos) << text;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const cost::CostEstimate estimate = testing::h100().estimate(*compilation.ma_module);
  ASSERT_EQ(estimate.kernels.size(), 1u);
  const double x_bytes = 8192.0 * 32000 * 2, y_bytes = 8192.0 * 32000 * 4;
  EXPECT_NEAR(estimate.kernels[0].global_bytes, x_bytes + y_bytes, 0.03 * (x_bytes + y_bytes));
  EXPECT_LT(estimate.kernels[0].global_bytes, row_kernel_dram_bytes("8192", "32000"));
  const search::SearchInput ragged = testing::text_input(kLogSoftmax, {"R=3", "C=8003"});
  const driver::Compilation small = testing::compile(ragged, result.schedule);
  ASSERT_TRUE(small.ok()) << small.schedule_error << small.internal_error;
  testing::expect_stage_matches_reference(small, driver::Stage::MATile, 9, "row on chip");
}

// Rows wider than a CTA's shared memory (softmax_temperature's 128256 bf16: 256 KB) are offered
// the form with tail=global (the leading tiles on chip, the rest read by every pass from
// memory); with one CTA per SM the model finds it slower than the row read from memory (measured
// on the H100: 220 us against 154 us), and the search returns the latter.
TEST(RowKernel, ARowWiderThanSharedMemoryStaysInMemory) {
  const search::SearchInput input = testing::text_input(kLogSoftmax, {"R=512", "C=128256"});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = sched::print_decisions(result.schedule.decisions, "\n");
  EXPECT_EQ(text.find("readers=all"), std::string::npos) << text;
}

constexpr const char* kSoftmaxTemperature = R"(let R = 512, C = 128256
input X[R, C] : bf16
Mx[r]   = max(c) X[r, c]
E[r, c] = exp((X[r, c] - Mx[r]) / 0.7)
output Y[r, c] : bf16 = E[r, c] / sum(c2) E[r, c2]
)";

// The search's completion offers the row on chip for a 64 KB row as is and for a 256 KB row
// with tail=global (the MA lowering keeps what fits).
TEST(RowKernel, ARowPastTheSharedMemoryIsOfferedWithItsTailInGlobalMemory) {
  const std::vector<std::string> row_kernel = {
      "rolling_update(Y_sum, c2, tile=2048)", "inline(E)", "reverse_compute_at(Y, Mx_init, r)",
      "bind(Y_sum, r=grid.x)", "tile(Y, c=2048)"};
  for (const char* columns : {"C=128256", "C=32000"}) {
    const search::SearchInput input = testing::text_input(kSoftmaxTemperature, {"R=512", columns});
    const driver::Compilation compilation =
        testing::compile(input, schedule_of(row_kernel), driver::Stage::Scalar);
    ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
    const std::vector<std::vector<sched::Decision>> forms =
        search::row_on_chip_forms(compilation.program);
    ASSERT_EQ(forms.size(), 1u) << columns;
    const std::string cache = sched::print_decision(forms[0][0]);
    EXPECT_NE(cache.find("readers=all"), std::string::npos) << cache;
    EXPECT_EQ(cache.find("tail=global") != std::string::npos, std::string(columns) == "C=128256")
        << columns << ": " << cache;
  }
}

// The partly resident row (55 of 63 tiles of 2048 on chip, the last 15616 columns read by both
// passes): the model requests the tail twice from L2 on top of X and Y once, and takes the
// second read from L2 (DRAM: X and Y once; ncu on the H100: 142 MB read, X is 131 MB).
TEST(RowKernel, TheModelChargesThePartlyResidentRowsTailTwice) {
  const search::SearchInput input = testing::text_input(kSoftmaxTemperature, {});
  const driver::Compilation compilation = testing::compile(
      input, schedule_of({"rolling_update(Y_sum, c2, tile=2048)", "inline(E)",
                          "reverse_compute_at(Y, Mx_init, r)", "bind(Y_sum, r=grid.x)",
                          "tile(Y, c=2048)",
                          "cache_read(Mx, X, shared, at=r, readers=all, tail=global)",
                          "tile(X_shared, c=2048)"}));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const cost::CostEstimate estimate = testing::h100().estimate(*compilation.ma_module);
  ASSERT_EQ(estimate.kernels.size(), 1u);
  const double x_bytes = 512.0 * 128256 * 2, y_bytes = x_bytes;
  const double tail_bytes = 512.0 * (128256 - 55 * 2048) * 2;
  EXPECT_GT(estimate.kernels[0].l2_bytes, 0.99 * (x_bytes + y_bytes + tail_bytes));
  EXPECT_NEAR(estimate.kernels[0].global_bytes, x_bytes + y_bytes, 0.03 * (x_bytes + y_bytes));
}

constexpr const char* kResidualRmsNorm = R"(let T = 8192, H = 4096
input X[T, H] : bf16
input Res[T, H] : bf16
input W[H] : bf16
output Hs[t, h] : bf16 = X[t, h] + Res[t, h]
R[t] = rsqrt((sum(h) Hs[t, h] * Hs[t, h]) / H + 0.00001)
output Y[t, h] : bf16 = Hs[t, h] * R[t] * W[h]
)";

// A reduction over the rows of an element-wise output (a residual sum, then its RMS norm): the
// search moves the reduction and the normalized output into the sum's row loop (one kernel, the
// row read once and held in registers) instead of writing the sum and reading it back twice
// (measured on the H100: 140.6 -> 90.9 us). The schedule reproduces the reference.
TEST(RowKernel, SearchKeepsAResidualRowForItsNormInOneKernel) {
  const search::SearchInput input = testing::text_input(kResidualRmsNorm, {});
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  std::string text;
  for (const sched::Decision& d : result.schedule.decisions) text += sched::print_decision(d) + "\n";
  ASSERT_TRUE(result.estimate);
  EXPECT_EQ(result.estimate->kernels.size(), 1u) << text;
  EXPECT_NE(text.find("reverse_compute_at(R_sum, Hs, t)"), std::string::npos) << text;
  const search::SearchInput small = testing::text_input(kResidualRmsNorm, {"T=5", "H=1000"});
  const driver::Compilation compilation = testing::compile(small, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 8, "residual");
}

}  // namespace
}  // namespace nautilus
