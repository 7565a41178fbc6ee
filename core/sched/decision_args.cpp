#include "core/sched/decision_args.h"

namespace nautilus::sched {

std::string usage_reason(std::string_view signature, const std::string& problem) {
  return std::string(signature) + ": " + problem;
}

std::string check_arg_shape(const Decision& decision, std::string_view signature,
                            ArgShape shape) {
  if (decision.target.empty()) {
    return usage_reason(signature, "the first argument names the target");
  }
  const size_t positional = decision.positional().size();
  if (positional < shape.min_positional || positional > shape.max_positional) {
    std::string expected = std::to_string(shape.min_positional);
    if (shape.max_positional != shape.min_positional) {
      expected = shape.max_positional == SIZE_MAX ? "at least " + expected
                                                  : expected + " to " +
                                                        std::to_string(shape.max_positional);
    }
    const bool one = shape.min_positional == 1 &&
                     (shape.max_positional == 1 || shape.max_positional == SIZE_MAX);
    return usage_reason(signature, "takes " + expected + " positional argument" +
                                       (one ? "" : "s") +
                                       " after the target, got " + std::to_string(positional));
  }
  const size_t keywords = decision.args.size() - positional;
  if (shape.keywords && keywords == 0) {
    return usage_reason(signature, "needs at least one keyword argument");
  }
  if (!shape.keywords && keywords > 0) {
    for (const DecisionArg& arg : decision.args) {
      if (!arg.key.empty()) {
        return usage_reason(signature, "takes no keyword arguments, got " + arg.key + "=");
      }
    }
  }
  for (size_t i = 0; i < decision.args.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!decision.args[i].key.empty() && decision.args[i].key == decision.args[j].key) {
        return usage_reason(signature, "keyword argument " + decision.args[i].key +
                                           " is given twice");
      }
    }
  }
  return {};
}

std::string check_two_names(const Decision& decision, std::string_view signature,
                            std::string_view names) {
  std::string reason = check_arg_shape(decision, signature, {2, 2, false});
  if (!reason.empty()) return reason;
  for (const DecisionArg* arg : decision.positional()) {
    if (arg->is_int()) {
      return usage_reason(signature, std::string(names) + " are names, got " +
                                         std::to_string(arg->as_int()));
    }
  }
  return {};
}

}  // namespace nautilus::sched
