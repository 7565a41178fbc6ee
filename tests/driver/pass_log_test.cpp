// The pass log: PassLogger's snapshots, verdicts, observer and stop token; the pipeline's log as
// typed snapshots (decisions carried, never re-parsed); rendering, per-pass diffs, explanations
// and the estimate after a scheduling pass.
#include <gtest/gtest.h>

#include <stop_token>
#include <string>
#include <vector>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pass_estimate.h"
#include "core/driver/pass_log.h"
#include "core/driver/pipeline.h"
#include "core/driver/render.h"
#include "core/matile/printer.h"
#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "core/sched/decision.h"
#include "core/spec/printer.h"
#include "core/vrtile/printer.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::compile_asset;
using testing::small_sizes;

sched::Decision decision_of(const std::string& text) {
  sched::DecisionParseError error;
  std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
  EXPECT_TRUE(decision) << sched::to_string(error);
  return decision.value_or(sched::Decision{});
}

// attention.nt with the hand schedule of assets/schedules/attention.json, compiled to `last`.
driver::Compilation compile_attention(driver::Stage last, const std::vector<std::string>& sizes,
                                      driver::CompileOptions options = {}) {
  std::string error;
  SourceFilePtr file =
      SourceFile::read(testing::source_path("assets/specs/attention.nt"), &error);
  EXPECT_TRUE(file) << error;
  for (const std::string& text : testing::hand_schedule("attention")) {
    options.schedule.decisions.push_back(decision_of(text));
  }
  for (const std::string& size : sizes) {
    std::optional<spec::SizeOverride> binding = spec::parse_size_override(size, &error);
    EXPECT_TRUE(binding) << error;
    if (binding) options.sizes.push_back(*binding);
  }
  options.last_stage = last;
  return driver::compile(file, options);
}

scalar::ProgramPtr gemm_program() {
  driver::Compilation compilation = compile_asset("gemm", small_sizes("gemm"));
  EXPECT_TRUE(compilation.ok());
  return compilation.program;
}

TEST(PassLogger, RecordsTheStepTheIrItsTimeAndWhetherItChangedAnything) {
  const scalar::ProgramPtr program = gemm_program();
  ASSERT_TRUE(program);
  driver::PassLogger logger;
  const sched::Decision tile = decision_of("tile(C, m=4)");
  const scalar::ProgramPtr same = logger.run(
      driver::PassStep{driver::Stage::Scalar, "keep", "returns its input", tile}, program,
      [&] { return program; });
  EXPECT_EQ(same, program);
  const scalar::ProgramPtr fresh = logger.run(
      driver::PassStep{driver::Stage::Scalar, "start", "starts from nothing", std::nullopt},
      scalar::ProgramPtr(), [&] { return program; });
  EXPECT_EQ(fresh, program);
  ASSERT_EQ(logger.log().size(), 2u);
  const driver::Snapshot& kept = logger.log()[0];
  EXPECT_EQ(kept.stage, driver::Stage::Scalar);
  EXPECT_EQ(kept.pass, "keep");
  EXPECT_EQ(kept.summary, "returns its input");
  ASSERT_TRUE(kept.decision);
  EXPECT_EQ(*kept.decision, tile);
  EXPECT_EQ(kept.program, program);
  EXPECT_TRUE(kept.unchanged);
  EXPECT_GE(kept.milliseconds, 0.0);
  // A pass with no input of the log (a stage's first pass) is never "unchanged".
  EXPECT_FALSE(logger.log()[1].unchanged);
  EXPECT_FALSE(logger.log()[1].decision);
  EXPECT_TRUE(logger.malformed().empty());
  EXPECT_FALSE(logger.cancelled());
}

TEST(PassLogger, AFailedPassLeavesNoSnapshot) {
  driver::PassLogger logger;
  const scalar::ProgramPtr failed =
      logger.run(driver::PassStep{driver::Stage::Scalar, "fails", "", std::nullopt},
                 gemm_program(), [] { return scalar::ProgramPtr(); });
  EXPECT_EQ(failed, nullptr);
  EXPECT_TRUE(logger.log().empty());
  EXPECT_TRUE(logger.malformed().empty()) << "the pass's own failure is not a verifier verdict";
}

TEST(PassLogger, MalformedOutputIsLoggedAndNamedAfterItsPass) {
  const scalar::ProgramPtr program = gemm_program();
  ASSERT_TRUE(program);
  // A store into a buffer the program does not declare is rejected by the scalar verifier.
  auto broken = std::make_shared<scalar::Program>(*program);
  broken->params.clear();
  broken->allocations.clear();
  ASSERT_FALSE(scalar::verify(*broken).empty());
  driver::PassLogger logger;
  const scalar::ProgramPtr result =
      logger.run(driver::PassStep{driver::Stage::Scalar, "drop-buffers", "", std::nullopt},
                 program, [&] { return scalar::ProgramPtr(broken); });
  EXPECT_EQ(result, nullptr);
  ASSERT_EQ(logger.log().size(), 1u) << "the malformed IR stays in the log for inspection";
  EXPECT_EQ(logger.malformed().rfind("scalar IR after pass 'drop-buffers' is malformed: ", 0), 0u)
      << logger.malformed();
}

TEST(PassLogger, StopsBeforeThePassWhenAskedAndTellsTheObserverOfEveryOther) {
  std::stop_source stop;
  std::vector<std::string> observed;
  driver::PassLogger logger(
      [&](const driver::Snapshot& snapshot) { observed.push_back(snapshot.pass); },
      stop.get_token());
  const scalar::ProgramPtr program = gemm_program();
  int runs = 0;
  const auto pass = [&] {
    ++runs;
    return program;
  };
  EXPECT_TRUE(logger.run(driver::PassStep{driver::Stage::Scalar, "one", "", std::nullopt},
                         program, pass));
  stop.request_stop();
  EXPECT_FALSE(logger.run(driver::PassStep{driver::Stage::Scalar, "two", "", std::nullopt},
                          program, pass));
  EXPECT_EQ(runs, 1) << "a stopped compile runs no further pass";
  EXPECT_TRUE(logger.cancelled());
  EXPECT_EQ(observed, std::vector<std::string>{"one"});
}

TEST(PassLog, SchedulingPassesCarryTheirDecisionAndNoOtherPassDoes) {
  const driver::Compilation compilation =
      compile_attention(driver::Stage::Cuda, small_sizes("attention"));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::vector<std::string> schedule = testing::hand_schedule("attention");
  std::vector<std::string> applied;
  for (const driver::Snapshot& snapshot : compilation.log) {
    if (!snapshot.decision) continue;
    EXPECT_EQ(snapshot.stage, driver::Stage::Scalar);
    EXPECT_EQ(snapshot.pass, sched::print_decision(*snapshot.decision));
    applied.push_back(sched::print_decision(*snapshot.decision));
  }
  EXPECT_EQ(applied, schedule);
  // Every stage is in the log, in pipeline order, each snapshot holding its stage's IR.
  for (const driver::Snapshot& snapshot : compilation.log) {
    switch (snapshot.stage) {
      case driver::Stage::Spec: EXPECT_TRUE(snapshot.spec); break;
      case driver::Stage::Scalar: EXPECT_TRUE(snapshot.program); break;
      case driver::Stage::VRTile: EXPECT_TRUE(snapshot.vr_module); break;
      case driver::Stage::MATile: EXPECT_TRUE(snapshot.ma_module); break;
      case driver::Stage::Cuda: EXPECT_TRUE(snapshot.cuda); break;
    }
  }
  EXPECT_EQ(compilation.log.front().pass, "parse-and-check");
  EXPECT_EQ(compilation.log.back().pass, "emit-cuda");
  EXPECT_EQ(compilation.final_snapshot(driver::Stage::Cuda)->cuda, compilation.cuda);
  EXPECT_EQ(compilation.final_snapshot(driver::Stage::MATile)->ma_module, compilation.ma_module);
}

TEST(PassLog, TheObserverSeesEachPassAsItIsLoggedAndTheStopTokenEndsTheCompile) {
  std::vector<std::string> observed;
  driver::CompileOptions options;
  options.on_snapshot = [&](const driver::Snapshot& snapshot) { observed.push_back(snapshot.pass); };
  const driver::Compilation full =
      compile_attention(driver::Stage::Cuda, small_sizes("attention"), options);
  ASSERT_TRUE(full.ok());
  std::vector<std::string> logged;
  for (const driver::Snapshot& snapshot : full.log) logged.push_back(snapshot.pass);
  EXPECT_EQ(observed, logged);

  // Stop once tilize has been logged: the compile ends there, marked cancelled, not ok.
  std::stop_source stop;
  driver::CompileOptions stopping;
  stopping.stop = stop.get_token();
  stopping.on_snapshot = [&](const driver::Snapshot& snapshot) {
    if (snapshot.pass == "tilize") stop.request_stop();
  };
  const driver::Compilation stopped =
      compile_attention(driver::Stage::Cuda, small_sizes("attention"), stopping);
  EXPECT_TRUE(stopped.cancelled);
  EXPECT_FALSE(stopped.ok());
  ASSERT_FALSE(stopped.log.empty());
  EXPECT_EQ(stopped.log.back().pass, "tilize");
  EXPECT_FALSE(stopped.vr_module);
  EXPECT_FALSE(stopped.cuda);
  EXPECT_TRUE(stopped.schedule_error.empty());
  EXPECT_TRUE(stopped.internal_error.empty());
}

TEST(Render, EachFormatIsTheStagePrinters) {
  const driver::Compilation compilation =
      compile_attention(driver::Stage::Cuda, small_sizes("attention"));
  ASSERT_TRUE(compilation.ok());
  const SourceFile* source = compilation.file.get();
  const driver::Snapshot& spec = *compilation.final_snapshot(driver::Stage::Spec);
  const driver::Snapshot& scalar = *compilation.final_snapshot(driver::Stage::Scalar);
  const driver::Snapshot& vr = *compilation.final_snapshot(driver::Stage::VRTile);
  const driver::Snapshot& ma = *compilation.final_snapshot(driver::Stage::MATile);
  const driver::Snapshot& cuda = *compilation.final_snapshot(driver::Stage::Cuda);
  using driver::RenderFormat;
  EXPECT_EQ(driver::render(spec, RenderFormat::Text), spec::print_spec(*spec.spec));
  EXPECT_EQ(driver::render(scalar, RenderFormat::Text, source),
            scalar::print_program(*scalar.program, source));
  EXPECT_EQ(driver::render(vr, RenderFormat::Dot), vrtile::module_to_dot(*vr.vr_module));
  EXPECT_EQ(driver::render(ma, RenderFormat::Json),
            matile::module_to_json(*ma.ma_module).dump(2) + "\n");
  EXPECT_EQ(driver::render(cuda, RenderFormat::Text), compilation.cuda->source);
  EXPECT_EQ(driver::render(cuda, RenderFormat::Dot), "") << "CUDA source has no graph";
  const nlohmann::ordered_json launches = driver::render_json(cuda);
  ASSERT_EQ(launches["kernels"].size(), compilation.cuda->kernels.size());
  EXPECT_EQ(launches["kernels"][0]["symbol"], compilation.cuda->kernels[0].symbol);
  EXPECT_EQ(launches["source"], compilation.cuda->source);
  // A snapshot without IR renders as nothing rather than failing.
  EXPECT_EQ(driver::render(driver::Snapshot{}, RenderFormat::Text), "");
  EXPECT_TRUE(driver::render_json(driver::Snapshot{}).is_null());

  EXPECT_EQ(driver::parse_render_format("dot"), RenderFormat::Dot);
  EXPECT_FALSE(driver::parse_render_format("svg"));
}

TEST(Render, PassDiffIsAgainstTheNeighbourAndEmptyForAnUnchangedPass) {
  driver::ScalarPass identity{"identity", "returns its input",
                              [](const scalar::ProgramPtr& program) { return program; }};
  const driver::Compilation compilation =
      compile_asset("gemm", small_sizes("gemm"), driver::Stage::Scalar, {identity});
  ASSERT_EQ(compilation.log.size(), 3u);
  const SourceFile* source = compilation.file.get();
  const std::string first = driver::pass_diff(compilation.log, 0, source);
  EXPECT_EQ(first.rfind("--- before (nothing)\n+++ after parse-and-check\n@@ -0,0 +1,", 0), 0u)
      << first;
  const std::string lowered = driver::pass_diff(compilation.log, 1, source);
  EXPECT_EQ(lowered.rfind("--- before parse-and-check\n+++ after lower-to-scalar\n", 0), 0u)
      << lowered;
  EXPECT_EQ(driver::pass_diff(compilation.log, 2, source), "");
  EXPECT_EQ(driver::pass_diff(compilation.log, 3, source), "") << "past the end of the log";
}

TEST(Render, ExplanationComesFromTheDecisionKindNotFromTheName) {
  const sched::DecisionKind* kind = sched::find_decision_kind("rolling_update");
  ASSERT_NE(kind, nullptr);
  driver::Snapshot decided;
  decided.stage = driver::Stage::Scalar;
  decided.pass = "rolling_update(O_sum, n, tile=64)";
  decided.summary = kind->summary;
  decided.decision = decision_of(decided.pass);
  EXPECT_EQ(driver::pass_explanation(decided),
            kind->description.empty() ? kind->summary : kind->description);
  // The same name without a decision is an ordinary pass: its own summary explains it.
  driver::Snapshot named = decided;
  named.decision.reset();
  named.summary = "a user pass that happens to print like a decision";
  EXPECT_EQ(driver::pass_explanation(named), named.summary);
  // Built-in passes are explained by the registry.
  driver::Snapshot tilize;
  tilize.stage = driver::Stage::VRTile;
  tilize.pass = "tilize";
  int explained = 0;
  for (const driver::PassInfo& info : driver::pass_registry()) {
    if (info.name != "tilize") continue;
    EXPECT_EQ(driver::pass_explanation(tilize), info.summary);
    ++explained;
  }
  EXPECT_EQ(explained, 1);
}

TEST(PassEstimate, RollingUpdateMakesTheCompletedAttentionCheaper) {
  const driver::Compilation compilation = compile_attention(driver::Stage::Scalar, {});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error;
  // log: parse-and-check, lower-to-scalar, rolling_update(...), ...
  ASSERT_GE(compilation.log.size(), 3u);
  ASSERT_TRUE(compilation.log[2].decision);
  ASSERT_EQ(compilation.log[2].decision->kind, "rolling_update");
  const std::unique_ptr<cost::CostModel> model =
      cost::make_analytical_model(*cost::device_model_for("h100"));
  const driver::PassEstimate before = driver::estimate_after_pass(compilation, 1, *model);
  const driver::PassEstimate after = driver::estimate_after_pass(compilation, 2, *model);
  ASSERT_TRUE(before.estimate) << before.reason;
  ASSERT_TRUE(after.estimate) << after.reason;
  ASSERT_TRUE(before.estimate->feasible) << before.estimate->infeasible_reason;
  ASSERT_TRUE(after.estimate->feasible) << after.estimate->infeasible_reason;
  EXPECT_LT(after.estimate->microseconds, before.estimate->microseconds)
      << "the fused online softmax is cheaper than the unfused program it replaces";

  // Only scheduling passes of the scalar IR have one.
  const driver::PassEstimate spec = driver::estimate_after_pass(compilation, 0, *model);
  EXPECT_FALSE(spec.estimate);
  EXPECT_FALSE(spec.reason.empty());
  EXPECT_FALSE(driver::estimate_after_pass(compilation, compilation.log.size(), *model).estimate);
}

}  // namespace
}  // namespace nautilus
