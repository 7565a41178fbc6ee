// The schedule's reading of index expressions (sched/region.h): affine forms in order of first
// appearance with negation and overflow checks, and simplify_index rebuilding a nested affine
// binding as one sum in that order.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/scalar/printer.h"
#include "core/sched/region.h"

namespace nautilus::sched {
namespace {

using scalar::BinaryOp;
using scalar::binary;
using scalar::Expr;
using scalar::int_imm;
using scalar::make_var;
using scalar::Var;
using scalar::var_ref;
using Terms = std::vector<std::pair<const scalar::VarNode*, int64_t>>;

Expr add(Expr a, Expr b) { return binary(BinaryOp::Add, std::move(a), std::move(b)); }
Expr mul(Expr a, int64_t c) { return binary(BinaryOp::Mul, std::move(a), int_imm(c)); }

TEST(AffineForm, NestedBindingsFlattenInOrderOfFirstAppearance) {
  const Var m_o = make_var("m_o"), m_i = make_var("m_i"), j_o = make_var("j_o"), j_i = make_var("j_i");
  // (m_o * 2 + m_i) * 4 + (j_o * 3 + j_i)
  const Expr e = add(mul(add(mul(var_ref(m_o), 2), var_ref(m_i)), 4),
                     add(mul(var_ref(j_o), 3), var_ref(j_i)));
  const std::optional<scalar::Affine> form = affine_form(e);
  ASSERT_TRUE(form);
  EXPECT_EQ(form->terms(), (Terms{{m_o.get(), 8}, {m_i.get(), 4}, {j_o.get(), 3}, {j_i.get(), 1}}));
  const Expr simplified = simplify_index(e);
  const std::optional<scalar::Affine> again = affine_form(simplified);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->terms(), form->terms());
  const std::string text = scalar::print_expr(simplified);
  EXPECT_LT(text.find("m_o"), text.find("m_i")) << text;
  EXPECT_LT(text.find("m_i"), text.find("j_o")) << text;
  EXPECT_LT(text.find("j_o"), text.find("j_i")) << text;
}

TEST(AffineForm, ReadsNegationAndRefusesOverflow) {
  const Var n = make_var("n");
  const std::optional<scalar::Affine> negated =
      affine_form(scalar::unary(scalar::UnaryOp::Neg, add(var_ref(n), int_imm(2))));
  ASSERT_TRUE(negated);
  EXPECT_EQ(negated->terms(), (Terms{{n.get(), -1}}));
  EXPECT_EQ(negated->constant, -2);
  EXPECT_FALSE(affine_form(mul(mul(var_ref(n), int64_t{1} << 40), int64_t{1} << 40)));
  EXPECT_FALSE(affine_form(binary(BinaryOp::Mul, var_ref(n), var_ref(n))));
}

}  // namespace
}  // namespace nautilus::sched
