#include "tests/matile/matile_test_util.h"

#include <gtest/gtest.h>

#include "core/spec/reference.h"

namespace nautilus::matile::testing {

ModulePtr lower_or_fail(const vrtile::ModulePtr& module, const LowerOptions& options) {
  layout::Result<ModulePtr> lowered = lower_to_matile(module, options);
  EXPECT_TRUE(lowered.ok()) << lowered.error().message;
  return lowered.ok() ? *lowered : nullptr;
}

Comparison check_lowering(const driver::Compilation& compilation, const vrtile::ModulePtr& vr,
                          const Module& ma, const std::string& output, bool exact, int seed) {
  Comparison out;
  const TensorMap inputs = spec::make_random_inputs(*compilation.spec, seed);
  out.ma = matile::interpret(ma, inputs);
  EXPECT_TRUE(out.ma.ok) << out.ma.error;
  out.vr = vrtile::interpret(*vr, inputs);
  EXPECT_TRUE(out.vr.ok) << out.vr.error;
  if (!out.ma.ok || !out.vr.ok) return out;
  const TensorData& actual = out.ma.outputs.at(output);
  const TensorData& expected = out.vr.outputs.at(output);
  const spec::ReferenceResult reference = spec::evaluate_reference(*compilation.spec, inputs);
  EXPECT_TRUE(reference.ok) << reference.error;
  if (reference.ok) {
    const ErrorReport error = compare_tensors(actual, reference.tensors.at(output));
    out.error_vs_reference = error.max_relative_error;
    EXPECT_LE(error.max_relative_error, tolerance(actual.dtype)) << "worst element " << error.worst_index;
    EXPECT_EQ(error.mismatched_nonfinite, 0);
  }
  EXPECT_EQ(actual.shape, expected.shape);
  if (exact) {
    EXPECT_EQ(actual.values, expected.values);
  }
  out.error_vs_vr = compare_tensors(actual, expected).max_relative_error;
  EXPECT_LE(out.error_vs_vr, tolerance(actual.dtype));
  return out;
}

}  // namespace nautilus::matile::testing
