// CPU interpreter for VR tile IR: executes a module exactly as ir.h says.
//
// Every kernel runs over its whole grid, kernels in order, grid points in row-major order of the
// grid axes (first axis outermost; grid points are independent by contract, so any order gives
// the same result). Tiles are dense row-major arrays of doubles: float elements are rounded to
// their dtype after every operation and every store is of a value already in the buffer's
// dtype, so f32 arithmetic and bf16/f16 storage behave as on the GPU up to the accuracy of
// transcendental functions. Index tiles hold exact integers (index arithmetic outside ±2^53 is
// an error); Bool tiles hold 0 and 1. Evaluation orders ir.h fixes: a dot adds its K products
// in increasing k, one f32 fused multiply-add at a time (std::fmaf, starting from the
// accumulator or 0); a reduce combines along its axis in increasing index order; a store writes
// its elements in row-major order (a later element wins on equal addresses).
//
// It is checked against the scalar interpreter, so it checks everything it can and reports
// (never crashes on): a load or store out of bounds where its mask holds, a read of a global
// element never written (outputs and intermediates start unwritten), an index division by zero
// or overflow, an index cast of a non-finite or too large float, a missing, unknown or
// mis-shaped input, tiles or buffers too large to hold, and running past the step budget.
// Errors name the kernel, the grid point, the op and its spec statement. Every output element
// must be written by the end; intermediates never written are NaN in `intermediates`. A module
// that does not verify is reported, not run.
#pragma once

#include <cstdint>
#include <string>

#include "core/support/tensor.h"
#include "core/vrtile/ir.h"

namespace nautilus::vrtile {

using nautilus::TensorData;  // core/support/tensor.h
using nautilus::TensorMap;

struct InterpretOptions {
  // Upper bound on steps; 0 means unlimited. An executed op costs one step per element of its
  // result (a store: per element of its value, a reduce: per element of its operand), a dot one
  // per multiply-add (M·N·K), and a For one per iteration besides its body's ops.
  uint64_t max_steps = 2'000'000'000;
};

struct InterpretResult {
  bool ok = false;
  std::string error;        // set when !ok
  TensorMap outputs;        // every Output buffer, when ok
  TensorMap intermediates;  // every allocation's final contents, when ok
  uint64_t steps = 0;       // as counted for InterpretOptions::max_steps
};

// Input values are rounded to each buffer's dtype before use.
InterpretResult interpret(const Module& module, const TensorMap& inputs,
                          const InterpretOptions& options = {});

}  // namespace nautilus::vrtile
