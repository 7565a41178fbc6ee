// The finite stand-in of a running max or min: `select(r == -inf, 0, r)` (or +inf for a min).
//
// rolling_update writes exponents of running values through it, so that a row whose values are
// all masked so far (the running max still -inf) gives exp(-inf - 0) = 0 instead of
// exp(-inf - -inf) = NaN; wherever r is finite it is r itself. The passes that reason about those
// exponents afterwards (skip_masked's simplifier, split_k_update's merge of partial results) read
// it back as r through `finite_stand_in_value`.
#pragma once

#include "core/scalar/ir.h"

namespace nautilus::sched {

// `select(value == infinity, 0, value)`, with the value's dtype and provenance.
scalar::Expr finite_stand_in(const scalar::Expr& value, double infinity);

// The r of `select(r == ±inf, 0, r)` (either operand order of the comparison), nullptr for any
// other expression.
scalar::Expr finite_stand_in_value(const scalar::Expr& expr);

}  // namespace nautilus::sched
