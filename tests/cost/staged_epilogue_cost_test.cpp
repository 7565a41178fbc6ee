// The cost model on the staged epilogue (docs/matile.md rule 7, docs/cost-model.md): a window
// store reaches the L2 as the 32-byte sectors its warp instructions touch. A bf16 tile stored
// from the wgmma accumulator fragments writes 8 rows of 16 bytes per warp instruction (2x its
// bytes at the L2), or of 8 bytes when the row pitch is odd (4x), while the staged epilogue's
// 16-byte runs write whole sectors; so the staged
// kernel is estimated faster, the more so where the output is large (lm_head), and the search
// prefers schedules that leave room for the staging tile.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pipeline.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::cost {
namespace {


matile::ModulePtr lower(const std::string& spec, const std::vector<std::string>& decisions,
                        const std::vector<std::string>& sizes, bool stage_epilogue) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  options.matile.stage_epilogue = stage_epilogue;
  const driver::Compilation compilation =
      nautilus::testing::compile_scheduled(spec, decisions, sizes, options);
  EXPECT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  return compilation.ma_module;
}

KernelCost estimate(const matile::ModulePtr& module) {
  const CostEstimate estimate = make_analytical_model(h100_sxm())->estimate(*module);
  EXPECT_TRUE(estimate.feasible) << estimate.infeasible_reason;
  EXPECT_EQ(estimate.kernels.size(), 1u);
  return estimate.kernels.empty() ? KernelCost{} : estimate.kernels[0];
}

TEST(StagedEpilogueCost, SixteenByteRowsWriteWholeSectorsAndTheFragmentsTwiceTheirBytes) {
  // GEMM 4096^3, 128 x 128 tiles, 4 stages: the staging tile fits. Only the store differs.
  const std::vector<std::string> schedule = {
      "tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)",
      "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=4)"};
  const std::vector<std::string> sizes = {"M=4096", "N=4096", "K=4096"};
  const KernelCost staged = estimate(lower("assets/specs/gemm.nt", schedule, sizes, true));
  const KernelCost fragments = estimate(lower("assets/specs/gemm.nt", schedule, sizes, false));
  const double output = 4096.0 * 4096 * 2;
  // From the fragments each thread stores a 4-byte pair: 8 rows x 16 bytes, half sectors.
  EXPECT_DOUBLE_EQ(fragments.l2_bytes - staged.l2_bytes, output);
  EXPECT_DOUBLE_EQ(fragments.global_bytes, staged.global_bytes);  // DRAM: the bytes either way
  EXPECT_LT(staged.microseconds, fragments.microseconds);
}

TEST(StagedEpilogueCost, AnOddPitchStagedIsEstimatedFasterThanItsFragmentStores) {
  // lm_head: 823 MB of bf16 logits with a row pitch of 50257 elements. Staged, a warp's store
  // is 64 contiguous bytes (2 or 3 sectors); from the fragments 8 sectors.
  const std::vector<std::string> schedule = {
      "tile(Logits_sum, t=128, v=128, h=64)", "reverse_compute_at(Logits, Logits_sum, v_o)",
      "bind(Logits_sum, v_o=grid.y, t_o=grid.x)", "warp_spec(Logits_sum, consumers=2, stages=4)"};
  const KernelCost staged = estimate(lower("bench/variants/lm_head_gemm.nt", schedule, {}, true));
  const KernelCost fragments = estimate(lower("bench/variants/lm_head_gemm.nt", schedule, {}, false));
  const double output = 8192.0 * 50257 * 2;
  EXPECT_GT(fragments.l2_bytes - staged.l2_bytes, 2 * output);
  EXPECT_LT(staged.microseconds, fragments.microseconds * 0.85);
}

}  // namespace
}  // namespace nautilus::cost
