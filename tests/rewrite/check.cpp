#include "tests/rewrite/check.h"

#include <sstream>

#include "core/spec/reference.h"
#include "core/support/tensor.h"
#include "core/vrtile/interpreter.h"
#include "core/vrtile/verifier.h"

namespace nautilus::rewrite::testing {
namespace {

std::string verify_message(const vrtile::Module& module) {
  const std::vector<std::string> problems = vrtile::verify(module);
  std::ostringstream out;
  for (const std::string& problem : problems) out << problem << "\n";
  return out.str();
}

}  // namespace

CheckResult check_against_reference(const driver::Compilation& compilation,
                                    const vrtile::Module& module, const std::string& output,
                                    uint64_t seed, double tolerance) {
  CheckResult result;
  result.error = verify_message(module);
  if (!result.error.empty()) return result;
  const TensorMap inputs = spec::make_random_inputs(*compilation.spec, seed);
  const vrtile::InterpretResult run = vrtile::interpret(module, inputs);
  if (!run.ok) {
    result.error = run.error;
    return result;
  }
  const spec::ReferenceResult reference = spec::evaluate_reference(*compilation.spec, inputs);
  if (!reference.ok) {
    result.error = reference.error;
    return result;
  }
  const TensorData& actual = run.outputs.at(output);
  const ErrorReport error = compare_tensors(actual, reference.tensors.at(output));
  result.relative_error = error.max_relative_error;
  const double limit = tolerance > 0.0 ? tolerance : nautilus::tolerance(actual.dtype);
  result.ok = error.max_relative_error <= limit && error.mismatched_nonfinite == 0;
  if (!result.ok) {
    std::ostringstream message;
    message << "relative error " << error.max_relative_error << " > " << limit << " (worst "
            << error.worst_index << ", non-finite mismatches " << error.mismatched_nonfinite
            << ")";
    result.error = message.str();
  }
  return result;
}

CheckResult check_equivalent(const vrtile::Module& before, const vrtile::Module& after,
                             double tolerance, uint64_t seed) {
  CheckResult result;
  result.error = verify_message(before) + verify_message(after);
  if (!result.error.empty()) return result;
  TensorMap inputs;
  for (const vrtile::Buffer& buffer : before.params) {
    if (buffer->role != scalar::BufferRole::Input) continue;
    inputs[buffer->name] = random_tensor(buffer->shape, buffer->dtype, seed++);
  }
  const vrtile::InterpretResult a = vrtile::interpret(before, inputs);
  const vrtile::InterpretResult b = vrtile::interpret(after, inputs);
  if (!a.ok || !b.ok) {
    result.error = "before: " + a.error + " after: " + b.error;
    return result;
  }
  result.ok = true;
  for (const auto& [name, expected] : a.outputs) {
    auto found = b.outputs.find(name);
    if (found == b.outputs.end()) {
      result.ok = false;
      result.error = "output " + name + " missing after the rewrite";
      return result;
    }
    const ErrorReport error = compare_tensors(found->second, expected);
    result.relative_error = std::max(result.relative_error, error.max_relative_error);
    if (error.max_relative_error > tolerance || error.mismatched_nonfinite != 0) {
      result.ok = false;
      std::ostringstream message;
      message << "output " << name << ": relative error " << error.max_relative_error << " > "
              << tolerance;
      result.error = message.str();
    }
  }
  return result;
}

}  // namespace nautilus::rewrite::testing
