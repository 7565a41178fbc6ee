// Rule 8 of the MA lowering: a row copied once (cache_read(..., shared, at=r, readers=all)) is a
// shared allocation of the row kernel, filled by cp.async where its rows are 16-byte aligned and
// by ld.global + st.shared elsewhere; every stage's interpreter reproduces the float64
// reference at ragged row lengths; rows past the CTA's shared memory are refused.
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

TEST(RowBuffer, ARowPastTheSharedMemoryIsRefused) {
  // softmax_temperature's 128256-wide rows: 256 KB of bf16, more than a CTA's 227 KB.
  const driver::Compilation compilation = compile_log_softmax({"R=2", "C=128256"});
  EXPECT_FALSE(compilation.ok());
  const std::string& messages = compilation.schedule_error;
  EXPECT_NE(messages.find("the on-chip buffer X_shared (128256 bf16 elements, 252 KB in 63 tiles "
                          "of 2048) does not fit the 227 KB of shared memory of a sm_90a CTA"),
            std::string::npos)
      << messages;
}

}  // namespace
}  // namespace nautilus
