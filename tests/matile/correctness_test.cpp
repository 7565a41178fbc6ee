// The hand-built VR kernels (tests/vrtile/kernels.h) lowered to MA tile IR and run by the MA
// interpreter -- thread by thread, through shared memory, cp.async groups and fragment layouts --
// against the VR interpreter and the float64 reference on random inputs, at sizes that are and
// are not multiples of the tiles. GEMM must match VR bit for bit on every path (mma and FMA add
// the same products in the same k order); softmax and attention reassociate their row sums
// (shuffle trees), so they are held to the dtype's tolerance.
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/matile/printer.h"
#include "core/rewrite/operand_narrowing.h"
#include "tests/common/spec_test_util.h"
#include "tests/matile/matile_test_util.h"
#include "tests/vrtile/kernels.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_asset;
using nautilus::testing::compile_text;
using nautilus::testing::f32_variant;
using testing::check_lowering;
using testing::Comparison;
using testing::lower_or_fail;

uint64_t count(const Comparison& c, const std::string& instruction) {
  auto found = c.ma.instructions.find(instruction);
  return found == c.ma.instructions.end() ? 0 : found->second;
}

// ---- GEMM ---------------------------------------------------------------------------------

struct GemmCase {
  std::vector<std::string> sizes;
  int64_t bm, bn, bk;
  int warps, stages;
  bool mma, async_a, async_b;  // the paths the lowering must choose
};

void PrintTo(const GemmCase& c, std::ostream* out) {
  for (const std::string& s : c.sizes) *out << s << " ";
  *out << "tiles " << c.bm << "x" << c.bn << "x" << c.bk << " warps " << c.warps << " stages "
       << c.stages;
}

class GemmLowering : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmLowering, MatchesVrBitForBit) {
  const GemmCase& c = GetParam();
  const driver::Compilation compilation = compile_asset("gemm", c.sizes);
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr = vrtile::test_kernels::tiled_gemm(*compilation.program, c.bm, c.bn, c.bk);
  LowerOptions options;
  options.warps = c.warps;
  options.stages = c.stages;
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  const Comparison result = check_lowering(compilation, vr, *ma, "C", /*exact=*/true);
  EXPECT_EQ(count(result, "mma.m16n8k16") > 0, c.mma);
  EXPECT_EQ(count(result, "fma") > 0, !c.mma);
  EXPECT_EQ(count(result, "cp.async") > 0, c.async_a || c.async_b);
  const std::string text = print_module(*ma);
  EXPECT_EQ(text.find("cp.async a_smem") != std::string::npos, c.async_a) << text;
  EXPECT_EQ(text.find("cp.async w_smem") != std::string::npos, c.async_b) << text;
  if (c.mma && c.async_a && c.stages >= 2) {
    EXPECT_NE(text.find("pipeline " + std::to_string(c.stages)), std::string::npos);
    EXPECT_NE(text.find("cp.async.wait_group " + std::to_string(c.stages - 2)), std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, GemmLowering,
    ::testing::Values(
        // mma.sync, both operands by cp.async, double-buffered; M, K tails
        GemmCase{{"M=40", "N=48", "K=40"}, 32, 32, 16, 2, 2, true, true, true},
        // four warps, three stages, two k steps per tile, no tails
        GemmCase{{"M=64", "N=64", "K=96"}, 64, 64, 32, 4, 3, true, true, true},
        // one stage: copy, wait and compute in the same iteration
        GemmCase{{"M=40", "N=48", "K=40"}, 32, 32, 16, 2, 1, true, true, true},
        // N = 10: B's rows are not 16-byte multiples, so B is loaded into its fragments directly
        GemmCase{{"M=13", "N=10", "K=24"}, 16, 16, 16, 1, 2, true, true, false},
        // warps along N (BM = 16 with 2 warps): warp grid (1, 2)
        GemmCase{{"M=16", "N=64", "K=32"}, 16, 64, 16, 2, 2, true, true, true},
        // a 32 x 8 tile on 2 warps: warp grid (2, 1), one n8 atom each, B loaded straight
        // into its fragments (rows of 9 elements take no cp.async)
        GemmCase{{"M=5", "N=7", "K=9"}, 32, 8, 16, 2, 2, true, false, false},
        // tiles too small for the warp grid (16 x 16 on 2 or 4 warps): the FMA path
        GemmCase{{"M=5", "N=7", "K=9"}, 16, 16, 16, 2, 2, false, false, false},
        GemmCase{{"M=5", "N=7", "K=9"}, 16, 16, 16, 4, 2, false, false, false}));

// A router's gate logits over 8 experts (bench/variants/router_softmax_combine.nt, split 16 ways
// along k as the search splits it): a 64 x 8 product on 4 warps takes one n8 atom per warp, B
// loaded straight into its fragments, not the CUDA-core dot. Measured on the H200 (2026-11-29,
// bench/RESULTS.md) the gate kernel ran 12.1 us with mma.sync against 24.4 us on the FMA dot.
TEST(GemmLowering, ARoutersEightExpertsTakeOneN8AtomPerWarp) {
  const std::vector<std::string> schedule = {
      "rolling_update(Y_sum, e, tile=8)", "split_k_update(G, k, splits=4)",
      "split_k_update(G_part, k, splits=4)", "bind(Y_sum_acc, t=grid.x)",
      "reverse_compute_at(Y, Y_sum, t)", "compute_at(G, Mx, e_o)", "compute_at(G_part, G, e_o)",
      "tile(G_part_part, t=64)", "bind(G_part_part, k_s2=grid.z, k_s=grid.y, t_o=grid.x)"};
  const driver::Compilation compilation = nautilus::testing::compile_for_arch(
      "bench/variants/router_softmax_combine.nt", schedule, {"T=200", "H=2048"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string text = print_module(*compilation.ma_module);
  EXPECT_NE(text.find("mma.m16n8k16"), std::string::npos) << text;
  EXPECT_EQ(text.find("fma_dot"), std::string::npos) << text;
  nautilus::testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 3, "router gate on mma");
}

TEST(GemmLowering, FmaPathWhenMmaIsDisabled) {
  const driver::Compilation compilation = compile_asset("gemm", {"M=40", "N=24", "K=40"});
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr = vrtile::test_kernels::tiled_gemm(*compilation.program, 16, 16, 16);
  LowerOptions options;
  options.warps = 1;
  options.use_mma = false;
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  const Comparison result = check_lowering(compilation, vr, *ma, "C", /*exact=*/true);
  EXPECT_EQ(count(result, "mma.m16n8k16"), 0u);
  EXPECT_GT(count(result, "fma"), 0u);
}

TEST(GemmLowering, SeveralSeedsAndSm90a) {
  const driver::Compilation compilation = compile_asset("gemm", {"M=33", "N=32", "K=48"});
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr = vrtile::test_kernels::tiled_gemm(*compilation.program, 32, 32, 16);
  LowerOptions options;
  options.warps = 2;
  options.arch = "sm_90a";
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  EXPECT_EQ(ma->arch, "sm_90a");
  for (int seed : {1, 2, 3}) check_lowering(compilation, vr, *ma, "C", /*exact=*/true, seed);
}

// ---- Softmax (no dots: blocked layouts, shuffle and cross-warp reductions) ----------------

struct SoftmaxCase {
  std::vector<std::string> sizes;
  int64_t br, bc;
  int warps;
  bool f32;
};

void PrintTo(const SoftmaxCase& c, std::ostream* out) {
  for (const std::string& s : c.sizes) *out << s << " ";
  *out << "tiles " << c.br << "x" << c.bc << " warps " << c.warps << (c.f32 ? " f32" : "");
}

class SoftmaxLowering : public ::testing::TestWithParam<SoftmaxCase> {};

TEST_P(SoftmaxLowering, MatchesTheReference) {
  const SoftmaxCase& c = GetParam();
  const driver::Compilation compilation =
      c.f32 ? compile_text(f32_variant("softmax"), c.sizes) : compile_asset("softmax", c.sizes);
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr = vrtile::test_kernels::online_softmax(*compilation.program, c.br, c.bc);
  LowerOptions options;
  options.warps = c.warps;
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  const Comparison result = check_lowering(compilation, vr, *ma, "Y", /*exact=*/false);
  EXPECT_GT(count(result, "shfl.bfly"), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, SoftmaxLowering,
    ::testing::Values(SoftmaxCase{{"R=7", "C=33"}, 4, 16, 1, false},   // tails on both axes
                      SoftmaxCase{{"R=8", "C=32"}, 4, 8, 2, false},    // no tails
                      SoftmaxCase{{"R=7", "C=33"}, 4, 16, 1, true},    // f32: tight tolerance
                      // rows of 64 over 4 warps: 32 lanes and 2 warps per row, so the row
                      // reductions combine across warps through shared scratch
                      SoftmaxCase{{"R=6", "C=100"}, 2, 64, 4, true}));

TEST(SoftmaxLowering, WideRowsReduceAcrossWarps) {
  const driver::Compilation compilation = compile_asset("softmax", {"R=6", "C=100"});
  ASSERT_TRUE(compilation.ok());
  LowerOptions options;
  options.warps = 4;
  const ModulePtr ma = lower_or_fail(vrtile::test_kernels::online_softmax(*compilation.program, 2, 64), options);
  ASSERT_TRUE(ma);
  EXPECT_NE(print_module(*ma).find("via shared"), std::string::npos);
}

// ---- FlashAttention -----------------------------------------------------------------------

struct AttentionCase {
  std::vector<std::string> sizes;
  int64_t bm, bn;
  int warps;
  bool narrow;  // P rounded to bf16 (rewrite::narrow_dot_operands): P V on mma.sync too
  bool f32;
};

void PrintTo(const AttentionCase& c, std::ostream* out) {
  for (const std::string& s : c.sizes) *out << s << " ";
  *out << "tiles " << c.bm << "x" << c.bn << " warps " << c.warps << (c.narrow ? " narrowed" : "")
       << (c.f32 ? " f32" : "");
}

class AttentionLowering : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionLowering, MatchesTheReference) {
  const AttentionCase& c = GetParam();
  const driver::Compilation compilation =
      c.f32 ? compile_text(f32_variant("attention"), c.sizes) : compile_asset("attention", c.sizes);
  ASSERT_TRUE(compilation.ok());
  vrtile::ModulePtr vr = vrtile::test_kernels::flash_attention(*compilation.program, c.bm, c.bn);
  if (c.narrow) vr = rewrite::narrow_dot_operands(vr);
  LowerOptions options;
  options.warps = c.warps;
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  const Comparison result = check_lowering(compilation, vr, *ma, "O", /*exact=*/false);
  if (!c.f32) {
    // Q Kᵀ always runs on mma.sync (Q hoisted into fragments once, K read transposed).
    EXPECT_GT(count(result, "mma.m16n8k16"), 0u);
    EXPECT_GT(count(result, "ldmatrix.x4"), 0u);
    // P V on mma.sync only when P is bf16; otherwise on FMA from shared memory.
    EXPECT_EQ(count(result, "fma") > 0, !c.narrow);
    EXPECT_EQ(count(result, "ldmatrix.x4.trans") > 0, c.narrow);
  } else {
    EXPECT_EQ(count(result, "mma.m16n8k16"), 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Sizes, AttentionLowering,
    ::testing::Values(
        AttentionCase{{"B=1", "H=2", "M=20", "N=40", "D=16"}, 16, 16, 1, false, false},
        AttentionCase{{"B=1", "H=2", "M=20", "N=40", "D=16"}, 16, 16, 1, true, false},
        AttentionCase{{"B=1", "H=1", "M=40", "N=40", "D=16"}, 32, 16, 2, true, false},
        AttentionCase{{"B=2", "H=1", "M=32", "N=48", "D=32"}, 32, 32, 2, true, false},
        AttentionCase{{"B=1", "H=1", "M=12", "N=20", "D=8"}, 8, 8, 1, false, true},
        // FlashAttention-2's shape: 64x64 tiles, d = 64, four warps
        AttentionCase{{"B=1", "H=1", "M=70", "N=70", "D=64"}, 64, 64, 4, true, false}));

TEST(AttentionLowering, QIsCopiedAndReadIntoFragmentsOnce) {
  const driver::Compilation compilation =
      compile_asset("attention", {"B=1", "H=1", "M=40", "N=40", "D=16"});
  ASSERT_TRUE(compilation.ok());
  const vrtile::ModulePtr vr =
      rewrite::narrow_dot_operands(vrtile::test_kernels::flash_attention(*compilation.program, 32, 16));
  LowerOptions options;
  options.warps = 2;
  const ModulePtr ma = lower_or_fail(vr, options);
  ASSERT_TRUE(ma);
  const Kernel& kernel = *ma->kernels[0];
  int q_copies_outside = 0, q_reads_outside = 0, p_register_conversions = 0;
  for (const OpPtr& op : kernel.body->ops) {
    if (op->kind == OpKind::AsyncCopy && op->buffer->name == "Q") ++q_copies_outside;
    if (op->kind == OpKind::SharedLoad && op->results[0]->name == "q_frag") ++q_reads_outside;
    if (op->kind == OpKind::For) {
      for (const OpPtr& inner : op->body->ops) {
        EXPECT_FALSE(inner->kind == OpKind::AsyncCopy && inner->buffer->name == "Q");
        if (inner->kind == OpKind::ConvertLayout && !inner->via_shared &&
            inner->results[0]->layout.kind == LayoutKind::MmaA) {
          ++p_register_conversions;
        }
      }
    }
  }
  EXPECT_EQ(q_copies_outside, 1);
  EXPECT_EQ(q_reads_outside, 1);
  EXPECT_EQ(p_register_conversions, 1);  // S's accumulator fragment becomes P's A fragment
}

}  // namespace
}  // namespace nautilus::matile
