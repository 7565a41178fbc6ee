// Golden-file comparison for tests. Text is the golden medium: a mismatch prints a unified-style
// line diff. Run a test with NAUTILUS_UPDATE_GOLDEN=1 to rewrite the files after a deliberate
// change, then review the diff in git.
#pragma once

#include <string>

namespace nautilus::testing {

// Absolute path of a file under the source tree, e.g. source_path("assets/specs/gemm.nt").
std::string source_path(const std::string& relative);

// Reads a whole file; fails the current test (and returns "") when it cannot.
std::string read_text(const std::string& path);

// Compares `actual` with tests/golden/<relative>; with NAUTILUS_UPDATE_GOLDEN=1 writes it instead.
void expect_golden(const std::string& relative, const std::string& actual);

}  // namespace nautilus::testing
