#include "tests/views_gl/gl_test_util.h"

#include <gtest/gtest.h>

#include "core/sched/decision.h"
#include "core/spec/sema.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::views::gl::testing {

matile::ModulePtr compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes) {
  using nautilus::testing::source_path;
  std::string error;
  auto schedule = sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  if (schedule) options.schedule = *schedule;
  const driver::Compilation compilation =
      nautilus::testing::compile_scheduled("assets/specs/" + asset + ".nt", {}, sizes, options);
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  return compilation.ok() ? compilation.ma_module : nullptr;
}

matile::ModulePtr compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes,
                                    const std::vector<std::string>& decisions, const std::string& arch,
                                    std::vector<std::string>* statement_names) {
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  options.matile.arch = arch;
  const driver::Compilation compilation =
      nautilus::testing::compile_scheduled("assets/specs/" + asset + ".nt", decisions, sizes, options);
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  if (statement_names && compilation.spec) {
    for (const spec::Statement& statement : compilation.spec->program.statements) {
      statement_names->push_back(statement.name);
    }
  }
  return compilation.ok() ? compilation.ma_module : nullptr;
}

namespace {

struct WarpSpecializedAttention {
  matile::ModulePtr module;
  std::vector<std::string> statements;
};

const WarpSpecializedAttention& warp_specialized_attention() {
  static const WarpSpecializedAttention compiled = [] {
    WarpSpecializedAttention result;
    result.module = compile_to_matile(
        "attention", {"B=1", "H=1", "M=128", "N=384", "D=64"},
        {"rolling_update(O_sum, n, tile=128)", "compute_at(S, Mx, n_o)", "tile(O_sum_acc, m=128)",
         "reverse_compute_at(O, O_sum, m_o)", "bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)",
         "warp_spec(O_sum_acc, consumers=2, stages=2)"},
        "sm_90a", &result.statements);
    return result;
  }();
  return compiled;
}

}  // namespace

matile::ModulePtr warp_specialized_attention_module() { return warp_specialized_attention().module; }

const std::vector<std::string>& attention_statement_names() { return warp_specialized_attention().statements; }

matile::ModulePtr attention_module() {
  static const matile::ModulePtr module =
      compile_to_matile("attention", {"B=1", "H=1", "M=128", "N=192", "D=64"});
  return module;
}

}  // namespace nautilus::views::gl::testing
