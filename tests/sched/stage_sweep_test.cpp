// Every stage-adding decision tried on every block of every asset (and of the rolling-updated
// attention and softmax), at every loop and tensor it could name: each attempt either returns a
// reason or a well-formed program with the same results as the unscheduled one. Catches crashes
// and unsound acceptances that the hand-picked cases miss.
#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "core/sched/decision.h"
#include "core/sched/loop_nest.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

using namespace scalar;

// Candidate decisions for one block: names of its axes, loops and the tensors it reads.
std::vector<std::string> candidates(const Program& program, const BlockPath& path) {
  const Block& block = path.block();
  std::vector<std::string> loops;
  for (const For* loop : path.loops()) loops.push_back(loop->var->name);
  std::vector<std::string> result;
  for (const IterVar& iter : block.iter_vars) {
    if (iter.kind == IterKind::Reduce) {
      for (int splits : {2, 3}) {
        result.push_back("split_k_update(" + block.name + ", " + iter.var->name +
                         ", splits=" + std::to_string(splits) + ")");
      }
    }
  }
  for (const BufferNode* read : block_accesses(block).reads) {
    if (block_accesses(block).writes_buffer(read)) continue;
    result.push_back("cache_read(" + block.name + ", " + read->name + ", shared)");
    for (const std::string& loop : loops) {
      result.push_back("cache_read(" + block.name + ", " + read->name + ", register, at=" + loop +
                       ")");
    }
    if (program.find_buffer(read->name)) {
      result.push_back("rematerialize(" + read->name + ", " + block.name + ")");
    }
  }
  result.push_back("cache_write(" + block.name + ", register)");
  for (const std::string& loop : loops) {
    result.push_back("cache_write(" + block.name + ", shared, at=" + loop + ")");
    result.push_back("regularize(" + block.name + ", " + loop + "=pow2)");
  }
  return result;
}

void sweep(const testing::LoweredAsset& asset, const ProgramPtr& start, size_t* applied,
           size_t* refused) {
  for (const Block* block : collect_blocks(start->body)) {
    const BlockPath path = *find_block(start->body, block->name);
    for (const std::string& text : candidates(*start, path)) {
      SCOPED_TRACE(text);
      DecisionParseError parse_error;
      const std::optional<Decision> decision = parse_decision(text, &parse_error);
      ASSERT_TRUE(decision) << to_string(parse_error);
      const ApplyResult result = apply_decision(start, *decision);
      if (!result.ok()) {
        EXPECT_FALSE(result.reason.empty());
        ++*refused;
        continue;
      }
      ++*applied;
      const std::vector<std::string> problems = verify(*result.program);
      EXPECT_TRUE(problems.empty()) << problems.front() << "\n" << print_program(*result.program);
      if (!problems.empty()) continue;
      // Split sums reassociate; every other decision changes no bit.
      testing::LoweredAsset base = asset;
      base.program = start;
      testing::expect_same_results(base, result.program,
                                   text.rfind("split_k_update", 0) == 0 ? 2e-5 : 0.0, {5});
    }
  }
}

TEST(StageSweep, EveryDecisionOnEveryBlockAppliesSoundlyOrSaysWhy) {
  size_t applied = 0, refused = 0;
  const std::vector<std::pair<std::string, std::vector<std::string>>> sizes = {
      {"attention", {"B=1", "H=2", "M=3", "N=7", "D=4"}},
      {"attention_one_statement", {"B=1", "H=1", "M=3", "N=5", "D=4"}},
      {"causal_attention", {"B=1", "H=1", "M=4", "N=4", "D=4"}},
      {"gqa_attention", {"B=1", "H=4", "KH=2", "M=2", "N=5", "D=4"}},
      {"gemm", {"M=5", "N=3", "K=7"}},
      {"batched_gemm", {"Z=2", "M=3", "N=4", "K=5"}},
      {"softmax", {"R=3", "C=9"}},
      {"logsumexp", {"R=3", "C=9"}},
      {"rmsnorm", {"T=3", "H=10"}},
      {"layernorm", {"T=3", "H=10"}},
      {"gated_mlp", {"T=3", "H=4", "F=6"}},
  };
  for (const auto& [name, size] : sizes) {
    SCOPED_TRACE(name);
    auto asset = testing::lower_asset(name, size);
    ASSERT_TRUE(asset.program);
    sweep(asset, asset.program, &applied, &refused);
  }
  for (const auto& [name, setup] :
       std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"attention", {"rolling_update(O_sum, n, tile=3)"}},
           {"softmax", {"rolling_update(Y_sum, c2, tile=4)", "tile(Y, c=4)"}},
           {"gemm", {"tile(C_sum, m=2, n=2, k=3)", "reverse_compute_at(C, C_sum, n_o)"}}}) {
    SCOPED_TRACE(name);
    const std::vector<std::string>& size = std::find_if(sizes.begin(), sizes.end(), [&](const auto& s) {
                                             return s.first == name;
                                           })->second;
    auto asset = testing::lower_asset(name, size);
    sweep(asset, testing::apply_decisions(asset.program, setup), &applied, &refused);
  }
  // The sweep exercises both outcomes broadly.
  EXPECT_GT(applied, 100u);
  EXPECT_GT(refused, 20u);
}

}  // namespace
}  // namespace nautilus::sched
