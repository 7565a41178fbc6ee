#include "core/sched/decision.h"

#include <cctype>
#include <charconv>

#include "core/sched/bind.h"
#include "core/sched/cache_read.h"
#include "core/sched/cache_write.h"
#include "core/sched/compute_at.h"
#include "core/sched/compute_with.h"
#include "core/sched/factor.h"
#include "core/sched/inline.h"
#include "core/sched/launch.h"
#include "core/sched/persistent.h"
#include "core/sched/tile_order.h"
#include "core/sched/warp_spec.h"
#include "core/sched/pipeline_decision.h"
#include "core/sched/regularize.h"
#include "core/sched/rematerialize.h"
#include "core/sched/skip_masked.h"
#include "core/sched/reorder.h"
#include "core/sched/reverse_compute_at.h"
#include "core/sched/rolling_update.h"
#include "core/sched/split.h"
#include "core/sched/split_k_update.h"
#include "core/sched/tile.h"
#include "core/support/source.h"

namespace nautilus::sched {

// ---------------------------------------------------------------------------------------------
// Decision

const DecisionArg* Decision::find(std::string_view key) const {
  for (const DecisionArg& arg : args) {
    if (!arg.key.empty() && arg.key == key) return &arg;
  }
  return nullptr;
}

std::vector<const DecisionArg*> Decision::positional() const {
  std::vector<const DecisionArg*> result;
  for (const DecisionArg& arg : args) {
    if (arg.key.empty()) result.push_back(&arg);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Text form

namespace {

std::string value_text(const DecisionArg& arg) {
  return arg.is_int() ? std::to_string(arg.as_int()) : arg.as_name();
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Recursive descent over
//
//   decision := NAME '(' [ arg { ',' arg } ] ')'
//   arg      := NAME '=' value | value
//   value    := INTEGER | NAME { '.' NAME }          INTEGER := [ '-' ] DIGIT { DIGIT }
//
// with free whitespace between tokens. The first argument is the target when it is a positional
// plain name; positional arguments may not follow keyword arguments, and a keyword appears once.
class DecisionParser {
 public:
  explicit DecisionParser(std::string_view text) : text_(text) {}

  std::optional<Decision> parse(DecisionParseError* error) {
    Decision decision;
    bool ok = parse_decision(&decision);
    if (ok) {
      skip_space();
      if (pos_ < text_.size()) ok = fail("unexpected text after ')'");
    }
    if (!ok) {
      if (error) *error = error_;
      return std::nullopt;
    }
    return decision;
  }

 private:
  bool parse_decision(Decision* decision) {
    skip_space();
    if (!parse_name(&decision->kind, "a decision name such as tile")) return false;
    skip_space();
    if (!consume('(')) return fail("expected '(' after '" + decision->kind + "'");
    skip_space();
    if (consume(')')) return true;
    bool seen_keyword = false;
    while (true) {
      skip_space();
      const size_t arg_start = pos_;
      DecisionArg arg;
      if (!parse_arg(&arg)) return false;
      if (arg.key.empty() && seen_keyword) {
        return fail_at(arg_start, "positional argument after keyword arguments");
      }
      if (!arg.key.empty() && decision->find(arg.key)) {
        return fail_at(arg_start, "keyword argument '" + arg.key + "' is given twice");
      }
      seen_keyword |= !arg.key.empty();
      const bool is_target = decision->args.empty() && decision->target.empty() &&
                             arg.key.empty() && !arg.is_int() &&
                             arg.as_name().find('.') == std::string::npos;
      if (is_target) {
        decision->target = arg.as_name();
      } else {
        decision->args.push_back(std::move(arg));
      }
      skip_space();
      if (consume(')')) return true;
      if (!consume(',')) {
        return fail(pos_ < text_.size() ? "expected ',' or ')'" : "expected ')'");
      }
    }
  }

  bool parse_arg(DecisionArg* arg) {
    if (pos_ < text_.size() && is_name_start(text_[pos_])) {
      const size_t name_start = pos_;
      std::string name;
      if (!parse_dotted_name(&name)) return false;
      skip_space();
      if (!consume('=')) {
        arg->value = std::move(name);
        return true;
      }
      if (name.find('.') != std::string::npos) {
        return fail_at(name_start, "a keyword is a plain name, not '" + name + "'");
      }
      arg->key = std::move(name);
      skip_space();
      if (pos_ < text_.size() && is_name_start(text_[pos_])) {
        std::string value;
        if (!parse_dotted_name(&value)) return false;
        arg->value = std::move(value);
        return true;
      }
      if (pos_ < text_.size() && (std::isdigit(static_cast<unsigned char>(text_[pos_])) ||
                                  text_[pos_] == '-')) {
        return parse_integer(arg);
      }
      return fail("expected a value after '" + arg->key + "='");
    }
    if (pos_ < text_.size() &&
        (std::isdigit(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '-')) {
      return parse_integer(arg);
    }
    return fail("expected an argument (a name, an integer or name=value)");
  }

  bool parse_integer(DecisionArg* arg) {
    const size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      return fail("expected digits after '-'");
    }
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text_.data() + start, text_.data() + pos_, value);
    if (ec != std::errc() || end != text_.data() + pos_) {
      return fail_at(start, "integer " + std::string(text_.substr(start, pos_ - start)) +
                                " is out of range");
    }
    if (pos_ < text_.size() && is_name_char(text_[pos_])) {
      return fail("expected ',' or ')' after the integer");
    }
    arg->value = value;
    return true;
  }

  bool parse_name(std::string* name, const std::string& what) {
    if (pos_ >= text_.size() || !is_name_start(text_[pos_])) return fail("expected " + what);
    const size_t start = pos_;
    while (pos_ < text_.size() && is_name_char(text_[pos_])) ++pos_;
    *name = std::string(text_.substr(start, pos_ - start));
    return true;
  }

  bool parse_dotted_name(std::string* name) {
    if (!parse_name(name, "a name")) return false;
    while (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      std::string part;
      if (!parse_name(&part, "a name after '.'")) return false;
      *name += "." + part;
    }
    return true;
  }

  void skip_space() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool fail(std::string message) { return fail_at(pos_, std::move(message)); }
  bool fail_at(size_t offset, std::string message) {
    error_.column = offset + 1;
    error_.message = std::move(message);
    return false;
  }

  std::string_view text_;
  size_t pos_ = 0;
  DecisionParseError error_;
};

}  // namespace

std::string print_decisions(const std::vector<Decision>& decisions, std::string_view separator) {
  std::string text;
  for (const Decision& decision : decisions) {
    if (!text.empty()) text += separator;
    text += print_decision(decision);
  }
  return text;
}

std::string print_decision(const Decision& decision) {
  std::string text = decision.kind + "(";
  bool first = true;
  auto separate = [&] {
    if (!first) text += ", ";
    first = false;
  };
  if (!decision.target.empty()) {
    separate();
    text += decision.target;
  }
  for (const DecisionArg& arg : decision.args) {
    separate();
    if (!arg.key.empty()) text += arg.key + "=";
    text += value_text(arg);
  }
  return text + ")";
}

std::optional<Decision> parse_decision(std::string_view text, DecisionParseError* error) {
  return DecisionParser(text).parse(error);
}

std::string to_string(const DecisionParseError& error) {
  return error.message + " at column " + std::to_string(error.column);
}

// ---------------------------------------------------------------------------------------------
// JSON form

nlohmann::ordered_json schedule_to_json(const Schedule& schedule) {
  nlohmann::ordered_json decisions = nlohmann::ordered_json::array();
  for (const Decision& decision : schedule.decisions) decisions.push_back(print_decision(decision));
  nlohmann::ordered_json json;
  json["decisions"] = std::move(decisions);
  return json;
}

std::optional<Schedule> schedule_from_json(const nlohmann::json& json, std::string* error) {
  auto fail = [&](std::string message) -> std::optional<Schedule> {
    if (error) *error = std::move(message);
    return std::nullopt;
  };
  if (!json.is_object()) return fail("a schedule is a JSON object {\"decisions\": [...]}");
  for (const auto& [key, value] : json.items()) {
    if (key != "decisions") return fail("unknown key \"" + key + "\" in the schedule");
  }
  auto decisions = json.find("decisions");
  if (decisions == json.end() || !decisions->is_array()) {
    return fail("the schedule has no \"decisions\" array");
  }
  Schedule schedule;
  for (size_t i = 0; i < decisions->size(); ++i) {
    const nlohmann::json& entry = (*decisions)[i];
    const std::string where = "decisions[" + std::to_string(i) + "]";
    if (!entry.is_string()) return fail(where + " is not a string");
    const std::string text = entry.get<std::string>();
    DecisionParseError parse_error;
    std::optional<Decision> decision = parse_decision(text, &parse_error);
    if (!decision) return fail(where + " \"" + text + "\": " + to_string(parse_error));
    schedule.decisions.push_back(std::move(*decision));
  }
  return schedule;
}

std::optional<Schedule> read_schedule_file(const std::string& path, std::string* error) {
  std::string read_error;
  SourceFilePtr file = SourceFile::read(path, &read_error);
  if (!file) {
    if (error) *error = read_error;
    return std::nullopt;
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(file->text());
  } catch (const nlohmann::json::parse_error& parse_error) {
    if (error) *error = path + ": not valid JSON: " + parse_error.what();
    return std::nullopt;
  }
  std::string schedule_error;
  std::optional<Schedule> schedule = schedule_from_json(json, &schedule_error);
  if (!schedule && error) *error = path + ": " + schedule_error;
  return schedule;
}

// ---------------------------------------------------------------------------------------------
// Registry and application

const std::vector<DecisionKind>& decision_registry() {
  // The order is the one help texts and "known decisions" lists show: loop structure first,
  // then fusion.
  static const std::vector<DecisionKind> registry = {
      tile_decision(),
      split_decision(),
      reorder_decision(),
      bind_decision(),
      inline_decision(),
      compute_at_decision(),
      compute_with_decision(),
      factor_decision(),
      reverse_compute_at_decision(),
      rolling_update_decision(),
      split_k_update_decision(),
      cache_read_decision(),
      cache_write_decision(),
      rematerialize_decision(),
      regularize_decision(),
      skip_masked_decision(),
      launch_decision(),
      warp_spec_decision(),
      pipeline_decision(),
      tile_order_decision(),
      persistent_decision(),
  };
  return registry;
}

const DecisionKind* find_decision_kind(std::string_view name) {
  for (const DecisionKind& kind : decision_registry()) {
    if (kind.name == name) return &kind;
  }
  return nullptr;
}

ApplyResult apply_decision(const scalar::ProgramPtr& program, const Decision& decision) {
  const DecisionKind* kind = find_decision_kind(decision.kind);
  if (!kind) {
    std::string known;
    for (const DecisionKind& entry : decision_registry()) {
      known += (known.empty() ? "" : ", ") + entry.name;
    }
    return ApplyResult::failure("unknown decision '" + decision.kind + "'; known decisions: " +
                                known);
  }
  if (!program || !program->body) return ApplyResult::failure("there is no program to schedule");
  ApplyResult result = kind->apply(program, decision);
  // Passes rebuild loop nests without knowing about launch attributes; the nests keep them here.
  if (result.ok()) result.program = keep_launch_attrs(program, result.program);
  return result;
}

ApplyResult apply_schedule(const scalar::ProgramPtr& program, const Schedule& schedule) {
  scalar::ProgramPtr current = program;
  for (size_t i = 0; i < schedule.decisions.size(); ++i) {
    ApplyResult result = apply_decision(current, schedule.decisions[i]);
    if (!result.ok()) {
      return ApplyResult::failure("decision " + std::to_string(i + 1) + " " +
                                  print_decision(schedule.decisions[i]) + ": " + result.reason);
    }
    current = std::move(result.program);
  }
  return ApplyResult::success(std::move(current));
}

}  // namespace nautilus::sched
