// Rescale cancellation: exponential rescale factors that multiply the same tile merge, and
// factors equal to 1 disappear.
//
// A product (a chain of mul and div whose intermediate results have no other use) is read as a
// list of factors. Two factors exp(k·(a − b)) and exp(k·(b − c)) — the same exp or exp2, the same
// constant k (or none), broadcast the same way — multiply to exp(k·(a − c)); a divisor
// exp(k·(a − b)) counts as the factor exp(k·(b − a)). A merged factor exp(k·(a − a)) is 1, and a
// constant factor 1 is dropped, so `x · 1` becomes x. This is how a rescale by
// exp(m_old − m_mid) followed by one by exp(m_mid − m_new) (two online-softmax steps applied to
// one accumulator) becomes one rescale by exp(m_old − m_new). Where b is infinite the merged
// form is the limit of the original (the product of 0 and ∞ the original would form is NaN).
//
//   before:                                   after:
//     %d1 = sub %m_old, %m_mid : f32[8]         %d = sub %m_old, %m_new : f32[8]
//     %a1 = exp %d1 : f32[8]                    %a = exp %d : f32[8]
//     %d2 = sub %m_mid, %m_new : f32[8]         %r = mul %l_i, %a : f32[8]
//     %a2 = exp %d2 : f32[8]
//     %t = mul %l_i, %a1 : f32[8]
//     %r = mul %t, %a2 : f32[8]
#pragma once

#include "core/vrtile/ir.h"

namespace nautilus::rewrite {

// Returns `module` itself when no factors cancel or merge.
vrtile::ModulePtr cancel_rescales(const vrtile::ModulePtr& module);

}  // namespace nautilus::rewrite
