#include "tests/common/spec_test_util.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>

#include <gtest/gtest.h>

#include "core/codegen/emit_cuda.h"
#include "core/sched/decision.h"
#include "tests/common/golden.h"

namespace nautilus::testing {

namespace {

driver::Compilation compile_file(SourceFilePtr file, const std::vector<std::string>& sizes,
                                 driver::Stage last_stage,
                                 std::vector<driver::ScalarPass> extra_passes) {
  driver::CompileOptions options;
  options.last_stage = last_stage;
  options.extra_passes = std::move(extra_passes);
  for (const std::string& text : sizes) {
    std::string error;
    auto binding = spec::parse_size_override(text, &error);
    EXPECT_TRUE(binding.has_value()) << text << ": " << error;
    if (binding) options.sizes.push_back(*binding);
  }
  driver::Compilation compilation = driver::compile(file, options);
  EXPECT_TRUE(compilation.ok()) << compilation.diagnostics->render_all()
                                << compilation.internal_error;
  return compilation;
}

}  // namespace

std::vector<std::string> warp_spec_attention(const WarpSpecAttention& form) {
  std::vector<std::string> d = {"rolling_update(O_sum, n, tile=" + std::to_string(form.key_tile) + ")",
                                "compute_at(S, Mx, n_o)"};
  if (form.causal) d.push_back("compute_at(S_sum, S, n_o)");
  d.push_back("tile(O_sum_acc, m=" + std::to_string(64 * form.consumers) + ")");
  d.push_back("reverse_compute_at(O, O_sum, m_o)");
  d.push_back("bind(O_sum_acc, b=grid.z, h=grid.y, m_o=grid.x)");
  if (form.causal) d.push_back("skip_masked(S, n_o)");
  d.push_back("warp_spec(O_sum_acc, consumers=" + std::to_string(form.consumers) + ", stages=" +
              std::to_string(form.stages) + (form.overlap ? ", overlap=1" : "") +
              (form.pingpong ? ", pingpong=1" : "") + ")");
  return d;
}

std::vector<std::string> hand_schedule(const std::string& asset) {
  std::string error;
  auto schedule =
      sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  std::vector<std::string> printed;
  if (schedule) {
    for (const sched::Decision& decision : schedule->decisions) {
      printed.push_back(sched::print_decision(decision));
    }
  }
  return printed;
}

driver::Compilation compile_asset(const std::string& name, const std::vector<std::string>& sizes,
                                  driver::Stage last_stage,
                                  std::vector<driver::ScalarPass> extra_passes) {
  std::string error;
  SourceFilePtr file = SourceFile::read(source_path("assets/specs/" + name + ".nt"), &error);
  EXPECT_TRUE(file) << error;
  if (!file) file = std::make_shared<SourceFile>(name, "");
  return compile_file(file, sizes, last_stage, std::move(extra_passes));
}

driver::Compilation compile_scheduled(const std::string& path, const std::vector<std::string>& decisions,
                                      const std::vector<std::string>& sizes,
                                      driver::CompileOptions options) {
  std::string error;
  SourceFilePtr file = SourceFile::read(source_path(path), &error);
  EXPECT_TRUE(file) << error;
  if (!file) file = std::make_shared<SourceFile>(path, "");
  return compile_scheduled(file, decisions, sizes, std::move(options));
}

driver::Compilation compile_for_arch(const std::string& path, const std::vector<std::string>& decisions,
                                     const std::vector<std::string>& sizes, const std::string& arch,
                                     driver::Stage last) {
  driver::CompileOptions options;
  options.last_stage = last;
  options.matile.arch = arch;
  return compile_scheduled(path, decisions, sizes, std::move(options));
}

driver::Compilation compile_scheduled(const SourceFilePtr& file, const std::vector<std::string>& decisions,
                                      const std::vector<std::string>& sizes,
                                      driver::CompileOptions options) {
  std::string error;
  for (const sched::Decision& decision : parse_schedule(decisions).decisions) {
    options.schedule.decisions.push_back(decision);
  }
  for (const std::string& text : sizes) {
    std::optional<spec::SizeOverride> size = spec::parse_size_override(text, &error);
    EXPECT_TRUE(size) << text << ": " << error;
    if (size) options.sizes.push_back(*size);
  }
  return driver::compile(file, options);
}

sched::Schedule parse_schedule(const std::vector<std::string>& decisions) {
  sched::Schedule schedule;
  for (const std::string& text : decisions) {
    sched::DecisionParseError error;
    std::optional<sched::Decision> decision = sched::parse_decision(text, &error);
    EXPECT_TRUE(decision) << text << ": " << sched::to_string(error);
    if (decision) schedule.decisions.push_back(*decision);
  }
  return schedule;
}

driver::Compilation compile_text(const std::string& text, const std::vector<std::string>& sizes) {
  return compile_file(std::make_shared<SourceFile>("inline.nt", text), sizes,
                      driver::Stage::Scalar, {});
}

std::vector<std::string> small_sizes(const std::string& asset) {
  static const std::map<std::string, std::vector<std::string>> sizes = {
      {"attention", {"B=1", "H=2", "M=12", "N=20", "D=8"}},
      {"causal_attention", {"B=1", "H=2", "M=12", "N=12", "D=8"}},
      {"gqa_attention", {"B=1", "H=8", "KH=2", "M=6", "N=10", "D=8"}},
      {"attention_one_statement", {"B=1", "H=1", "M=5", "N=7", "D=4"}},
      {"gemm", {"M=12", "N=10", "K=24"}},
      {"batched_gemm", {"Z=3", "M=6", "N=5", "K=16"}},
      {"softmax", {"R=7", "C=33"}},
      {"logsumexp", {"R=7", "C=33"}},
      {"rmsnorm", {"T=6", "H=40"}},
      {"layernorm", {"T=6", "H=40"}},
      {"gated_mlp", {"T=5", "H=16", "F=24"}},
      {"fp8_gemm", {"M=13", "N=11", "K=37"}},
      {"fp8_gemm_nt", {"M=13", "N=11", "K=37"}},
      {"int8_weight_gemm", {"M=13", "N=11", "K=37", "G=16", "KG=3"}},
      {"int4_weight_gemm", {"M=13", "N=11", "K=38", "G=16", "KG=3"}},
  };
  auto it = sizes.find(asset);
  return it == sizes.end() ? std::vector<std::string>{} : it->second;
}

std::vector<std::string> asset_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(source_path("assets/specs"))) {
    if (entry.is_regular_file() && entry.path().extension() == ".nt") {
      names.push_back(entry.path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string f32_variant(const std::string& asset) {
  std::string text = read_text(source_path("assets/specs/" + asset + ".nt"));
  for (size_t at = text.find("bf16"); at != std::string::npos; at = text.find("bf16", at)) {
    text.replace(at, 4, "f32");
  }
  return text;
}

void expect_stage_matches_reference(const driver::Compilation& compilation, driver::Stage stage,
                                    uint64_t seed, const std::string& what) {
  driver::EvalOptions options;
  options.stage = stage;
  options.seed = seed;
  const driver::EvalResult result = driver::evaluate(compilation, options);
  ASSERT_TRUE(result.ran) << what << result.error;
  ASSERT_FALSE(result.outputs.empty()) << what;
  for (const driver::OutputCheck& check : result.outputs) {
    EXPECT_TRUE(check.passed) << what << check.name << " " << check.error.max_relative_error;
  }
}

std::string emitted_cuda(const driver::Compilation& compilation) {
  EXPECT_TRUE(compilation.ok() && compilation.ma_module)
      << compilation.schedule_error << compilation.internal_error;
  if (!compilation.ma_module) return "";
  const codegen::Result<codegen::EmittedModule> module = codegen::emit_cuda(*compilation.ma_module);
  EXPECT_TRUE(module) << module.error().message;
  return module ? module->source : "";
}

}  // namespace nautilus::testing
