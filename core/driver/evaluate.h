// `nautilus eval`: run a stage's interpreter on seeded random inputs and compare every output
// with the float64 reference of the spec.
//
// The error of an output is normwise: max|out - ref| / max|ref| (support/tensor.h); it passes
// when that is at most the output dtype's tolerance (support/dtype.h) and no non-finite value
// appears where the reference has another value.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/driver/pipeline.h"
#include "core/support/tensor.h"

namespace nautilus::driver {

struct EvalOptions {
  Stage stage = Stage::Scalar;
  uint64_t seed = 0;
  // Refuse to start when the reference or the interpreter would do more scalar operations.
  double max_operations = 2e9;
};

struct OutputCheck {
  std::string name;
  DType dtype = DType::F32;
  ErrorReport error;
  double tolerance = 0.0;
  bool passed = false;
};

struct EvalResult {
  bool ran = false;       // false: the evaluation could not run (see `error`)
  std::string error;
  std::vector<OutputCheck> outputs;
  TensorMap inputs;       // what the interpreters were given
  TensorMap reference;    // float64 reference of every output
  TensorMap actual;       // the stage's outputs

  bool passed() const;
};

// Requires a successful compilation that reached `options.stage`.
EvalResult evaluate(const Compilation& compilation, const EvalOptions& options);

// Writes inputs, reference and stage outputs as .npy files plus a manifest.json into `directory`
// (created if needed). Returns an empty string on success, otherwise the reason.
std::string save_evaluation(const EvalResult& result, const std::string& directory);

}  // namespace nautilus::driver
