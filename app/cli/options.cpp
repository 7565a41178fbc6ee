#include "app/cli/options.h"

#include <ctime>

#include <sstream>

namespace nautilus::cli {

std::string ParsedOptions::get(const std::string& name, const std::string& fallback) const {
  auto it = values.find(name);
  return it == values.end() || it->second.empty() ? fallback : it->second.back();
}

const std::vector<std::string>& ParsedOptions::all(const std::string& name) const {
  static const std::vector<std::string> empty;
  auto it = values.find(name);
  return it == values.end() ? empty : it->second;
}

namespace {

const OptionSpec* find_option(const CommandSpec& command, const std::string& name) {
  for (const OptionSpec& option : command.options) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

}  // namespace

std::optional<ParsedOptions> parse_options(const CommandSpec& command,
                                           const std::vector<std::string>& args,
                                           std::string* error) {
  ParsedOptions parsed;
  const std::string where = "'nautilus " + command.name + "'";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string name, value;
    bool has_inline_value = false;
    if (arg.rfind("-D", 0) == 0) {  // -D NAME=VALUE or -DNAME=VALUE
      name = "D";
      if (arg.size() > 2) {
        value = arg.substr(2);
        has_inline_value = true;
      }
    } else if (arg.rfind("--", 0) == 0 && arg.size() > 2) {
      std::string body = arg.substr(2);
      size_t eq = body.find('=');
      name = body.substr(0, eq);
      if (eq != std::string::npos) {
        value = body.substr(eq + 1);
        has_inline_value = true;
      }
    } else if (arg.size() > 1 && arg[0] == '-' && arg != "-") {
      *error = "unknown option '" + arg + "' for " + where + " (see 'nautilus help " +
               command.name + "')";
      return std::nullopt;
    } else {
      parsed.positionals.push_back(arg);
      continue;
    }
    const OptionSpec* option = find_option(command, name);
    if (!option) {
      *error = "unknown option '" + (name == "D" ? std::string("-D") : "--" + name) + "' for " +
               where + " (see 'nautilus help " + command.name + "')";
      return std::nullopt;
    }
    const std::string spelled = name == "D" ? "-D" : "--" + name;
    if (option->value_name.empty()) {
      if (has_inline_value) {
        *error = "option '" + spelled + "' takes no value";
        return std::nullopt;
      }
    } else if (!has_inline_value) {
      if (i + 1 >= args.size()) {
        *error = "option '" + spelled + "' expects a value (" + option->value_name + ")";
        return std::nullopt;
      }
      value = args[++i];
    }
    if (!option->repeatable && parsed.has(name)) {
      *error = "option '" + spelled + "' given more than once";
      return std::nullopt;
    }
    parsed.values[name].push_back(value);
  }
  int count = static_cast<int>(parsed.positionals.size());
  if (count < command.min_positionals) {
    *error = where + " expects a spec file (usage: " + command.usage + ")";
    return std::nullopt;
  }
  if (count > command.max_positionals) {
    *error = "unexpected argument '" + parsed.positionals[command.max_positionals] + "' for " +
             where + " (usage: " + command.usage + ")";
    return std::nullopt;
  }
  return parsed;
}

std::string command_help(const CommandSpec& command) {
  std::ostringstream out;
  out << "usage: " << command.usage << "\n\n" << command.summary << "\n";
  if (!command.options.empty()) out << "\noptions:\n";
  for (const OptionSpec& option : command.options) {
    std::string spelled = option.name == "D" ? "-D " : "--" + option.name;
    if (!option.value_name.empty()) spelled += (option.name == "D" ? "" : " ") + option.value_name;
    out << "  " << spelled;
    if (spelled.size() < 24) out << std::string(24 - spelled.size(), ' ');
    else out << "\n" << std::string(26, ' ');
    out << option.help << "\n";
  }
  return out.str();
}

std::optional<uint64_t> parse_non_negative(const std::string& text, size_t max_digits) {
  if (text.empty() || text.size() > max_digits) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<uint64_t>(c - '0');
  }
  return value;
}

std::optional<double> parse_duration(const std::string& text) {
  if (text.empty()) return std::nullopt;
  double scale = 1.0;
  std::string digits = text;
  switch (text.back()) {
    case 's': digits.pop_back(); break;
    case 'm': scale = 60.0; digits.pop_back(); break;
    case 'h': scale = 3600.0; digits.pop_back(); break;
    default: break;
  }
  const std::optional<uint64_t> value = parse_non_negative(digits);
  if (!value || *value == 0) return std::nullopt;
  return static_cast<double>(*value) * scale;
}

std::string date_text(int64_t unix_seconds) {
  const std::time_t time = static_cast<std::time_t>(unix_seconds);
  std::tm utc{};
  gmtime_r(&time, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%d %H:%M", &utc);
  return buffer;
}

}  // namespace nautilus::cli
