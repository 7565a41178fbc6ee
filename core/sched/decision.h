// Schedule decisions: the unit of optimization that users pin and the auto-scheduler searches.
//
// A decision has a kind, a target (a block or tensor of the program, named as in the spec) and
// arguments, and prints as one line that parses back:
//
//   tile(O, m=128, n=64)          rolling_update(O, n)          inline(P)
//   compute_at(S, O, n)           place(K, shared, stages=2)    bind(O, m=grid.x)
//
// Arguments are positional (identifiers or integers) followed by keyword arguments
// (`name=value`, the value an identifier, an integer or a dotted name such as grid.x).
// A schedule is an ordered list of decisions; applying it applies each decision in order to the
// scalar IR. Applying a decision either succeeds or returns the reason it does not apply
// (`block O has no axis k`); it never asserts. Each decision kind is one pass, in its own file,
// registered in `decision_registry()` with the name, signature and description that the CLI help,
// the app's tooltips and the docs show.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/scalar/ir.h"

namespace nautilus::sched {

struct DecisionArg {
  std::string key;                           // empty for a positional argument
  std::variant<int64_t, std::string> value;  // integer or identifier (possibly dotted)

  bool is_int() const { return std::holds_alternative<int64_t>(value); }
  int64_t as_int() const { return std::get<int64_t>(value); }
  const std::string& as_name() const { return std::get<std::string>(value); }
  bool operator==(const DecisionArg&) const = default;
};

struct Decision {
  std::string kind;
  std::string target;
  std::vector<DecisionArg> args;

  // The keyword argument `key`, or nullptr.
  const DecisionArg* find(std::string_view key) const;
  std::vector<const DecisionArg*> positional() const;
  bool operator==(const Decision&) const = default;
};

// "tile(O, m=128, n=64)". Canonical spacing; parse_decision(print_decision(d)) == d.
std::string print_decision(const Decision& decision);
// The decisions printed and joined with `separator`: "rolling_update(O_sum, n, tile=64); tile(...)".
std::string print_decisions(const std::vector<Decision>& decisions, std::string_view separator);

struct DecisionParseError {
  size_t column = 0;  // 1-based column in the text
  std::string message;
};
// Parses one decision. Whitespace is free; errors give the column and what was expected.
std::optional<Decision> parse_decision(std::string_view text, DecisionParseError* error);
// "expected ')' at column 14".
std::string to_string(const DecisionParseError& error);

struct Schedule {
  std::vector<Decision> decisions;
};

// {"decisions": ["tile(O, m=128, n=64)", ...]} — one printed decision per entry, so the file
// reads like the CLI's --pin arguments and diffs line by line.
nlohmann::ordered_json schedule_to_json(const Schedule& schedule);
// Accepts the form above; errors name the entry and column.
std::optional<Schedule> schedule_from_json(const nlohmann::json& json, std::string* error);
std::optional<Schedule> read_schedule_file(const std::string& path, std::string* error);

struct ApplyResult {
  scalar::ProgramPtr program;  // set on success
  std::string reason;          // set when the decision does not apply

  bool ok() const { return program != nullptr; }
  static ApplyResult success(scalar::ProgramPtr p) { return {std::move(p), {}}; }
  static ApplyResult failure(std::string why) { return {nullptr, std::move(why)}; }
};

struct DecisionKind {
  std::string name;         // "tile"
  std::string signature;    // "tile(BLOCK, AXIS=SIZE, ...)"
  std::string summary;      // one sentence
  std::string description;  // a paragraph with a before/after example
  std::function<ApplyResult(const scalar::ProgramPtr&, const Decision&)> apply;
};

const std::vector<DecisionKind>& decision_registry();
const DecisionKind* find_decision_kind(std::string_view name);

// Applies one decision; unknown kinds fail with the list of known kinds.
ApplyResult apply_decision(const scalar::ProgramPtr& program, const Decision& decision);
// Applies the decisions in order; the first that does not apply fails the whole schedule with
// "decision 2 tile(O, q=4): block O has no axis or loop q".
ApplyResult apply_schedule(const scalar::ProgramPtr& program, const Schedule& schedule);

}  // namespace nautilus::sched
