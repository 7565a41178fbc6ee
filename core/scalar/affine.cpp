#include "core/scalar/affine.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace nautilus::scalar {

Affine Affine::plus(const Affine& other, int64_t sign) const {
  Affine sum = *this;
  sum.vars.insert(other.vars.begin(), other.vars.end());
  for (const auto& [var, c] : other.coeffs) sum.coeffs[var] += sign * c;
  sum.constant += sign * other.constant;
  std::erase_if(sum.coeffs, [](const auto& entry) { return entry.second == 0; });
  return sum;
}

Affine Affine::times(int64_t factor) const {
  Affine product;
  product.vars = vars;
  if (factor == 0) return product;
  for (const auto& [var, c] : coeffs) product.coeffs[var] = c * factor;
  product.constant = constant * factor;
  return product;
}

std::optional<Affine> affine_of(const Expr& expr) {
  if (const auto* imm = expr->as<IntImm>()) return Affine{{}, imm->value, {}};
  if (const auto* ref = expr->as<VarRef>()) {
    return Affine{{{ref->var.get(), 1}}, 0, {{ref->var.get(), ref->var}}};
  }
  const auto* bin = expr->as<Binary>();
  if (!bin) return std::nullopt;
  const std::optional<Affine> a = affine_of(bin->a), b = affine_of(bin->b);
  if (!a || !b) return std::nullopt;
  switch (bin->op) {
    case BinaryOp::Add: return a->plus(*b);
    case BinaryOp::Sub: return a->plus(*b, -1);
    case BinaryOp::Mul:
      if (a->coeffs.empty()) return b->times(a->constant);
      if (b->coeffs.empty()) return a->times(b->constant);
      return std::nullopt;
    default: return std::nullopt;
  }
}

Expr affine_expr(const Affine& affine) {
  std::vector<std::pair<const VarNode*, int64_t>> terms(affine.coeffs.begin(),
                                                        affine.coeffs.end());
  std::sort(terms.begin(), terms.end(), [](const auto& x, const auto& y) {
    return std::tie(x.first->name, x.first) < std::tie(y.first->name, y.first);
  });
  Expr sum;
  for (const auto& [var, c] : terms) {
    Expr term = var_ref(affine.vars.at(var));
    if (c != 1) term = binary(BinaryOp::Mul, term, int_imm(c));
    sum = sum ? binary(BinaryOp::Add, sum, term) : term;
  }
  if (!sum) return int_imm(affine.constant);
  if (affine.constant > 0) return binary(BinaryOp::Add, sum, int_imm(affine.constant));
  if (affine.constant < 0) return binary(BinaryOp::Sub, sum, int_imm(-affine.constant));
  return sum;
}

}  // namespace nautilus::scalar
