// Ping-pong of the consumer warpgroups (warp_spec's pingpong=1, core/matile/lower_hopper.cpp):
// the MA interpreter runs each warpgroup of such a role as its own thread of control, so the
// per-warpgroup named barriers are executed and checked. A hand-built cooperative GEMM with the
// barrier sequence matches the reference in every interleaving, and its broken variants (no seed,
// no drain, no epilogue barrier) are caught with their typed errors; the lowering's ping-pong
// GEMM and attention (plain and causal, overlap 0 and 1) match the float64 reference at sizes
// that are no tile multiples; existing kernels run alike with their warpgroups apart; the
// decision refuses what cannot apply; the emitter picks each warpgroup's barrier id.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/codegen/emit_cuda.h"
#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/matile/interpreter.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "tests/common/hopper_kernels.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::compile_for_arch;
using nautilus::testing::roles_op;
using nautilus::testing::describe_failure;
using nautilus::testing::count_ops;
using nautilus::testing::expect_stage_matches_reference;
using testing::HopperBug;
using testing::HopperGemmShape;
using testing::hopper_gemm;
using testing::hopper_gemm_inputs;

HopperGemmShape pingpong_shape() {
  HopperGemmShape shape{72, 40, 200, 2};
  shape.cooperative = true;
  shape.pingpong = true;
  return shape;
}

// ---- the hand-built cooperative GEMM with the ping-pong barriers

TEST(PingPong, HandBuiltGemmMatchesInEveryInterleaving) {
  const HopperGemmShape shape = pingpong_shape();
  const ModulePtr module = hopper_gemm(shape);
  ASSERT_TRUE(verify(*module).empty()) << verify(*module).front();
  const std::string text = print_module(*module);
  EXPECT_NE(text.find("bar.sync [1, 2] by warpgroup, 256"), std::string::npos) << text;
  EXPECT_NE(text.find("bar.arrive [-, 1] by warpgroup, 256"), std::string::npos) << text;
  const TensorMap inputs = hopper_gemm_inputs(shape, 3);
  HopperGemmShape lockstep = shape;
  lockstep.pingpong = false;
  const InterpretResult reference = interpret(*hopper_gemm(lockstep), inputs);
  ASSERT_TRUE(reference.ok) << describe_failure(reference);
  for (uint64_t seed : {0u, 1u, 2u, 3u, 4u}) {
    InterpretOptions options;
    options.schedule_seed = seed;
    const InterpretResult result = interpret(*module, inputs, options);
    ASSERT_TRUE(result.ok) << "seed " << seed << ": " << describe_failure(result);
    EXPECT_EQ(result.outputs.at("C").values, reference.outputs.at("C").values) << "seed " << seed;
    // 4 k steps: per warpgroup 4 turns passed (bar.arrive), plus the seed; one CTA per
    // 128 x 64 tile: 1 x 1 tiles.
    EXPECT_EQ(result.instructions.at("bar.arrive"), 2u * 4 + 1) << "seed " << seed;
  }
}

struct BrokenPingPong {
  HopperBug bug;
  InterpretErrorKind kind;
  std::vector<std::string> message;  // pieces of the error
};

TEST(PingPong, BrokenBarrierSequencesAreCaught) {
  const std::vector<BrokenPingPong> cases = {
      // Nobody lets warpgroup 0 start: it waits on barrier 1 and warpgroup 1 on barrier 2.
      {HopperBug::PingPongMissingSeed, InterpretErrorKind::Deadlock,
       {"deadlock", "role consumers warpgroup 0 waits", "named barrier 1", "role consumers warpgroup 1 waits",
        "named barrier 2", "128 of 256 threads arrived"}},
      // Warpgroup 1's last pass is never consumed: barrier 1 stays mid-phase.
      {HopperBug::PingPongMissingDrain, InterpretErrorKind::ArrivalCountMismatch,
       {"named barrier 1 in a partial phase", "128 of 256", "role consumers warpgroup 1 arrived"}},
  };
  const HopperGemmShape shape = pingpong_shape();
  for (const BrokenPingPong& broken : cases) {
    for (uint64_t seed : {0u, 7u}) {
      InterpretOptions options;
      options.schedule_seed = seed;
      const InterpretResult result = interpret(*hopper_gemm(shape, broken.bug), hopper_gemm_inputs(shape, 5), options);
      ASSERT_FALSE(result.ok) << "seed " << seed;
      EXPECT_EQ(result.error_kind, broken.kind) << "seed " << seed << ": " << describe_failure(result);
      for (const std::string& piece : broken.message) {
        EXPECT_NE(result.error.find(piece), std::string::npos) << piece << " in " << describe_failure(result);
      }
    }
  }
}

// Warpgroup 0 stores the C tile with TMA after warpgroup 1's stmatrix wrote its half: with a
// bar.sync that orders each warpgroup's threads among themselves only, the read is a race between
// two threads of control.
TEST(PingPong, ARaceBetweenWarpgroupsRunningApartIsCaught) {
  const HopperGemmShape shape = pingpong_shape();
  const InterpretResult result =
      interpret(*hopper_gemm(shape, HopperBug::EpilogueBarrierPerWarpgroup), hopper_gemm_inputs(shape, 5));
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error_kind, InterpretErrorKind::UnsynchronizedRead) << describe_failure(result);
  EXPECT_NE(result.error.find("written by role consumers warpgroup 1"), std::string::npos) << describe_failure(result);
}

// Kernels without per-warpgroup barriers keep their lockstep roles; with split_warpgroups their
// warpgroups run apart and give the same numbers (the cooperative GEMM's elected arrive waits
// for both warpgroups, as the emitter's role barrier does).
TEST(PingPong, WarpgroupsRunApartOnRequestGiveTheSameResult) {
  HopperGemmShape shape{72, 40, 200, 2};
  shape.cooperative = true;
  const ModulePtr module = hopper_gemm(shape);
  const TensorMap inputs = hopper_gemm_inputs(shape, 4);
  const InterpretResult lockstep = interpret(*module, inputs);
  ASSERT_TRUE(lockstep.ok) << describe_failure(lockstep);
  for (uint64_t seed : {0u, 3u}) {
    InterpretOptions options;
    options.split_warpgroups = true;
    options.schedule_seed = seed;
    const InterpretResult apart = interpret(*module, inputs, options);
    ASSERT_TRUE(apart.ok) << describe_failure(apart);
    EXPECT_EQ(apart.outputs.at("C").values, lockstep.outputs.at("C").values);
    EXPECT_EQ(apart.instructions.at("wgmma.m64n64k16"), lockstep.instructions.at("wgmma.m64n64k16"));
  }
}

// ---- the lowering's ping-pong from the math

std::vector<std::string> gemm_schedule(const std::string& warp_spec) {
  return {"tile(C_sum, m=128, n=128, k=64)", "reverse_compute_at(C, C_sum, n_o)",
          "bind(C_sum, m_o=grid.y, n_o=grid.x)", warp_spec};
}

std::vector<std::string> attention_schedule(bool causal, int stages, bool overlap, bool pingpong) {
  return nautilus::testing::warp_spec_attention(
      {.causal = causal, .stages = stages, .overlap = overlap, .pingpong = pingpong});
}

// The consumers' per-warpgroup barriers, printed ("bar.sync [1, 2] by warpgroup, 256", ...).
std::vector<std::string> turn_barriers(const Kernel& kernel) {
  std::vector<std::string> lines;
  const Op* roles = roles_op(kernel);
  if (!roles) return lines;
  count_ops(*roles->roles.back().body, [&](const Op& op) {
    if (op.kind == OpKind::NamedBarrier && !op.warpgroup_ids.empty()) lines.push_back(print_op(kernel, op));
    return false;
  });
  return lines;
}

// Runs the MA module once more in random interleavings on the inputs `evaluate` drew, and
// expects the outputs it gave: the turns change when each warpgroup runs, never the numbers.
void expect_same_in_random_interleavings(const driver::Compilation& compilation, uint64_t seed) {
  driver::EvalOptions eval;
  eval.stage = driver::Stage::MATile;
  eval.seed = seed;
  const driver::EvalResult evaluated = driver::evaluate(compilation, eval);
  ASSERT_TRUE(evaluated.passed()) << evaluated.error;
  for (uint64_t schedule : {5u, 11u}) {
    InterpretOptions options;
    options.schedule_seed = schedule;
    const InterpretResult result = interpret(*compilation.ma_module, evaluated.inputs, options);
    ASSERT_TRUE(result.ok) << describe_failure(result);
    for (const auto& [name, data] : evaluated.actual) {
      EXPECT_EQ(result.outputs.at(name).values, data.values) << name << " interleaving " << schedule;
    }
  }
}

TEST(PingPong, GemmTakesTurnsAndMatchesTheReference) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule("warp_spec(C_sum, consumers=2, stages=3, pingpong=1)"),
              {"M=200", "N=136", "K=328"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  // The seed, the turn taken and passed in the loop, and warpgroup 0's closing wait.
  EXPECT_EQ(turn_barriers(kernel),
            (std::vector<std::string>{"bar.arrive [-, 1] by warpgroup, 256", "bar.sync [1, 2] by warpgroup, 256",
                                      "bar.arrive [2, 1] by warpgroup, 256", "bar.sync [1, -] by warpgroup, 256"}));
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 3, "ping-pong GEMM");
  expect_same_in_random_interleavings(compilation, 4);
}

struct AttentionCase {
  std::string spec;
  bool causal;
  int stages;
  bool overlap;
  std::vector<std::string> sizes;
};

TEST(PingPong, AttentionPlainAndCausalWithAndWithoutOverlapMatchTheReference) {
  const std::vector<AttentionCase> cases = {
      {"assets/specs/attention.nt", false, 2, false, {"B=1", "H=2", "M=200", "N=136", "D=64"}},
      {"assets/specs/causal_attention.nt", true, 2, false, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
      {"assets/specs/attention.nt", false, 3, true, {"B=1", "H=2", "M=200", "N=136", "D=80"}},
      {"assets/specs/causal_attention.nt", true, 3, true, {"B=1", "H=2", "M=300", "N=300", "D=64"}},
  };
  for (const AttentionCase& c : cases) {
    const std::string what = c.spec + (c.overlap ? " overlap=1 " : " ") + c.sizes[2];
    SCOPED_TRACE(what);
    const driver::Compilation compilation =
        compile_for_arch(c.spec, attention_schedule(c.causal, c.stages, c.overlap, true), c.sizes);
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const std::vector<std::string> barriers = turn_barriers(*compilation.ma_module->kernels.at(0));
    // Each main loop (the causal one split into its unmasked and masked halves, the overlapped
    // one with iteration 0 before it) takes and passes the turn once per iteration.
    const auto count = [&](const std::string& line) { return std::count(barriers.begin(), barriers.end(), line); };
    EXPECT_EQ(count("bar.arrive [-, 1] by warpgroup, 256"), 1);
    EXPECT_EQ(count("bar.sync [1, -] by warpgroup, 256"), 1);
    EXPECT_GE(count("bar.sync [1, 2] by warpgroup, 256"), 1);
    EXPECT_EQ(count("bar.sync [1, 2] by warpgroup, 256"), count("bar.arrive [2, 1] by warpgroup, 256"));
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 5, what);
    expect_same_in_random_interleavings(compilation, 6);
  }
}

// Persistent CTAs walk several tiles each, and the turns run on from one tile's last iteration
// to the next tile's first: the seed comes before the tile loop and the closing wait after it
// (inside it, their branches on the warpgroup made ptxas serialize every wgmma, C7520). The
// interpreter launches 3 CTAs for 8 tiles, in lockstep and in random interleavings.
TEST(PingPong, PersistentCtasTakeTurnsTileAfterTile) {
  for (const bool overlap : {false, true}) {
    SCOPED_TRACE(overlap ? "overlap=1" : "overlap=0");
    std::vector<std::string> decisions = attention_schedule(true, 3, overlap, true);
    decisions.push_back("persistent(O_sum_acc)");
    const driver::Compilation compilation =
        compile_for_arch("assets/specs/causal_attention.nt", decisions, {"B=1", "H=2", "M=520", "N=520", "D=64"});
    ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
    const Kernel& kernel = *compilation.ma_module->kernels.at(0);
    EXPECT_TRUE(kernel.persistent);
    const Op* roles = roles_op(kernel);
    ASSERT_TRUE(roles);
    const Region& consumers = *roles->roles.back().body;
    // Directly in the role: the seed (an arrival) and the closing wait, around the tile loop.
    std::vector<std::string> outside;
    const Op* tile_loop = nullptr;
    for (const OpPtr& op : consumers.ops) {
      if (op->kind == OpKind::NamedBarrier && !op->warpgroup_ids.empty()) outside.push_back(print_op(kernel, *op));
      if (op->kind == OpKind::For && op->tile_loop) tile_loop = op.get();
    }
    ASSERT_TRUE(tile_loop);
    ASSERT_EQ(outside.size(), 2u);
    EXPECT_NE(outside[0].find("bar.arrive [-, 1]"), std::string::npos) << outside[0];
    EXPECT_NE(outside[1].find("bar.sync [1, -]"), std::string::npos) << outside[1];
    // Inside it, only the turns: a wait and a pass per main loop (and per split-off loop).
    const int inside = count_ops(*tile_loop->body, [](const Op& op) {
      return op.kind == OpKind::NamedBarrier && !op.warpgroup_ids.empty() &&
             std::count(op.warpgroup_ids.begin(), op.warpgroup_ids.end(), 0) > 0;
    });
    EXPECT_EQ(inside, 0) << "a barrier op some warpgroup skips inside the tile loop";
    expect_stage_matches_reference(compilation, driver::Stage::MATile, 9, "persistent ping-pong");
    expect_same_in_random_interleavings(compilation, 9);
  }
}

// Three consumer warpgroups (a 192-row tile at d 64) pass the turn around: 0 -> 1 -> 2 -> 0.
TEST(PingPong, ThreeConsumersPassTheTurnAround) {
  std::vector<std::string> decisions = attention_schedule(false, 3, true, true);
  decisions[2] = "tile(O_sum_acc, m=192)";
  decisions.back() = "warp_spec(O_sum_acc, consumers=3, stages=3, overlap=1, pingpong=1)";
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/attention.nt", decisions, {"B=1", "H=2", "M=400", "N=296", "D=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const std::vector<std::string> barriers = turn_barriers(*compilation.ma_module->kernels.at(0));
  EXPECT_NE(std::find(barriers.begin(), barriers.end(), "bar.sync [1, 2, 3] by warpgroup, 256"), barriers.end());
  EXPECT_NE(std::find(barriers.begin(), barriers.end(), "bar.arrive [2, 3, 1] by warpgroup, 256"), barriers.end());
  EXPECT_NE(std::find(barriers.begin(), barriers.end(), "bar.arrive [-, -, 1] by warpgroup, 256"), barriers.end());
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 12, "three consumers, ping-pong");
}

// overlap=1 follows FlashAttention-3: in the steady loop the turn is taken before QKᵀ and passed
// once the previous iteration's P·V is issued behind it, before the wait for the scores.
TEST(PingPong, OverlappedAttentionPassesTheTurnAfterPV) {
  const driver::Compilation compilation = compile_for_arch("assets/specs/attention.nt", attention_schedule(false, 3, true, true),
                                                  {"B=1", "H=1", "M=128", "N=256", "D=64"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const Kernel& kernel = *compilation.ma_module->kernels.at(0);
  int steady_loops = 0;
  count_ops(*roles_op(kernel)->roles.back().body, [&](const Op& op) {
    if (op.kind != OpKind::For) return false;
    std::vector<std::string> order;
    for (const OpPtr& inner : op.body->ops) {
      if (inner->kind == OpKind::Wgmma) order.push_back("wgmma");
      if (inner->kind == OpKind::NamedBarrier) order.push_back(inner->arrive_only ? "pass" : "take");
      if (inner->kind == OpKind::WgmmaWaitGroup) order.push_back("wait" + std::to_string(inner->extent));
    }
    if (order == std::vector<std::string>{"take", "wgmma", "wgmma", "pass", "wait1", "wait0"}) ++steady_loops;
    return false;
  });
  EXPECT_EQ(steady_loops, 1);
}

// A pipeline decision after warp_spec turns the ping-pong on or off and keeps the rest of the
// kernel's pipeline (what a measurement appends to a searched schedule).
TEST(PingPong, APipelineDecisionTurnsItOnAndOff) {
  const std::vector<std::string> sizes = {"B=1", "H=1", "M=256", "N=256", "D=64"};
  std::vector<std::string> on = attention_schedule(false, 3, true, false);
  on.push_back("pipeline(O_sum_acc, pingpong=1)");
  const driver::Compilation with = compile_for_arch("assets/specs/attention.nt", on, sizes);
  ASSERT_TRUE(with.ma_module) << with.schedule_error;
  EXPECT_FALSE(turn_barriers(*with.ma_module->kernels.at(0)).empty());
  int ring = 0;
  for (const SharedAlloc& alloc : with.ma_module->kernels.at(0)->shared) ring = std::max(ring, alloc.stages);
  EXPECT_EQ(ring, 3);
  std::vector<std::string> off = attention_schedule(false, 3, true, true);
  off.push_back("pipeline(O_sum_acc, pingpong=0)");
  const driver::Compilation without = compile_for_arch("assets/specs/attention.nt", off, sizes);
  ASSERT_TRUE(without.ma_module) << without.schedule_error;
  EXPECT_TRUE(turn_barriers(*without.ma_module->kernels.at(0)).empty());
}

TEST(PingPong, TheDecisionSaysWhereItCannotApply) {
  const driver::Compilation one = compile_for_arch(
      "assets/specs/gemm.nt", gemm_schedule("warp_spec(C_sum, consumers=1, stages=3, pingpong=1)"), {});
  EXPECT_FALSE(one.ma_module);
  EXPECT_NE(one.schedule_error.find("no other warpgroup to take turns with"), std::string::npos) << one.schedule_error;
  const driver::Compilation two = compile_for_arch(
      "assets/specs/gemm.nt", gemm_schedule("warp_spec(C_sum, consumers=2, pingpong=2)"), {});
  EXPECT_FALSE(two.ma_module);
  EXPECT_NE(two.schedule_error.find("pingpong is 0 or 1"), std::string::npos) << two.schedule_error;
  const driver::Compilation word = compile_for_arch(
      "assets/specs/gemm.nt", gemm_schedule("warp_spec(C_sum, consumers=2, ping=1)"), {});
  EXPECT_NE(word.schedule_error.find("expected consumers, stages, overlap or pingpong"), std::string::npos)
      << word.schedule_error;
}

// The emitter picks warpgroup g's id from the role's thread index; the role's own barrier for
// elected arrives keeps clear of the ping-pong ids.
TEST(PingPong, TheEmitterPicksEachWarpgroupsBarrier) {
  const driver::Compilation compilation =
      compile_for_arch("assets/specs/gemm.nt", gemm_schedule("warp_spec(C_sum, consumers=2, stages=3, pingpong=1)"),
              {"M=256", "N=256", "K=256"});
  ASSERT_TRUE(compilation.ma_module) << compilation.schedule_error;
  const auto emitted = codegen::emit_cuda(*compilation.ma_module, {});
  ASSERT_TRUE(emitted) << emitted.error().message;
  const std::string& cuda = emitted->source;
  EXPECT_NE(cuda.find("if (tid / 128 == 1) named_barrier_arrive(1, 256);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("named_barrier_sync((tid / 128 == 0 ? 1 : 2), 256);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("named_barrier_arrive((tid / 128 == 0 ? 2 : 1), 256);"), std::string::npos) << cuda;
  EXPECT_NE(cuda.find("if (tid / 128 == 0) named_barrier_sync(1, 256);"), std::string::npos) << cuda;
  EXPECT_EQ(cuda.find("named_barrier_sync(0,"), std::string::npos);
}

}  // namespace
}  // namespace nautilus::matile
