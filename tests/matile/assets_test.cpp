// Totality over the asset specs: every asset, scheduled by its hand-written schedule
// (assets/schedules) and tiled by core/tilize, lowers to MA tile IR and the MA interpreter
// reproduces the float64 reference, at sizes that are not multiples of the tiles.
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/matile/printer.h"
#include "core/sched/decision.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::matile {
namespace {

using nautilus::testing::source_path;

// Sizes with a remainder tile on every tiled axis, small enough for the thread-level interpreter.
const std::map<std::string, std::vector<std::string>>& tail_sizes() {
  static const std::map<std::string, std::vector<std::string>> sizes = {
      {"attention", {"B=1", "H=1", "M=70", "N=70", "D=16"}},
      {"causal_attention", {"B=1", "H=1", "M=70", "N=70", "D=16"}},
      {"gqa_attention", {"B=1", "H=2", "KH=1", "M=70", "N=40", "D=16"}},
      {"attention_one_statement", {"B=1", "H=1", "M=20", "N=10", "D=16"}},
      {"gemm", {"M=70", "N=72", "K=40"}},
      {"batched_gemm", {"Z=2", "M=70", "N=40", "K=36"}},
      {"softmax", {"R=5", "C=300"}},
      {"logsumexp", {"R=5", "C=300"}},
      {"rmsnorm", {"T=5", "H=300"}},
      {"layernorm", {"T=5", "H=300"}},
      {"gated_mlp", {"T=70", "H=16", "F=40"}},
      {"fp8_gemm", {"M=70", "N=72", "K=40"}},
      {"fp8_gemm_nt", {"M=70", "N=72", "K=48"}},
      {"int8_weight_gemm", {"M=70", "N=72", "K=140", "G=128", "KG=2"}},
      {"int4_weight_gemm", {"M=70", "N=72", "K=140", "G=128", "KG=2"}},
  };
  return sizes;
}

driver::Compilation compile_to_matile(const std::string& asset, const std::vector<std::string>& sizes) {
  std::string error;
  auto schedule = sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::MATile;
  if (schedule) options.schedule = *schedule;
  for (const std::string& text : sizes) options.sizes.push_back(*spec::parse_size_override(text, &error));
  auto file = SourceFile::read(source_path("assets/specs/" + asset + ".nt"), &error);
  return driver::compile(file, options);
}

class AssetsToMatile : public ::testing::TestWithParam<std::string> {};

TEST_P(AssetsToMatile, MatchesTheReference) {
  const std::string asset = GetParam();
  ASSERT_TRUE(tail_sizes().count(asset)) << "add sizes for " << asset;
  const driver::Compilation compilation = compile_to_matile(asset, tail_sizes().at(asset));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  ASSERT_TRUE(compilation.ma_module);
  nautilus::testing::expect_stage_matches_reference(compilation, driver::Stage::MATile, 3, asset + " ");
}

INSTANTIATE_TEST_SUITE_P(Assets, AssetsToMatile, ::testing::ValuesIn(nautilus::testing::asset_names()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) { return param_info.param; });

}  // namespace
}  // namespace nautilus::matile
