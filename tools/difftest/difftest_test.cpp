// Tests of the differential tester itself (its spec generator is valid and deterministic, a
// triple replays to the same result) and the regression tests of the compiler bugs it found
// (docs/difftest.md). A bug not fixed yet is a DISABLED_ test with the reproducer, so that
// enabling it is the check that the fix works.
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/driver/pipeline.h"
#include "core/sched/decision.h"
#include "core/support/source.h"
#include "tools/difftest/difftest.h"
#include "tools/difftest/spec_generator.h"

namespace nautilus {
namespace {

using difftest::Rng;

// Every category's specs parse, check and lower: a rejected spec is a generator bug.
TEST(DiffTestGenerator, EverySpecIsValid) {
  for (const std::string& category : difftest::spec_categories()) {
    for (uint64_t index = 0; index < 150; ++index) {
      Rng rng = Rng::for_triple(7, index);
      const difftest::GeneratedSpec spec = difftest::generate_spec(rng, category);
      driver::CompileOptions options;
      options.last_stage = driver::Stage::Scalar;
      const driver::Compilation compilation =
          driver::compile(std::make_shared<SourceFile>("generated.nt", spec.text), options);
      ASSERT_TRUE(compilation.ok()) << spec.text << compilation.diagnostics->render_all()
                                    << compilation.internal_error;
    }
  }
}

TEST(DiffTestGenerator, IsDeterministic) {
  for (uint64_t index = 0; index < 20; ++index) {
    Rng a = Rng::for_triple(3, index), b = Rng::for_triple(3, index);
    EXPECT_EQ(difftest::generate_spec(a).text, difftest::generate_spec(b).text);
  }
  Rng a = Rng::for_triple(3, 0), b = Rng::for_triple(4, 0);
  EXPECT_NE(difftest::generate_spec(a).text, difftest::generate_spec(b).text);
}

TEST(DiffTest, ATripleReplaysToTheSameResult) {
  for (uint64_t index : {0u, 1u, 2u}) {
    const difftest::TripleResult first = difftest::run_triple(11, index, {});
    const difftest::TripleResult again = difftest::run_triple(11, index, {});
    EXPECT_EQ(first.spec_text, again.spec_text);
    EXPECT_EQ(sched::print_decisions(first.schedule.decisions, "; "),
              sched::print_decisions(again.schedule.decisions, "; "));
    EXPECT_EQ(first.status, again.status);
  }
}

// ---- regression tests of what the tester found ------------------------------------------

struct Reproducer {
  const char* spec;
  std::vector<const char*> schedule;
  driver::Stage stage;
  uint64_t seed;
};

// Compiles `r` to its stage and evaluates it there against the float64 reference.
void expect_matches_reference(const Reproducer& r) {
  driver::CompileOptions options;
  options.last_stage = r.stage;
  for (const char* text : r.schedule) {
    sched::DecisionParseError error;
    std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
    ASSERT_TRUE(decision) << text << ": " << sched::to_string(error);
    options.schedule.decisions.push_back(*decision);
  }
  const driver::Compilation compilation =
      driver::compile(std::make_shared<SourceFile>("reproducer.nt", r.spec), options);
  ASSERT_TRUE(compilation.internal_error.empty()) << compilation.internal_error;
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error
                                << compilation.diagnostics->render_all();
  driver::EvalOptions eval;
  eval.stage = r.stage;
  eval.seed = r.seed;
  const driver::EvalResult result = driver::evaluate(compilation, eval);
  ASSERT_TRUE(result.ran) << result.error;
  for (const driver::OutputCheck& check : result.outputs) {
    EXPECT_TRUE(check.passed) << check.name << ": max rel error "
                              << check.error.max_relative_error << " > " << check.tolerance
                              << ", non-finite mismatches " << check.error.mismatched_nonfinite;
  }
}

}  // namespace
}  // namespace nautilus
