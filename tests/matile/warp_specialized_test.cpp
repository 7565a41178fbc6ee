// The warp-specialized Hopper form (lower.h rule 6, core/matile/lower_hopper.cpp) from the math
// spec: a schedule's warp_spec decision gives the GEMM's main loop a TMA producer warpgroup and
// wgmma consumer warpgroups on sm_90a; the MA interpreter (which runs the roles interleaved and
// checks every mbarrier hand-off) reproduces the float64 reference; sm_80 keeps mma.sync; kernels
// that cannot take the form are refused with the reason.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/driver/pipeline.h"
#include "core/matile/ir.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::source_path;

driver::Compilation compile(const std::string& spec, const std::vector<std::string>& decisions,
                            const std::vector<std::string>& sizes, const std::string& arch) {
  std::string error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = arch;
  for (const std::string& text : decisions) {
    sched::DecisionParseError parse_error;
    std::optional<sched::Decision> decision = sched::parse_decision(text, &parse_error);
    EXPECT_TRUE(decision) << text << ": " << sched::to_string(parse_error);
    if (decision) options.schedule.decisions.push_back(*decision);
  }
  for (const std::string& text : sizes) options.sizes.push_back(*spec::parse_size_override(text, &error));
  return driver::compile(SourceFile::read(source_path(spec), &error), options);
}

std::vector<std::string> gemm_schedule(int tile_m, int tile_n, int stages, int consumers) {
  return {"tile(C_sum, m=" + std::to_string(tile_m) + ", n=" + std::to_string(tile_n) + ", k=64)",
          "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)",
          "launch(C_sum, stages=" + std::to_string(stages) + ")",
          "warp_spec(C_sum, consumers=" + std::to_string(consumers) + ")"};
}

int count_ops(const Region& region, const std::function<bool(const Op&)>& wanted) {
  int count = 0;
  for (const OpPtr& op : region.ops) {
    if (wanted(*op)) ++count;
    if (op->body) count += count_ops(*op->body, wanted);
    for (const WarpRole& role : op->roles) {
      if (role.body) count += count_ops(*role.body, wanted);
    }
  }
  return count;
}

int count_kind(const Kernel& kernel, OpKind kind) {
  return count_ops(*kernel.body, [&](const Op& op) { return op.kind == kind; });
}

TEST(WarpSpecialized, AGemmGetsATmaProducerAndWgmmaConsumersThatMatchTheReference) {
  // Two consumer warpgroups of 64 rows each over a 128 x 256 tile; 5 k steps around a ring of
  // 4 stages (the ring wraps, so the empty barriers' second phase is exercised).
  const driver::Compilation compilation = compile(
      "assets/specs/gemm.nt", gemm_schedule(128, 256, 4, 2), {"M=256", "N=512", "K=320"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(kernel.warps, 12);  // producer + 2 consumers
  ASSERT_EQ(count_kind(kernel, OpKind::Roles), 1);
  const Op* roles = nullptr;
  for (const OpPtr& op : kernel.body->ops) {
    if (op->kind == OpKind::Roles) roles = op.get();
  }
  ASSERT_TRUE(roles);
  ASSERT_EQ(roles->roles.size(), 2u);
  EXPECT_EQ(roles->roles[0].name, "producer");
  EXPECT_EQ(roles->roles[1].warpgroups, 2);
  // The producer copies both operands; the consumers own every MMA and the store.
  EXPECT_EQ(count_ops(*roles->roles[0].body, [](const Op& op) { return op.kind == OpKind::TmaLoad; }), 2);
  EXPECT_EQ(count_ops(*roles->roles[0].body, [](const Op& op) { return op.kind == OpKind::Wgmma; }), 0);
  EXPECT_EQ(count_ops(*roles->roles[1].body, [](const Op& op) { return op.kind == OpKind::Wgmma; }), 2);
  EXPECT_EQ(count_kind(kernel, OpKind::Mma), 0);
  EXPECT_EQ(count_kind(kernel, OpKind::AsyncCopy), 0);
  EXPECT_EQ(count_kind(kernel, OpKind::Barrier), 1);  // after the mbarrier init only
  ASSERT_EQ(kernel.tma_maps.size(), 2u);
  // B[k, n] lands MN-major: two 64-column panels per stage, not one row-major box.
  EXPECT_FALSE(kernel.tma_maps[0].shared_layout);
  EXPECT_TRUE(kernel.tma_maps[1].shared_layout);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 3);
}

TEST(WarpSpecialized, OneConsumerWarpgroupAndAShortRingAlsoMatchTheReference) {
  for (int stages : {2, 3}) {
    SCOPED_TRACE("stages " + std::to_string(stages));
    const driver::Compilation compilation = compile(
        "assets/specs/gemm.nt", gemm_schedule(64, 128, stages, 1), {"M=192", "N=256", "K=192"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    EXPECT_EQ(compilation.ma_module->kernels.at(0)->warps, 8);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 5);
  }
}

TEST(WarpSpecialized, OnSm80TheConsumerWarpgroupsBecomePlainWarpsOnMmaSync) {
  const driver::Compilation compilation = compile(
      "assets/specs/gemm.nt", gemm_schedule(128, 128, 3, 2), {"M=256", "N=256", "K=192"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(kernel.warps, 8);
  EXPECT_EQ(count_kind(kernel, OpKind::Roles), 0);
  EXPECT_GT(count_kind(kernel, OpKind::Mma), 0);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 4);
}

std::string refusal(const std::vector<std::string>& decisions, const std::vector<std::string>& sizes) {
  const driver::Compilation compilation = compile("assets/specs/gemm.nt", decisions, sizes, "sm_90a");
  EXPECT_FALSE(compilation.ma_module);
  return compilation.schedule_error + compilation.diagnostics->render_all();
}

TEST(WarpSpecialized, KernelsThatCannotTakeTheFormAreRefusedWithTheReason) {
  // One consumer warpgroup holds 64 rows of a wgmma tile, not 128.
  EXPECT_NE(refusal(gemm_schedule(128, 128, 3, 1), {"M=256", "N=256", "K=256"}).find("64 each"),
            std::string::npos);
  // One stage deadlocks: the consumers keep a stage in flight while the producer needs it.
  EXPECT_NE(refusal(gemm_schedule(128, 128, 1, 2), {"M=256", "N=256", "K=256"}).find("deadlocks"),
            std::string::npos);
  // 8 stages of 48 KB do not fit a CTA's shared memory.
  EXPECT_NE(refusal(gemm_schedule(128, 256, 8, 2), {"M=256", "N=512", "K=1024"}).find("KB of shared memory"),
            std::string::npos);
  // The main loop's dot must be the whole kernel's only loop of dots on loaded tiles.
  EXPECT_NE(refusal({"tile(C_sum, m=128, n=128, k=64)", "warp_spec(C_sum, consumers=2)"},
                    {"M=256", "N=256", "K=256"})
                .find("warp_spec"),
            std::string::npos);
}

TEST(WarpSpecialized, RaggedSizesAreZeroFilledByTheTensorMaps) {
  // Neither M, N nor K is a multiple of its tile: TMA fills past the buffers' ends with zeros,
  // and the k tail needs no select of its own (the operands stay plain loaded tiles).
  const driver::Compilation compilation = compile(
      "assets/specs/gemm.nt", gemm_schedule(128, 128, 3, 2), {"M=200", "N=136", "K=328"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  EXPECT_EQ(count_kind(*compilation.ma_module->kernels.at(0), OpKind::Roles), 1);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 9);
}

TEST(WarpSpecialized, TheDecisionChecksItsArguments) {
  EXPECT_NE(refusal({"tile(C_sum, m=128, n=128, k=64)", "warp_spec(C_sum, consumers=3)"}, {}).find(
                "consumers must be 0, 1 or 2"),
            std::string::npos);
  EXPECT_NE(refusal({"warp_spec(C_sum, warps=3)"}, {}).find("expected consumers"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::matile
