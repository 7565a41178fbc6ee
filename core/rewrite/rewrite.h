// The VR tile expression rewrites (DESIGN.md §3, level 3), run by the driver after tilize.
//
// Every pass is a function ModulePtr → ModulePtr that returns its input pointer when it changed
// nothing, keeps the module valid for vrtile::verify, and keeps each op's provenance (a new op
// takes the provenance of the op it replaces). They are general algebraic rewrites: none looks
// at names or at the operator being compiled. docs/vr-rewrites.md shows each with an example
// and the FlashAttention loop before and after the whole list.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/rewrite/common_subexpressions.h"
#include "core/rewrite/constant_folding.h"
#include "core/rewrite/dead_code.h"
#include "core/rewrite/delayed_normalization.h"
#include "core/rewrite/exp_to_exp2.h"
#include "core/rewrite/loop_invariant_hoisting.h"
#include "core/rewrite/operand_narrowing.h"
#include "core/rewrite/reciprocal_divisors.h"
#include "core/rewrite/stored_narrowing.h"
#include "core/rewrite/rescale_cancellation.h"
#include "core/rewrite/scale_folding.h"
#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Static description of one pass: the same text feeds CLI help, pass logs and GUI tooltips.
struct VRPassInfo {
  std::string name;
  std::string summary;
  std::function<vrtile::ModulePtr(const vrtile::ModulePtr&)> run;
};

// The ordered list the driver runs after tilize:
//   fold-constants, cse, hoist-invariants, delay-normalization, fold-scales, cancel-rescales, exp-to-exp2,
//   narrow-dot-operands, cleanup (cse, hoisting and dead code elimination to a fixed point).
// Rescale cancellation runs before exp → exp2 because it reads exponents as differences.
const std::vector<VRPassInfo>& vr_rewrite_passes();

// CSE, loop-invariant hoisting and DCE repeated until none changes anything.
vrtile::ModulePtr clean_up(const vrtile::ModulePtr& module);

// Every pass of vr_rewrite_passes() in order.
vrtile::ModulePtr run_vr_rewrites(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
