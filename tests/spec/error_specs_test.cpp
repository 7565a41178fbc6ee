// Every bad spec in assets/specs/errors gives exactly the diagnostics its header announces.
//
// A file starts with comment lines
//   # define: NAME=VALUE                          (optional, a -D size override)
//   # expect: LINE:COL: error: MESSAGE-PREFIX     (one per diagnostic, in order)
//   # expect: error: MESSAGE-PREFIX               (a diagnostic without a location)
// and each produced diagnostic "LINE:COL: severity: message" must start with its expect line.
#include <algorithm>
#include <filesystem>
#include <sstream>

#include <gtest/gtest.h>

#include "tests/spec/spec_test_support.h"

namespace nautilus::spec {
namespace {

using testing::load_text;
using testing::Loaded;

struct Expectations {
  std::vector<SizeOverride> overrides;
  std::vector<std::string> diagnostics;
};

Expectations read_expectations(const std::string& text) {
  Expectations result;
  std::istringstream in(text);
  std::string line;
  const std::string expect = "# expect: ", define = "# define: ";
  while (std::getline(in, line)) {
    if (line.rfind(expect, 0) == 0) result.diagnostics.push_back(line.substr(expect.size()));
    if (line.rfind(define, 0) == 0) {
      std::string error;
      std::optional<SizeOverride> override_ = parse_size_override(line.substr(define.size()),
                                                                  &error);
      EXPECT_TRUE(override_) << error;
      if (override_) result.overrides.push_back(*override_);
    }
  }
  return result;
}

std::vector<std::string> error_spec_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(
           nautilus::testing::source_path("assets/specs/errors"))) {
    if (entry.path().extension() == ".nt") {
      files.push_back("assets/specs/errors/" + entry.path().filename().string());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ErrorSpecs, EachGivesExactlyItsExpectedDiagnostics) {
  std::vector<std::string> files = error_spec_files();
  EXPECT_GE(files.size(), 25u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    std::string text = nautilus::testing::read_text(nautilus::testing::source_path(path));
    Expectations expected = read_expectations(text);
    ASSERT_FALSE(expected.diagnostics.empty()) << "no '# expect:' line";
    Loaded loaded = load_text(text, expected.overrides, path);
    std::vector<std::string> actual = loaded.headlines();
    bool expects_error = std::any_of(expected.diagnostics.begin(), expected.diagnostics.end(),
                                     [](const std::string& line) {
                                       return line.find("error: ") != std::string::npos;
                                     });
    EXPECT_EQ(loaded.spec == nullptr, expects_error);
    std::string all;
    for (const std::string& line : actual) all += "\n  " + line;
    ASSERT_EQ(actual.size(), expected.diagnostics.size()) << "got:" << all;
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].rfind(expected.diagnostics[i], 0), 0u)
          << "expected: " << expected.diagnostics[i] << "\ngot:      " << actual[i];
    }
  }
}

}  // namespace
}  // namespace nautilus::spec
