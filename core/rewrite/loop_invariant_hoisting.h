// Loop-invariant hoisting for VR tile IR.
//
// A pure op in a For body that reads neither the loop variable, nor a carried value, nor
// anything else defined in the body computes the same tile in every iteration; it moves to just
// before the For and runs once. Inner loops are processed first, so an op can climb several
// loops in one run. Only loops that run at least once are touched (hoisting out of a loop of
// zero iterations would run code the program never runs), and a load moves only when the
// kernel never stores into its buffer.
//
//   before:                                   after:
//     for n_o in 0..3 iter_args(...) {          %sd = full 2.0 : f32
//       %sd = full 2.0 : f32                    %sd_t = broadcast %sd, dims [] : f32[8, 16]
//       %sd_t = broadcast %sd, dims [] ...      for n_o in 0..3 iter_args(...) {
//       %qk = dot %q, %kt : f32[8, 16]            %qk = dot %q, %kt : f32[8, 16]
//       %s = div %qk, %sd_t : f32[8, 16]          %s = div %qk, %sd_t : f32[8, 16]
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no For body holds an invariant op.
vrtile::ModulePtr hoist_loop_invariants(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
