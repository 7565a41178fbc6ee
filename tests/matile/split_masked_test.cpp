// split_masked_loops (core/matile/split_masked.h): causal attention's key loop becomes an
// unmasked loop and a masked one, the split changes no bit of any output, the unmasked loop has
// no select or tile comparison left, and loops without such a mask are left alone.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/driver/evaluate.h"
#include "core/matile/interpreter.h"
#include "core/matile/split_masked.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "core/support/tensor.h"
#include "tests/common/golden.h"
#include "tests/common/matile_ops.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::count_ops;

using nautilus::testing::hand_schedule;
using nautilus::testing::expect_stage_matches_reference;

driver::Compilation compile(const std::string& spec_path_or_text, bool inline_text,
                            const std::vector<std::string>& decisions,
                            const std::vector<std::string>& sizes) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  if (inline_text) {
    return nautilus::testing::compile_scheduled(
        std::make_shared<SourceFile>("inline.nt", spec_path_or_text), decisions, sizes, options);
  }
  return nautilus::testing::compile_scheduled(spec_path_or_text, decisions, sizes, options);
}

// The module the placement produced, before split-masked ran.
ModulePtr placed_module(const driver::Compilation& compilation) {
  for (const driver::Snapshot& snapshot : compilation.log) {
    if (snapshot.pass == "place") return snapshot.ma_module;
  }
  return nullptr;
}

const driver::Snapshot* split_snapshot(const driver::Compilation& compilation) {
  for (const driver::Snapshot& snapshot : compilation.log) {
    if (snapshot.pass == "split-masked") return &snapshot;
  }
  return nullptr;
}

std::vector<const Op*> top_level_loops(const Kernel& kernel) {
  std::vector<const Op*> loops;
  for (const OpPtr& op : kernel.body->ops) {
    if (op->kind == OpKind::For) loops.push_back(op.get());
  }
  return loops;
}

// The mask's select and comparison work on index tiles; the finite stand-in of the running max
// (`Mx == -inf ? 0 : Mx`, rolling_update) compares floats and is not a mask.
bool is_tile_compare(const Op& op) {
  return op.kind == OpKind::Compare && op.results[0]->type.rank() > 0 &&
         op.operands[0]->type.dtype == DType::Index;
}
bool is_select(const Op& op) {
  return op.kind == OpKind::Select && op.results[0]->type.rank() > 1;
}

// Both modules run on the same inputs and produce the same bits.
void expect_same_outputs(const Module& before, const Module& after, uint64_t seed) {
  const TensorMap inputs = nautilus::testing::module_inputs(before, seed);
  const InterpretResult a = interpret(before, inputs);
  const InterpretResult b = interpret(after, inputs);
  ASSERT_TRUE(a.ok) << a.error;
  ASSERT_TRUE(b.ok) << b.error;
  ASSERT_EQ(a.outputs.size(), b.outputs.size());
  for (const auto& [name, tensor] : a.outputs) {
    ASSERT_TRUE(b.outputs.count(name)) << name;
    EXPECT_EQ(tensor.values, b.outputs.at(name).values) << name << ", seed " << seed;
  }
}

TEST(SplitMaskedLoops, CausalAttentionRunsItsDiagonalTilesInALoopOfTheirOwn) {
  // 256 keys and queries: 4 key tiles of 64, 2 query tiles of 128 (no partial tiles, so the
  // causal select is the loop's only select).
  const driver::Compilation compilation =
      compile("assets/specs/causal_attention.nt", false, hand_schedule("causal_attention"),
              {"B=1", "H=2", "M=256", "N=256", "D=32"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const driver::Snapshot* split = split_snapshot(compilation);
  ASSERT_NE(split, nullptr);
  EXPECT_FALSE(split->unchanged);
  ASSERT_EQ(compilation.ma_module->kernels.size(), 1u);
  const Kernel& kernel = *compilation.ma_module->kernels[0];

  const std::vector<const Op*> loops = top_level_loops(kernel);
  ASSERT_EQ(loops.size(), 2u);
  const Op& unmasked = *loops[0];
  const Op& masked = *loops[1];
  // The masked loop carries on from the unmasked one's values and starts where it stopped.
  EXPECT_EQ(masked.operands, unmasked.results);
  const Value offset = split_loop_offset(unmasked, masked);
  ASSERT_NE(offset, nullptr);
  EXPECT_EQ(offset->name, "n_o.1");
  EXPECT_EQ(unmasked.pipeline_stages, masked.pipeline_stages);
  // No mask left in the unmasked loop; the masked loop keeps it.
  EXPECT_EQ(count_ops(*unmasked.body, is_select), 0);
  EXPECT_EQ(count_ops(*unmasked.body, is_tile_compare), 0);
  EXPECT_EQ(count_ops(*masked.body, is_select), 1);
  EXPECT_EQ(count_ops(*masked.body, is_tile_compare), 1);

  const ModulePtr before = placed_module(compilation);
  ASSERT_NE(before, nullptr);
  for (uint64_t seed : {1, 2, 3}) expect_same_outputs(*before, *compilation.ma_module, seed);
  for (int seed : {4, 5}) expect_stage_matches_reference(compilation, driver::Stage::MATile, seed);
}

TEST(SplitMaskedLoops, OtherTileShapesAndSizesKeepTheirResults) {
  // 64 query rows with 128-key tiles (the prefix in units of two query tiles), 1 and 3 stages,
  // and more keys than queries (the diagonal off the corner).
  const std::vector<std::vector<std::string>> schedules = {
      {"rolling_update(O_sum, n, tile=128)", "tile(O_sum_acc, m=64)", "compute_at(S, Mx, n_o)",
       "compute_at(S_sum, S, n_o)", "reverse_compute_at(O, O_sum, m_o)",
       "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "skip_masked(S, n_o)",
       "launch(O_sum_acc, warps=4, stages=1)"},
      {"rolling_update(O_sum, n, tile=32)", "tile(O_sum_acc, m=64)", "compute_at(S, Mx, n_o)",
       "compute_at(S_sum, S, n_o)", "reverse_compute_at(O, O_sum, m_o)",
       "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)", "skip_masked(S, n_o)",
       "launch(O_sum_acc, warps=4, stages=3)"},
  };
  for (const std::vector<std::string>& decisions : schedules) {
    for (const std::vector<std::string>& sizes :
         {std::vector<std::string>{"B=1", "H=1", "M=300", "N=300", "D=16"},
          std::vector<std::string>{"B=1", "H=1", "M=100", "N=260", "D=16"}}) {
      const driver::Compilation compilation =
          compile("assets/specs/causal_attention.nt", false, decisions, sizes);
      ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
      ASSERT_EQ(top_level_loops(*compilation.ma_module->kernels[0]).size(), 2u) << decisions[0];
      expect_same_outputs(*placed_module(compilation), *compilation.ma_module, 11);
      expect_stage_matches_reference(compilation, driver::Stage::MATile, 12);
    }
  }
}

// Attention over 192 queries and keys whose scores are `scores` (an expression of the dot
// `QK`), scheduled with 64 query rows, 32-key tiles and no skip_masked (so the masked loop also
// runs the tiles that are masked entirely); split into an unmasked loop without selects and a
// masked one with `masked_selects`, computing the same bits and the reference's values.
void expect_split_without_selects_first(const std::string& scores, int masked_selects,
                                        uint64_t seed) {
  std::string spec = R"(let B = 1, H = 1, M = 192, N = 192, D = 16
input Q[B, H, M, D] : bf16
input K[B, H, N, D] : bf16
input V[B, H, N, D] : bf16
S[b, h, m, n] = SCORES
Mx[b, h, m]   = max(n) S[b, h, m, n]
P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
L[b, h, m]    = sum(n) P[b, h, m, n]
output O[b, h, m, d] : bf16 = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]
)";
  std::string expression = scores;
  expression.replace(expression.find("QK"), 2, "sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D)");
  spec.replace(spec.find("SCORES"), 6, expression);
  const driver::Compilation compilation =
      compile(spec, true,
              {"rolling_update(O_sum, n, tile=32)", "tile(O_sum_acc, m=64)",
               "compute_at(S, Mx, n_o)", "compute_at(S_sum, S, n_o)",
               "reverse_compute_at(O, O_sum, m_o)",
               "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)"},
              {});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::vector<const Op*> loops = top_level_loops(*compilation.ma_module->kernels[0]);
  ASSERT_EQ(loops.size(), 2u) << scores;
  EXPECT_EQ(count_ops(*loops[0]->body, is_select), 0) << scores;
  EXPECT_EQ(count_ops(*loops[1]->body, is_select), masked_selects) << scores;
  expect_same_outputs(*placed_module(compilation), *compilation.ma_module, seed);
  expect_stage_matches_reference(compilation, driver::Stage::MATile, static_cast<int>(seed) + 1);
}

TEST(SplitMaskedLoops, AMaskWrittenTheOtherWayRoundAndWithoutSkippingIsSplitToo) {
  // `m >= n` instead of `n <= m`.
  expect_split_without_selects_first("select(m >= n, QK, -inf)", 1, 21);
}

TEST(SplitMaskedLoops, AMaskThatNeverCoversAWholeTileDoesNotStopTheSplit) {
  // `n < 1000` holds on every key tile of 192 keys; the causal mask still splits the loop, and
  // both selects leave the first one.
  expect_split_without_selects_first("select(n < 1000, select(n <= m, QK, -inf), -inf)", 2, 41);
}

TEST(SplitMaskedLoops, AttentionWithAPartialLastKeyTileRunsItLast) {
  // 200 keys in tiles of 64: the bounds mask n < 200 (a [64] comparison broadcast to the scores)
  // holds on the whole tile for the first 3 tiles. The query-bounds masks (m < 200) do not
  // depend on the key loop and stay in both loops.
  const driver::Compilation compilation =
      compile("assets/specs/attention.nt", false, hand_schedule("attention"),
              {"B=1", "H=2", "M=200", "N=200", "D=32"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::vector<const Op*> loops = top_level_loops(*compilation.ma_module->kernels[0]);
  ASSERT_EQ(loops.size(), 2u);
  ASSERT_NE(split_loop_offset(*loops[0], *loops[1]), nullptr);
  EXPECT_LT(count_ops(*loops[0]->body, is_select), count_ops(*loops[1]->body, is_select));
  EXPECT_EQ(count_ops(*loops[0]->body, [](const Op& op) {
              return is_tile_compare(op) && op.results[0]->type.shape.size() == 1 &&
                     op.results[0]->type.shape[0] == 64;
            }),
            0);
  for (uint64_t seed : {31, 32}) {
    expect_same_outputs(*placed_module(compilation), *compilation.ma_module, seed);
  }
  expect_stage_matches_reference(compilation, driver::Stage::MATile, 33);
}

TEST(SplitMaskedLoops, LoopsWithoutATileMaskAreLeftAlone) {
  for (const std::string asset : {"attention", "gemm", "softmax"}) {
    const driver::Compilation compilation =
        compile("assets/specs/" + asset + ".nt", false, hand_schedule(asset), {});
    ASSERT_TRUE(compilation.ok()) << asset << ": " << compilation.schedule_error;
    const driver::Snapshot* split = split_snapshot(compilation);
    ASSERT_NE(split, nullptr) << asset;
    EXPECT_TRUE(split->unchanged) << asset;
    EXPECT_EQ(compilation.ma_module, placed_module(compilation)) << asset;
  }
}

}  // namespace
}  // namespace nautilus::matile
