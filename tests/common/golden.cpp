#include "tests/common/golden.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <gtest/gtest.h>

namespace nautilus::testing {

std::string source_path(const std::string& relative) {
  return std::string(NAUTILUS_SOURCE_DIR) + "/" + relative;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

std::string describe_difference(const std::string& expected, const std::string& actual) {
  std::vector<std::string> a = split_lines(expected), b = split_lines(actual);
  size_t first = 0;
  while (first < a.size() && first < b.size() && a[first] == b[first]) ++first;
  std::ostringstream out;
  out << "first difference at line " << first + 1 << ":\n";
  for (size_t i = first; i < std::min(a.size(), first + 8); ++i) out << "- " << a[i] << "\n";
  for (size_t i = first; i < std::min(b.size(), first + 8); ++i) out << "+ " << b[i] << "\n";
  return out.str();
}

}  // namespace

void expect_golden(const std::string& relative, const std::string& actual) {
  std::string path = source_path("tests/golden/" + relative);
  const char* update = std::getenv("NAUTILUS_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << "golden file " << path
                  << " is missing; run with NAUTILUS_UPDATE_GOLDEN=1 to create it";
    return;
  }
  std::string expected = read_text(path);
  if (expected != actual) {
    ADD_FAILURE() << "output differs from golden file " << relative << "\n"
                  << describe_difference(expected, actual)
                  << "(run with NAUTILUS_UPDATE_GOLDEN=1 to accept the new output)";
  }
}

}  // namespace nautilus::testing
