// The register estimate against ptxas: every kernel of every asset spec with its hand schedule,
// lowered for and compiled by NVRTC for sm_90a (skipped when NVRTC is not installed; a hand
// schedule with warp_spec, fp8_gemm_nt's, gives its warp-specialized kernel).
//
// What the estimate is for: CTAs per SM. The MMA kernels are the ones whose occupancy registers
// decide (accumulators of 64-128 registers), so there it must be close: within 20% of ptxas.
// Elsewhere it must not undercount by much (an undercount predicts more resident CTAs than the
// GPU runs); it may overcount the row-reduction kernels, whose squares ptxas folds into the
// reduction slot by slot (docs/cost-model.md).
#include <gtest/gtest.h>

#include "core/codegen/emit_cuda.h"
#include "core/codegen/nvrtc.h"
#include "core/cost/analytical_model.h"
#include "core/matile/visitor.h"
#include "tests/common/spec_test_util.h"
#include "tests/cost/cost_test_util.h"

namespace nautilus::cost {
namespace {

bool has_mma(const matile::Region& region) {
  bool found = false;
  matile::for_each_op(region, [&](const matile::Op& op) {
    found = found || op.kind == matile::OpKind::Mma;
  });
  return found;
}

TEST(RegisterEstimate, CloseToPtxasOnTheMmaKernels) {
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc) GTEST_SKIP() << nvrtc.error().message;
  int mma_kernels = 0;
  for (const std::string& asset : nautilus::testing::asset_names()) {
    const matile::ModulePtr module = testing::compile_ma(asset, {}, testing::hand_schedule(asset), "sm_90a");
    ASSERT_TRUE(module) << asset;
    const auto emitted = codegen::emit_cuda(*module);
    ASSERT_TRUE(emitted) << emitted.error().message;
    codegen::NvrtcOptions options;
    options.arch = codegen::GpuArch::Sm90a;
    const auto compiled = (*nvrtc)->compile(emitted->source, asset + ".cu", options);
    ASSERT_TRUE(compiled) << compiled.error().message;
    ASSERT_EQ(emitted->kernels.size(), module->kernels.size());
    for (size_t i = 0; i < module->kernels.size(); ++i) {
      const matile::Kernel& kernel = *module->kernels[i];
      const codegen::KernelResources* ptxas = compiled->report.find(emitted->kernels[i].symbol);
      ASSERT_NE(ptxas, nullptr) << emitted->kernels[i].symbol;
      const int estimate = estimate_registers_per_thread(kernel);
      const std::string what = asset + " " + kernel.name + ": estimate " +
                               std::to_string(estimate) + ", ptxas " +
                               std::to_string(ptxas->registers);
      EXPECT_GE(estimate, 0.75 * ptxas->registers) << what;
      if (has_mma(*kernel.body)) {
        ++mma_kernels;
        EXPECT_LE(std::abs(estimate - ptxas->registers), 0.2 * ptxas->registers) << what;
      }
    }
  }
  EXPECT_GE(mma_kernels, 5);
}

// FP8 GEMM on mma.sync (B stored [K, N], widened to bf16 per k step) at the tiles the search
// weighs: ptxas converts the fragments of every k step of an iteration before their mmas, so a
// k tile of 128 on a 128-row tile spills (the search once picked 128 x 128 x 128: 1384 bytes
// spilled, measured 1353.7 µs against 689.8 µs for a tile that fits). The estimate must say
// "over 255" exactly where ptxas spills, and be close where it does not.
TEST(RegisterEstimate, WidenedEightBitFragmentsSpillWhereThePtxasSpills) {
  const auto& nvrtc = codegen::Nvrtc::shared();
  if (!nvrtc) GTEST_SKIP() << nvrtc.error().message;
  struct Tile {
    const char* tile;
    int warps;
  };
  const std::vector<Tile> tiles = {{"m=128, n=128, k=128", 4}, {"m=128, n=128, k=64", 4},
                                   {"m=128, n=64, k=128", 4},  {"m=64, n=256, k=32", 4},
                                   {"m=64, n=128, k=64", 4},   {"m=128, n=256, k=32", 8},
                                   {"m=64, n=64, k=16", 4}};
  for (const Tile& tile : tiles) {
    const std::vector<std::string> decisions = {
        std::string("tile(C_sum, ") + tile.tile + ")", "reverse_compute_at(C, C_sum, n_o)",
        "bind(C_sum, n_o=grid.y, m_o=grid.x)",
        "launch(C_sum, warps=" + std::to_string(tile.warps) + ", stages=2)"};
    const matile::ModulePtr module =
        testing::compile_ma("fp8_gemm", {"M=1024", "N=1024", "K=1024"}, decisions, "sm_90a");
    ASSERT_TRUE(module) << tile.tile;
    const auto emitted = codegen::emit_cuda(*module);
    ASSERT_TRUE(emitted) << emitted.error().message;
    codegen::NvrtcOptions options;
    options.arch = codegen::GpuArch::Sm90a;
    const auto compiled = (*nvrtc)->compile(emitted->source, "fp8_gemm.cu", options);
    ASSERT_TRUE(compiled) << compiled.error().message;
    ASSERT_EQ(module->kernels.size(), 1u);
    const codegen::KernelResources* ptxas = compiled->report.find(emitted->kernels[0].symbol);
    ASSERT_NE(ptxas, nullptr);
    const int estimate = estimate_registers_per_thread(*module->kernels[0]);
    const bool spills = ptxas->spill_store_bytes + ptxas->spill_load_bytes > 0;
    const std::string what = std::string(tile.tile) + " on " + std::to_string(tile.warps) +
                             " warps: estimate " + std::to_string(estimate) + ", ptxas " +
                             std::to_string(ptxas->registers) + (spills ? " and spills" : "");
    EXPECT_EQ(estimate > 255, spills) << what;
    if (!spills) EXPECT_LE(std::abs(estimate - ptxas->registers), 0.2 * ptxas->registers) << what;
  }
}

}  // namespace
}  // namespace nautilus::cost
