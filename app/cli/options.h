// Command-line option parsing shared by every `nautilus` command.
//
// Accepted forms: `--name value`, `--name=value`, boolean `--flag`, `-D NAME=VALUE` and
// `-DNAME=VALUE` (repeatable), and positional arguments. Unknown options and missing values are
// errors that name the option and the command.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nautilus::cli {

struct OptionSpec {
  std::string name;         // without leading dashes, e.g. "stage"
  std::string value_name;   // empty for boolean flags, e.g. "NAME"
  std::string help;
  bool repeatable = false;
};

struct CommandSpec {
  std::string name;
  std::string usage;        // e.g. "nautilus lower FILE [options]"
  std::string summary;
  std::vector<OptionSpec> options;
  int min_positionals = 1;
  int max_positionals = 1;
};

struct ParsedOptions {
  std::vector<std::string> positionals;
  std::map<std::string, std::vector<std::string>> values;  // option name → values in order

  bool has(const std::string& name) const { return values.count(name) > 0; }
  // The last value given for `name`, or `fallback`.
  std::string get(const std::string& name, const std::string& fallback = {}) const;
  const std::vector<std::string>& all(const std::string& name) const;
};

// Parses `args` (without the command name). On failure returns nullopt and sets `error`.
std::optional<ParsedOptions> parse_options(const CommandSpec& command,
                                           const std::vector<std::string>& args,
                                           std::string* error);

// Multi-line help of one command.
std::string command_help(const CommandSpec& command);

// Exit statuses of every command: success, a user-facing failure (bad input, failed check, no
// GPU), an internal compiler error.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitInternal = 2;

// A non-negative decimal integer of at most `max_digits` digits (so it cannot overflow), or
// nullopt: "12" -> 12; "", "-1", "1e3", "0x10" -> nullopt.
std::optional<uint64_t> parse_non_negative(const std::string& text, size_t max_digits = 9);

// A positive duration in seconds: "90" or "90s", "15m", "2h"; nullopt for anything else (tune's
// --time, --slurm-wait).
std::optional<double> parse_duration(const std::string& text);

// Seconds since the epoch as "2026-11-27 04:22" (UTC), as the database listings print dates.
std::string date_text(int64_t unix_seconds);

}  // namespace nautilus::cli
