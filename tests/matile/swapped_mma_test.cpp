// The swapped product of a short A (ir.h Mma's `swapped`, layouts.h mma_swapped_c_layout): a dot
// of 1, 2, 4 or 8 rows computed as (B^T A^T)^T, B's n8 atom pairs as the instruction's 16 rows.
// Every form is run by the MA interpreter, which executes each instruction from the lanes'
// registers as the hardware does, against the float64 reference at sizes that are no tile
// multiples; launch's mma= pins the form.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/matile/ir.h"
#include "core/matile/printer.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::expect_stage_matches_reference;

int count_mmas(const driver::Compilation& compilation, bool swapped) {
  const std::string text = print_module(*compilation.ma_module);
  const std::string needle = swapped ? "mma.m16n8k16.swapped " : "mma.m16n8k16 ";
  int count = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

std::vector<std::string> gemm_schedule(const std::string& rows, const std::string& launch_extra) {
  return {"tile(C_sum, m=" + rows + ", n=64, k=32)", "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)", "launch(C_sum, warps=4, stages=2" + launch_extra + ")"};
}

TEST(SwappedMma, ShortGemmProductsRunSwappedAndMatchTheReferenceAsTheDirectFormDoes) {
  // A bf16 GEMM of 1 to 8 rows a tile, B through cp.async and ldmatrix: pinned swapped, and
  // direct by default (auto swaps only a B loaded into its fragments). 80 columns and 96 = 3 k
  // tiles: a partial column tile.
  for (const std::string rows : {"1", "2", "4", "8"}) {
    SCOPED_TRACE("M=" + rows);
    const std::vector<std::string> sizes = {"M=" + std::to_string(2 * std::stoi(rows) + 1), "N=80", "K=96"};
    const driver::Compilation swapped =
        compile_for_arch("assets/specs/gemm.nt", gemm_schedule(rows, ", mma=swapped"), sizes, "sm_80");
    const driver::Compilation direct =
        compile_for_arch("assets/specs/gemm.nt", gemm_schedule(rows, ""), sizes, "sm_80");
    ASSERT_TRUE(swapped.ma_module) << swapped.schedule_error << swapped.internal_error;
    ASSERT_TRUE(direct.ma_module) << direct.schedule_error << direct.internal_error;
    EXPECT_GT(count_mmas(swapped, true), 0);
    EXPECT_EQ(count_mmas(swapped, false), 0);
    EXPECT_EQ(count_mmas(direct, true), 0);
    EXPECT_GT(count_mmas(direct, false), 0);
    EXPECT_NE(print_module(*swapped.ma_module).find("mma_c_swapped warps(1,4)"), std::string::npos);
    expect_stage_matches_reference(swapped, driver::Stage::MATile, 41, "swapped ");
    expect_stage_matches_reference(direct, driver::Stage::MATile, 42, "direct ");
    const std::string cuda = nautilus::testing::emitted_cuda(swapped);
    EXPECT_NE(cuda.find("mma_m16n8k16_swapped(&"), std::string::npos);
  }
}

TEST(SwappedMma, WidenedInt8WeightsReadElementWiseRunSwappedWhenPinned) {
  // int8 weights widened from shared memory a byte per lane (reads=elements: the columns are not
  // interleaved), 4 activation rows and a per-column group scale: pinned swapped (auto keeps such
  // a B direct), against the reference.
  const std::vector<std::string> schedule = {"tile(Y_sum, m=4, n=64, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
                                             "bind(Y_sum, m_o=grid.y, n_o=grid.x)",
                                             "launch(Y_sum, warps=4, stages=3, reads=elements, mma=swapped)"};
  const driver::Compilation compilation = compile_for_arch("assets/specs/int8_weight_gemm.nt", schedule,
                                                           {"M=5", "N=80", "K=384", "G=128", "KG=3"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  EXPECT_GT(count_mmas(compilation, true), 0);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 43, "swapped int8 ");
}

TEST(SwappedMma, PinnedOnAProductThatASoftmaxReadsItStillMatchesTheReference) {
  // A decode step's 8-head group: S = Q K^T feeds the row max and sum and P V reads V by
  // ldmatrix, so the default keeps both direct. Pinned swapped, the reductions run over the
  // swapped accumulator's layout and P is converted to the next product's operand layout; the
  // result is the same.
  const std::vector<std::string> schedule = {"rolling_update(O_sum, n, tile=64)", "compute_at(S, Mx, n_o)",
                                             "tile(O_sum_acc, h=8)", "reverse_compute_at(O, O_sum, h_o)",
                                             "bind(O_sum_acc, b=grid.y, h_o=grid.x)"};
  const std::vector<std::string> sizes = {"B=1", "H=16", "KH=2", "N=200", "D=64"};
  std::vector<std::string> swapped = schedule, automatic = schedule;
  swapped.push_back("launch(O_sum_acc, warps=4, stages=2, mma=swapped)");
  automatic.push_back("launch(O_sum_acc, warps=4, stages=2)");
  const driver::Compilation pinned = compile_for_arch("bench/variants/gqa_decode.nt", swapped, sizes, "sm_80");
  const driver::Compilation plain = compile_for_arch("bench/variants/gqa_decode.nt", automatic, sizes, "sm_80");
  ASSERT_TRUE(pinned.ma_module) << pinned.schedule_error << pinned.internal_error;
  ASSERT_TRUE(plain.ma_module) << plain.schedule_error << plain.internal_error;
  EXPECT_EQ(count_mmas(plain, true), 0) << "by default both products stay direct";
  EXPECT_EQ(count_mmas(pinned, false), 0);
  expect_stage_matches_reference(pinned, driver::Stage::MATile, 44, "swapped softmax ");
  expect_stage_matches_reference(plain, driver::Stage::MATile, 45, "direct softmax ");
}

TEST(SwappedMma, PinnedWhereItCannotApplyLeavesTheDirectFormAndSaysWhy) {
  // int8 weights read grouped: B's columns interleave (4 n8 atoms a warp), which the swapped
  // instruction's rows cannot follow. The note names what is missing.
  const std::vector<std::string> schedule = {"tile(Y_sum, m=4, n=128, k=128)", "reverse_compute_at(Y, Y_sum, n_o)",
                                             "bind(Y_sum, m_o=grid.y, n_o=grid.x)",
                                             "launch(Y_sum, warps=4, stages=3, reads=grouped, mma=swapped)"};
  const driver::Compilation compilation = compile_for_arch("assets/specs/int8_weight_gemm.nt", schedule,
                                                           {"M=4", "N=160", "K=256", "G=128", "KG=2"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  EXPECT_EQ(count_mmas(compilation, true), 0);
  bool noted = false;
  for (const std::string& note : compilation.ma_module->kernels.at(0)->notes) {
    noted |= note.find("not swapped: it needs 1, 2, 4 or 8 rows, 16 columns a warp") != std::string::npos;
  }
  EXPECT_TRUE(noted);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 46, "direct ");
}

}  // namespace
}  // namespace nautilus::matile
