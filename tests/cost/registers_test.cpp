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

}  // namespace
}  // namespace nautilus::cost
