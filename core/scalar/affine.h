// Affine index expressions: `sum(coeff * var) + constant` over loop or iteration variables.
//
// Passes that reason about index ranges (tilize's regions and bounds, skip_masked's conditions,
// the schedule's regions and index simplification in core/sched/region.h) read index expressions
// in this form; anything else (floor division, modulo, a product of two variables) has no affine
// form.
//
//   m_o * 128 + m_i - 1   →   {m_o: 128, m_i: 1}, constant -1
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/scalar/ir.h"

namespace nautilus::scalar {

struct Affine {
  std::map<const VarNode*, int64_t> coeffs;  // never holds a zero coefficient
  int64_t constant = 0;
  std::map<const VarNode*, Var> vars;        // the variables seen, to rebuild an expression
  // The variables of `coeffs` in order of first appearance: plus() appends the other side's new
  // ones and drops those whose coefficient cancels (one that comes back goes last), so that an
  // expression can be rebuilt in the order it was written. Code that edits `coeffs` directly
  // may leave it behind; terms() does not rely on it being complete.
  std::vector<const VarNode*> order;

  bool uses(const VarNode* var) const { return coeffs.count(var) > 0; }
  // this + sign * other
  Affine plus(const Affine& other, int64_t sign = 1) const;
  Affine times(int64_t factor) const;
  // (variable, coefficient) for every coefficient, in `order`, then any variable `order` misses
  // by name.
  std::vector<std::pair<const VarNode*, int64_t>> terms() const;
  // Drops the variables of `order` that have no coefficient (any more).
  void forget_cancelled();
};

// The affine form of an index expression (integer constants, variables, +, -, and * by a
// constant), or nullopt.
std::optional<Affine> affine_of(const Expr& expr);

// The expression `terms + constant` with variables in order of name, for building predicates.
// Every variable with a coefficient must be in `affine.vars` (affine_of puts them there).
Expr affine_expr(const Affine& affine);

}  // namespace nautilus::scalar
