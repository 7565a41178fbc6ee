// Text, DOT and JSON forms of VR tile IR (the `vrtile` stage).
//
// Text (stable, golden-tested; MLIR-like, one op per line, nesting indents by two spaces):
//
//   # vrtile IR: attention
//   param Q : bf16[1, 2, 13, 4] global input
//   ...
//
//   kernel attention(Q, K, V, O) grid(b: 1, h: 2, m_o: 2) {
//     %q = load Q[%qb, %qh, %qm, %qd] mask %qmask other 0.0 : bf16[8, 4]
//     ...
//     %mx, %l, %acc = for n_o in 0..2 iter_args(%mx_i = %mx0, %l_i = %l0, %acc_i = %acc0) {
//       %s = dot %q, %kt : f32[8, 16]
//       %rowmax = reduce max %sm, axis 1 : f32[8]
//       ...
//       yield %mx1, %l1, %acc1
//     }
//     store O[%qb, %qh, %qm, %qd], %ob mask %qmask
//   }
//
// Values print as `%name`; grid and loop variables are declared by name (`grid(b: 1)`,
// `for n_o in 0..2`) and used as `%b`, `%n_o` like any value. Every op with results ends in
// ` : TYPE` (its result type; for a For the types are those of its iter_args and are not
// repeated). The forms are:
//   load B[%i, ...] [mask %m other C]     store B[%i, ...], %v [mask %m]
//   dot %a, %b[, %acc]                    reduce sum|max|min %x, axis A
//   broadcast %x, dims [d, ...]           permute %x, order [o, ...]
//   iota N                                full C
//   UNARY %x   (neg exp exp2 log log2 sqrt rsqrt tanh sigmoid abs)
//   BINARY %a, %b   (add sub mul div floordiv mod max min)
//   cmp lt|le|gt|ge|eq|ne %a, %b          and|or %a, %b
//   select %c, %a, %b                     cast %x
//   for V in 0..N [iter_args(%arg = %init, ...)] { ... }     yield [%v, ...]
// Constants print in the dtype they denote: floats with the shortest digits that read back to
// the same value (`0.0`, `0.35355338`, `-inf`, `nan`), index constants as integers, bool ones as
// `true`/`false`. A kernel is preceded by a blank line.
//
// DOT: buffers are nodes ("buffer:NAME", boxes styled by role, as in scalar IR); each kernel is a
// cluster, each For body a cluster inside it. Every value is a node "op:KERNEL/NAME" — the op that
// defines it (labelled with the op's text line), or an ellipse for grid and loop variables, block
// arguments and For results; a Store is a node "op:KERNEL/store#I" (I counts the kernel's stores
// in program order). Solid edges carry data: operand → op, buffer → load, store → buffer, a For's
// initial value → its block argument, a yielded value → the For's result. The loop-carried edge
// from a yielded value back to its block argument is dashed and does not constrain the layout.
//
// JSON: {"name", "buffers": [{name, shape, dtype, scope, role, provenance}] (params, then
// allocations), "kernels": [{"name", "params": [buffer names], "grid": [{"var", "extent"}],
// "body": [ops], "provenance"}]}. An op is {"kind" (op_kind_name), "results": [{"name",
// "dtype", "shape"}], "operands": [value names], the kind's fields ("buffer", "masked",
// "other"; "op"; "axis"; "dims"; "order"; "n"; "value"; For: "var", "extent", "block_args",
// "body"), "provenance"}. Provenance is {"statement", "begin", "end"} (begin/end only when the
// range is valid). Non-finite constants are the strings "inf", "-inf", "nan".
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "core/vrtile/ir.h"

namespace nautilus::vrtile {

std::string print_module(const Module& module);
std::string print_kernel(const Kernel& kernel);
std::string print_op(const Op& op, int indent = 0);  // indent: levels of two spaces
// A short name of an op for messages: "dot %s", "store O", "for n_o", "yield".
std::string op_label(const Op& op);

std::string module_to_dot(const Module& module);

nlohmann::ordered_json module_to_json(const Module& module);

}  // namespace nautilus::vrtile
