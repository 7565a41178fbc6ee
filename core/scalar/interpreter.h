// CPU interpreter for scalar IR: executes any loop structure exactly as the IR says.
//
// Values are held as doubles; every float operation is rounded to its node's dtype and every
// store to the buffer's dtype, so f32 arithmetic and bf16/f16 storage behave as on the GPU up to
// the accuracy of transcendental functions. It is the oracle later stages are compared with, so
// it checks everything it can and reports (never crashes on) out-of-bounds accesses, reads of
// elements that were never written, a missing or mis-shaped input, and running past a step
// budget. Errors name the block and the spec statement (provenance) where they happened.
//
// Where ir.h leaves evaluation order open: `select` evaluates only the chosen branch and
// `and`/`or` short-circuit, as the generated CUDA does; max/min ignore a NaN operand (fmaxf).
// Index arithmetic is int64 with floor division and a modulo that has the divisor's sign;
// division by zero and overflow are errors. Every output element must be written by the end;
// intermediates never written are NaN in `intermediates`. A malformed program (verify() fails)
// is reported, not run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/support/tensor.h"

namespace nautilus::scalar {

using nautilus::TensorData;  // core/support/tensor.h
using nautilus::TensorMap;

struct InterpretOptions {
  // Upper bound on executed block instances plus stores; 0 means unlimited. A block instance
  // counts whether or not its predicate holds, so every loop iteration costs a step.
  uint64_t max_steps = 2'000'000'000;
};

struct InterpretResult {
  bool ok = false;
  std::string error;     // set when !ok
  TensorMap outputs;     // every Output buffer, when ok
  TensorMap intermediates;  // every intermediate buffer's final contents, when ok
  uint64_t steps = 0;    // block instances + stores executed
};

// Input values are rounded to each buffer's dtype before use.
InterpretResult interpret(const Program& program, const TensorMap& inputs,
                          const InterpretOptions& options = {});

}  // namespace nautilus::scalar
