// regularize(BLOCK, AXIS=SIZE, ...) — pad loops to hardware-friendly trip counts, masking the
// padded iterations so they do nothing.
//
// Each AXIS names a loop of BLOCK's nest as split does (the one loop an iteration variable's
// binding uses, or a loop by its name, e.g. m_i). SIZE is the new extent: an integer that is at
// least the extent E and a power of two or a multiple of 16, or `pow2` (the next power of two)
// or `mul16` (the next multiple of 16). `for x in 0..E` becomes `for x in 0..SIZE` and every
// block under the loop gets the predicate `x < E`, so the padded iterations run no block (and no
// binding is evaluated past the old extent). Regular trip counts let later stages use whole
// warps, MMA shapes and unmasked vector loads for the inner loops; the predicate is what remains
// of the boundary.
//
//   regularize(C_sum, m_i=8) on gemm after split(C_sum, m, 5) (M = 12), before:
//     for m_o in 0..3:
//       for m_i in 0..5:
//         ...
//           block C_sum(m = m_o * 5 + m_i, n = n; reduce k = k) if m_o * 5 + m_i < 12:
//   after:
//     for m_o in 0..3:
//       for m_i in 0..8:
//         ...
//           block C_sum(m = m_o * 5 + m_i, n = n; reduce k = k) if m_o * 5 + m_i < 12 and m_i < 5:
//
// A SIZE equal to the extent changes nothing (the program is returned as is). Refused, with the
// reason: an axis or loop the block does not have, a SIZE below the extent or that is neither a
// power of two nor a multiple of 16, an unknown size name.
#pragma once

#include <string_view>
#include <vector>

#include "core/sched/decision.h"

namespace nautilus::sched {

struct RegularSize {
  std::string axis;
  std::string size;  // an integer, "pow2" or "mul16"
};

ApplyResult regularize(const scalar::ProgramPtr& program, std::string_view block,
                       const std::vector<RegularSize>& sizes);

DecisionKind regularize_decision();

}  // namespace nautilus::sched
