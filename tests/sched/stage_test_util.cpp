#include "tests/sched/stage_test_util.h"

#include <gtest/gtest.h>

#include <limits>

#include "core/scalar/interpreter.h"
#include "core/sched/loop_nest.h"
#include "core/spec/reference.h"
#include "tests/common/golden.h"

namespace nautilus::testing {

scalar::ProgramPtr expect_golden_schedule_within(const LoweredAsset& asset,
                                                 const std::string& golden,
                                                 const std::vector<std::string>& setup,
                                                 const std::vector<std::string>& decisions,
                                                 double tolerance) {
  scalar::ProgramPtr after;
  expect_golden(golden, before_after(asset, setup, decisions, &after));
  expect_same_results(asset, after, tolerance);
  return after;
}

double worst_output_error(const LoweredAsset& asset, const scalar::ProgramPtr& program,
                          uint64_t seed) {
  const TensorMap inputs = spec::make_random_inputs(*asset.spec, seed);
  const scalar::InterpretResult expected = scalar::interpret(*asset.program, inputs);
  EXPECT_TRUE(expected.ok) << expected.error;
  const scalar::InterpretResult actual = scalar::interpret(*program, inputs);
  if (!actual.ok) return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (const auto& [name, tensor] : expected.outputs) {
    const ErrorReport report = compare_tensors(actual.outputs.at(name), tensor);
    if (report.mismatched_nonfinite > 0) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, report.max_relative_error);
  }
  return worst;
}

scalar::ProgramPtr rewrite_block(const scalar::ProgramPtr& program, const std::string& name,
                                 const std::function<scalar::Stmt(const scalar::Block&)>& rewrite) {
  const std::optional<sched::BlockPath> path = sched::find_block(program->body, name);
  EXPECT_TRUE(path.has_value()) << "no block " << name;
  if (!path) return program;
  const size_t last = path->stmts.size() - 1;
  scalar::Stmt replacement = rewrite(path->block());
  return sched::with_body(program, replacement ? sched::replace_at(*path, last, replacement)
                                               : sched::remove_at(*path, last));
}

scalar::Stmt with_block_body(const scalar::Block& block, scalar::Stmt body) {
  return scalar::make_block(block.name, block.iter_vars, block.bindings, block.predicate,
                            block.init, std::move(body), block.provenance);
}

}  // namespace nautilus::testing
