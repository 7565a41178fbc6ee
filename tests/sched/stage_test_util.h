// Helpers for the tests of the decisions that add stages and buffers (split_k_update,
// cache_read, cache_write, rematerialize, regularize): golden text with a tolerance for
// reassociated sums, the size of a mismatch (to show a broken variant is caught), and surgery on
// one block to build such variants.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/scalar/ir.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::testing {

// As expect_golden_schedule, with results compared within `tolerance` (0: exactly).
scalar::ProgramPtr expect_golden_schedule_within(const LoweredAsset& asset,
                                                 const std::string& golden,
                                                 const std::vector<std::string>& setup,
                                                 const std::vector<std::string>& decisions,
                                                 double tolerance);

// The largest relative error over the outputs of `program` against the unscheduled program on
// the random inputs of `seed`; infinity when `program` fails to run (a read of an unwritten
// element, an index out of bounds).
double worst_output_error(const LoweredAsset& asset, const scalar::ProgramPtr& program,
                          uint64_t seed = 1);

// `program` with block `name` replaced by what `rewrite` returns (nullptr: removed).
scalar::ProgramPtr rewrite_block(const scalar::ProgramPtr& program, const std::string& name,
                                 const std::function<scalar::Stmt(const scalar::Block&)>& rewrite);

// `block` with a new body.
scalar::Stmt with_block_body(const scalar::Block& block, scalar::Stmt body);

}  // namespace nautilus::testing
