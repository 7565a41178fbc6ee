#include "tests/cost/cost_test_util.h"

#include <gtest/gtest.h>

#include "core/driver/pipeline.h"
#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "core/support/source.h"
#include "tests/common/golden.h"

namespace nautilus::cost::testing {

matile::ModulePtr compile_ma(const std::string& asset, const std::vector<std::string>& sizes,
                             const std::vector<std::string>& decisions,
                             const std::string& arch, matile::LowerOptions::RingRelease ring_release) {
  std::string error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  if (!arch.empty()) options.matile.arch = arch;
  options.matile.ring_release = ring_release;
  for (const std::string& size : sizes) {
    auto binding = spec::parse_size_override(size, &error);
    EXPECT_TRUE(binding) << size << ": " << error;
    if (!binding) return nullptr;
    options.sizes.push_back(*binding);
  }
  for (const std::string& text : decisions) {
    sched::DecisionParseError parse_error;
    auto decision = sched::parse_decision(text, &parse_error);
    EXPECT_TRUE(decision) << text << ": " << sched::to_string(parse_error);
    if (!decision) return nullptr;
    options.schedule.decisions.push_back(*decision);
  }
  auto file =
      SourceFile::read(nautilus::testing::source_path("assets/specs/" + asset + ".nt"), &error);
  EXPECT_TRUE(file) << error;
  if (!file) return nullptr;
  const driver::Compilation compilation = driver::compile(file, options);
  EXPECT_TRUE(compilation.ok() && compilation.ma_module)
      << asset << ": " << compilation.schedule_error << compilation.internal_error
      << compilation.diagnostics->render_all();
  return compilation.ok() ? compilation.ma_module : nullptr;
}

std::vector<std::string> with_decision(std::vector<std::string> decisions,
                                       const std::string& replacement) {
  sched::DecisionParseError error;
  const auto wanted = sched::parse_decision(replacement, &error);
  EXPECT_TRUE(wanted) << replacement;
  if (!wanted) return decisions;
  for (std::string& text : decisions) {
    const auto decision = sched::parse_decision(text, &error);
    if (decision && decision->kind == wanted->kind && decision->target == wanted->target) {
      text = replacement;
      return decisions;
    }
  }
  decisions.push_back(replacement);
  return decisions;
}

}  // namespace nautilus::cost::testing
