// Persistent CTAs with the static scheduler (`persistent(BLOCK, scheduler=static)`,
// core/sched/persistent.h; Kernel::persistent and the tile loop, ir.h; the dynamic scheduler has
// dynamic_tiles_test.cpp): each role of a warp-specialized kernel walks the CTA's tiles, its ring
// position continuing from tile to tile. The MA interpreter runs such kernels on a few CTAs, in
// every interleaving of the roles, against the float64 reference; and it catches the two hazards
// the form adds (a staging buffer or a tile copied once, overwritten while the previous tile
// still reads it).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/matile/interpreter.h"
#include "core/matile/ir.h"
#include "core/matile/printer.h"
#include "core/matile/visitor.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::barrier_index;
using nautilus::testing::compile_for_arch;
using nautilus::testing::program_order;
using nautilus::testing::role_named;
using nautilus::testing::roles_op;
using nautilus::testing::without_op;
using nautilus::testing::count_ops;

std::vector<std::string> gemm_schedule(bool persistent, int group = 1) {
  std::vector<std::string> d = {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)",
                                "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=3)"};
  if (group > 1) d.push_back("tile_order(C_sum, group=" + std::to_string(group) + ")");
  if (persistent) d.push_back("persistent(C_sum, scheduler=static)");
  return d;
}

std::vector<std::string> attention_schedule(bool causal, bool overlap) {
  std::vector<std::string> d = nautilus::testing::warp_spec_attention({.causal = causal, .overlap = overlap});
  d.push_back("persistent(O_sum_acc, scheduler=static)");
  return d;
}

// Runs the compiled module's MA stage with the given CTA count and role interleaving and
// checks every output against the float64 reference of the same inputs.
void expect_matches_reference(const driver::Compilation& compilation, int64_t ctas, uint64_t seed) {
  driver::EvalOptions eval;
  eval.stage = driver::Stage::MATile;
  eval.seed = 7;
  const driver::EvalResult reference = driver::evaluate(compilation, eval);
  ASSERT_TRUE(reference.ran) << reference.error;
  ASSERT_TRUE(reference.passed());
  InterpretOptions options;
  options.persistent_ctas = ctas;
  options.schedule_seed = seed;
  const InterpretResult run = interpret(*compilation.ma_module, reference.inputs, options);
  ASSERT_TRUE(run.ok) << run.error;
  for (const auto& [name, expected] : reference.reference) {
    ASSERT_TRUE(run.outputs.count(name)) << name;
    const ErrorReport error = compare_tensors(run.outputs.at(name), expected);
    EXPECT_LT(error.max_relative_error, 2e-2) << name << " with " << ctas << " CTAs, seed " << seed;
  }
}

int tile_loops(const Region& region) {
  return count_ops(region, [](const Op& op) { return op.kind == OpKind::For && op.tile_loop; });
}

TEST(Persistent, EachRoleWalksTheTilesAndTheRingContinuesAcrossThem) {
  // 2 x 3 tiles of 128 x 128, 5 k steps each around a ring of 3: the ring's position at a
  // tile's start is not a multiple of its stages, so a ring restarted per tile would deadlock.
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(true), {"M=200", "N=296", "K=320"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_TRUE(kernel.persistent);
  ASSERT_EQ(kernel.grid.size(), 2u);  // the tile space keeps its axes
  const Op* roles = roles_op(kernel);
  ASSERT_TRUE(roles);
  for (const WarpRole& role : roles->roles) EXPECT_EQ(tile_loops(*role.body), 1) << role.name;
  const std::string text = print_module(*compilation.ma_module);
  EXPECT_NE(text.find(" persistent warps"), std::string::npos);
  EXPECT_NE(text.find("in tiles(6) iter_args(%ring_base"), std::string::npos) << text;
  for (int64_t ctas : {1, 2, 4, 6}) {
    for (uint64_t seed : {0u, 3u}) expect_matches_reference(compilation, ctas, seed);
  }
}

TEST(Persistent, AGroupedTileOrderIsWalkedByTheTileLoops) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(true, 2), {"M=600", "N=304", "K=136"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  EXPECT_EQ(compilation.ma_module->kernels.at(0)->tile_group, 2);
  for (int64_t ctas : {3, 5}) expect_matches_reference(compilation, ctas, 1);
}

TEST(Persistent, AttentionWithItsQueryTileCopiedOncePerTileMatchesTheReference) {
  struct Case {
    std::string spec;
    bool causal, overlap;
    std::vector<std::string> sizes;
  };
  const std::vector<Case> cases = {
      {"assets/specs/attention.nt", false, false, {"B=1", "H=2", "M=300", "N=200", "D=64"}},
      // Causal: query tiles skip different numbers of key tiles, so each tile advances the ring
      // by its own trip count.
      {"assets/specs/causal_attention.nt", true, false, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      {"assets/specs/causal_attention.nt", true, true, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      {"assets/specs/gqa_attention.nt", false, true, {"B=1", "H=4", "KH=2", "M=130", "N=200", "D=64"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec + (c.overlap ? " overlap" : ""));
    const driver::Compilation compilation = compile_for_arch(c.spec, attention_schedule(c.causal, c.overlap), c.sizes);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_GE(barrier_index(kernel, "once_empty"), 0);
    for (uint64_t seed : {0u, 5u}) expect_matches_reference(compilation, 2, seed);
  }
}

bool is_once_release(const Op& op) {
  return op.kind == OpKind::For && op.loop_var && op.loop_var->name.rfind("once_release", 0) == 0;
}

TEST(Persistent, TheConsumersReleaseTheQueryTileInTheLastIterationAfterItsQKt) {
  // Each iteration's QK^T is the query tile's only reader and retires inside the iteration, so
  // the last iteration releases the tile right after that wait: the producer copies the next
  // tile's Q under the last softmax, the last key tile's P.V and the epilogue. Every copy of the
  // iteration body (overlap=1's first iteration, the unmasked and the masked loop) holds the
  // release in a loop of at most one trip, taken in the last iteration only.
  for (const bool overlap : {true, false}) {
    SCOPED_TRACE(overlap ? "overlap" : "no overlap");
    const driver::Compilation compilation = compile_for_arch(
        "assets/specs/causal_attention.nt", attention_schedule(true, overlap), {"B=1", "H=2", "M=300", "N=300", "D=64"});
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    const int once_empty = barrier_index(kernel, "once_empty");
    ASSERT_GE(once_empty, 0);
    const WarpRole* consumers = role_named(kernel, "consumers");
    ASSERT_NE(consumers, nullptr);
    std::vector<const Op*> order;
    program_order(*consumers->body, &order);
    int first_release = -1, last_pv = -1, releases = 0, release_loops = 0;
    for (size_t i = 0; i < order.size(); ++i) {
      const Op& op = *order[i];
      if (op.kind == OpKind::MBarrierArrive && op.mbarrier.barrier == once_empty) {
        ++releases;
        if (first_release < 0) first_release = static_cast<int>(i);
      }
      if (is_once_release(op)) {
        ++release_loops;
        EXPECT_TRUE(op.trip_count) << "a release taken in every iteration";
      }
      if (op.kind == OpKind::For && op.loop_var && op.loop_var->name.size() > 5 &&
          op.loop_var->name.substr(op.loop_var->name.size() - 5) == "_last") {
        last_pv = static_cast<int>(i);
      }
    }
    EXPECT_GE(releases, 2) << print_kernel(kernel);
    EXPECT_EQ(releases, release_loops) << print_kernel(kernel);
    if (overlap) {
      ASSERT_GE(last_pv, 0) << print_kernel(kernel);
      EXPECT_LT(first_release, last_pv) << print_kernel(kernel);
    }
    for (uint64_t seed : {1u, 7u}) expect_matches_reference(compilation, 2, seed);
  }
}

InterpretResult run_broken(const driver::Compilation& compilation, const ModulePtr& broken) {
  driver::EvalOptions eval;
  eval.stage = driver::Stage::MATile;
  const driver::EvalResult reference = driver::evaluate(compilation, eval);
  InterpretOptions options;
  options.persistent_ctas = 2;
  return interpret(*broken, reference.inputs, options);
}

TEST(Persistent, AStagingBufferReusedWithoutABarrierIsCaught) {
  // The consumers store the staged rows themselves (no TMA store): without the barrier before
  // the epilogue's stmatrix the next tile's rows overwrite the staging tile while other warps
  // still read the previous tile's.
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  options.matile.tma_store = LowerOptions::TmaStore::Never;
  const driver::Compilation compilation = nautilus::testing::compile_scheduled(
      "assets/specs/gemm.nt", gemm_schedule(true), {"M=256", "N=256", "K=128"}, options);
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const ModulePtr broken = without_op(compilation.ma_module, "consumers",
                                      [](const Op& op) { return op.kind == OpKind::NamedBarrier; });
  const InterpretResult result = run_broken(compilation, broken);
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error_kind, InterpretErrorKind::StageOverwrite) << result.error;
}

TEST(Persistent, AStagingBufferRewrittenWhileItsTmaStoreReadsIsCaught) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(true), {"M=256", "N=256", "K=128"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  // The wait for the previous tile's TMA store to have read the staging tile, before stmatrix.
  const ModulePtr broken = without_op(compilation.ma_module, "consumers",
                                      [](const Op& op) { return op.kind == OpKind::BulkWaitGroup; });
  const InterpretResult result = run_broken(compilation, broken);
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error_kind, InterpretErrorKind::StageOverwrite) << result.error;
  EXPECT_NE(result.error.find("TMA store"), std::string::npos) << result.error;
}

TEST(Persistent, AQueryTileRecopiedBeforeTheConsumersAreDoneIsCaught) {
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/attention.nt", attention_schedule(false, false), {"B=1", "H=2", "M=256", "N=128", "D=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const int once_empty = barrier_index(kernel, "once_empty");
  ASSERT_GE(once_empty, 0);
  const ModulePtr broken = without_op(compilation.ma_module, "producer", [&](const Op& op) {
    return op.kind == OpKind::MBarrierWait && op.mbarrier.barrier == once_empty;
  });
  const InterpretResult result = run_broken(compilation, broken);
  ASSERT_FALSE(result.ok);
  EXPECT_TRUE(result.error_kind == InterpretErrorKind::StageOverwrite ||
              result.error_kind == InterpretErrorKind::TxCountMismatch)
      << result.error;
}

TEST(Persistent, AQueryTileReleasedInEveryIterationIsCaught) {
  // The release of the query tile taken in every iteration instead of the last: the producer
  // copies the next tile's Q while this tile's later QK^T still read it.
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/attention.nt", attention_schedule(false, true), {"B=1", "H=2", "M=256", "N=384", "D=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const KernelPtr& kernel = compilation.ma_module->kernels.at(0);
  int loosened = 0;
  Rebuilder rebuilder(*kernel);
  const KernelPtr broken_kernel =
      rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed, Rebuilder& out) {
        if (!is_once_release(original)) return out.emit(renamed);
        auto every_iteration = std::make_shared<Op>(*renamed);
        every_iteration->trip_count = nullptr;
        ++loosened;
        out.emit(every_iteration);
      });
  ASSERT_GT(loosened, 0) << print_kernel(*kernel);
  auto broken = std::make_shared<Module>(*compilation.ma_module);
  broken->kernels[0] = broken_kernel;
  const InterpretResult result = run_broken(compilation, broken);
  ASSERT_FALSE(result.ok);
  EXPECT_TRUE(result.error_kind == InterpretErrorKind::StageOverwrite ||
              result.error_kind == InterpretErrorKind::UnlandedRead ||
              result.error_kind == InterpretErrorKind::ArrivalCountMismatch)
      << result.error;
}

TEST(Persistent, KernelsWithoutWarpSpecializationKeepOneCtaPerTileAndSaySo) {
  const driver::Compilation compilation = compile_for_arch(
      "assets/specs/gemm.nt",
      {"tile(C_sum, m=64, n=64, k=32)", "reverse_compute_at(C, C_sum, n_o)",
       "bind(C_sum, m_o=grid.y, n_o=grid.x)", "persistent(C_sum)"},
      {"M=128", "N=128", "K=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_FALSE(kernel.persistent);
  ASSERT_FALSE(kernel.notes.empty());
  EXPECT_NE(kernel.notes.back().find("persistent not applied"), std::string::npos);
  nautilus::testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 2);
}

TEST(Persistent, TheDecisionNeedsATileOnTheGrid) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", {"tile(C_sum, m=64, n=64, k=32)", "persistent(C_sum)"},
              {"M=128", "N=128", "K=64"}, "sm_90a", driver::Stage::Scalar);
  EXPECT_NE(compilation.schedule_error.find("binds no loop to the grid"), std::string::npos)
      << compilation.schedule_error;
}

TEST(Persistent, TheEmittedKernelLoopsOverItsTilesAndAsksForAClampedGrid) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule(true, 2), {"M=600", "N=304", "K=136"}, "sm_90a", driver::Stage::Cuda);
  ASSERT_TRUE(compilation.cuda) << compilation.schedule_error << compilation.internal_error;
  const codegen::EmittedKernel& launch = compilation.cuda->kernels.at(0);
  EXPECT_TRUE(launch.persistent);
  EXPECT_EQ(launch.grid, (std::array<int64_t, 3>{15, 1, 1}));  // 3 x 5 tiles
  const std::string& source = compilation.cuda->source;
  EXPECT_NE(source.find("tile = blockIdx.x; tile < 15; ++tile_step, tile += gridDim.x)"), std::string::npos)
      << source;
  EXPECT_NE(source.find("band"), std::string::npos);  // the grouped order inside the loop
}

}  // namespace
}  // namespace nautilus::matile
