// Dead code elimination for VR tile IR.
//
// Removes every pure op whose results nothing live reads, every carried value of a For that
// neither the code after the loop nor a live op in its body reads (its init, block argument,
// yield operand and result go together), and every For left with no carried value and no store.
// Stores are the roots of liveness; a value is live when a live op reads it.
//
//   before:
//     %e = exp %x : f32[4]
//     %mx, %l = for c in 0..2 iter_args(%mx_i = %mx0, %l_i = %l0) {
//       %mx1 = max %mx_i, %r : f32[4]
//       %l1 = add %l_i, %r : f32[4]
//       yield %mx1, %l1
//     }
//     store Y[%i], %l
//   after:
//     %l = for c in 0..2 iter_args(%l_i = %l0) {
//       %l1 = add %l_i, %r : f32[4]
//       yield %l1
//     }
//     store Y[%i], %l
// (%e and the running max, never read, are gone.)
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when nothing is dead.
vrtile::ModulePtr eliminate_dead_code(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
