// Rule 8 of the MA lowering: a row copied once (cache_read(..., shared, at=r, readers=all)) is a
// shared allocation of the row kernel, filled by cp.async where its rows are 16-byte aligned and
// by ld.global + st.shared elsewhere; every stage's interpreter reproduces the float64
// reference at ragged row lengths; rows past the CTA's shared memory are refused, or, with
// tail=global, keep their leading tiles on chip and read the rest from global memory.
#include <gtest/gtest.h>

#include "core/matile/printer.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::compile_scheduled;

// log_softmax (bench/variants/log_softmax.nt) as the search schedules it, the row on chip.
const char* kLogSoftmax =
    "let R = 8192, C = 32000\n"
    "input X[R, C] : bf16\n"
    "Mx[r]  = max(c) X[r, c]\n"
    "Lse[r] = log(sum(c) exp(X[r, c] - Mx[r]))\n"
    "output Y[r, c] : f32 = X[r, c] - Mx[r] - Lse[r]\n";

const std::vector<std::string> kRowOnChip = {
    "rolling_update(Lse_sum, c, tile=2048)", "reverse_compute_at(Lse, Lse_sum_init, r)",
    "reverse_compute_at(Y, Mx_init, r)",     "bind(Lse_sum, r=grid.x)",
    "tile(Y, c=2048)",                       "cache_read(Mx, X, shared, at=r, readers=all)",
    "tile(X_shared, c=2048)"};

driver::Compilation compile_log_softmax(const std::vector<std::string>& sizes,
                                        driver::Stage stage = driver::Stage::MATile,
                                        std::vector<std::string> decisions = kRowOnChip) {
  driver::CompileOptions options;
  options.last_stage = stage;
  options.matile.arch = "sm_90a";
  return compile_scheduled(std::make_shared<SourceFile>("log_softmax.nt", kLogSoftmax), decisions,
                           sizes, options);
}

std::string ma_text(const driver::Compilation& compilation) {
  return matile::print_module(*compilation.ma_module);
}

TEST(RowBuffer, AlignedRowsAreCopiedOnceByCpAsyncAndReadFromSharedMemory) {
  const driver::Compilation compilation = compile_log_softmax({"R=3", "C=4096"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error;
  const std::string text = ma_text(compilation);
  EXPECT_NE(text.find("shared X_shared : bf16[2048] Sw<0,0,0> o 2048:1 stages 2"), std::string::npos) << text;
  EXPECT_NE(text.find("cp.async X_shared[%c_o][0] <- X[%r, %3 + i0]"), std::string::npos) << text;
  EXPECT_NE(text.find("ld.shared X_shared"), std::string::npos) << text;
  // X is read from global memory by the copy alone, and X_shared is no global parameter.
  EXPECT_EQ(text.find("global_load X"), std::string::npos) << text;
  EXPECT_EQ(text.find("kernel Y(X, Y, X_shared)"), std::string::npos) << text;
  EXPECT_EQ(text.find("st.shared X_shared"), std::string::npos) << text;
  // The readers wait for the copies once, before the statistics loop.
  const size_t wait = text.find("cp.async.wait_group 0");
  ASSERT_NE(wait, std::string::npos) << text;
  EXPECT_LT(wait, text.find("ld.shared X_shared")) << text;
}

TEST(RowBuffer, UnalignedRowsGoThroughRegisters) {
  // 4100 bf16 = 8200 bytes per row: rows are not 16-byte aligned, cp.async cannot copy them.
  const driver::Compilation compilation = compile_log_softmax({"R=3", "C=4100"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error;
  const std::string text = ma_text(compilation);
  EXPECT_NE(text.find("stages 3"), std::string::npos) << text;
  EXPECT_NE(text.find("st.shared X_shared[%c_o][0]"), std::string::npos) << text;
  EXPECT_EQ(text.find("cp.async X_shared"), std::string::npos) << text;
}

TEST(RowBuffer, EveryStageMatchesTheReferenceAtRaggedRowLengths) {
  // Multiples of the tile, of the 16-byte vector only, of neither (the suite's validation 8003),
  // a row shorter than one tile, and tails of 1 and 7 elements past a vector.
  for (const char* columns : {"C=4096", "C=4104", "C=8003", "C=1000", "C=2049", "C=6151"}) {
    for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
      const driver::Compilation compilation = compile_log_softmax({"R=3", columns}, stage);
      ASSERT_TRUE(compilation.ok()) << columns << ": " << compilation.schedule_error;
      for (uint64_t seed : {0, 7}) {
        testing::expect_stage_matches_reference(compilation, stage, seed,
                                                std::string(columns) + " stage " +
                                                    std::to_string(static_cast<int>(stage)));
      }
    }
  }
}

TEST(RowBuffer, ACopyAndReadersOfOtherWidthsAreRefusedNotKeptInGlobalMemory) {
  // Without tile(X_shared, ...) the copy writes the whole 4096-element row at once while the
  // readers read 2048 at a time. Such a buffer used to stay in global memory, one copy for all
  // CTAs, which raced on the GPU.
  std::vector<std::string> decisions = kRowOnChip;
  decisions.pop_back();
  const driver::Compilation compilation = compile_log_softmax({"R=3", "C=4096"}, driver::Stage::MATile, decisions);
  EXPECT_FALSE(compilation.ok());
  EXPECT_NE(compilation.schedule_error.find("the on-chip buffer X_shared (shared) cannot be placed in shared "
                                            "memory: it is read in tiles of bf16[2048] and elsewhere in "
                                            "tiles of 4096 elements"),
            std::string::npos)
      << compilation.schedule_error;
}

TEST(RowBuffer, ARowPastTheSharedMemoryIsRefused) {
  // softmax_temperature's 128256-wide rows: 256 KB of bf16, more than a CTA's 227 KB.
  const driver::Compilation compilation = compile_log_softmax({"R=2", "C=128256"});
  EXPECT_FALSE(compilation.ok());
  const std::string& messages = compilation.schedule_error;
  EXPECT_NE(messages.find("the on-chip buffer X_shared (128256 bf16 elements, 252 KB in 63 tiles "
                          "of 2048) does not fit the 227 KB of shared memory of a sm_90a CTA"),
            std::string::npos)
      << messages;
  EXPECT_NE(messages.find("tail=global"), std::string::npos) << messages;
}

// softmax with a temperature (bench/variants/softmax_temperature.nt): an online max and sum in
// one rolled pass, then the output pass, both reading the row copy.
const char* kSoftmaxTemperature =
    "let R = 512, C = 128256\n"
    "input X[R, C] : bf16\n"
    "Mx[r]   = max(c) X[r, c]\n"
    "E[r, c] = exp((X[r, c] - Mx[r]) / 0.7)\n"
    "output Y[r, c] : bf16 = E[r, c] / sum(c2) E[r, c2]\n";

std::vector<std::string> partial_row_schedule(const std::string& tail = ", tail=global") {
  return {"rolling_update(Y_sum, c2, tile=2048)", "inline(E)", "reverse_compute_at(Y, Mx_init, r)",
          "bind(Y_sum, r=grid.x)", "tile(Y, c=2048)",
          "cache_read(Mx, X, shared, at=r, readers=all" + tail + ")", "tile(X_shared, c=2048)"};
}

// A shared budget of 16 KB (the test's knob): 4 KB tiles, 4 KB kept for scratch, so 3 tiles of
// the row stay on chip and the rest is the tail.
driver::Compilation compile_partial_row(const std::vector<std::string>& sizes,
                                        driver::Stage stage = driver::Stage::MATile,
                                        const std::vector<std::string>& decisions = partial_row_schedule()) {
  driver::CompileOptions options;
  options.last_stage = stage;
  options.matile.arch = "sm_90a";
  options.matile.row_shared_budget = 16 * 1024;
  return compile_scheduled(std::make_shared<SourceFile>("softmax_temperature.nt", kSoftmaxTemperature),
                           decisions, sizes, options);
}

TEST(RowBuffer, ATailPastTheSharedMemoryIsReadFromGlobalMemory) {
  const driver::Compilation compilation = compile_partial_row({"R=3", "C=20000"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error;
  const std::string text = ma_text(compilation);
  // 10 tiles of 2048: 3 on chip, copied by cp.async; the copy loop's tail part copies nothing.
  EXPECT_NE(text.find("shared X_shared : bf16[2048] Sw<0,0,0> o 2048:1 stages 3"), std::string::npos) << text;
  EXPECT_NE(text.find("the first 3 of 10 tiles of 2048"), std::string::npos) << text;
  EXPECT_NE(text.find("for c_o in 0..3 {"), std::string::npos) << text;
  EXPECT_NE(text.find("for c_o_tail in 0..7 {"), std::string::npos) << text;
  // Both passes run their first 3 iterations from shared memory and their last 7 from X.
  EXPECT_NE(text.find("for c2_o in 0..3 iter_args"), std::string::npos) << text;
  EXPECT_NE(text.find("for c2_o_tail in 0..7 iter_args"), std::string::npos) << text;
  EXPECT_NE(text.find("ld.shared X_shared[%c2_o][0]"), std::string::npos) << text;
  EXPECT_NE(text.find("global_load X[%r, "), std::string::npos) << text;
  EXPECT_EQ(text.find("st.shared X_shared"), std::string::npos) << text;
}

TEST(RowBuffer, APartlyResidentRowMatchesTheReferenceAtRaggedRowLengths) {
  // A multiple of the tile, tails of 1 and 7 vectors past a tile, a row whose last tile is
  // partial, one that fits the budget whole (no tail), and one with a single tail tile.
  for (const char* columns : {"C=20480", "C=20488", "C=14392", "C=13000", "C=6000", "C=8000"}) {
    for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
      const driver::Compilation compilation = compile_partial_row({"R=3", columns}, stage);
      ASSERT_TRUE(compilation.ok()) << columns << ": " << compilation.schedule_error;
      for (uint64_t seed : {0, 7}) {
        testing::expect_stage_matches_reference(compilation, stage, seed,
                                                std::string(columns) + " stage " +
                                                    std::to_string(static_cast<int>(stage)));
      }
    }
  }
}

TEST(RowBuffer, ARowThatFitsIsWhollyOnChipWithTailGlobal) {
  const driver::Compilation compilation = compile_partial_row({"R=3", "C=6000"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error;
  const std::string text = ma_text(compilation);
  EXPECT_NE(text.find("stages 3"), std::string::npos) << text;
  EXPECT_EQ(text.find("_tail"), std::string::npos) << text;
  EXPECT_EQ(text.find("global_load X"), std::string::npos) << text;
}

TEST(RowBuffer, APartlyResidentRowNeedsCpAsyncCopies) {
  // 20002 bf16 per row: not 16-byte aligned, so the copy goes through registers and the readers
  // would have no source window for the tail.
  const driver::Compilation compilation = compile_partial_row({"R=3", "C=20002"});
  EXPECT_FALSE(compilation.ok());
  EXPECT_NE(compilation.schedule_error.find("keeps 3 of its 10 tiles on chip (tail=global), but its "
                                            "copy is no cp.async"),
            std::string::npos)
      << compilation.schedule_error;
}

TEST(RowBuffer, TailGlobalNeedsSharedReadersAll) {
  const driver::Compilation without_readers = compile_partial_row(
      {"R=3", "C=20000"}, driver::Stage::MATile,
      {"rolling_update(Y_sum, c2, tile=2048)", "cache_read(Mx, X, shared, at=r, tail=global)"});
  EXPECT_FALSE(without_readers.ok());
  EXPECT_NE(without_readers.schedule_error.find("tail=global needs readers=all"), std::string::npos)
      << without_readers.schedule_error;
  const driver::Compilation registers = compile_partial_row(
      {"R=3", "C=20000"}, driver::Stage::MATile,
      {"cache_read(Mx, X, register, at=r, readers=all, tail=global)"});
  EXPECT_FALSE(registers.ok());
  EXPECT_NE(registers.schedule_error.find("tail=global keeps part of a shared copy on chip"),
            std::string::npos)
      << registers.schedule_error;
}

}  // namespace
}  // namespace nautilus
