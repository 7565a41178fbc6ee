// The hand-written schedules in assets/schedules/: one per asset spec, applying at the spec's
// own (realistic) sizes and reproducing the float64 reference at sizes that are not multiples of
// their tiles, with several tiles per axis.
#include <filesystem>
#include <map>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "core/scalar/printer.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::source_path;

// Sizes that cut every tile of the asset's schedule into several tiles plus a remainder.
const std::map<std::string, std::vector<std::string>>& multi_tile_sizes() {
  static const std::map<std::string, std::vector<std::string>> sizes = {
      {"attention", {"B=1", "H=1", "M=130", "N=70", "D=8"}},
      {"causal_attention", {"B=1", "H=1", "M=130", "N=130", "D=4"}},
      {"gqa_attention", {"B=1", "H=4", "KH=1", "M=130", "N=70", "D=4"}},
      {"attention_one_statement", {"B=1", "H=1", "M=130", "N=20", "D=2"}},
      {"gemm", {"M=130", "N=129", "K=40"}},
      {"batched_gemm", {"Z=2", "M=130", "N=129", "K=36"}},
      {"softmax", {"R=5", "C=1030"}},
      {"logsumexp", {"R=5", "C=1030"}},
      {"rmsnorm", {"T=5", "H=1030"}},
      {"layernorm", {"T=5", "H=1030"}},
      {"gated_mlp", {"T=130", "H=9", "F=130"}},
      {"fp8_gemm", {"M=130", "N=129", "K=40"}},
      {"fp8_gemm_nt", {"M=130", "N=129", "K=144"}},
      {"int8_weight_gemm", {"M=130", "N=129", "K=300", "G=128", "KG=3"}},
      {"int4_weight_gemm", {"M=130", "N=129", "K=300", "G=128", "KG=3"}},
  };
  return sizes;
}

driver::Compilation compile_with_schedule(const std::string& asset,
                                          const std::vector<std::string>& sizes) {
  std::string error;
  auto schedule = sched::read_schedule_file(source_path("assets/schedules/" + asset + ".json"), &error);
  EXPECT_TRUE(schedule) << error;
  driver::CompileOptions options;
  options.last_stage = driver::Stage::VRTile;
  if (schedule) options.schedule = *schedule;
  for (const std::string& text : sizes) options.sizes.push_back(*spec::parse_size_override(text, &error));
  auto file = SourceFile::read(source_path("assets/specs/" + asset + ".nt"), &error);
  return driver::compile(file, options);
}

class HandSchedule : public ::testing::TestWithParam<std::string> {};

TEST_P(HandSchedule, AppliesAtRealisticSizes) {
  auto compilation = compile_with_schedule(GetParam(), {});
  EXPECT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
}

TEST_P(HandSchedule, MatchesReferenceAcrossSeveralTiles) {
  const std::string asset = GetParam();
  ASSERT_TRUE(multi_tile_sizes().count(asset)) << "add sizes for " << asset;
  auto compilation = compile_with_schedule(asset, multi_tile_sizes().at(asset));
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  for (driver::Stage stage : {driver::Stage::Scalar, driver::Stage::VRTile}) {
    for (uint64_t seed : {0, 1}) {
      driver::EvalOptions options;
      options.stage = stage;
      options.seed = seed;
      driver::EvalResult result = driver::evaluate(compilation, options);
      ASSERT_TRUE(result.ran) << driver::stage_name(stage) << ": " << result.error;
      for (const driver::OutputCheck& check : result.outputs) {
        EXPECT_TRUE(check.passed) << asset << " " << driver::stage_name(stage) << " "
                                  << check.name << " " << check.error.max_relative_error;
      }
    }
  }
}

TEST(HandSchedules, EveryAssetHasOne) {
  for (const std::string& asset : testing::asset_names()) {
    EXPECT_TRUE(std::filesystem::exists(source_path("assets/schedules/" + asset + ".json"))) << asset;
  }
}

TEST(HandSchedules, AttentionIsOneGridOfCtasWithOneLoopOverKeyTiles) {
  auto compilation = compile_with_schedule("attention", {"B=1", "H=2", "M=256", "N=128", "D=8"});
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error;
  testing::expect_golden("sched/hand_schedule_attention.txt",
                         scalar::print_program(*compilation.program));
}

INSTANTIATE_TEST_SUITE_P(Assets, HandSchedule, ::testing::ValuesIn(testing::asset_names()),
                         [](const auto& test_info) { return test_info.param; });

}  // namespace
}  // namespace nautilus
