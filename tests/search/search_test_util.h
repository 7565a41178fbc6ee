// Helpers of the search tests: the H100 model, search inputs from assets or inline text, a
// search with two threads, and compiling a found schedule.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/cost/analytical_model.h"
#include "core/cost/device_models.h"
#include "core/driver/pipeline.h"
#include "core/search/search.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::testing {

inline const cost::CostModel& h100() {
  static const std::unique_ptr<cost::CostModel> model =
      cost::make_analytical_model(cost::h100_sxm());
  return *model;
}

inline std::vector<spec::SizeOverride> parse_sizes(const std::vector<std::string>& texts) {
  std::vector<spec::SizeOverride> sizes;
  for (const std::string& text : texts) {
    std::string error;
    auto size = spec::parse_size_override(text, &error);
    EXPECT_TRUE(size) << error;
    if (size) sizes.push_back(*size);
  }
  return sizes;
}

// A spec file of the repository (relative to its root) at `sizes`.
inline search::SearchInput file_input(const std::string& path, const std::vector<std::string>& sizes) {
  std::string error;
  search::SearchInput input;
  input.file = SourceFile::read(testing::source_path(path), &error);
  EXPECT_TRUE(input.file) << error;
  input.sizes = parse_sizes(sizes);
  return input;
}

inline search::SearchInput asset_input(const std::string& asset, const std::vector<std::string>& sizes) {
  return file_input("assets/specs/" + asset + ".nt", sizes);
}

inline search::SearchInput text_input(const std::string& text, const std::vector<std::string>& sizes) {
  search::SearchInput input;
  input.file = std::make_shared<SourceFile>("unseen.nt", text);
  input.sizes = parse_sizes(sizes);
  return input;
}

inline search::SearchResult run(const search::SearchInput& input, search::SearchOptions options = {},
                         const cost::CostModel& model = h100()) {
  options.threads = 2;
  return search::run_search(input, model, options);
}

inline driver::Compilation compile(const search::SearchInput& input, const sched::Schedule& schedule,
                            driver::Stage stage = driver::Stage::MATile) {
  driver::CompileOptions options;
  options.sizes = input.sizes;
  options.last_stage = stage;
  options.schedule = schedule;
  // The arch the search lowers for on the H100 model (its warp_spec decisions take effect).
  options.matile.arch = "sm_90a";
  return driver::compile(input.file, options);
}

}  // namespace nautilus::testing
