// The held-out variant suite (bench/variants/*.nt: attention masks and score functions, decode
// and cross-attention shapes, norms feeding GEMMs, MLPs, GEMM epilogues, row reductions written
// as users write them): for every spec, the schedule the search chooses at small sizes reproduces
// the float64 reference at stage matile. The same specs are timed on the H100 at their realistic
// sizes by bench/variants.py.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/driver/evaluate.h"
#include "tests/common/golden.h"
#include "tests/search/search_test_util.h"

namespace nautilus {
namespace {

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& entry :
       std::filesystem::directory_iterator(testing::source_path("bench/variants"))) {
    if (entry.path().extension() == ".nt") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// Every size of the spec's `let` lines capped at `cap`: small enough for the interpreters, and
// still partial tiles and masked rows.
std::vector<std::string> capped_sizes(const std::string& text, int64_t cap) {
  std::vector<std::string> sizes;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("let ", 0) != 0) continue;
    std::istringstream bindings(line.substr(4));
    std::string binding;
    while (std::getline(bindings, binding, ',')) {
      const size_t equals = binding.find('=');
      if (equals == std::string::npos) continue;
      std::string name = binding.substr(0, equals);
      name.erase(std::remove(name.begin(), name.end(), ' '), name.end());
      const int64_t value = std::stoll(binding.substr(equals + 1));
      sizes.push_back(name + "=" + std::to_string(std::min(value, cap)));
    }
  }
  return sizes;
}

class VariantSuite : public ::testing::TestWithParam<std::string> {};

TEST_P(VariantSuite, SearchedScheduleMatchesTheReference) {
  const std::string path = testing::source_path("bench/variants/" + GetParam() + ".nt");
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  ASSERT_FALSE(text.str().empty()) << path;
  const search::SearchInput input = testing::text_input(text.str(), capped_sizes(text.str(), 24));
  const search::SearchResult result = testing::run(input);
  ASSERT_TRUE(result.ok) << result.error;
  const driver::Compilation compilation = testing::compile(input, result.schedule);
  ASSERT_TRUE(compilation.ok()) << compilation.schedule_error << compilation.internal_error;
  driver::EvalOptions options;
  options.stage = driver::Stage::MATile;
  options.seed = 11;
  const driver::EvalResult evaluation = driver::evaluate(compilation, options);
  ASSERT_TRUE(evaluation.ran) << evaluation.error;
  for (const driver::OutputCheck& output : evaluation.outputs) {
    EXPECT_TRUE(output.passed) << output.name << ": error " << output.error.max_relative_error
                               << " > " << output.tolerance;
  }
}

INSTANTIATE_TEST_SUITE_P(HeldOut, VariantSuite, ::testing::ValuesIn(variant_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace nautilus
