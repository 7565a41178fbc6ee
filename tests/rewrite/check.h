// Numerical checks shared by the rewrite tests: a module against the float64 reference of its
// spec, and two modules against each other, on random inputs (never zeros).
#pragma once

#include <string>
#include <vector>

#include "core/driver/pipeline.h"
#include "core/vrtile/ir.h"

namespace nautilus::rewrite::testing {

struct CheckResult {
  bool ok = false;          // ran, verified and is within tolerance
  std::string error;        // why not, when !ok
  double relative_error = 0.0;
};

// Verifies `module`, runs it and the spec's float64 reference on random inputs (seed), and
// compares `output` within the output dtype's tolerance (or `tolerance` when positive).
CheckResult check_against_reference(const driver::Compilation& compilation,
                                    const vrtile::Module& module, const std::string& output,
                                    uint64_t seed = 7, double tolerance = 0.0);

// Verifies both, runs them on the same random inputs of their (shared) input buffers, and
// compares every output within `tolerance` (normwise relative error).
CheckResult check_equivalent(const vrtile::Module& before, const vrtile::Module& after,
                             double tolerance, uint64_t seed = 11);

}  // namespace nautilus::rewrite::testing
