// Semantic checks of a parsed spec: names, ranks, extents, index-variable roles, dtypes and
// size binding.
//
// Sizes come from `let` and from command-line overrides (`-D NAME=VALUE`); an override replaces
// a `let` value, so a spec's default sizes can be shrunk for evaluation. Every problem is
// reported with its source range (overrides that name no size symbol are reported without one);
// checking continues after an error so that independent errors are all reported.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/spec/ast.h"
#include "core/support/diagnostics.h"

namespace nautilus::spec {

struct SizeOverride {
  std::string name;
  int64_t value = 0;
};

// Parses "NAME=VALUE" (VALUE a positive integer); nullopt with `error` set otherwise.
std::optional<SizeOverride> parse_size_override(std::string_view text, std::string* error);

// Largest number of elements a tensor may have; larger shapes are reported as errors so that
// size arithmetic can never overflow.
inline constexpr int64_t kMaxTensorElements = int64_t{1} << 40;

// Largest rank of a tensor and largest number of index variables in one statement. Later stages
// build one loop per variable and recurse over loop nests; these bounds keep that shallow.
inline constexpr int kMaxRank = 8;
inline constexpr int kMaxStatementVars = 16;

// Checks `program`; returns the spec, or nullptr when `diagnostics` holds an error (reported by
// this check or earlier).
SpecPtr check_program(Program program, const std::vector<SizeOverride>& overrides,
                      DiagnosticEngine& diagnostics);

// parse_program, then check_program when parsing reported no error: a statement dropped by the
// parser would otherwise cause follow-on errors ("unknown tensor") that are not the user's.
SpecPtr load_spec(SourceFilePtr file, const std::vector<SizeOverride>& overrides,
                  DiagnosticEngine& diagnostics);

}  // namespace nautilus::spec
