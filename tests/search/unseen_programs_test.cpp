// Variants users write that the assets do not cover (issue "Unseen programs"): each test failed
// before the fix it guards.
//   - a window mask that masks a row's leading key tiles entirely (NaN from exp(-inf - -inf)),
//     and those tiles skipped (skip_masked bounding the key loop from below);
//   - the normalizer written inline, `(sum(n) P * V) / (sum(n) P)`, which left the scores
//     unfused in a kernel of one CTA per score (estimates of seconds);
//   - the search's comparison with the roofline bound of the math, and its wider second try;
//   - grouped-query decode, whose key/value head is read through `h / 8`: the schedule kept a
//     whole split of the keys per thread (arrays of 8192 values that never finished compiling)
//     and read each key/value head once per query head;
//   - a language-model head whose vocabulary is no multiple of a tile: a select on the
//     accumulator in every step of the reduction loop, and CTAs rastered along the vocabulary,
//     so that the weights (larger than L2) came from DRAM once per row of CTAs;
//   - a normalization feeding a GEMM: the normalized operand's tile read straight from global
//     memory into the fragment layout, four bytes per load and no latency hidden;
//   - decode attention, one query row per head: key splits that could not become a grid
//     dimension once the heads were tiled (FlashDecoding never reached).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/cost/device_models.h"
#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/matile/printer.h"
#include "core/vrtile/printer.h"
#include "core/sched/decision.h"
#include "core/search/search.h"
#include "tests/common/spec_test_util.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

using testing::compile;
using testing::run;
using testing::file_input;
using testing::text_input;

// Sliding-window attention with an additive bias: query m sees keys m - W < n <= m. The scores
// are scaled up so that a rescale from a finite stand-in of 0 would overflow.
const char* kSlidingWindow = R"(let B = 1, H = 2, M = 40, N = 40, D = 8, W = 6
input Q[B, H, M, D] : f32
input K[B, H, N, D] : f32
input V[B, H, N, D] : f32
input Bias[H, M, N] : f32
S[b, h, m, n] = select(n <= m and m - n < W, 40 * (sum(d) Q[b, h, m, d] * K[b, h, n, d]) + Bias[h, m, n], -inf)
Mx[b, h, m] = max(n) S[b, h, m, n]
P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
L[b, h, m] = sum(n) P[b, h, m, n]
output O[b, h, m, d] = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]
)";

// Causal attention with tanh soft-capping (Gemma 2) and the normalizer inline.
const char* kSoftCapInline = R"(let B = 1, H = 2, M = 256, N = 256, D = 64
input Q[B, H, M, D] : bf16
input K[B, H, N, D] : bf16
input V[B, H, N, D] : bf16
S[b, h, m, n] = select(n <= m, 30 * tanh((sum(d) Q[b, h, m, d] * K[b, h, n, d]) / sqrt(D) / 30), -inf)
Mx[b, h, m] = max(n) S[b, h, m, n]
P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
output O[b, h, m, d] : bf16 = (sum(n) P[b, h, m, n] * V[b, h, n, d]) / (sum(n) P[b, h, m, n])
)";

// Cross-attention, 77 queries over 1031 keys, normalizer inline.
const char* kCrossInline = R"(let B = 4, H = 16, M = 77, N = 1031, D = 96
input Q[B, H, M, D] : f16
input K[B, H, N, D] : f16
input V[B, H, N, D] : f16
S[b, h, m, n] = sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D)
Mx[b, h, m] = max(n) S[b, h, m, n]
P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
output O[b, h, m, d] : f16 = (sum(n) P[b, h, m, n] * V[b, h, n, d]) / (sum(n) P[b, h, m, n])
)";

// Online softmax over key tiles of 4 for kSlidingWindow, query tiles of 8.
const std::vector<const char*> kWindowFlash = {
    "rolling_update(O, n, tile=4)", "compute_at(S, Mx, n_o)", "compute_at(S_sum, S, n_o)",
    "tile(O_acc, m=8)", "bind(O_acc, b=grid.z, h=grid.y, m_o=grid.x)"};

sched::Schedule parse_schedule(const std::vector<const char*>& texts) {
  sched::Schedule schedule;
  for (const char* text : texts) {
    sched::DecisionParseError error;
    auto decision = sched::parse_decision(text, &error);
    EXPECT_TRUE(decision) << text;
    if (decision) schedule.decisions.push_back(*decision);
  }
  return schedule;
}

void expect_every_stage_passes(const search::SearchInput& input, const sched::Schedule& schedule) {
  const driver::Compilation compilation = compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile, driver::Stage::MATile}) {
    for (uint64_t seed : {0, 3}) {
      driver::EvalOptions options;
      options.stage = stage;
      options.seed = seed;
      const driver::EvalResult result = driver::evaluate(compilation, options);
      ASSERT_TRUE(result.ran) << result.error;
      for (const driver::OutputCheck& output : result.outputs) {
        EXPECT_TRUE(output.passed) << driver::stage_name(stage) << " seed " << seed << ": "
                                   << output.name << " error " << output.error.max_relative_error;
      }
    }
  }
}

TEST(UnseenPrograms, WindowMaskingARowsLeadingKeyTilesGivesNoNaN) {
  // Rows m >= 8 see no key of tile 0 (keys 0..3): their running max is -inf after it.
  const search::SearchInput input = text_input(kSlidingWindow, {});
  expect_every_stage_passes(input, parse_schedule(kWindowFlash));
}

TEST(UnseenPrograms, WindowSkippingStartsAtTheWindowAndMatchesTheReference) {
  // skip_masked bounds the key-tile loop from both sides: rows m >= 8 start past tile 0.
  const search::SearchInput input = text_input(kSlidingWindow, {});
  std::vector<const char*> decisions = kWindowFlash;
  decisions.push_back("skip_masked(S, n_o)");
  expect_every_stage_passes(input, parse_schedule(decisions));
}

TEST(UnseenPrograms, PrefixLmSkipsTheKeyTilesPastBothBoundsAndMatchesTheReference) {
  // Enough query tiles for several waves: below one wave the longest CTA decides and skipping
  // tiles gains nothing.
  const char* prefix_lm = R"(let B = 4, H = 16, M = 2048, N = 2048, D = 64, P = 512
input Q[B, H, M, D] : bf16
input K[B, H, N, D] : bf16
input V[B, H, N, D] : bf16
S[b, h, m, n] = select(n <= m or n < P, sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D), -inf)
Mx[b, h, m] = max(n) S[b, h, m, n]
E[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
output O[b, h, m, d] : bf16 = (sum(n) E[b, h, m, n] * V[b, h, n, d]) / (sum(n) E[b, h, m, n])
)";
  const search::SearchResult result = run(text_input(prefix_lm, {}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_TRUE(std::any_of(result.schedule.decisions.begin(), result.schedule.decisions.end(),
                          [](const sched::Decision& d) { return d.kind == "skip_masked"; }));
  expect_every_stage_passes(text_input(prefix_lm, {"B=1", "H=2", "M=150", "N=150", "D=64", "P=40"}),
                            result.schedule);
}

TEST(UnseenPrograms, DocumentMaskSkipsOtherDocumentsKeyTilesAndMatchesTheReference) {
  // Block-diagonal causal attention over documents of Doc tokens (packed sequences): each query
  // tile visits the key tiles of its own document only, 14 ms -> under 1 ms estimated.
  const char* documents = R"(let B = 1, H = 32, M = 16384, N = 16384, D = 128, Doc = 1024
input Q[B, H, M, D] : bf16
input K[B, H, N, D] : bf16
input V[B, H, N, D] : bf16
S[b, h, m, n] = select(m / Doc == n / Doc and n <= m, sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D), -inf)
Mx[b, h, m] = max(n) S[b, h, m, n]
P[b, h, m, n] = exp(S[b, h, m, n] - Mx[b, h, m])
L[b, h, m] = sum(n) P[b, h, m, n]
output O[b, h, m, d] : bf16 = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]
)";
  const search::SearchResult result = run(text_input(documents, {}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_LT(result.estimate->microseconds, 1000.0) << cost::describe(*result.estimate);
  expect_every_stage_passes(
      text_input(documents, {"H=2", "M=150", "N=150", "D=16", "Doc=40"}), result.schedule);
}

TEST(UnseenPrograms, WindowAttentionSearchedScheduleMatchesTheReference) {
  const search::SearchInput input = text_input(kSlidingWindow, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_TRUE(std::any_of(result.schedule.decisions.begin(), result.schedule.decisions.end(),
                          [](const sched::Decision& d) { return d.kind == "rolling_update"; }));
  expect_every_stage_passes(input, result.schedule);
}

size_t kernels_of(const search::SearchResult& result) {
  return result.estimate ? result.estimate->kernels.size() : 0;
}

TEST(UnseenPrograms, AnInlineNormalizerFusesIntoOneKernel) {
  const search::SearchInput input = text_input(kSoftCapInline, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(kernels_of(result), 1u) << cost::describe(*result.estimate);
  ASSERT_TRUE(result.roofline);
  EXPECT_LT(result.estimate->microseconds, 5.0 * result.roofline->microseconds)
      << cost::describe(*result.estimate);
  // The normalizer as its own statement gets the same kind of kernel.
  std::string separate = kSoftCapInline;
  separate.replace(separate.find("output O"), std::string::npos,
                   "L[b, h, m] = sum(n) P[b, h, m, n]\n"
                   "output O[b, h, m, d] : bf16 = sum(n) P[b, h, m, n] * V[b, h, n, d] / L[b, h, m]\n");
  const search::SearchResult spelled = run(text_input(separate, {}));
  ASSERT_TRUE(spelled.ok) << spelled.error;
  EXPECT_LT(result.estimate->microseconds, 1.5 * spelled.estimate->microseconds);
  const search::SearchInput small = text_input(kSoftCapInline, {"M=40", "N=40", "D=16"});
  const search::SearchResult small_result = run(small);
  ASSERT_TRUE(small_result.ok) << small_result.error;
  expect_every_stage_passes(small, small_result.schedule);
}

TEST(UnseenPrograms, CrossAttentionWithAnInlineNormalizerIsOneKernelNearTheBound) {
  const search::SearchResult result = run(text_input(kCrossInline, {}));
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_EQ(kernels_of(result), 1u) << cost::describe(*result.estimate);
  ASSERT_TRUE(result.roofline);
  EXPECT_LT(result.estimate->microseconds, 5.0 * result.roofline->microseconds);
  EXPECT_TRUE(result.warnings.empty());
}

// Stable Diffusion's cross-attention (bench/variants/cross_attention_sd.nt): image latents
// query the 77 tokens of a CLIP prompt. A key step wider than the 77 keys is one step of 80 (five
// k16 atoms, the last 3 keys masked), so both products stay on the tensor cores; a step of
// exactly 77 had no MMA shape and fell back to CUDA-core dot products (a 20x slower kernel by
// the model).
search::SearchInput prompt_cross_attention(const std::vector<std::string>& sizes) {
  return file_input("bench/variants/cross_attention_sd.nt", sizes);
}

TEST(UnseenPrograms, AKeyStepWiderThanAShortPromptStaysOnTheTensorCores) {
  const search::SearchInput input = prompt_cross_attention({"B=1", "H=2", "M=200"});
  for (const char* step : {"rolling_update(O_sum, n, tile=80)", "rolling_update(O_sum, n, tile=128)"}) {
    const sched::Schedule schedule =
        parse_schedule({step, "compute_at(S, Mx, n_o)", "tile(O_sum_acc, m=64)",
                        "reverse_compute_at(O, O_sum, m_o)",
                        "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)"});
    const driver::Compilation compilation = compile(input, schedule);
    ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
    const std::string ma = matile::print_module(*compilation.ma_module);
    EXPECT_NE(ma.find("for n_o in 0..1 "), std::string::npos) << step << "\n" << ma;
    EXPECT_NE(ma.find("mma.m16n8k16"), std::string::npos) << step << "\n" << ma;
    EXPECT_EQ(ma.find("fma_dot"), std::string::npos) << step << "\n" << ma;
    expect_every_stage_passes(input, schedule);
  }
  // The search's own kernel at Stable Diffusion's sizes takes no CUDA-core dot either.
  const search::SearchResult result = run(prompt_cross_attention({}));
  ASSERT_TRUE(result.ok) << result.error;
  const driver::Compilation searched = compile(prompt_cross_attention({}), result.schedule);
  ASSERT_TRUE(searched.ok()) << searched.schedule_error << searched.internal_error;
  EXPECT_EQ(matile::print_module(*searched.ma_module).find("fma_dot"), std::string::npos)
      << sched::print_decisions(result.schedule.decisions, "; ");
}

// A schedule the search chose, pinned whole, is completed to itself: on the H200 model the
// prompt cross-attention takes 192-row tiles on three consumer warpgroups, and the pinned
// warp_spec (applied before the completion) counts as the 192-row tile's warp specialization.
TEST(UnseenPrograms, TheSearchsOwnScheduleCompletesWhenPinnedWhole) {
  const std::unique_ptr<cost::CostModel> h200 = cost::make_analytical_model(cost::h200_sxm());
  const search::SearchInput input = prompt_cross_attention({});
  const search::SearchResult first = run(input, {}, *h200);
  ASSERT_TRUE(first.ok) << first.error;
  search::SearchOptions pinned;
  pinned.pins = first.schedule.decisions;
  const search::SearchResult again = run(input, pinned, *h200);
  ASSERT_TRUE(again.ok) << again.error << "\npinned: "
                        << sched::print_decisions(first.schedule.decisions, "; ");
  EXPECT_EQ(sched::print_decisions(again.schedule.decisions, "; "),
            sched::print_decisions(first.schedule.decisions, "; "));
}

TEST(UnseenPrograms, ASchedulesFarAboveTheRooflineWidensTheBeamAndWarns) {
  // Without rolling_update nothing fuses the scores: the best left is hundreds of times the
  // bound, and no beam finds better.
  const search::SearchInput input = text_input(kCrossInline, {"B=1", "H=1", "D=16"});
  search::SearchOptions options;
  sched::DecisionParseError error;
  options.forbids.push_back(*sched::parse_decision("rolling_update(O_sum, n)", &error));
  options.forbids.push_back(*sched::parse_decision("rolling_update(O_sum_1, n)", &error));
  const search::SearchResult result = run(input, options);
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_TRUE(result.roofline);
  EXPECT_GT(result.estimate->microseconds, search::kRooflineSuspicion * result.roofline->microseconds);
  // The wider search ran; the result is the better of the two.
  EXPECT_TRUE(result.beam == 3 || result.beam == 12) << result.beam;
  ASSERT_EQ(result.warnings.size(), 1u);
  EXPECT_NE(result.warnings[0].find("x the roofline bound of the math"), std::string::npos)
      << result.warnings[0];
  EXPECT_NE(result.warnings[0].find("also with a beam of 12"), std::string::npos)
      << result.warnings[0];
  EXPECT_NE(result.warnings[0].find("dominates"), std::string::npos) << result.warnings[0];
}

// Grouped-query decode: one query row per head, 8 query heads per key/value head.
const char* kGroupedQueryDecode = R"(let B = 16, H = 64, KH = 8, N = 8192, D = 128
input Q[B, H, D] : bf16
input K[B, KH, N, D] : bf16
input V[B, KH, N, D] : bf16
S[b, h, n] = sum(d) Q[b, h, d] * K[b, h / 8, n, d] / sqrt(D)
Mx[b, h] = max(n) S[b, h, n]
P[b, h, n] = exp(S[b, h, n] - Mx[b, h])
L[b, h] = sum(n) P[b, h, n]
output O[b, h, d] : bf16 = sum(n) P[b, h, n] * V[b, h / 8, n, d] / L[b, h]
)";

TEST(UnseenPrograms, GroupedQueryDecodeTilesTheHeadsOfAGroupTogether) {
  const search::SearchInput input = text_input(kGroupedQueryDecode, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_TRUE(result.roofline);
  EXPECT_LT(result.estimate->microseconds, 5.0 * result.roofline->microseconds)
      << cost::describe(*result.estimate);
  const auto tiles_a_group = [](const sched::Decision& d) {
    return d.kind == "tile" && std::any_of(d.args.begin(), d.args.end(), [](const auto& arg) {
             return arg.key == "h" && arg.is_int() && arg.as_int() == 8;
           });
  };
  EXPECT_TRUE(std::any_of(result.schedule.decisions.begin(), result.schedule.decisions.end(),
                          tiles_a_group));
  // Some spilling may pay; whole rows of keys per thread (thousands of registers) never do.
  for (const cost::KernelCost& kernel : result.estimate->kernels) {
    EXPECT_LE(kernel.registers_per_thread, 2 * 255) << kernel.kernel;
  }
  // In the kernel the key/value tile has no head axis: `(h_o * 8 + h_i) / 8` is `h_o`. 1000
  // keys (not a tile multiple) still give each of up to 8 splits whole key tiles.
  const search::SearchInput small = text_input(kGroupedQueryDecode, {"B=2", "N=1000", "D=16"});
  const driver::Compilation compilation = compile(small, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  expect_every_stage_passes(small, result.schedule);
}

// GPT-2's tied language-model head: logits = X · Wteᵀ with a vocabulary (203 here, 50257 in the
// model) that no tile divides.
const char* kLanguageModelHead = R"(let T = 64, H = 64, V = 203
input X[T, H] : bf16
input Wte[V, H] : bf16
output Logits[t, v] : bf16 = sum(h) X[t, h] * Wte[v, h]
)";

// The lines of `text` between the first line containing `open` and the next line that is
// exactly `close` (a loop body of a printed kernel).
std::string between(const std::string& text, const std::string& open, const std::string& close) {
  const size_t begin = text.find(open);
  if (begin == std::string::npos) return "";
  const size_t end = text.find("\n" + close + "\n", begin);
  return text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

TEST(UnseenPrograms, APartialVocabularyTileUpdatesItsAccumulatorWithoutASelect) {
  const search::SearchInput input = text_input(kLanguageModelHead, {});
  const sched::Schedule schedule = parse_schedule(
      {"tile(Logits_sum, t=32, v=64, h=32)", "reverse_compute_at(Logits, Logits_sum, v_o)",
       "bind(Logits_sum, v_o=grid.y, t_o=grid.x)"});
  const driver::Compilation compilation = compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  // The lanes past the vocabulary are never stored and no reduction reads them: the loads
  // bring zeros there, and the accumulator needs no mask in the loop.
  const std::string loop = between(matile::print_module(*compilation.ma_module), "= for h_o", "  }");
  ASSERT_FALSE(loop.empty()) << matile::print_module(*compilation.ma_module);
  EXPECT_EQ(loop.find("select"), std::string::npos) << loop;
  EXPECT_NE(matile::print_module(*compilation.ma_module).find("bounds [64, 203]"), std::string::npos);
  expect_every_stage_passes(input, schedule);
}

// A softmax-weighted combine of expert outputs, one CTA per token (its 8 experts need no
// tiling): the bf16 cast of the combined row is written by the same CTA, instead of an f32
// row stored for a kernel of its own to read back (reverse_compute_at at a loop bound to the
// grid untiled).
const char* kRouterCombine = R"(let T = 64, H = 512, E = 8
input X[T, H] : bf16
input Wr[H, E] : bf16
input Eo[T, E, H] : bf16
G[t, e]  = sum(k) X[t, k] * Wr[k, e]
Mx[t]    = max(e) G[t, e]
P[t, e]  = exp(G[t, e] - Mx[t])
output Y[t, h] : bf16 = sum(e) P[t, e] * Eo[t, e, h] / sum(e2) P[t, e2]
)";

TEST(UnseenPrograms, ARowCombinedPerCtaIsCastAndStoredByThatCta) {
  const search::SearchInput input = text_input(kRouterCombine, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  bool fused = false;
  for (const sched::Decision& d : result.schedule.decisions) {
    const std::string text = sched::print_decision(d);
    fused = fused || text.rfind("reverse_compute_at(Y, ", 0) == 0;
  }
  EXPECT_TRUE(fused) << sched::print_decisions(result.schedule.decisions, "\n");
  const driver::Compilation compilation = compile(input, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string module = matile::print_module(*compilation.ma_module);
  EXPECT_EQ(module.find("Y_sum : f32[64, 512]"), std::string::npos) << module;
  expect_every_stage_passes(input, result.schedule);
}

// Log-sum-exp over GPT-2's vocabulary: the rolling step may be 2048 columns (two 16-byte runs
// of a bf16 row per thread and step), which the search takes with 2 rows per CTA.
const char* kLogSumExpRows = R"(let R = 8192, C = 50257
input X[R, C] : bf16
Mx[r] = max(c) X[r, c]
output Lse[r] : f32 = Mx[r] + log(sum(c) exp(X[r, c] - Mx[r]))
)";

TEST(UnseenPrograms, ALongRowReductionStepsTwoThousandColumns) {
  const search::SearchResult result = run(text_input(kLogSumExpRows, {}));
  ASSERT_TRUE(result.ok) << result.error;
  const std::string schedule = sched::print_decisions(result.schedule.decisions, "\n");
  EXPECT_NE(schedule.find("rolling_update(Lse_sum, c, tile=2048)"), std::string::npos) << schedule;
  // The same decisions on a short, ragged problem: every stage against the reference.
  expect_every_stage_passes(text_input(kLogSumExpRows, {"R=6", "C=5001"}), result.schedule);
}

TEST(UnseenPrograms, AGemmWhoseWeightsExceedL2RunsTheCtasOfAWaveOverOneWeightTile) {
  // At GPT-2's sizes the weights (77 MB) do not fit in L2 and the activations (12.5 MB) do:
  // consecutive CTAs must share a weight tile and sweep the activations.
  const search::SearchInput input = text_input(kLanguageModelHead, {"T=8192", "H=768", "V=50257"});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  bool activations_fastest = false;
  for (const sched::Decision& d : result.schedule.decisions) {
    if (d.kind != "bind") continue;
    for (const auto& arg : d.args) {
      activations_fastest |= arg.key == "t_o" && !arg.is_int() && arg.as_name() == "grid.x";
    }
  }
  EXPECT_TRUE(activations_fastest) << sched::print_decisions(result.schedule.decisions, "; ");
  // The search estimated this raster order on the other order's module with its grid
  // reordered; compiled as chosen, the schedule must estimate the same.
  const driver::Compilation chosen = compile(input, result.schedule);
  ASSERT_TRUE(chosen.ok()) << chosen.schedule_error << chosen.internal_error;
  EXPECT_DOUBLE_EQ(testing::h100().estimate(*chosen.ma_module).microseconds,
                   result.estimate->microseconds);
  ASSERT_TRUE(result.roofline);
  EXPECT_LT(result.estimate->microseconds, 3.0 * result.roofline->microseconds)
      << cost::describe(*result.estimate);
}

// LayerNorm with scale and shift, then a projection (GPT-2, OPT, Falcon).
const char* kLayerNormGemm = R"(let T = 64, H = 96, N = 64
input X[T, H] : bf16
input G[H] : bf16
input Bt[H] : bf16
input Wp[H, N] : bf16
Mu[t]  = (sum(h) X[t, h]) / H
Var[t] = (sum(h) (X[t, h] - Mu[t]) * (X[t, h] - Mu[t])) / H
Xn[t, h] : bf16 = (X[t, h] - Mu[t]) * rsqrt(Var[t] + 0.00001) * G[h] + Bt[h]
output Y[t, n] : bf16 = sum(h) Xn[t, h] * Wp[h, n]
)";

TEST(UnseenPrograms, ANormalizedGemmOperandIsCopiedAheadAndReadWithLdmatrix) {
  const search::SearchInput input = text_input(kLayerNormGemm, {});
  const sched::Schedule schedule = parse_schedule(
      {"inline(Xn)", "tile(Y_sum, t=32, n=32, h=32)", "reverse_compute_at(Y, Y_sum, n_o)",
       "bind(Y_sum, t_o=grid.y, n_o=grid.x)", "launch(Y_sum, warps=2, stages=2)"});
  const driver::Compilation compilation = compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string ma = matile::print_module(*compilation.ma_module);
  const std::string kernel = ma.substr(ma.find("kernel Y("));
  // X's tile travels by cp.async, issued an iteration ahead, and reaches the fragments by
  // ldmatrix; the normalization runs on the fragments.
  EXPECT_NE(kernel.find("cp.async X_smem"), std::string::npos) << kernel;
  EXPECT_NE(kernel.find("ldmatrix.x4 X_smem"), std::string::npos) << kernel;
  EXPECT_EQ(kernel.find("global_load X["), std::string::npos) << kernel;
  expect_every_stage_passes(input, schedule);
}

// Multi-query decode: one query row per head, every head over one shared key/value head.
const char* kMultiQueryDecode = R"(let B = 32, H = 32, N = 8192, D = 128
input Q[B, H, D] : bf16
input K[B, N, D] : bf16
input V[B, N, D] : bf16
S[b, h, n] = sum(d) Q[b, h, d] * K[b, n, d] / sqrt(D)
Mx[b, h] = max(n) S[b, h, n]
P[b, h, n] = exp(S[b, h, n] - Mx[b, h])
L[b, h] = sum(n) P[b, h, n]
output O[b, h, d] : bf16 = sum(n) P[b, h, n] * V[b, n, d] / L[b, h]
)";

TEST(UnseenPrograms, DecodeSplitsTheKeysOverCtasBesideTheHeadTiles) {
  const search::SearchInput input = text_input(kMultiQueryDecode, {});
  const sched::Schedule pins = parse_schedule(
      {"rolling_update(O_sum, n, tile=256)", "split_k_update(O_sum_acc, n, splits=8)"});
  search::SearchOptions options;
  options.pins = pins.decisions;
  const search::SearchResult result = run(input, options);
  ASSERT_TRUE(result.ok) << result.error;
  // The split loop stays outside the head tile, so it is bound to the grid beside it.
  bool split_on_grid = false;
  for (const sched::Decision& d : result.schedule.decisions) {
    if (d.kind != "bind") continue;
    for (const auto& arg : d.args) split_on_grid |= arg.key == "n_s";
  }
  EXPECT_TRUE(split_on_grid) << sched::print_decisions(result.schedule.decisions, "; ");
  const search::SearchInput small = text_input(kMultiQueryDecode, {"B=1", "N=2048", "D=16"});
  expect_every_stage_passes(small, result.schedule);
}

// Without pins the search fuses the scores into the rolling loop and splits it (FlashDecoding):
// the split only pays once the scores are fused, and the fused step needs fewer keys than the
// unfused one to keep its copies pipelined.
TEST(UnseenPrograms, MultiQueryDecodeFusesItsScoresIntoASplitRollingLoop) {
  const search::SearchInput input = text_input(kMultiQueryDecode, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = sched::print_decisions(result.schedule.decisions, "; ");
  EXPECT_NE(text.find("compute_at(S, "), std::string::npos) << text;
  EXPECT_NE(text.find("split_k_update("), std::string::npos) << text;
  ASSERT_TRUE(result.roofline);
  EXPECT_LT(result.estimate->microseconds, 1.5 * result.roofline->microseconds)
      << cost::describe(*result.estimate);
  const search::SearchInput small = text_input(kMultiQueryDecode, {"B=1", "H=16", "N=2048"});
  expect_every_stage_passes(small, result.schedule);
}

// The searched decode split (FlashDecoding) starts streaming keys at once and writes its
// partials once: the CTA's first key and value tiles are requested together with Q (Q's wait
// comes after the ring's prologue, leaving its two groups in flight), and the initial -inf / 0
// stores of Mx_part, L_part and O_sum_acc_part, which the final stores overwrite, are gone.
// Every stage still matches the float64 reference at a key count no tile or split divides.
TEST(UnseenPrograms, ADecodeSplitRequestsItsFirstKeyTilesWithQAndStoresItsPartialsOnce) {
  const sched::Schedule schedule = parse_schedule(
      {"rolling_update(O_sum, n, tile=64)", "split_k_update(Mx, n, splits=4)",
       "compute_at(S, Mx_part, n_o)", "bind(O_sum_acc, b=grid.y, h=grid.x)",
       "tile(O_sum_acc_part, h=16)", "reverse_compute_at(O, O_sum, h)",
       "bind(O_sum_acc_part, n_s=grid.z, b=grid.y, h_o=grid.x)",
       "launch(O_sum_acc_part, warps=4, stages=3)"});
  const search::SearchInput input = text_input(kMultiQueryDecode, {});
  const driver::Compilation compilation = compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string ma = matile::print_module(*compilation.ma_module);
  const size_t kernel = ma.find("kernel O_sum_acc_part(");
  ASSERT_NE(kernel, std::string::npos) << ma;
  const std::string body = ma.substr(kernel, ma.find("\nkernel ", kernel + 1) - kernel);
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = body.find(what); at != std::string::npos; at = body.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("global_store Mx_part["), 1u) << body;
  EXPECT_EQ(count("global_store L_part["), 1u) << body;
  EXPECT_EQ(count("global_store O_sum_acc_part["), 1u) << body;
  const size_t q_copy = body.find("cp.async Q_smem");
  const size_t second_v_tile = body.find("cp.async V_smem[%c1]");
  const size_t q_wait = body.find("cp.async.wait_group 2");
  const size_t q_fragments = body.find("ldmatrix.x4 Q_smem");
  const size_t loop = body.find("for n_o");
  ASSERT_NE(q_copy, std::string::npos) << body;
  ASSERT_NE(second_v_tile, std::string::npos) << body;
  ASSERT_NE(q_wait, std::string::npos) << body;
  EXPECT_EQ(body.find("cp.async.wait_group", q_copy), q_wait) << body;
  EXPECT_LT(q_copy, second_v_tile) << body;
  EXPECT_LT(second_v_tile, q_wait) << body;
  EXPECT_LT(q_wait, q_fragments) << body;
  EXPECT_LT(q_fragments, loop) << body;
  expect_every_stage_passes(text_input(kMultiQueryDecode, {"B=1", "N=1000"}), schedule);
  expect_every_stage_passes(text_input(kMultiQueryDecode, {"B=2", "H=16", "N=600"}), schedule);
}

// Grouped-query decode (Llama 2/3 70B): a head group is an 8-row tile, so the QK and PV
// products run on mma.m16n8k16 with the atom's rows repeated, in one fused kernel reading K and
// V once.
TEST(UnseenPrograms, AGroupedDecodeStepRunsItsHeadGroupOnTheTensorCores) {
  const search::SearchInput input = text_input(kGroupedQueryDecode, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string text = sched::print_decisions(result.schedule.decisions, "; ");
  EXPECT_NE(text.find("compute_at(S, "), std::string::npos) << text;
  ASSERT_TRUE(result.roofline);
  EXPECT_LT(result.estimate->microseconds, 1.5 * result.roofline->microseconds)
      << cost::describe(*result.estimate);
  const driver::Compilation compilation = compile(input, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string ma = matile::print_module(*compilation.ma_module);
  EXPECT_NE(ma.find("mma.m16n8k16"), std::string::npos) << ma;
  EXPECT_EQ(ma.find("fma_dot"), std::string::npos) << ma;
  const search::SearchInput small =
      text_input(kGroupedQueryDecode, {"B=1", "H=16", "KH=2", "N=1024"});
  expect_every_stage_passes(small, result.schedule);
}

// Attention written as one statement repeats the scores four times and their max twice: the
// lowering keeps one temporary of each, so the search fuses everything into one kernel (it
// used to keep three kernels that recomputed the scores, estimated at 2.6x the bound).
TEST(UnseenPrograms, ScoresWrittenFourTimesInOneStatementAreComputedOnceInOneKernel) {
  const char* one_statement = R"(let B = 32, H = 32, M = 512, N = 512, D = 64
input Q[B, H, M, D] : bf16
input K[B, H, N, D] : bf16
input V[B, H, N, D] : bf16
output O[b, h, m, e] : bf16 = (sum(n) exp((sum(d) Q[b, h, m, d] * K[b, h, n, d]) * rsqrt(D) - (max(n2) (sum(d2) Q[b, h, m, d2] * K[b, h, n2, d2]) * rsqrt(D))) * V[b, h, n, e]) / (sum(n3) exp((sum(d3) Q[b, h, m, d3] * K[b, h, n3, d3]) * rsqrt(D) - (max(n4) (sum(d4) Q[b, h, m, d4] * K[b, h, n4, d4]) * rsqrt(D))))
)";
  const search::SearchInput input = text_input(one_statement, {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_TRUE(result.estimate && result.roofline);
  EXPECT_EQ(result.estimate->kernels.size(), 1u) << cost::describe(*result.estimate);
  EXPECT_LT(result.estimate->microseconds, 1.5 * result.roofline->microseconds)
      << cost::describe(*result.estimate);
  // Ragged query and key counts with two key tiles: the searched warp-specialized form takes
  // key tiles of 128, which a key axis shorter than one tile does not give it (a loop of one
  // partial tile is no main loop the producer can run).
  const search::SearchInput small = text_input(one_statement, {"B=1", "H=1", "M=130", "N=136"});
  expect_every_stage_passes(small, result.schedule);
}

}  // namespace
}  // namespace nautilus
