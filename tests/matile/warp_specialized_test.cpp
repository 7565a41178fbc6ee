// The warp-specialized Hopper form (lower.h rule 6, core/matile/lower_hopper.cpp) from the math
// spec: a schedule's warp_spec decision gives the GEMM's main loop a TMA producer warpgroup and
// wgmma consumer warpgroups on sm_90a; the MA interpreter (which runs the roles interleaved and
// checks every mbarrier hand-off) reproduces the float64 reference; sm_80 keeps mma.sync; kernels
// that cannot take the form are refused with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/matile/ir.h"
#include "core/matile/printer.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "tests/common/golden.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::roles_op;
using nautilus::testing::expect_stage_matches_reference;

std::vector<std::string> gemm_schedule(int tile_m, int tile_n, int stages, int consumers) {
  return {"tile(C_sum, m=" + std::to_string(tile_m) + ", n=" + std::to_string(tile_n) + ", k=64)",
          "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)",
          "launch(C_sum, stages=" + std::to_string(stages) + ")",
          "warp_spec(C_sum, consumers=" + std::to_string(consumers) + ")"};
}

using nautilus::testing::count_kind;
using nautilus::testing::count_ops;

TEST(WarpSpecialized, AGemmGetsATmaProducerAndWgmmaConsumersThatMatchTheReference) {
  // Two consumer warpgroups of 64 rows each over a 128 x 256 tile; 5 k steps around a ring of
  // 4 stages (the ring wraps, so the empty barriers' second phase is exercised).
  const driver::Compilation compilation = compile_for_arch(
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
  // One wgmma in the loop: no iteration is peeled.
  EXPECT_EQ(count_ops(*roles->roles[1].body, [](const Op& op) { return op.kind == OpKind::Wgmma; }), 1);
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
    const driver::Compilation compilation = compile_for_arch(
        "assets/specs/gemm.nt", gemm_schedule(64, 128, stages, 1), {"M=192", "N=256", "K=192"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
    EXPECT_EQ(compilation.ma_module->kernels.at(0)->warps, 8);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 5);
  }
}

TEST(WarpSpecialized, OnSm80TheConsumerWarpgroupsBecomePlainWarpsOnMmaSync) {
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gemm.nt", gemm_schedule(128, 128, 3, 2), {"M=256", "N=256", "K=192"}, "sm_80");
  ASSERT_TRUE(compilation.ma_module) << compilation.diagnostics->render_all();
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_EQ(kernel.warps, 8);
  EXPECT_EQ(count_kind(kernel, OpKind::Roles), 0);
  EXPECT_GT(count_kind(kernel, OpKind::Mma), 0);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 4);
}

std::string refusal(const std::vector<std::string>& decisions, const std::vector<std::string>& sizes) {
  const driver::Compilation compilation = compile_for_arch("assets/specs/gemm.nt", decisions, sizes, "sm_90a");
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
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gemm.nt", gemm_schedule(128, 128, 3, 2), {"M=200", "N=136", "K=328"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  EXPECT_EQ(count_kind(*compilation.ma_module->kernels.at(0), OpKind::Roles), 1);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 9);
}

// ptxas compiles a kernel of four warpgroups under 128 registers per thread, whatever
// setmaxnreg grants its consumers later: one m64n256 wgmma (128 accumulator registers and its
// operands) does not fit there ("insufficient registers (128)"), an m64n192 one does.
TEST(WarpSpecialized, ThreeConsumersTakeAtMost192Columns) {
  const std::string wide = refusal(gemm_schedule(192, 256, 3, 3), {"M=384", "N=512", "K=256"});
  EXPECT_NE(wide.find("registers ptxas compiles a kernel of 4 warpgroups under"), std::string::npos) << wide;
  const driver::Compilation fits = compile_for_arch("assets/specs/gemm.nt", gemm_schedule(192, 192, 3, 3),
                                           {"M=384", "N=384", "K=256"}, "sm_90a");
  EXPECT_TRUE(fits.ma_module) << fits.schedule_error;
}

TEST(WarpSpecialized, TheDecisionChecksItsArguments) {
  EXPECT_NE(refusal({"tile(C_sum, m=128, n=128, k=64)", "warp_spec(C_sum, consumers=4)"}, {}).find(
                "consumers must be 0 to 3"),
            std::string::npos);
  EXPECT_NE(refusal({"warp_spec(C_sum, warps=3)"}, {}).find("expected consumers"), std::string::npos);
}

// Attention's main loop from the math: the scores feed the softmax inside the loop, so the
// consumers wait for QKᵀ in the iteration, and P·V takes P from registers (the RS form).
std::vector<std::string> attention_schedule(bool causal, int key_tile, int consumers, int stages,
                                            bool overlap = false) {
  return nautilus::testing::warp_spec_attention(
      {.causal = causal, .key_tile = key_tile, .consumers = consumers, .stages = stages, .overlap = overlap});
}

// Three consumer warpgroups (a 192-row query tile, FlashAttention-3's d 64 form): the producer
// gives up registers (setmaxnreg 32) so that each consumer keeps 160, and every warpgroup owns
// its 64 rows; run against the float64 reference with ragged queries and keys.
TEST(WarpSpecialized, ThreeConsumerWarpgroupsShareA192RowTile) {
  for (const bool overlap : {false, true}) {
    const driver::Compilation compilation =
        compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 64, 3, 3, overlap),
                {"B=1", "H=2", "M=400", "N=296", "D=64"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Op* roles = roles_op(*compilation.ma_module->kernels.at(0));
    ASSERT_TRUE(roles);
    ASSERT_EQ(roles->roles.size(), 2u);
    EXPECT_EQ(roles->roles[0].max_registers, 32);
    EXPECT_EQ(roles->roles[1].warpgroups, 3);
    EXPECT_EQ(roles->roles[1].max_registers, 160);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, overlap ? 12 : 11,
                                   overlap ? "three consumers, overlap" : "three consumers");
  }
}

// FlashAttention-3's d 64 tile: 192 query rows over 128 keys, three consumers of 160 registers,
// overlapped and taking turns. Its tiles fit the budget when the keys fill whole tiles (the
// partial query tile is fine); a partial last key tile keeps mask registers live beside them,
// which ptxas spills at 1000 keys, so the overlapped form is refused there.
TEST(WarpSpecialized, ThreeConsumersTake128KeyTilesAtD64UnlessTheLastKeyTileIsPartial) {
  std::vector<std::string> schedule = nautilus::testing::warp_spec_attention(
      {.key_tile = 128, .consumers = 3, .stages = 3, .overlap = true, .pingpong = true});
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/attention.nt", schedule, {"B=1", "H=2", "M=400", "N=384", "D=64"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Op* roles = roles_op(*compilation.ma_module->kernels.at(0));
  ASSERT_TRUE(roles);
  EXPECT_EQ(roles->roles[1].warpgroups, 3);
  EXPECT_EQ(roles->roles[1].max_registers, 160);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 13, "192 x 128, three consumers");

  const driver::Compilation ragged =
      compile_for_arch("assets/specs/attention.nt", schedule, {"B=1", "H=2", "M=400", "N=1000", "D=64"}, "sm_90a");
  EXPECT_FALSE(ragged.ma_module);
  EXPECT_NE(ragged.schedule_error.find("masks of a partial last tile"), std::string::npos)
      << ragged.schedule_error;
}

// Causal, the same tile: one CTA per tile fits the three consumers' budget, but a persistent tile
// loop that stops each tile's main loop early keeps more live beside the tiles (ptxas spilled
// 196 bytes at B2 H32 S8192), so persistent CTAs are refused there and say why.
TEST(WarpSpecialized, ThreeConsumersOnCausalRowsStayOneCtaPerTile) {
  std::vector<std::string> schedule = nautilus::testing::warp_spec_attention(
      {.causal = true, .key_tile = 128, .consumers = 3, .stages = 3, .overlap = true, .pingpong = true});
  const std::vector<std::string> sizes = {"B=1", "H=2", "M=384", "N=384", "D=64"};
  const driver::Compilation per_tile = compile_for_arch("assets/specs/causal_attention.nt", schedule, sizes, "sm_90a");
  ASSERT_TRUE(per_tile.ma_module) << per_tile.schedule_error;
  expect_stage_matches_reference(per_tile, driver::Stage::MATile, 15, "causal 192 x 128, three consumers");
  schedule.push_back("persistent(O_sum_acc)");
  const driver::Compilation persistent = compile_for_arch("assets/specs/causal_attention.nt", schedule, sizes, "sm_90a");
  EXPECT_FALSE(persistent.ma_module);
  EXPECT_NE(persistent.schedule_error.find("a persistent tile loop's early stop"), std::string::npos)
      << persistent.schedule_error;
}

// At d 128 a three-stage ring of 128-key K and V tiles (192 KB) and the 32 KB query tile leave
// no room for a separate staging tile: the staged epilogue takes the query tile's bytes once the
// main loop is done with them (16-byte row stores instead of pairs from the fragments). The MA
// interpreter gives both one storage, so its race checks cover the reuse.
TEST(WarpSpecialized, TheStagedEpilogueReusesTheQueryTileWhenTheRingFillsSharedMemory) {
  for (const bool overlap : {false, true}) {
    const driver::Compilation compilation =
        compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 128, 2, 3, overlap),
                {"B=1", "H=2", "M=200", "N=384", "D=128"}, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    int query = -1;
    const SharedAlloc* staged = nullptr;
    for (size_t a = 0; a < kernel.shared.size(); ++a) {
      if (kernel.shared[a].name == "Q_tile") query = static_cast<int>(a);
      if (kernel.shared[a].name == "O_staged") staged = &kernel.shared[a];
    }
    ASSERT_GE(query, 0);
    ASSERT_TRUE(staged) << print_kernel(kernel);
    EXPECT_EQ(staged->alias_of, query);
    EXPECT_EQ(staged->byte_offset, kernel.shared[static_cast<size_t>(query)].byte_offset);
    EXPECT_LE(kernel.shared_bytes, 227 * 1024);
    EXPECT_NE(print_kernel(kernel).find("aliases Q_tile"), std::string::npos);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, overlap ? 14 : 13,
                                   overlap ? "staged on Q, overlap" : "staged on Q");
  }
}

TEST(WarpSpecialized, AttentionWaitsForItsScoresAndTakesPFromRegisters) {
  // Keys not a multiple of the 64-key tile; the 4-D buffers' tiles are boxes [1, 1, rows, D].
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 64, 2, 2),
              {"B=1", "H=2", "M=256", "N=300", "D=64"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const Op* roles = roles_op(kernel);
  ASSERT_TRUE(roles);
  // The producer copies Q once (its own mbarrier) and K and V into the ring every iteration.
  EXPECT_EQ(count_ops(*roles->roles[0].body, [](const Op& op) { return op.kind == OpKind::TmaLoad; }), 3);
  ASSERT_EQ(kernel.tma_maps.size(), 3u);
  for (const TmaMap& map : kernel.tma_maps) {
    EXPECT_EQ(map.box.size(), 4u);
    EXPECT_EQ(map.box[0], 1);
    EXPECT_EQ(map.box[1], 1);
  }
  // full, empty and the query tile's once: at d 64 the ring released together fits beside
  // everything else, so K and V share one release group (RingRelease::Auto; K released in its
  // own iteration: tests/matile/early_release_test.cpp).
  ASSERT_EQ(kernel.mbarriers.size(), 3u);
  EXPECT_EQ(kernel.mbarriers[0].name, "full");
  EXPECT_EQ(kernel.mbarriers[1].name, "empty");
  EXPECT_EQ(kernel.mbarriers[2].name, "once");
  // The consumers: QKᵀ with both operands in shared memory, P·V with P in registers, and a wait
  // for every group inside the iteration, before the softmax reads the scores.
  int shared_a = 0, register_a = 0, full_waits = 0;
  count_ops(*roles->roles[1].body, [&](const Op& op) {
    if (op.kind == OpKind::Wgmma) (op.operands.size() == 2 ? register_a : shared_a)++;
    if (op.kind == OpKind::WgmmaWaitGroup && op.extent == 0) ++full_waits;
    return false;
  });
  // (The ragged key tail splits the loop into its unmasked and masked halves: one of each per half.)
  EXPECT_GE(shared_a, 1);
  EXPECT_EQ(shared_a, register_a);
  EXPECT_GE(full_waits, 2);  // in the loop, and after it
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 3);
}

// Attention schedules of `cases` (plain or overlapped), each lowered to the warp-specialized
// form and run by the MA interpreter against the float64 reference.
struct AttentionCase {
  std::string spec;
  bool causal;
  int key_tile, consumers, stages;
  std::vector<std::string> sizes;
};

void expect_attention_cases_match(const std::vector<AttentionCase>& cases, bool overlap) {
  for (const AttentionCase& c : cases) {
    SCOPED_TRACE(c.spec + " " + c.sizes.back());
    const driver::Compilation compilation = compile_for_arch(
        c.spec, attention_schedule(c.causal, c.key_tile, c.consumers, c.stages, overlap), c.sizes, "sm_90a");
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    EXPECT_TRUE(roles_op(*compilation.ma_module->kernels.at(0)));
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 5);
  }
}

TEST(WarpSpecialized, AttentionVariantsMatchTheReference) {
  expect_attention_cases_match({
      // A head dimension of 80 (32-byte swizzled tiles), query rows not a multiple of 128.
      {"assets/specs/attention.nt", false, 64, 2, 3, {"B=1", "H=2", "M=200", "N=136", "D=80"}},
      // Causal with skipped tiles: a trip count per query tile, and the loop split into its
      // unmasked and masked halves inside the consumers' role; the ring wraps.
      {"assets/specs/causal_attention.nt", true, 64, 2, 2, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      // One consumer warpgroup; 128-key tiles.
      {"assets/specs/causal_attention.nt", true, 128, 1, 2, {"B=1", "H=1", "M=256", "N=256", "D=64"}},
      // Grouped heads: K and V tiles of one KV head per query head group.
      {"assets/specs/gqa_attention.nt", false, 64, 2, 2, {"B=1", "H=8", "KH=2", "M=256", "N=200", "D=64"}},
  }, false);
}

TEST(WarpSpecialized, AttentionTilesWhoseRegistersWouldSpillAreRefused) {
  // 256 keys at d 64: the scores (128 registers per consumer thread), P (64) and the output (32)
  // with the softmax's values exceed the consumers' 232 registers; 128 keys fit.
  const std::vector<std::string> sizes = {"B=1", "H=1", "M=256", "N=512", "D=64"};
  const driver::Compilation wide =
      compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 256, 2, 2), sizes, "sm_90a");
  EXPECT_FALSE(wide.ma_module);
  EXPECT_NE(wide.schedule_error.find("would spill"), std::string::npos) << wide.schedule_error;
  const driver::Compilation fits =
      compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 128, 2, 2), sizes, "sm_90a");
  EXPECT_TRUE(fits.ma_module) << fits.schedule_error;
}

// overlap=1: P·V of iteration k - 1 is issued in iteration k behind QKᵀ, and the consumers wait
// only for QKᵀ (wgmma.wait_group 1) before the softmax; iteration 0's softmax runs before the
// loop and the last P·V after it, both skipped when a query tile has no key tile to run.
TEST(WarpSpecialized, OverlappedAttentionIssuesPVBehindTheNextScores) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 64, 2, 3, true),
              {"B=1", "H=2", "M=256", "N=300", "D=64"}, "sm_90a");
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const Op* roles = roles_op(kernel);
  ASSERT_TRUE(roles);
  // The consumers' steady loop: two groups committed before a wait that leaves one in flight.
  int overlapped_loops = 0;
  count_ops(*roles->roles[1].body, [&](const Op& op) {
    if (op.kind != OpKind::For) return false;
    int commits = 0;
    bool waits_for_one = false;
    for (const OpPtr& inner : op.body->ops) {
      if (inner->kind == OpKind::WgmmaCommitGroup && !waits_for_one) ++commits;
      if (inner->kind == OpKind::WgmmaWaitGroup && inner->extent == 1) waits_for_one = true;
    }
    if (commits == 2 && waits_for_one) ++overlapped_loops;
    return false;
  });
  EXPECT_GE(overlapped_loops, 1);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 3);
}

TEST(WarpSpecialized, OverlappedAttentionVariantsMatchTheReference) {
  expect_attention_cases_match({
      // Causal: the first query tiles have no unmasked key tile, so the unmasked half of the
      // split loop runs no iteration; the ring wraps.
      {"assets/specs/causal_attention.nt", true, 64, 2, 3, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      // A head of 80 with ragged queries and keys; four stages.
      {"assets/specs/attention.nt", false, 64, 2, 4, {"B=1", "H=2", "M=200", "N=136", "D=80"}},
      // One key tile only: the steady loop runs no iteration.
      {"assets/specs/attention.nt", false, 64, 2, 3, {"B=1", "H=1", "M=128", "N=64", "D=64"}},
      // One consumer warpgroup, grouped heads.
      {"assets/specs/gqa_attention.nt", false, 64, 1, 3, {"B=1", "H=4", "KH=2", "M=130", "N=200", "D=64"}},
  }, true);
}

// A query tile whose keys are all masked (keys at least 128 behind the query: the first
// tile has none) skips every key tile: its trip count is 0. The overlapped loop still runs
// iteration 0's QKᵀ on the stage the producer fills for it, then drops its values. The
// reference has no value for those rows either (0 / 0); the others must match.
TEST(WarpSpecialized, OverlappedAttentionWithAnEmptyQueryTileMatchesTheReference) {
  const auto spec = std::make_shared<SourceFile>("lookback.nt", R"(let B = 1, H = 2, M = 300, N = 300, D = 64
input Q[B, H, M, D] : bf16
input K[B, H, N, D] : bf16
input V[B, H, N, D] : bf16
S[b, h, m, n] = select(n + 128 <= m, sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D), -inf)
Mx[b, h, m]   = max(n) S[b, h, m, n]
P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
L[b, h, m]    = sum(n) P[b, h, m, n]
output O[b, h, m, d] : bf16 = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]
)");
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  const driver::Compilation compilation =
      nautilus::testing::compile_scheduled(spec, attention_schedule(true, 64, 2, 3, true), {}, options);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  driver::EvalOptions eval;
  eval.stage = driver::Stage::MATile;
  eval.seed = 7;
  const driver::EvalResult result = driver::evaluate(compilation, eval);
  ASSERT_FALSE(result.actual.empty()) << result.error;
  const TensorData& actual = result.actual.at("O");
  const TensorData& reference = result.reference.at("O");
  double scale = 0.0, error = 0.0;
  int64_t empty_rows = 0;
  for (size_t i = 0; i < reference.values.size(); ++i) {
    if (std::isnan(reference.values[i])) {
      ++empty_rows;
      continue;
    }
    scale = std::max(scale, std::abs(reference.values[i]));
    error = std::max(error, std::abs(actual.values[i] - reference.values[i]));
  }
  EXPECT_EQ(empty_rows, 2 * 128 * 64);  // rows 0..127 of both heads
  EXPECT_GT(scale, 0.0);
  EXPECT_LE(error, 2e-2 * scale);
}

TEST(WarpSpecialized, OverlapSaysWhyItDoesNotApply) {
  const std::vector<std::string> sizes = {"B=1", "H=1", "M=128", "N=256", "D=64"};
  // Two stages suffice: K's slot is released in its own iteration (early_release_test.cpp).
  const driver::Compilation two_stages =
      compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 64, 2, 2, true), sizes, "sm_90a");
  EXPECT_TRUE(two_stages.ma_module) << two_stages.schedule_error;
  std::vector<std::string> gemm = gemm_schedule(128, 128, 4, 2);
  gemm.back() = "warp_spec(C_sum, consumers=2, stages=4, overlap=1)";
  const driver::Compilation plain = compile_for_arch("assets/specs/gemm.nt", gemm, {"M=256", "N=256", "K=256"}, "sm_90a");
  EXPECT_FALSE(plain.ma_module);
  EXPECT_NE(plain.schedule_error.find("reads no dot result inside the iteration"), std::string::npos)
      << plain.schedule_error;
  EXPECT_NE(refusal({"warp_spec(C_sum, consumers=2, overlap=2)"}, {}).find("overlap is 0 or 1"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::matile
