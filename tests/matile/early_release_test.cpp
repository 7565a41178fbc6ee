// Early release of ring operands (lower.h rule 6, lower_hopper.cpp plan_early_release): in a
// warp-specialized attention loop the consumers release K, whose QKᵀ the iteration waits for
// before its softmax, in that iteration, and V in the next. The producer refills K's slot while
// V's is still read, so an overlapped loop runs on a ring of two slots (FlashAttention-3's
// separate K and V pipelines). The MA interpreter runs every form against the float64
// reference with its mbarrier, race and deadlock checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/matile/interpreter.h"
#include "core/matile/ir.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::compile_scheduled;
using nautilus::testing::count_ops;
using nautilus::testing::expect_stage_matches_reference;
using nautilus::testing::roles_op;

// `early_stages` > 0: K's ring of its own depth (the pipeline decision's early_stages).
std::vector<std::string> attention(bool causal, int stages, bool overlap, bool persistent = false,
                                   int key_tile = 64, int early_stages = 0) {
  std::vector<std::string> d = nautilus::testing::warp_spec_attention(
      {.causal = causal, .key_tile = key_tile, .consumers = 2, .stages = stages, .overlap = overlap});
  if (persistent) d.push_back("persistent(O_sum_acc, scheduler=static)");
  if (early_stages > 0) {
    d.push_back("pipeline(O_sum_acc, stages=" + std::to_string(stages) +
                ", early_stages=" + std::to_string(early_stages) + ")");
  }
  return d;
}

// Lowered for sm_90a with early release wherever it applies (not only where it buys room).
driver::Compilation compile_early(const std::string& path, const std::vector<std::string>& decisions,
                                  const std::vector<std::string>& sizes,
                                  LowerOptions::RingRelease release = LowerOptions::RingRelease::Early) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = "sm_90a";
  options.matile.ring_release = release;
  return compile_scheduled(path, decisions, sizes, std::move(options));
}

const MBarrierAlloc* barrier(const Kernel& kernel, const std::string& name) {
  for (const MBarrierAlloc& b : kernel.mbarriers) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

const SharedAlloc* ring_of(const Kernel& kernel, const std::string& operand) {
  for (const SharedAlloc& a : kernel.shared) {
    if (a.name.rfind(operand, 0) == 0 && a.name.find("_ring") != std::string::npos) return &a;
  }
  return nullptr;
}

TEST(EarlyRelease, AttentionReleasesKInItsIterationAndVInTheNext) {
  const driver::Compilation compilation = compile_early(
      "assets/specs/attention.nt", attention(false, 2, true), {"B=1", "H=2", "M=256", "N=300", "D=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  const SharedAlloc* k_ring = ring_of(kernel, "K");
  const SharedAlloc* v_ring = ring_of(kernel, "V");
  ASSERT_TRUE(k_ring && v_ring);
  EXPECT_TRUE(k_ring->released_in_iteration);
  EXPECT_FALSE(v_ring->released_in_iteration);
  EXPECT_EQ(k_ring->stages, 2);
  const MBarrierAlloc* early_full = barrier(kernel, "early_full");
  const MBarrierAlloc* early_empty = barrier(kernel, "early_empty");
  ASSERT_TRUE(early_full && early_empty && barrier(kernel, "full") && barrier(kernel, "empty"));
  EXPECT_EQ(early_full->arrivals, 1);  // the producer's arrive.expect_tx of K's bytes
  EXPECT_EQ(early_empty->arrivals, 8);  // one per consumer warp
  // The producer waits on both empties and announces each group's bytes apart.
  const Op* roles = roles_op(kernel);
  ASSERT_TRUE(roles);
  int producer_waits = 0, announcements = 0;
  count_ops(*roles->roles[0].body, [&](const Op& op) {
    if (op.kind == OpKind::MBarrierWait) ++producer_waits;
    if (op.kind == OpKind::MBarrierArrive && op.tx_bytes > 0) ++announcements;
    return false;
  });
  EXPECT_GE(producer_waits, 2);
  EXPECT_GE(announcements, 3);  // K, V, and the query tile once
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 3);
}

// Every attention form with two release groups, on two slots and on three, against the float64
// reference: plain and overlapped, causal with skipped tiles (trip counts of 0 and a split
// loop), a query tile with one key tile, grouped heads, 128-key tiles at d 128.
TEST(EarlyRelease, AttentionFormsOnTwoAndThreeSlotsMatchTheReference) {
  struct Case {
    std::string spec;
    bool causal, overlap;
    int stages, key_tile;
    std::vector<std::string> sizes;
    int early_stages = 0;
  };
  const std::vector<Case> cases = {
      {"assets/specs/attention.nt", false, false, 2, 64, {"B=1", "H=2", "M=200", "N=136", "D=80"}},
      {"assets/specs/attention.nt", false, true, 2, 64, {"B=1", "H=1", "M=128", "N=64", "D=64"}},
      {"assets/specs/attention.nt", false, true, 3, 64, {"B=1", "H=2", "M=200", "N=300", "D=64"}},
      {"assets/specs/causal_attention.nt", true, true, 2, 64, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      {"assets/specs/causal_attention.nt", true, false, 2, 64, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      {"assets/specs/gqa_attention.nt", false, true, 2, 64, {"B=1", "H=4", "KH=2", "M=130", "N=200", "D=64"}},
      {"assets/specs/attention.nt", false, true, 2, 128, {"B=1", "H=1", "M=256", "N=384", "D=128"}},
      // K and V on rings of different depths: 2 and 3, 3 and 2, 1 and 2.
      {"assets/specs/attention.nt", false, true, 3, 64, {"B=1", "H=2", "M=200", "N=456", "D=64"}, 2},
      {"assets/specs/causal_attention.nt", true, false, 2, 64, {"B=1", "H=2", "M=300", "N=300", "D=64"}, 3},
      {"assets/specs/attention.nt", false, false, 2, 64, {"B=1", "H=1", "M=128", "N=320", "D=64"}, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.spec + (c.overlap ? " overlap" : "") + " stages " + std::to_string(c.stages) + " " +
                 c.sizes.back());
    const driver::Compilation compilation =
        compile_early(c.spec, attention(c.causal, c.stages, c.overlap, false, c.key_tile, c.early_stages),
                      c.sizes);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    ASSERT_TRUE(barrier(kernel, "early_empty"));
    EXPECT_EQ(ring_of(kernel, "K")->stages, c.early_stages > 0 ? c.early_stages : c.stages);
    EXPECT_EQ(ring_of(kernel, "V")->stages, c.stages);
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 5);
  }
}

// A persistent CTA's ring runs on from tile to tile: the early group's releases (one per
// iteration, none on behalf of iteration -1) and the late group's (one per iteration plus the
// tile's -1) must both stay in step with the producer's fills across tiles of different
// lengths (causal) and under every interleaving of the roles the interpreter tries.
TEST(EarlyRelease, PersistentCtasKeepBothGroupsInStepAcrossTiles) {
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    // Full rows: both rings of 2; causal: V on 3, K on 2 (their positions wrap apart).
    const driver::Compilation compilation =
        compile_early(causal ? "assets/specs/causal_attention.nt" : "assets/specs/attention.nt",
                      causal ? attention(true, 3, true, true, 64, 2) : attention(false, 2, true, true),
                      {"B=1", "H=2", "M=520", "N=520", "D=64"});
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    ASSERT_TRUE(barrier(*compilation.ma_module->kernels.at(0), "early_empty"));
    driver::EvalOptions eval;
    eval.stage = driver::Stage::MATile;
    eval.seed = 11;
    const driver::EvalResult reference = driver::evaluate(compilation, eval);
    ASSERT_TRUE(reference.ran) << reference.error;
    for (const uint64_t seed : {1u, 2u, 3u}) {
      InterpretOptions options;
      options.persistent_ctas = 3;
      options.schedule_seed = seed;
      const InterpretResult run = interpret(*compilation.ma_module, reference.inputs, options);
      ASSERT_TRUE(run.ok) << run.error;
      const ErrorReport error = compare_tensors(run.outputs.at("O"), reference.reference.at("O"));
      EXPECT_LT(error.max_relative_error, 2e-2) << "seed " << seed;
    }
  }
}

// A GEMM's A and B are read by the dot whose accumulator only the next iteration reads: one
// release group, one arrival on `full` per slot, no early barrier.
TEST(EarlyRelease, AGemmKeepsOneReleaseGroup) {
  const driver::Compilation compilation = compile_early(
      "assets/specs/gemm.nt",
      {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)",
       "bind(C_sum, m_o=grid.y, n_o=grid.x)", "warp_spec(C_sum, consumers=2, stages=3)"},
      {"M=256", "N=256", "K=320"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  EXPECT_FALSE(barrier(kernel, "early_empty"));
  ASSERT_TRUE(barrier(kernel, "full"));
  EXPECT_EQ(barrier(kernel, "full")->arrivals, 1);
  for (const SharedAlloc& a : kernel.shared) EXPECT_FALSE(a.released_in_iteration) << a.name;
}

// The default, RingRelease::Auto, releases early only where that buys shared memory: at d 64 a
// three-slot ring of K and V released together fits beside the query tile and the staged
// epilogue, so it has one release group; at d 128 in a persistent kernel the together ring
// (3 x 64 KB) leaves the 32 KB staging tile no room, so K is released early on its 2 slots; and
// two overlapped slots exist only with early release.
TEST(EarlyRelease, AutoReleasesEarlyOnlyWhereItBuysSharedMemory) {
  struct Case {
    int d, stages, early_stages;
    bool persistent, early;
    std::string why;
    int k_slots;  // the K ring's depth
  };
  const std::vector<Case> cases = {
      {64, 3, 2, true, false, "", 3},
      {128, 3, 2, true, true, "left the staged epilogue no shared memory", 2},
      // No depth in the schedule: early release at 3 slots frees nothing; at 2 it makes room.
      {128, 3, 0, true, true, "left the staged epilogue no shared memory; the early ring takes 2 slots", 2},
      {64, 2, 0, false, true, "the ring released together failed", 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE("d " + std::to_string(c.d) + ", " + std::to_string(c.stages) + " stages");
    const driver::Compilation compilation = compile_early(
        "assets/specs/attention.nt", attention(false, c.stages, true, c.persistent, c.d == 128 ? 128 : 64, c.early_stages),
        {"B=1", "H=2", "M=256", "N=512", "D=" + std::to_string(c.d)}, LowerOptions::RingRelease::Auto);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error << compilation.internal_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_EQ(barrier(kernel, "early_empty") != nullptr, c.early);
    const SharedAlloc* k_ring = ring_of(kernel, "K");
    ASSERT_TRUE(k_ring);
    EXPECT_EQ(k_ring->stages, c.k_slots);
    bool noted = false, staged_from_fragments = false;
    for (const std::string& note : kernel.notes) {
      if (note.rfind("early release: ", 0) == 0) noted = note.find(c.why) != std::string::npos;
      if (note.find("stored from its fragments") != std::string::npos) staged_from_fragments = true;
    }
    EXPECT_EQ(noted, c.early);
    EXPECT_FALSE(staged_from_fragments);
  }
}

}  // namespace
}  // namespace nautilus::matile
