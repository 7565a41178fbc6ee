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
// Float immediates print with the shortest round-trip digits and an `f` suffix for f32;
// infinities print as `inf`/`-inf`. Loop nests that come from one spec statement are preceded by
// a comment with the statement's source line when a SourceFile is given.
//
// DOT: buffers are nodes ("buffer:NAME", boxes; inputs and outputs styled apart), blocks are
// nodes ("block:NAME", records with iteration variables and body), each top-level loop nest is a
// cluster labelled with its loops; edges go from read buffers to blocks and from blocks to
// written buffers.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/scalar/ir.h"
#include "core/support/source.h"

namespace nautilus::scalar {

std::string print_program(const Program& program, const SourceFile* source = nullptr);
std::string print_stmt(const Stmt& stmt, int indent = 0);
std::string print_expr(const Expr& expr);

std::string program_to_dot(const Program& program);

nlohmann::ordered_json program_to_json(const Program& program);

}  // namespace nautilus::scalar
