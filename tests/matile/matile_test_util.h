// Shared pieces of the MA tile IR tests: compiling an asset to its hand-built VR kernel,
// lowering it, and running the MA and VR interpreters and the float64 reference on one set of
// random inputs.
#pragma once

#include <string>
#include <vector>

#include "core/driver/pipeline.h"
#include "core/matile/interpreter.h"
#include "core/matile/lower.h"
#include "core/vrtile/interpreter.h"

namespace nautilus::matile::testing {

// Lowers `module` (failing the test on a reason) and returns the MA module.
ModulePtr lower_or_fail(const vrtile::ModulePtr& module, const LowerOptions& options = {});

struct Comparison {
  matile::InterpretResult ma;
  vrtile::InterpretResult vr;
  double error_vs_reference = 0.0;  // normwise relative error of the MA output
  double error_vs_vr = 0.0;         // and against the VR interpreter's
};

// Runs both interpreters and the reference on random inputs (seed) and checks the MA output of
// buffer `output` within the dtype's tolerance (and bit for bit against VR when `exact`).
Comparison check_lowering(const driver::Compilation& compilation, const vrtile::ModulePtr& vr,
                          const Module& ma, const std::string& output, bool exact, int seed = 7);

}  // namespace nautilus::matile::testing
