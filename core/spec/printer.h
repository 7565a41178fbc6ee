// Text, DOT and JSON forms of a checked spec (the `spec` stage of `nautilus lower`).
//
// The text form is the canonical spelling of the program with everything sema resolved made
// explicit: the size bindings, each tensor's shape and dtype, and each statement's index
// variables with extents and roles, e.g.
//
//   # spec attention (assets/specs/attention.nt)
//   let B = 2, H = 16, M = 4096, N = 4096, D = 128
//   input Q[B=2, H=16, M=4096, D=128] : bf16
//   ...
//   S[b, h, m, n] : f32 = sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D)
//       # spatial b:2 h:16 m:4096 n:4096, reduced d:128        (line 9)
//
// The output is stable (golden-tested): same spec, same text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/spec/ast.h"

namespace nautilus::spec {

std::string print_spec(const Spec& spec);
// One expression / index expression / condition in source syntax, fully parenthesized only
// where precedence requires it.
std::string print_expr(const Expr& expr);
std::string print_index(const IndexExpr& index);
std::string print_condition(const Condition& condition);

// A dataflow graph: tensors (inputs, intermediates, outputs) and one node per statement.
// Node ids are stable: "tensor:NAME" and "stmt:NAME".
std::string spec_to_dot(const Spec& spec);

nlohmann::ordered_json spec_to_json(const Spec& spec);

}  // namespace nautilus::spec
