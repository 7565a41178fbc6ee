#include "core/scalar/affine.h"

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace nautilus::scalar {

Affine Affine::plus(const Affine& other, int64_t sign) const {
  Affine sum = *this;
  sum.vars.insert(other.vars.begin(), other.vars.end());
  for (const auto& [var, c] : other.terms()) {
    if (!sum.coeffs.count(var)) sum.order.push_back(var);
    sum.coeffs[var] += sign * c;
  }
  sum.constant += sign * other.constant;
  std::erase_if(sum.coeffs, [](const auto& entry) { return entry.second == 0; });
  sum.forget_cancelled();
  return sum;
}

Affine Affine::times(int64_t factor) const {
  Affine product;
  product.vars = vars;
  if (factor == 0) return product;
  for (const auto& [var, c] : coeffs) product.coeffs[var] = c * factor;
  product.constant = constant * factor;
  product.order = order;
  return product;
}

std::vector<std::pair<const VarNode*, int64_t>> Affine::terms() const {
  std::vector<std::pair<const VarNode*, int64_t>> in_order;
  for (const VarNode* var : order) {
    auto it = coeffs.find(var);
    const bool listed = std::any_of(in_order.begin(), in_order.end(),
                                    [&](const auto& term) { return term.first == var; });
    if (it != coeffs.end() && !listed) in_order.emplace_back(var, it->second);
  }
  std::vector<std::pair<const VarNode*, int64_t>> unordered;
  for (const auto& [var, c] : coeffs) {
    if (std::find(order.begin(), order.end(), var) == order.end()) unordered.emplace_back(var, c);
  }
  std::sort(unordered.begin(), unordered.end(), [](const auto& x, const auto& y) {
    return std::tie(x.first->name, x.first) < std::tie(y.first->name, y.first);
  });
  in_order.insert(in_order.end(), unordered.begin(), unordered.end());
  return in_order;
}

void Affine::forget_cancelled() {
  std::erase_if(order, [&](const VarNode* var) { return !coeffs.count(var); });
}

std::optional<Affine> affine_of(const Expr& expr) {
  if (const auto* imm = expr->as<IntImm>()) return Affine{{}, imm->value, {}, {}};
  if (const auto* ref = expr->as<VarRef>()) {
    return Affine{{{ref->var.get(), 1}}, 0, {{ref->var.get(), ref->var}}, {ref->var.get()}};
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
