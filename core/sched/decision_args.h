// Checking a decision's arguments against its kind's signature, shared by the passes' registry
// entries so that every argument problem reads the same way: the signature, then the problem.
//
//   split(C_sum, m)   →  "split(BLOCK, AXIS, FACTOR) takes 2 arguments after the block, got 1"
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/sched/decision.h"

namespace nautilus::sched {

struct ArgShape {
  size_t min_positional = 0;  // positional arguments after the target
  size_t max_positional = 0;
  bool keywords = false;      // true: at least one keyword argument; false: none
};

// Empty when `decision` has a target and the shape; otherwise the reason, naming `signature`.
std::string check_arg_shape(const Decision& decision, std::string_view signature, ArgShape shape);

// "<signature>: <problem>".
std::string usage_reason(std::string_view signature, const std::string& problem);

// As check_arg_shape for exactly two positional names and no keywords; `names` says what they
// are in the reason for an integer ("CONSUMER and LOOP are names, got 3").
std::string check_two_names(const Decision& decision, std::string_view signature,
                            std::string_view names);

}  // namespace nautilus::sched
