#include "core/sched/finite_stand_in.h"

#include <cmath>

#include "core/scalar/printer.h"

namespace nautilus::sched {

using namespace scalar;

Expr finite_stand_in(const Expr& value, double infinity) {
  const Provenance& p = value->provenance;
  return select(compare(CompareOp::EQ, value, float_imm(infinity, value->dtype, p), p),
                float_imm(0.0, value->dtype, p), value, p);
}

Expr finite_stand_in_value(const Expr& expr) {
  const Select* s = expr->as<Select>();
  const Compare* c = s ? s->condition->as<Compare>() : nullptr;
  if (!c || c->op != CompareOp::EQ) return nullptr;
  const FloatImm* zero = s->if_true->as<FloatImm>();
  if (!zero || zero->value != 0.0) return nullptr;
  auto infinite = [](const Expr& e) {
    const FloatImm* imm = e->as<FloatImm>();
    return imm && std::isinf(imm->value);
  };
  const Expr& compared = infinite(c->b) ? c->a : infinite(c->a) ? c->b : nullptr;
  if (!compared || print_expr(compared) != print_expr(s->if_false)) return nullptr;
  return s->if_false;
}

}  // namespace nautilus::sched
