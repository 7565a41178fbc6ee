// Text, DOT and JSON forms of scalar IR (the `scalar` stage of `nautilus lower`).
//
// Text (stable, golden-tested):
//
//   # scalar IR: attention
//   param Q : bf16[2, 16, 64, 32] global input
//   ...
//   alloc S : f32[2, 16, 64, 64] global
//
//   # S[b, h, m, n] = sum(d) Q[b, h, m, d] * K[b, h, n, d] / sqrt(D)   (line 9)
//   for b in 0..2:
//     ...
//             block S(b = b, h = h, m = m, n = n; reduce d = d):
//               init:
//                 S[b, h, m, n] = 0.0f
//               S[b, h, m, n] = S[b, h, m, n] + f32(Q[b, h, m, d]) * f32(K[b, h, n, d]) * 0.0883883f
//
// A loop bound to the grid prints its dimension after the range: `for m_o in 0..32 [grid.x]:`.
// Float immediates print with the shortest round-trip digits and an `f` suffix for f32;
// infinities print as `inf`/`-inf`. Loop nests that come from one spec statement are preceded by
// a comment with the statement's source line when a SourceFile is given.
//
// Details: every line ends in a newline and nesting indents by two spaces; a blank line precedes
// each top-level statement of the body. Iteration variables print in order, runs of one kind
// separated by `;` and reduce runs prefixed `reduce`; a predicate follows the signature as
// `block C(m = mo * 8 + mi, n = n; reduce k = k) if mo * 8 + mi < 20:`. Other float dtypes
// print in call form, `bf16(0.5)`; index floordiv and mod print as `a // b` and `a % b`;
// parentheses appear only where C-like precedence and left associativity need them, so
// `a - (b - c)` keeps its grouping. Float immediates print the value of their dtype.
//
// DOT: buffers are nodes ("buffer:NAME", boxes; inputs and outputs styled apart), blocks are
// nodes ("block:NAME", records with iteration variables and body), each top-level loop nest is a
// cluster labelled with its loops (grid loops with their dimension, as in the text); edges go
// from read buffers to blocks and from blocks to written buffers. A buffer a block both reads and
// writes (an accumulator) gets one edge with `dir=both`, which keeps the graph acyclic.
//
// JSON: {"name", "buffers": [{name, shape, dtype, scope, role, provenance}] (params, then
// allocations), "body"}. Statements and expressions are objects with a "kind" (for, seq, store,
// block; int, float, var, load, cast, unary, binary, compare, logical, select) and the node's
// fields (a for's "for_kind" is "serial", "grid.x", "grid.y" or "grid.z"); expressions carry
// "dtype". Provenance is {"statement", "begin", "end"} (byte offsets; begin/end only when the
// range is valid); every statement has one, an expression only when it is not empty. Non-finite
// float immediates are the strings "inf", "-inf", "nan".
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/scalar/ir.h"
#include "core/support/source.h"

namespace nautilus::scalar {

std::string print_program(const Program& program, const SourceFile* source = nullptr);
std::string print_stmt(const Stmt& stmt, int indent = 0);  // indent: levels of two spaces
std::string print_expr(const Expr& expr);
// A nest's launch attributes as the printers write them: "launch(warps=8, stages=2, group=8)",
// and their JSON object (the scalar and VR printers share both).
std::string launch_text(const LaunchAttrs& launch);
// The names of the shared-read modes (launch's reads=, the CLI's --shared-reads): auto,
// elements, grouped; nullopt for any other name.
std::string shared_reads_name(SharedReads reads);
std::optional<SharedReads> shared_reads_from_name(const std::string& name);
std::string mma_form_name(MmaForm form);  // "auto", "direct", "swapped"
std::optional<MmaForm> mma_form_from_name(const std::string& name);
nlohmann::ordered_json launch_json(const LaunchAttrs& launch);

std::string program_to_dot(const Program& program);

nlohmann::ordered_json program_to_json(const Program& program);

}  // namespace nautilus::scalar
