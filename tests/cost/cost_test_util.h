// Helpers of the cost-model tests: compile an asset spec to MA tile IR exactly as the CLI does
// (`nautilus lower FILE --stage matile -D ... --schedule ... --pin ...`).
#pragma once

#include <string>
#include <vector>

#include "core/matile/ir.h"
#include "core/matile/lower.h"
#include "tests/common/spec_test_util.h"

namespace nautilus::cost::testing {

using nautilus::testing::hand_schedule;  // tests/common/spec_test_util.h

// Compiles assets/specs/<asset>.nt with -D `sizes` and the printed `decisions` (empty: the
// unscheduled program) to MA tile IR; fails the calling test (and returns null) on any error.
// `arch`: the MA lowering's target ("sm_80", "sm_90a"; empty: the lowering's default);
// `ring_release`: the lowering's (LowerOptions::ring_release; Auto by default).
matile::ModulePtr compile_ma(const std::string& asset, const std::vector<std::string>& sizes,
                             const std::vector<std::string>& decisions,
                             const std::string& arch = "",
                             matile::LowerOptions::RingRelease ring_release = matile::LowerOptions::RingRelease::Auto);

// `decisions` with every decision of `kind` (e.g. "launch") on the same target replaced by
// `replacement`, or `replacement` appended when there is none.
std::vector<std::string> with_decision(std::vector<std::string> decisions,
                                       const std::string& replacement);

}  // namespace nautilus::cost::testing
