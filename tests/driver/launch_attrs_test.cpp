// Launch attributes: the `launch` decision writes warps and stages on the outermost loop of a
// block's nest in the scalar IR; they print, serialize, verify, survive the decisions after it,
// reach the VR kernel and the MA kernel, and a kernel without them gets the lowering's defaults.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/driver/pipeline.h"
#include "core/matile/printer.h"
#include "core/scalar/printer.h"
#include "core/scalar/verifier.h"
#include "core/sched/decision.h"
#include "core/vrtile/printer.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::source_path;

// GEMM at a size that keeps every mma path, compiled with `decisions` up to `last_stage`.
driver::Compilation compile_gemm(const std::vector<std::string>& decisions,
                                 driver::Stage last_stage) {
  driver::CompileOptions options;
  options.last_stage = last_stage;
  for (const std::string& text : decisions) {
    sched::DecisionParseError error;
    std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
    EXPECT_TRUE(decision) << text;
    if (decision) options.schedule.decisions.push_back(*decision);
  }
  std::string error;
  for (const std::string text : {"M=256", "N=256", "K=256"}) {
    options.sizes.push_back(*spec::parse_size_override(text, &error));
  }
  auto file = SourceFile::read(source_path("assets/specs/gemm.nt"), &error);
  return driver::compile(file, options);
}

const std::vector<std::string> kGemmSchedule = {
    "tile(C_sum, m=128, n=128, k=64)",
    "reverse_compute_at(C, C_sum, n_o)",
    "bind(C_sum, m_o=grid.y, n_o=grid.x)",
};

std::vector<std::string> with_launch_first(const std::string& launch) {
  std::vector<std::string> decisions = {launch};
  decisions.insert(decisions.end(), kGemmSchedule.begin(), kGemmSchedule.end());
  return decisions;
}

const scalar::For& outermost_loop(const scalar::Program& program) {
  const scalar::Stmt& first =
      program.body->as<scalar::Seq>() ? program.body->as<scalar::Seq>()->stmts.front() : program.body;
  return *first->as<scalar::For>();
}

TEST(LaunchAttrs, PrintAndSerializeOnTheNestsOutermostLoop) {
  std::vector<std::string> decisions = kGemmSchedule;
  decisions.push_back("launch(C_sum, warps=8, stages=3)");
  const driver::Compilation compilation = compile_gemm(decisions, driver::Stage::Scalar);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  const std::string text = scalar::print_program(*compilation.program);
  EXPECT_NE(text.find("for m_o in 0..2 [grid.y] launch(warps=8, stages=3):\n"), std::string::npos)
      << text;
  const auto json = scalar::program_to_json(*compilation.program);
  const std::string dumped = json.dump();
  EXPECT_NE(dumped.find("\"launch\":{\"warps\":8,\"stages\":3}"), std::string::npos) << dumped;
  const scalar::For& loop = outermost_loop(*compilation.program);
  ASSERT_TRUE(loop.launch);
  EXPECT_EQ(*loop.launch, (scalar::LaunchAttrs{8, 3}));
}

TEST(LaunchAttrs, GroupedReadsPrintAndABadReadsValueIsRefusedWithItsChoices) {
  std::vector<std::string> decisions = kGemmSchedule;
  decisions.push_back("launch(C_sum, warps=4, stages=3, reads=grouped)");
  const driver::Compilation compilation = compile_gemm(decisions, driver::Stage::MATile);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  EXPECT_NE(scalar::print_program(*compilation.program).find("launch(warps=4, stages=3, reads=grouped):"),
            std::string::npos);
  EXPECT_NE(scalar::program_to_json(*compilation.program).dump().find("\"reads\":\"grouped\""), std::string::npos);
  EXPECT_TRUE(compilation.ma_module->kernels.at(0)->grouped_shared_reads);

  decisions.back() = "launch(C_sum, warps=4, stages=3, reads=fast)";
  const driver::Compilation bad = compile_gemm(decisions, driver::Stage::Scalar);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.schedule_error.find("launch: reads is auto, elements or grouped, got fast"), std::string::npos)
      << bad.schedule_error;
}

TEST(LaunchAttrs, TheMmaFormPrintsAndABadValueIsRefusedWithItsChoices) {
  std::vector<std::string> decisions = kGemmSchedule;
  decisions.push_back("launch(C_sum, warps=4, stages=3, mma=swapped)");
  const driver::Compilation compilation = compile_gemm(decisions, driver::Stage::Scalar);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  EXPECT_NE(scalar::print_program(*compilation.program).find("launch(warps=4, stages=3, mma=swapped):"),
            std::string::npos);
  EXPECT_NE(scalar::program_to_json(*compilation.program).dump().find("\"mma\":\"swapped\""), std::string::npos);
  EXPECT_EQ(outermost_loop(*compilation.program).launch->mma_form, scalar::MmaForm::Swapped);

  decisions.back() = "launch(C_sum, warps=4, stages=3, mma=transposed)";
  const driver::Compilation bad = compile_gemm(decisions, driver::Stage::Scalar);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.schedule_error.find("launch: mma is auto, direct or swapped, got transposed"), std::string::npos)
      << bad.schedule_error;
}

TEST(LaunchAttrs, SurviveTheDecisionsAfterTheLaunch) {
  // tile splits the outermost loop and reverse_compute_at moves C into C_sum's nest: the nest
  // the kernel comes from is rebuilt twice after the launch.
  const driver::Compilation compilation =
      compile_gemm(with_launch_first("launch(C, warps=2, stages=1)"), driver::Stage::Scalar);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  EXPECT_TRUE(scalar::verify(*compilation.program).empty());
  const scalar::For& loop = outermost_loop(*compilation.program);
  ASSERT_TRUE(loop.launch) << scalar::print_program(*compilation.program);
  EXPECT_EQ(*loop.launch, (scalar::LaunchAttrs{2, 1}));
  // Every snapshot after the launch keeps it.
  bool after_launch = false;
  for (const driver::Snapshot& snapshot : compilation.log) {
    if (snapshot.decision && snapshot.decision->kind == "launch") after_launch = true;
    if (!after_launch || snapshot.stage != driver::Stage::Scalar) continue;
    ASSERT_TRUE(snapshot.program);
    EXPECT_NE(scalar::print_program(*snapshot.program).find("launch(warps=2, stages=1)"),
              std::string::npos)
        << snapshot.pass;
  }
  EXPECT_TRUE(after_launch);
}

TEST(LaunchAttrs, ReachTheVrKernelAndTheMaKernel) {
  std::vector<std::string> decisions = kGemmSchedule;
  decisions.push_back("launch(C_sum, warps=8, stages=3)");
  const driver::Compilation compilation = compile_gemm(decisions, driver::Stage::MATile);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  ASSERT_EQ(compilation.vr_module->kernels.size(), 1u);
  const vrtile::Kernel& vr = *compilation.vr_module->kernels.front();
  ASSERT_TRUE(vr.launch);
  EXPECT_EQ(*vr.launch, (scalar::LaunchAttrs{8, 3}));
  EXPECT_NE(vrtile::print_module(*compilation.vr_module).find("launch(warps=8, stages=3) {"),
            std::string::npos);
  EXPECT_NE(vrtile::module_to_json(*compilation.vr_module).dump().find(
                "\"launch\":{\"warps\":8,\"stages\":3}"),
            std::string::npos);
  ASSERT_EQ(compilation.ma_module->kernels.size(), 1u);
  EXPECT_EQ(compilation.ma_module->kernels.front()->warps, 8);
  EXPECT_NE(matile::print_module(*compilation.ma_module).find("pipeline 3"), std::string::npos);
}

TEST(LaunchAttrs, AKernelWithoutThemGetsTheDefaults) {
  const driver::Compilation compilation = compile_gemm(kGemmSchedule, driver::Stage::MATile);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  EXPECT_FALSE(outermost_loop(*compilation.program).launch);
  EXPECT_EQ(scalar::print_program(*compilation.program).find("launch("), std::string::npos);
  ASSERT_EQ(compilation.vr_module->kernels.size(), 1u);
  EXPECT_FALSE(compilation.vr_module->kernels.front()->launch);
  const matile::LowerOptions defaults;
  EXPECT_EQ(compilation.ma_module->kernels.front()->warps, defaults.warps);
  EXPECT_NE(matile::print_module(*compilation.ma_module).find("pipeline " +
                                                              std::to_string(defaults.stages)),
            std::string::npos);
}

TEST(LaunchAttrs, TheVerifierRejectsThemInsideANestAndOutOfRange) {
  const driver::Compilation compilation = compile_gemm(kGemmSchedule, driver::Stage::Scalar);
  ASSERT_TRUE(compilation.ok());
  const scalar::Program& program = *compilation.program;
  const scalar::For& outer = outermost_loop(program);

  auto with_top = [&](scalar::Stmt top) {
    auto copy = std::make_shared<scalar::Program>(program);
    if (const auto* seq = program.body->as<scalar::Seq>()) {
      std::vector<scalar::Stmt> nests = seq->stmts;
      nests.front() = std::move(top);
      copy->body = scalar::make_seq(std::move(nests));
    } else {
      copy->body = std::move(top);
    }
    return copy;
  };
  const std::vector<std::string> bad_warps =
      scalar::verify(*with_top(scalar::with_launch(outer, scalar::LaunchAttrs{3, 2})));
  ASSERT_FALSE(bad_warps.empty());
  EXPECT_NE(bad_warps.front().find("warps must be 1, 2, 4 or 8"), std::string::npos);

  const scalar::For& inner = *outer.body->as<scalar::For>();
  const scalar::Stmt nested = scalar::make_for(
      outer.var, outer.extent, scalar::with_launch(inner, scalar::LaunchAttrs{4, 2}),
      outer.provenance, outer.for_kind);
  const std::vector<std::string> misplaced = scalar::verify(*with_top(nested));
  ASSERT_FALSE(misplaced.empty());
  EXPECT_NE(misplaced.front().find("not the outermost loop of a nest"), std::string::npos);
}

}  // namespace
}  // namespace nautilus
