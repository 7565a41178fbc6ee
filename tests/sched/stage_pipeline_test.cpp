// The stage-adding decisions in the compiler pipeline: a FlashDecoding schedule for causal
// attention (rolling update, split over the keys, value tiles in shared memory, partial
// accumulators in registers, the split loop on the grid, the masked scores recomputed where the
// running max reads them) runs as one logged pass per decision and matches the float64
// reference of the spec, including splits whose keys are all masked for a row.
#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "tests/common/golden.h"

namespace nautilus {
namespace {

TEST(StagePipeline, FlashDecodingScheduleIsLoggedAndMatchesTheReference) {
  const std::vector<std::string> decisions = {
      "rolling_update(O_sum, n, tile=8)",
      "split_k_update(O_sum_acc, n, splits=2)",
      "cache_read(O_sum_acc_part, V, shared, at=n_o)",
      "cache_write(O_sum_acc_part, register, at=n_s)",
      "regularize(O_sum_acc_part, d=8)",  // already regular: logged as unchanged
      "bind(Mx_part, n_s=grid.z, b=grid.y, h=grid.x)",
      "rematerialize(S, Mx_part)",  // causal S = select(n <= m, S_sum, -inf)
  };
  driver::CompileOptions options;
  for (const std::string& text : decisions) {
    sched::DecisionParseError error;
    std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
    ASSERT_TRUE(decision) << text << ": " << sched::to_string(error);
    options.schedule.decisions.push_back(*decision);
  }
  for (const char* size : {"B=1", "H=2", "M=3", "N=37", "D=8"}) {
    std::string error;
    options.sizes.push_back(*spec::parse_size_override(size, &error));
  }
  std::string error;
  SourceFilePtr file =
      SourceFile::read(testing::source_path("assets/specs/causal_attention.nt"), &error);
  ASSERT_TRUE(file) << error;
  const driver::Compilation compilation = driver::compile(file, options);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;

  size_t logged = 0;
  for (const driver::Snapshot& snapshot : compilation.log) {
    for (const std::string& text : decisions) {
      if (snapshot.pass != text) continue;
      ++logged;
      EXPECT_EQ(snapshot.unchanged, text.rfind("regularize", 0) == 0) << text;
    }
  }
  EXPECT_EQ(logged, decisions.size());
  for (uint64_t seed : {3, 11}) {
    driver::EvalOptions eval;
    eval.seed = seed;
    const driver::EvalResult result = driver::evaluate(compilation, eval);
    EXPECT_TRUE(result.passed()) << result.error;
  }
}

TEST(StagePipeline, DecisionsPrintAsOneLineThatParsesBack) {
  for (const char* text :
       {"split_k_update(O_sum_acc, n, splits=4)", "cache_read(S, K, shared, at=n_o)",
        "cache_read(C_sum, A, register)", "cache_write(C_sum, register, at=n_o)",
        "cache_write(O_sum_acc, shared)", "rematerialize(P, O_sum)",
        "regularize(C_sum, m_i=8, n=mul16, k=pow2)"}) {
    sched::DecisionParseError error;
    const std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
    ASSERT_TRUE(decision) << text;
    EXPECT_EQ(sched::print_decision(*decision), text);
    EXPECT_NE(sched::find_decision_kind(decision->kind), nullptr) << text;
    sched::Schedule schedule{{*decision}};
    std::string json_error;
    const std::optional<sched::Schedule> back =
        sched::schedule_from_json(sched::schedule_to_json(schedule), &json_error);
    ASSERT_TRUE(back) << json_error;
    EXPECT_EQ(back->decisions.front(), *decision);
  }
}

}  // namespace
}  // namespace nautilus
