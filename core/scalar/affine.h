// Affine index expressions: `sum(coeff * var) + constant` over loop or iteration variables.
//
// Passes that reason about index ranges (tilize's regions and bounds, skip_masked's conditions)
// read index expressions in this form; anything else (floor division, modulo, a product of two
// variables) has no affine form.
//
//   m_o * 128 + m_i - 1   →   {m_o: 128, m_i: 1}, constant -1
#pragma once

#include <cstdint>
#include <map>
#include <optional>

#include "core/scalar/ir.h"

namespace nautilus::scalar {

struct Affine {
  std::map<const VarNode*, int64_t> coeffs;  // never holds a zero coefficient
  int64_t constant = 0;
  std::map<const VarNode*, Var> vars;        // the variables seen, to rebuild an expression

  bool uses(const VarNode* var) const { return coeffs.count(var) > 0; }
  // this + sign * other
  Affine plus(const Affine& other, int64_t sign = 1) const;
  Affine times(int64_t factor) const;
};

// The affine form of an index expression (integer constants, variables, +, -, and * by a
// constant), or nullopt.
std::optional<Affine> affine_of(const Expr& expr);

// The expression `terms + constant` with variables in order of name, for building predicates.
// Every variable with a coefficient must be in `affine.vars` (affine_of puts them there).
Expr affine_expr(const Affine& affine);

}  // namespace nautilus::scalar
