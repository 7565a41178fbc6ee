// The auto-scheduler (core/search): what it finds for the asset specs and for specs it has never
// seen, that every schedule it returns reproduces the float64 reference at stage matile, pins and
// forbids, the tree, progress and cancellation, and the measured mode without a GPU.
#include <stdlib.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <thread>

#include <gtest/gtest.h>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/matile/visitor.h"
#include "core/search/search.h"
#include "core/search/tree_json.h"
#include "core/sched/launch.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

using testing::asset_input;
using testing::compile;
using testing::h100;
using testing::parse_sizes;
using testing::run;
using testing::source_path;
using testing::text_input;

std::string text_of(const sched::Schedule& schedule) {
  std::string text;
  for (const sched::Decision& d : schedule.decisions) text += sched::print_decision(d) + "\n";
  return text;
}

bool has_kind(const sched::Schedule& schedule, const std::string& kind) {
  for (const sched::Decision& d : schedule.decisions) {
    if (d.kind == kind) return true;
  }
  return false;
}

// ---- the structure of FlashAttention, checked on the compiled result ----------------------

void visit_vr(const vrtile::RegionPtr& region, const std::function<void(const vrtile::Op&)>& f) {
  for (const vrtile::OpPtr& op : region->ops) {
    f(*op);
    if (op->body) visit_vr(op->body, f);
  }
}

struct FlashStructure {
  size_t kernels = 0;
  size_t global_intermediates = 0;  // buffers S/P (or anything) stored between kernels
  size_t max_carried = 0;           // values carried by the widest VR For
  bool exp2 = false;
  int max_stages = 0;               // deepest multi-buffered K/V tile (cp.async pipeline or TMA ring)
  std::string why_not;

  bool ok() const { return why_not.empty(); }
};

FlashStructure flash_structure(const driver::Compilation& compilation) {
  FlashStructure s;
  if (!compilation.ok() || !compilation.vr_module || !compilation.ma_module) {
    s.why_not = "does not compile: " + compilation.schedule_error + compilation.internal_error;
    return s;
  }
  s.kernels = compilation.ma_module->kernels.size();
  // A workspace (a persistent kernel's tile counter) holds no tensor.
  s.global_intermediates = std::count_if(
      compilation.ma_module->allocations.begin(), compilation.ma_module->allocations.end(),
      [](const scalar::Buffer& buffer) { return buffer->role == scalar::BufferRole::Intermediate; });
  for (const vrtile::KernelPtr& kernel : compilation.vr_module->kernels) {
    visit_vr(kernel->body, [&](const vrtile::Op& op) {
      if (op.kind == vrtile::OpKind::For) s.max_carried = std::max(s.max_carried, op.results.size());
      if (op.kind == vrtile::OpKind::Unary && op.unary_op == scalar::UnaryOp::Exp2) s.exp2 = true;
    });
  }
  for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
    matile::for_each_op(*kernel->body, [&](const matile::Op& op) {
      if (op.kind == matile::OpKind::For) s.max_stages = std::max(s.max_stages, op.pipeline_stages);
    });
    // A warp-specialized kernel's producer fills a ring of stages through TMA.
    for (const matile::SharedAlloc& alloc : kernel->shared) {
      if (!kernel->tma_maps.empty()) s.max_stages = std::max(s.max_stages, alloc.stages);
    }
  }
  if (s.kernels != 1) s.why_not += "kernels: " + std::to_string(s.kernels) + "; ";
  if (s.global_intermediates != 0) {
    s.why_not += std::to_string(s.global_intermediates) + " intermediates in global memory; ";
  }
  if (s.max_carried < 3) s.why_not += "no loop carries max, sum and accumulator; ";
  if (!s.exp2) s.why_not += "no exp2; ";
  if (s.max_stages < 2) s.why_not += "K/V tiles not pipelined; ";
  return s;
}

// Sizes where tiles of 64 and more fit several times, and the causal mask skips whole tiles.
const std::map<std::string, std::vector<std::string>>& attention_sizes() {
  static const std::map<std::string, std::vector<std::string>> sizes = {
      {"attention", {"B=1", "H=2", "M=512", "N=512", "D=64"}},
      {"causal_attention", {"B=1", "H=2", "M=512", "N=512", "D=64"}},
      {"gqa_attention", {"B=1", "H=4", "KH=1", "M=512", "N=512", "D=64"}},
      {"attention_one_statement", {"B=1", "H=2", "M=512", "N=512", "D=64"}},
  };
  return sizes;
}

class FlashAttentionFromTheMath : public ::testing::TestWithParam<std::string> {};

TEST_P(FlashAttentionFromTheMath, OneFusedKernelWithOnlineSoftmaxAndPipelinedTiles) {
  const std::string asset = GetParam();
  const search::SearchInput input = asset_input(asset, attention_sizes().at(asset));
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const std::string schedule = text_of(result.schedule);
  EXPECT_TRUE(has_kind(result.schedule, "rolling_update")) << schedule;
  if (asset == "causal_attention") {
    EXPECT_TRUE(has_kind(result.schedule, "skip_masked")) << schedule;
  }
  const FlashStructure structure = flash_structure(compile(input, result.schedule));
  EXPECT_TRUE(structure.ok()) << structure.why_not << "\n" << schedule;
  std::printf("[ search   ] %s: %.1f µs, %d nodes, %d compiles, %.2f s\n%s", asset.c_str(),
              result.estimate->microseconds, result.stats.nodes, result.stats.compiles,
              result.stats.seconds, schedule.c_str());
}

INSTANTIATE_TEST_SUITE_P(Attention, FlashAttentionFromTheMath,
                         ::testing::Values("attention", "causal_attention", "gqa_attention",
                                           "attention_one_statement"),
                         [](const auto& test_info) { return test_info.param; });

// The structure checks fail for a search led by a model that prefers slow programs.
class InvertedModel : public cost::CostModel {
 public:
  std::string name() const override { return "inverted"; }
  const cost::DeviceModel& device() const override { return h100().device(); }
  cost::CostEstimate estimate(const matile::Module& module) const override {
    cost::CostEstimate estimate = h100().estimate(module);
    if (estimate.feasible) estimate.microseconds = 1e9 / estimate.microseconds;
    return estimate;
  }
};

TEST(FlashAttentionFromTheMath, ChecksCatchAScheduleThatIsNotFlashAttention) {
  const InvertedModel inverted;
  const search::SearchInput input = asset_input("attention", {"B=1", "H=1", "M=32", "N=32", "D=16"});
  search::SearchOptions options;
  options.beam = 1;
  const search::SearchResult result = run(input, options, inverted);
  ASSERT_TRUE(result.ok) << result.error;
  EXPECT_FALSE(flash_structure(compile(input, result.schedule)).ok()) << text_of(result.schedule);
}

// ---- search time ---------------------------------------------------------------------------

TEST(SearchTime, AttentionAtItsOwnSizesTakesUnderTenSeconds) {
  const search::SearchInput input = asset_input("attention", {});
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  double load = 0.0;
  getloadavg(&load, 1);
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::printf("[ search   ] attention B=2 H=16 M=N=4096 D=128: %.2f s, %d compiles, load %.1f on "
              "%u cores\n",
              result.stats.seconds, result.stats.compiles, load, cores);
  // Other work on the machine stretches wall time; the limit holds on an otherwise idle one.
  if (load < cores) {
    EXPECT_LT(result.stats.seconds, 10.0);
  }
  const FlashStructure structure = flash_structure(compile(input, result.schedule));
  EXPECT_TRUE(structure.ok()) << structure.why_not;
}

// ---- other operators: no worse than the hand schedules ------------------------------------

struct HandComparison {
  std::vector<std::string> sizes;
  // Accepted ratio of the search's estimate to the hand schedule's, with the reason when > 1.
  double tolerance = 1.0;
  std::string why;
};

const std::map<std::string, HandComparison>& hand_comparisons() {
  static const std::map<std::string, HandComparison> comparisons = {
      {"softmax", {{}, 1.0, ""}},
      {"logsumexp", {{}, 1.0, ""}},
      {"rmsnorm", {{}, 1.0, ""}},
      {"layernorm",
       {{},
        1.3,
        "the beam keeps split_k_update variants of the two statistics, which the model rates "
        "better than rolling_update(Var_sum, h) while the output nest is still untiled; the "
        "hand's one-pass mean/variance is not reached (docs/search.md, limitations)"}},
      {"gemm", {{"M=128", "N=128", "K=128"}, 1.0, ""}},
      {"batched_gemm", {{"Z=2", "M=128", "N=128", "K=128"}, 1.0, ""}},
      {"gated_mlp", {{"T=32", "H=32", "F=64"}, 1.0, ""}},
  };
  return comparisons;
}

class NoWorseThanHand : public ::testing::TestWithParam<std::string> {};

TEST_P(NoWorseThanHand, EstimateAtMostTheHandSchedules) {
  const std::string asset = GetParam();
  const HandComparison& comparison = hand_comparisons().at(asset);
  const search::SearchInput input = asset_input(asset, comparison.sizes);
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  std::string error;
  auto hand = sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  ASSERT_TRUE(hand) << error;
  const driver::Compilation hand_compiled = compile(input, *hand);
  ASSERT_TRUE(hand_compiled.ok()) << hand_compiled.schedule_error;
  const cost::CostEstimate hand_estimate = h100().estimate(*hand_compiled.ma_module);
  ASSERT_TRUE(hand_estimate.feasible) << hand_estimate.infeasible_reason;
  std::printf("[ search   ] %s: search %.2f µs, hand %.2f µs (%d compiles, %.2f s)\n", asset.c_str(),
              result.estimate->microseconds, hand_estimate.microseconds, result.stats.compiles,
              result.stats.seconds);
  EXPECT_LE(result.estimate->microseconds, hand_estimate.microseconds * comparison.tolerance + 1e-6)
      << comparison.why << "\n" << text_of(result.schedule);
}

INSTANTIATE_TEST_SUITE_P(Operators, NoWorseThanHand,
                         ::testing::Values("softmax", "logsumexp", "rmsnorm", "layernorm", "gemm",
                                           "batched_gemm", "gated_mlp"),
                         [](const auto& test_info) { return test_info.param; });

// ---- every schedule it returns reproduces the reference at stage matile ---------------------

void expect_matile_matches_reference(const search::SearchInput& input,
                                     const sched::Schedule& schedule, uint64_t seed,
                                     const std::string& what) {
  const driver::Compilation compilation = compile(input, schedule);
  ASSERT_TRUE(compilation.ok()) << what << ": " << compilation.schedule_error
                                << compilation.internal_error;
  driver::EvalOptions options;
  options.stage = driver::Stage::MATile;
  options.seed = seed;
  const driver::EvalResult evaluation = driver::evaluate(compilation, options);
  ASSERT_TRUE(evaluation.ran) << what << ": " << evaluation.error;
  for (const driver::OutputCheck& check : evaluation.outputs) {
    EXPECT_TRUE(check.passed) << what << " output " << check.name << ": max relative error "
                              << check.error.max_relative_error << "\n" << text_of(schedule);
  }
}

class EverySchedule : public ::testing::TestWithParam<std::string> {};

TEST_P(EverySchedule, MatchesTheReferenceAtStageMatileWithAndWithoutAPin) {
  const std::string asset = GetParam();
  const search::SearchInput input = asset_input(asset, testing::small_sizes(asset));
  for (uint64_t seed : {0u, 1u}) {
    search::SearchOptions options;
    options.seed = seed;
    const search::SearchResult result = run(input, options);
    ASSERT_TRUE(result.ok) << asset << ": " << result.error;
    expect_matile_matches_reference(input, result.schedule, seed, asset + " seed " +
                                                                      std::to_string(seed));
    // Pin a launch of a block the result binds: the pinned search must keep it.
    std::string block;
    for (const sched::Decision& d : result.schedule.decisions) {
      if (d.kind == "bind") block = d.target;
    }
    if (block.empty()) continue;
    sched::DecisionParseError parse_error;
    options.pins = {*sched::parse_decision("launch(" + block + ", warps=2, stages=1)", &parse_error)};
    const search::SearchResult pinned = run(input, options);
    ASSERT_TRUE(pinned.ok) << asset << " pinned: " << pinned.error;
    bool kept = false;
    for (const sched::Decision& d : pinned.schedule.decisions) kept |= d == options.pins.front();
    EXPECT_TRUE(kept) << text_of(pinned.schedule);
    expect_matile_matches_reference(input, pinned.schedule, seed, asset + " pinned");
  }
}

INSTANTIATE_TEST_SUITE_P(Assets, EverySchedule, ::testing::ValuesIn(testing::asset_names()),
                         [](const auto& test_info) { return test_info.param; });

// ---- specs it has never seen ---------------------------------------------------------------

TEST(UnseenSpecs, GemmWithBiasAndSigmoidAndARowScaledByItsLargestMagnitude) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> specs = {
      {"let M = 40, N = 24, K = 48\n"
       "input A[M, K] : bf16\ninput B[K, N] : bf16\ninput Bias[N] : bf16\n"
       "output Y[m, n] : bf16 = sigmoid(sum(k) A[m, k] * B[k, n] + Bias[n])\n",
       {}},
      {"let R = 6, C = 50\n"
       "input X[R, C] : f32\n"
       "Peak[r] = max(c) abs(X[r, c])\n"
       "output Y[r, c] : f32 = X[r, c] / Peak[r]\n",
       {}},
  };
  for (const auto& [text, sizes] : specs) {
    const search::SearchInput input = text_input(text, sizes);
    const search::SearchResult result = run(input);
    ASSERT_TRUE(result.ok) << result.error << "\n" << text;
    expect_matile_matches_reference(input, result.schedule, 3, text);
  }
}

// ---- pins and forbids ----------------------------------------------------------------------

sched::Decision parse(const std::string& text) {
  sched::DecisionParseError error;
  auto decision = sched::parse_decision(text, &error);
  EXPECT_TRUE(decision) << text << ": " << sched::to_string(error);
  return decision.value_or(sched::Decision{});
}

const std::vector<std::string> kSmallAttention = {"B=1", "H=2", "M=130", "N=70", "D=8"};

TEST(Pins, APinAppearsInTheResultAppliedAsSoonAsItApplies) {
  const search::SearchInput input = asset_input("attention", kSmallAttention);
  search::SearchOptions options;
  options.pins = {parse("tile(O_sum_acc, m=32)")};
  const search::SearchResult result = run(input, options);
  ASSERT_TRUE(result.ok) << result.error;
  // O_sum_acc exists only after rolling_update: the pin follows it directly.
  const std::vector<sched::Decision>& d = result.schedule.decisions;
  auto pin = std::find(d.begin(), d.end(), options.pins.front());
  ASSERT_NE(pin, d.end()) << text_of(result.schedule);
  ASSERT_NE(pin, d.begin());
  EXPECT_EQ((pin - 1)->kind, "rolling_update") << text_of(result.schedule);
  for (const search::SearchNode& node : result.nodes) {
    if (node.pinned) {
      EXPECT_EQ(node.parent >= 0 ? result.nodes[node.parent].children.size() : 1u, 1u);
    }
  }
  expect_matile_matches_reference(input, result.schedule, 5, "pinned attention");
}

TEST(Pins, AForbiddenDecisionIsNeverUsed) {
  const search::SearchInput input = asset_input("attention", kSmallAttention);
  search::SearchOptions options;
  options.forbids = {parse("rolling_update(O_sum, n)")};
  const search::SearchResult result = run(input, options);
  ASSERT_TRUE(result.ok) << result.error;
  for (const search::SearchNode& node : result.nodes) {
    if (!node.decision) continue;
    EXPECT_FALSE(search::decision_matches(options.forbids.front(), *node.decision))
        << sched::print_decision(*node.decision);
  }
  EXPECT_TRUE(search::decision_matches(parse("rolling_update(O_sum, n)"),
                                       parse("rolling_update(O_sum, n, tile=64)")));
  EXPECT_FALSE(search::decision_matches(parse("rolling_update(O_sum, n, tile=32)"),
                                        parse("rolling_update(O_sum, n, tile=64)")));
  EXPECT_FALSE(search::decision_matches(parse("tile(O_sum)"), parse("tile(S, m=4)")));
}

TEST(Pins, ConflictingPinsAreReportedPrecisely) {
  const search::SearchInput input = asset_input("attention", kSmallAttention);
  search::SearchOptions options;
  options.pins = {parse("tile(O_sum, m=4)"), parse("rolling_update(O_sum, n, tile=16)")};
  const search::SearchResult result = run(input, options);
  ASSERT_FALSE(result.ok);
  EXPECT_EQ(result.error.rfind("pin 2 rolling_update(O_sum, n, tile=16) does not apply after pin 1 "
                               "tile(O_sum, m=4): ", 0), 0u)
      << result.error;

  options.pins = {parse("tile(Nope, m=4)")};
  const search::SearchResult missing = run(input, options);
  ASSERT_FALSE(missing.ok);
  EXPECT_NE(missing.error.find("pin 1 tile(Nope, m=4) does not apply: "), std::string::npos)
      << missing.error;

  options.pins = {parse("inline(P)")};
  options.forbids = {parse("inline(P)")};
  const search::SearchResult forbidden = run(input, options);
  EXPECT_EQ(forbidden.error, "pin 1 inline(P) is forbidden by --forbid inline(P)");
}

// ---- the tree, determinism, progress and cancel --------------------------------------------

TEST(Tree, EveryNodeIsLinkedAndTheJsonHasEveryField) {
  const search::SearchInput input = asset_input("softmax", testing::small_sizes("softmax"));
  const search::SearchResult result = run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const nlohmann::ordered_json tree = search::tree_to_json(result);
  ASSERT_EQ(tree["nodes"].size(), result.nodes.size());
  EXPECT_EQ(tree["chosen"], result.chosen);
  int chosen = 0, leaves = 0;
  for (const auto& node : tree["nodes"]) {
    for (const char* key : {"id", "parent", "decision", "phase", "pinned", "estimate_us",
                            "measured_us", "status", "reason", "completion", "children"}) {
      EXPECT_TRUE(node.contains(key)) << key;
    }
    const int id = node["id"];
    for (int child : node["children"]) EXPECT_EQ(tree["nodes"][child]["parent"], id);
    if (node["status"] == "chosen") ++chosen;
    if (node["status"] == "leaf") ++leaves;
    if (node["status"] == "pruned") {
      EXPECT_FALSE(node["reason"].is_null()) << id;
    }
  }
  EXPECT_EQ(chosen, 1);
  EXPECT_EQ(tree["stats"]["leaves"], leaves + 1);
  // The chosen node's path from the root, then what its chosen completion added (softmax's
  // row kept on chip: cache_read ... readers=all), is its schedule.
  std::vector<std::string> path;
  for (int id = result.chosen; id > 0; id = result.nodes[id].parent) {
    path.insert(path.begin(), sched::print_decision(*result.nodes[id].decision));
  }
  for (const sched::Decision& d : result.nodes[result.chosen].completion.decisions) {
    path.push_back(sched::print_decision(d));
  }
  EXPECT_EQ(nlohmann::ordered_json(path), tree["schedule"]);
}

TEST(Tree, TheSameSeedGivesTheSameSearch) {
  const search::SearchInput input = asset_input("gemm", testing::small_sizes("gemm"));
  search::SearchOptions options;
  options.seed = 7;
  const search::SearchResult a = run(input, options);
  options.threads = 1;
  const search::SearchResult b = search::run_search(input, h100(), options);
  ASSERT_TRUE(a.ok && b.ok);
  EXPECT_EQ(text_of(a.schedule), text_of(b.schedule));
  EXPECT_EQ(a.nodes.size(), b.nodes.size());
}

class CountingObserver : public search::SearchObserver {
 public:
  void on_progress(const search::SearchProgress& progress) override {
    ++calls;
    if (progress.best_us) best = *progress.best_us;
  }
  int calls = 0;
  double best = 0.0;
};

TEST(Progress, ReportsAndStopsWithinAHundredMillisecondsOfACancel) {
  const search::SearchInput input = asset_input("attention", kSmallAttention);
  search::SearchOptions options;
  options.beam = 64;  // long enough to still be running when cancelled
  CountingObserver observer;
  std::stop_source stop;
  std::atomic<bool> finished{false};
  std::chrono::steady_clock::time_point returned;
  search::SearchResult result;
  std::thread worker([&] {
    result = search::run_search(input, h100(), options, &observer, stop.get_token());
    returned = std::chrono::steady_clock::now();
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const bool ran_long_enough = !finished;
  const auto requested = std::chrono::steady_clock::now();
  stop.request_stop();
  worker.join();
  ASSERT_TRUE(ran_long_enough) << "the search finished before the cancel";
  const double ms = std::chrono::duration<double, std::milli>(returned - requested).count();
  std::printf("[ search   ] stopped %.1f ms after the cancel\n", ms);
  EXPECT_LT(ms, 100.0);
  EXPECT_TRUE(result.stats.cancelled);
  EXPECT_GT(observer.calls, 0);
  EXPECT_GT(observer.best, 0.0);
}

// Records every tree the search hands out while it runs.
class TreeRecorder : public search::SearchObserver {
 public:
  bool wants_tree() const override { return true; }
  void on_tree(const std::vector<search::SearchNode>& nodes) override { trees.push_back(nodes); }
  std::vector<std::vector<search::SearchNode>> trees;
};

TEST(Progress, TheTreeGrowsNodeByNodeAndEndsAsTheResult) {
  const search::SearchInput input = asset_input("attention", kSmallAttention);
  TreeRecorder recorder;
  search::SearchOptions options;
  options.threads = 1;
  const search::SearchResult result = search::run_search(input, h100(), options, &recorder);
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_GE(recorder.trees.size(), 3u) << "one tree per round at least";
  size_t open_seen = 0;
  for (size_t t = 0; t < recorder.trees.size(); ++t) {
    const std::vector<search::SearchNode>& tree = recorder.trees[t];
    // Only ever grows; every node keeps its id, parent and decision into the final tree.
    if (t > 0) {
      EXPECT_GE(tree.size(), recorder.trees[t - 1].size());
    }
    ASSERT_LE(tree.size(), result.nodes.size());
    for (const search::SearchNode& node : tree) {
      const search::SearchNode& final_node = result.nodes[static_cast<size_t>(node.id)];
      EXPECT_EQ(node.parent, final_node.parent);
      EXPECT_EQ(node.decision.has_value(), final_node.decision.has_value());
      if (node.decision) {
        EXPECT_EQ(sched::print_decision(*node.decision), sched::print_decision(*final_node.decision));
      }
      EXPECT_NE(node.status, search::NodeStatus::Chosen) << "chosen only in the result";
      if (node.status == search::NodeStatus::Open) ++open_seen;
      // A pruned node stays pruned, with its reason, unless a later fusion replays its
      // decisions on it (a rolling step revisited): then it gains children and ends expanded.
      // (An expanded one may still end as a leaf: in the multi-step phases a node with
      // children can also go on unchanged.)
      if (node.status == search::NodeStatus::Pruned) {
        EXPECT_FALSE(node.reason.empty()) << node.id;
        const bool revived = final_node.status == search::NodeStatus::Expanded &&
                             final_node.children.size() > node.children.size();
        EXPECT_TRUE(final_node.status == search::NodeStatus::Pruned || revived)
            << "node " << node.id << " in tree " << t;
      }
    }
  }
  EXPECT_GT(open_seen, 0u) << "the live trees show nodes still waiting to be expanded";
  EXPECT_LT(recorder.trees.front().size(), result.nodes.size());
  for (const search::SearchNode& node : result.nodes) {
    EXPECT_NE(node.status, search::NodeStatus::Open) << "the result settles every node";
  }
}

// ---- measured mode -------------------------------------------------------------------------

TEST(Measure, WithoutAGpuSaysSoAndChoosesByTheEstimate) {
  const std::string cli = NAUTILUS_CLI_PATH;
  const std::string dir = std::filesystem::path(cli).parent_path().string();
  const std::string tree = (std::filesystem::temp_directory_path() / "search_measure_tree.json").string();
  const std::string command = cli + " schedule " + source_path("assets/specs/gemm.nt") +
                              " -D M=12 -D N=10 -D K=24 --measure 2 --tree " + tree + " 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 256> buffer;
  while (fgets(buffer.data(), buffer.size(), pipe)) output += buffer.data();
  const int status = pclose(pipe);
  if (output.find("measured:") != std::string::npos) GTEST_SKIP() << "a GPU is present";
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("warning: no GPU"), std::string::npos) << output;
  EXPECT_NE(output.find("chose by the estimate"), std::string::npos) << output;
  EXPECT_NE(output.find("estimate:"), std::string::npos) << output;
  std::ifstream file(tree);
  const nlohmann::json json = nlohmann::json::parse(file);
  for (const auto& node : json["nodes"]) EXPECT_TRUE(node["measured_us"].is_null());
  (void)dir;
}

TEST(Measure, ChoosesByMeasuredTimeAndRecordsIt) {
  const search::SearchInput input = asset_input("gemm", testing::small_sizes("gemm"));
  search::SearchOptions options;
  options.measure = 3;
  int calls = 0;
  // A stand-in GPU on which the estimate's ranking is reversed.
  const search::Measurer measurer = [&](const sched::Schedule& schedule) {
    ++calls;
    search::Measurement m;
    m.status = search::Measurement::Status::Ok;
    m.microseconds = 100.0 - static_cast<double>(schedule.decisions.size()) - calls;
    return m;
  };
  const search::SearchResult result =
      search::run_search(input, h100(), options, nullptr, {}, measurer);
  ASSERT_TRUE(result.ok) << result.error;
  ASSERT_TRUE(result.measured_us);
  int measured = 0;
  double best = 1e9;
  for (const search::SearchNode& node : result.nodes) {
    if (!node.measured_us) continue;
    ++measured;
    best = std::min(best, *node.measured_us);
  }
  EXPECT_EQ(measured, calls);
  EXPECT_LE(measured, 3);
  EXPECT_EQ(*result.measured_us, best);
}

// A nest's launch is set once: after a warp_spec the launch phase offers no launch and no other
// warp_spec for its blocks, and the warp-specialized completions add none, so every leaf is
// estimated as the kernel its decisions say (a second warp_spec used to replace a node's own,
// pinned ones included).
TEST(Search, EveryLeafSetsEachNestsLaunchOnce) {
  for (const char* asset : {"gemm", "causal_attention"}) {
    const search::SearchResult result = testing::run(asset_input(asset, {}));
    ASSERT_TRUE(result.ok) << asset << ": " << result.error;
    const std::vector<search::LeafSchedule> leaves = search::complete_leaves(result);
    ASSERT_GE(leaves.size(), 3u) << asset;
    for (const search::LeafSchedule& leaf : leaves) {
      std::map<std::string, int> launches;
      for (const sched::Decision& d : leaf.schedule.decisions) {
        if (d.kind == "warp_spec" || d.kind == "launch") ++launches[d.target];
      }
      for (const auto& [block, count] : launches) {
        EXPECT_EQ(count, 1) << asset << ", block " << block << ": "
                            << sched::print_decisions(leaf.schedule.decisions, "; ");
      }
    }
  }
}

}  // namespace
}  // namespace nautilus
