#include "core/rewrite/rewrite.h"

#include "core/rewrite/support.h"

namespace nautilus::rewrite {

ModulePtr clean_up(const ModulePtr& module) {
  return repeat_until_unchanged(module, [](const ModulePtr& current) {
    return eliminate_dead_code(hoist_loop_invariants(eliminate_common_subexpressions(current)));
  });
}

const std::vector<VRPassInfo>& vr_rewrite_passes() {
  static const std::vector<VRPassInfo> passes = {
      {"fold-constants",
       "compute element-wise ops on constants at compile time; divide by a constant as a "
       "multiply by its reciprocal",
       fold_constants},
      {"cse", "merge pure ops that compute the same tile from the same operands",
       eliminate_common_subexpressions},
      {"hoist-invariants", "move pure ops that do not change across iterations before the loop",
       hoist_loop_invariants},
      {"delay-normalization",
       "move divisions by factors constant along a summed axis out of reduce sum, dot and "
       "accumulating loops",
       delay_normalization},
      {"fold-scales",
       "carry a positive constant scale through max/sum chains and apply it in the exponent",
       fold_scales},
      {"cancel-rescales",
       "merge exp(a-b)·exp(b-c) into exp(a-c) and drop factors equal to 1", cancel_rescales},
      {"exp-to-exp2", "exp(x) → exp2(x·log2 e), folding log2 e into a constant scale",
       exp_to_exp2},
      {"narrow-dot-operands",
       "dots read 16-bit operands: drop exact casts, round a computed f32 operand (approximate)",
       [](const ModulePtr& module) { return narrow_dot_operands(module); }},
      {"narrow-stored-intermediates",
       "store an f32 intermediate that every reader rounds to 16 bits in that type (exact)",
       narrow_stored_intermediates},
      {"reciprocal-divisors",
       "divide by a broadcast lower-rank value as one reciprocal per element of that value and a "
       "multiply",
       reciprocal_divisors},
      {"cleanup", "CSE, loop-invariant hoisting and dead code elimination to a fixed point",
       clean_up},
  };
  return passes;
}

ModulePtr run_vr_rewrites(const ModulePtr& module) {
  ModulePtr current = module;
  for (const VRPassInfo& pass : vr_rewrite_passes()) current = pass.run(current);
  return current;
}

}  // namespace nautilus::rewrite
