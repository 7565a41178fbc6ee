// FP8 GEMMs on Hopper's 8-bit warpgroup MMA (lower_dots.cpp plan_eight_bit_wgmma, rule 6 of
// lower.h): with warp_spec on sm_90a, a dot of two fp8 tiles that are K-major in global memory
// (A[M, K], B[N, K]) runs wgmma m64nNk32 on the bytes the TMA producer copied, with no widening
// cast; the MA interpreter (which executes the roles and checks every mbarrier hand-off) agrees
// with the float64 reference at sizes that are not tile multiples. sm_80 keeps the widening
// mma.sync path; an N-major fp8 operand, a k step under 32 and an f32 output are refused with the
// reason, and fp8 x bf16 falls back to the 16-bit register-A form.
#include <gtest/gtest.h>

#include <memory>
#include <tuple>
#include <string>
#include <vector>

#include "core/driver/pipeline.h"
#include "core/layout/printer.h"
#include "core/matile/ir.h"
#include "core/matile/printer.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::count_kind;
using nautilus::testing::count_ops;
using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::first_op;

std::vector<std::string> nt_schedule(int tile_m, int tile_n, int tile_k, int consumers, int stages,
                                     const std::vector<std::string>& more = {}) {
  std::vector<std::string> d = {
      "tile(C_sum, m=" + std::to_string(tile_m) + ", n=" + std::to_string(tile_n) + ", k=" + std::to_string(tile_k) + ")",
      "reverse_compute_at(C, C_sum, n_o)", "bind(C_sum, m_o=grid.y, n_o=grid.x)",
      "warp_spec(C_sum, consumers=" + std::to_string(consumers) + ", stages=" + std::to_string(stages) + ")"};
  d.insert(d.end(), more.begin(), more.end());
  return d;
}

// An fp8 GEMM with operands of the given dtypes and layouts (B[N, K] when `b_k_major`, else
// B[K, N]) and output dtype, scaled like the asset.
std::string gemm_text(const std::string& a, const std::string& b, bool b_k_major, const std::string& out) {
  return "let M = 256, N = 256, K = 256\n"
         "input A[M, K] : " + a + "\n" +
         (b_k_major ? "input B[N, K] : " : "input B[K, N] : ") + b + "\n"
         "input S[1] : f32\n"
         "output C[m, n] : " + out + " = (sum(k) A[m, k] * " + (b_k_major ? "B[n, k]" : "B[k, n]") + ") * S[0]\n";
}

driver::Compilation compile_text(const std::string& text, const std::vector<std::string>& decisions,
                                 const std::vector<std::string>& sizes, const std::string& arch = "sm_90a") {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = arch;
  return testing::compile_scheduled(std::make_shared<SourceFile>("inline.nt", text), decisions, sizes, options);
}

const Op* the_wgmma(const Kernel& kernel) {
  return first_op(*kernel.body, [](const Op& op) { return op.kind == OpKind::Wgmma; });
}

// Casts from an 8-bit type: the widening the 8-bit form makes unnecessary.
int widening_casts(const Kernel& kernel) {
  return count_ops(*kernel.body, [](const Op& op) {
    return op.kind == OpKind::Cast && !op.operands.empty() && is_narrow_storage(op.operands[0]->type.dtype);
  });
}

std::string refusal(const driver::Compilation& compilation) {
  EXPECT_FALSE(compilation.ma_module);
  return compilation.schedule_error + compilation.internal_error + compilation.diagnostics->render_all();
}

TEST(Fp8Wgmma, KMajorFp8OperandsRunWgmmaK32FromTheTmaRingAndMatchTheReference) {
  // The asset's hand schedule (128 x 256 x 128, two consumers, three stages) at sizes that are
  // no tile multiples: TMA zero-fills the partial tiles, k's too (400 = 3 x 128 + 16; every row
  // of A and B is a multiple of 16 bytes).
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/fp8_gemm_nt.nt", testing::hand_schedule("fp8_gemm_nt"), {"M=200", "N=264", "K=400"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  ASSERT_EQ(count_kind(kernel, OpKind::Roles), 1);
  EXPECT_EQ(count_kind(kernel, OpKind::Mma), 0);
  EXPECT_EQ(widening_casts(kernel), 0);
  EXPECT_EQ(count_kind(kernel, OpKind::TmaLoad), 2);
  const Op* wgmma = the_wgmma(kernel);
  ASSERT_TRUE(wgmma);
  EXPECT_EQ(wgmma->extent, 128);
  EXPECT_EQ(instruction_name(*wgmma, &kernel), "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3");
  // Both rings hold the bytes as they are, K-major, 128 elements of k per 128-byte swizzled row.
  for (const SharedRef* ref : {&wgmma->shared, &wgmma->shared_b}) {
    const SharedAlloc& alloc = kernel.shared.at(static_cast<size_t>(ref->alloc));
    EXPECT_EQ(alloc.dtype, DType::F8E4M3) << alloc.name;
    EXPECT_EQ(layout::to_string(alloc.layout).rfind("Sw<3,4,3> o ", 0), 0u) << layout::to_string(alloc.layout);
  }
  EXPECT_NE(print_module(*compilation.ma_module).find("wgmma.m64n256k32 A_ring"), std::string::npos);
  for (uint64_t seed : {3, 4}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed, "fp8_gemm_nt ");
}

TEST(Fp8Wgmma, OneConsumerSw64TilesAndPersistentCtasMatchTheReference) {
  // A k step of 64 bytes takes the SW64 layout; one consumer warpgroup of 64 rows; persistent
  // CTAs (dynamic and static tile schedulers) walking several tiles each over a ring that wraps.
  for (const std::string& persistent : {std::string(), std::string("persistent(C_sum)"),
                                        std::string("persistent(C_sum, scheduler=static)")}) {
    SCOPED_TRACE(persistent);
    std::vector<std::string> more;
    if (!persistent.empty()) more.push_back(persistent);
    const driver::Compilation compilation = compile_for_arch(
        "assets/specs/fp8_gemm_nt.nt", nt_schedule(64, 128, 64, 1, 2, more), {"M=136", "N=264", "K=208"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_EQ(kernel.persistent, !persistent.empty());
    const Op* wgmma = the_wgmma(kernel);
    ASSERT_TRUE(wgmma);
    EXPECT_EQ(instruction_name(*wgmma, &kernel), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3");
    EXPECT_EQ(layout::to_string(kernel.shared.at(static_cast<size_t>(wgmma->shared.alloc)).layout).rfind("Sw<2,4,3>", 0), 0u);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 7, "persistent ");
  }
}

TEST(Fp8Wgmma, AnF32IntermediateThatOnlyBf16OutputsReadTakesTheEightBitForm) {
  // Without reverse_compute_at the scaled, rounded output is a kernel of its own reading C_sum,
  // an f32 intermediate: its product still reaches only the bf16 output, so the GEMM kernel runs
  // the 8-bit form (the search's unfused states must see it too).
  std::vector<std::string> unfused = nt_schedule(128, 128, 128, 2, 3);
  unfused.erase(unfused.begin() + 1);
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/fp8_gemm_nt.nt", unfused, {"M=200", "N=136", "K=272"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  ASSERT_EQ(compilation.ma_module->kernels.size(), 2u);
  const Kernel& gemm = *compilation.ma_module->kernels.at(0);
  const Op* wgmma = the_wgmma(gemm);
  ASSERT_TRUE(wgmma);
  EXPECT_EQ(instruction_name(*wgmma, &gemm), "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3");
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 12, "unfused ");
}

TEST(Fp8Wgmma, E5m2AndE4m3InEitherPairingPickTheirInstruction) {
  for (const auto& [a, b, ptx] : {std::tuple{"fp8e5m2", "fp8e4m3", "e5m2.e4m3"},
                                  std::tuple{"fp8e4m3", "fp8e5m2", "e4m3.e5m2"},
                                  std::tuple{"fp8e5m2", "fp8e5m2", "e5m2.e5m2"}}) {
    SCOPED_TRACE(ptx);
    const driver::Compilation compilation =
        compile_text(gemm_text(a, b, true, "bf16"), nt_schedule(128, 128, 128, 2, 3), {"M=200", "N=136", "K=272"});
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    const Op* wgmma = the_wgmma(kernel);
    ASSERT_TRUE(wgmma);
    EXPECT_EQ(instruction_name(*wgmma, &kernel), std::string("wgmma.mma_async.sync.aligned.m64n128k32.f32.") + ptx);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 11, ptx + std::string(" "));
  }
}

TEST(Fp8Wgmma, OnSm80TheFp8OperandsStayWidenedForMmaSync) {
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/fp8_gemm_nt.nt", testing::hand_schedule("fp8_gemm_nt"), {"M=136", "N=264", "K=144"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(count_kind(kernel, OpKind::Roles), 0);
  EXPECT_EQ(count_kind(kernel, OpKind::Wgmma), 0);
  EXPECT_GT(count_kind(kernel, OpKind::Mma), 0);
  EXPECT_GT(widening_casts(kernel), 0);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 5, "sm_80 ");
}

TEST(Fp8Wgmma, CombinationsTheEightBitFormCannotTakeAreRefusedWithTheReason) {
  const std::vector<std::string> sizes = {"M=256", "N=256", "K=256"};
  // The asset fp8_gemm stores B[K, N]: its tile is N-major, and 8-bit wgmma has no transpose.
  const std::string n_major = refusal(compile_for_arch("assets/specs/fp8_gemm.nt", nt_schedule(128, 128, 128, 2, 3),
                                                       sizes, "sm_90a"));
  EXPECT_NE(n_major.find("N-major (stored [K, N], contiguous along n)"), std::string::npos) << n_major;
  EXPECT_NE(n_major.find("store B as [N, K]"), std::string::npos) << n_major;
  // A k step of 16 is half an 8-bit wgmma.
  const std::string short_k = refusal(compile_for_arch("assets/specs/fp8_gemm_nt.nt", nt_schedule(128, 128, 16, 2, 3),
                                                       sizes, "sm_90a"));
  EXPECT_NE(short_k.find("not a multiple of 32 (one 8-bit wgmma reads k 32)"), std::string::npos) << short_k;
  // An f32 output, fused or through the f32 intermediate C_sum: the 8-bit form's accumulation is
  // narrower than f32.
  const std::string wide_out =
      refusal(compile_text(gemm_text("fp8e4m3", "fp8e4m3", true, "f32"), nt_schedule(128, 128, 128, 2, 3), sizes));
  EXPECT_NE(wide_out.find("reaches an output of 32 bits or more"), std::string::npos) << wide_out;
  std::vector<std::string> unfused = nt_schedule(128, 128, 128, 2, 3);
  unfused.erase(unfused.begin() + 1);
  const std::string wide_unfused =
      refusal(compile_text(gemm_text("fp8e4m3", "fp8e4m3", true, "f32"), unfused, sizes));
  EXPECT_NE(wide_unfused.find("reaches an output of 32 bits or more"), std::string::npos) << wide_unfused;
  // The same schedules without warp_spec keep the widening mma.sync path on sm_90a.
  std::vector<std::string> plain = nt_schedule(128, 128, 128, 2, 3);
  plain.pop_back();
  const driver::Compilation widened = compile_for_arch("assets/specs/fp8_gemm.nt", plain, {"M=136", "N=72", "K=144"}, "sm_90a");
  ASSERT_TRUE(widened.ma_module) << widened.schedule_error;
  EXPECT_GT(count_kind(*widened.ma_module->kernels.at(0), OpKind::Mma), 0);
  expect_stage_matches_reference(widened, driver::Stage::MATile, 6, "widened ");
}

TEST(Fp8Wgmma, Fp8TimesBf16RunsTheSixteenBitFormWithTheFp8TileWidenedInRegisters) {
  // The 8-bit form takes two 8-bit operands; A fp8 times B bf16 keeps A widened to bf16, which
  // wgmma then reads from registers (the RS form), B from the TMA ring.
  const driver::Compilation compilation = compile_text(gemm_text("fp8e4m3", "bf16", true, "bf16"),
                                                       nt_schedule(128, 128, 64, 2, 3), {"M=200", "N=136", "K=208"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const Op* wgmma = the_wgmma(kernel);
  ASSERT_TRUE(wgmma);
  EXPECT_EQ(instruction_name(*wgmma, &kernel), "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 (A in registers)");
  EXPECT_GT(widening_casts(kernel), 0);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 8, "fp8 x bf16 ");
}

}  // namespace
}  // namespace nautilus::matile
