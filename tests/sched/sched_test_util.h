// Helpers for schedule tests: lower an asset spec, apply decisions written as text, and compare
// the scalar interpreter's results before and after.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "core/spec/ast.h"
#include "core/support/source.h"

namespace nautilus::testing {

struct LoweredAsset {
  SourceFilePtr file;
  spec::SpecPtr spec;
  scalar::ProgramPtr program;
};

// Lowers assets/specs/<name>.nt (or, for a name with a slash, that path from the source root:
// "bench/variants/geglu_mlp.nt") with the given size bindings ("M=13"); fails the test on errors
// (program is then null).
LoweredAsset lower_asset(const std::string& name, const std::vector<std::string>& sizes);

// Parses and applies each decision in order, verifying the program after each; fails the test
// with the reason when one does not parse, does not apply or breaks the verifier. Returns the
// last good program.
scalar::ProgramPtr apply_decisions(const scalar::ProgramPtr& program,
                                   const std::vector<std::string>& decisions);

// Applies one decision that must not apply and returns its reason ("" after failing the test
// when it applied).
std::string failure_reason(const scalar::ProgramPtr& program, const std::string& decision);

// Interprets `original` and `scheduled` on the same random inputs (for each seed) and expects
// every output, and every intermediate both programs still have, to agree: exactly when
// `tolerance` is 0, else within that normwise relative error.
void expect_same_results(const LoweredAsset& asset, const scalar::ProgramPtr& scheduled,
                         double tolerance = 0.0, const std::vector<uint64_t>& seeds = {1, 7});

// As expect_same_results, for the outputs only: for schedules that leave parts of intermediates
// unwritten (skip_masked skips whole iterations of a loop).
void expect_same_outputs(const LoweredAsset& asset, const scalar::ProgramPtr& scheduled,
                         double tolerance = 0.0, const std::vector<uint64_t>& seeds = {1, 7});

// An asset, its size bindings and the decisions to schedule it with.
struct ScheduleCase {
  const char* asset;
  std::vector<std::string> sizes;
  std::vector<std::string> decisions;
};

// For each case (traced by its asset): lowers the asset, applies the decisions and expects the
// same results as the unscheduled program (expect_same_results with its defaults).
void expect_cases_same_results(const std::vector<ScheduleCase>& cases);

// The golden text of a pass: applies `setup` to the asset's program, prints it as "before",
// applies `decisions`, prints the result as "after", under a header listing both lists. The
// scheduled program is stored in `after` when given.
std::string before_after(const LoweredAsset& asset, const std::vector<std::string>& setup,
                         const std::vector<std::string>& decisions,
                         scalar::ProgramPtr* after = nullptr);

// The golden before/after text of `decisions` (after `setup`) checked against `golden`, then
// expect_same_results on the scheduled program, which is returned.
scalar::ProgramPtr expect_golden_schedule(const LoweredAsset& asset, const std::string& golden,
                                          const std::vector<std::string>& setup,
                                          const std::vector<std::string>& decisions);

// Small hand-built programs, for the failure reasons the asset specs cannot reach.
namespace hand {

scalar::Buffer input(const std::string& name, std::vector<int64_t> shape);
scalar::Buffer output(const std::string& name, std::vector<int64_t> shape);
scalar::Buffer temp(const std::string& name, std::vector<int64_t> shape);

// The iteration variables of a block, as expressions for its body.
using Iters = std::vector<scalar::Expr>;

// `for i0 in 0..e0: ... block NAME(i0 = i0, ...): buffer[store(iters)] = value(iters)`, one
// spatial iteration variable per dimension of `buffer` named i, j, k, ...; `store` defaults to
// the iteration variables in order.
scalar::Stmt nest(const std::string& name, const scalar::Buffer& buffer,
                  const std::function<scalar::Expr(const Iters&)>& value,
                  const std::function<Iters(const Iters&)>& store = nullptr);

// The nests as one program (inputs and outputs are found among the buffers they use).
scalar::ProgramPtr program(const std::vector<scalar::Buffer>& params,
                           const std::vector<scalar::Buffer>& allocations,
                           std::vector<scalar::Stmt> nests);

}  // namespace hand

}  // namespace nautilus::testing
