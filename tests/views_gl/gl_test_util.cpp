#include "tests/views_gl/gl_test_util.h"

#include <gtest/gtest.h>

#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "tests/common/golden.h"

namespace nautilus::views::gl::testing {

matile::ModulePtr compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes) {
  using nautilus::testing::source_path;
  std::string error;
  auto schedule = sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  if (schedule) options.schedule = *schedule;
  for (const std::string& text : sizes) {
    auto size = spec::parse_size_override(text, &error);
    EXPECT_TRUE(size) << error;
    if (size) options.sizes.push_back(*size);
  }
  auto file = SourceFile::read(source_path("assets/specs/" + asset + ".nt"), &error);
  EXPECT_TRUE(file) << error;
  if (!file) return nullptr;
  const driver::Compilation compilation = driver::compile(file, options);
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  return compilation.ok() ? compilation.ma_module : nullptr;
}

matile::ModulePtr attention_module() {
  static const matile::ModulePtr module =
      compile_to_matile("attention", {"B=1", "H=1", "M=128", "N=192", "D=64"});
  return module;
}

}  // namespace nautilus::views::gl::testing
