// Affine index expressions: the coefficients affine_of reads, the order in which terms() gives
// them back (first appearance, a cancelled variable going last when it returns) and
// affine_expr's rebuilt expression.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "core/scalar/affine.h"
#include "core/scalar/printer.h"

namespace nautilus::scalar {
namespace {

using Terms = std::vector<std::pair<const VarNode*, int64_t>>;

struct Vars {
  Var m_o = make_var("m_o"), m_i = make_var("m_i"), n = make_var("n");
  Expr ref(const Var& v) const { return var_ref(v); }
};

TEST(Affine, ReadsSumsAndScaledVariablesInOrderOfFirstAppearance) {
  Vars v;
  // n + m_o * 128 + m_i - 1
  const Expr e = binary(BinaryOp::Sub,
                        binary(BinaryOp::Add,
                               binary(BinaryOp::Add, v.ref(v.n),
                                      binary(BinaryOp::Mul, v.ref(v.m_o), int_imm(128))),
                               v.ref(v.m_i)),
                        int_imm(1));
  const std::optional<Affine> a = affine_of(e);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->constant, -1);
  EXPECT_EQ(a->terms(), (Terms{{v.n.get(), 1}, {v.m_o.get(), 128}, {v.m_i.get(), 1}}));
  // affine_expr orders by name, whatever the order of appearance.
  EXPECT_EQ(print_expr(affine_expr(*a)), print_expr(binary(
      BinaryOp::Sub,
      binary(BinaryOp::Add,
             binary(BinaryOp::Add, v.ref(v.m_i), binary(BinaryOp::Mul, v.ref(v.m_o), int_imm(128))),
             v.ref(v.n)),
      int_imm(1))));
}

TEST(Affine, ACancelledVariableLeavesTheOrderAndComesBackLast) {
  Vars v;
  const Affine n = *affine_of(v.ref(v.n));
  const Affine m = *affine_of(v.ref(v.m_o));
  const Affine cancelled = n.plus(m).plus(n, -1);  // n + m_o - n
  EXPECT_EQ(cancelled.terms(), (Terms{{v.m_o.get(), 1}}));
  EXPECT_EQ(cancelled.plus(n).terms(), (Terms{{v.m_o.get(), 1}, {v.n.get(), 1}}));
  EXPECT_TRUE(n.times(0).terms().empty());
  EXPECT_EQ(n.plus(m).times(3).terms(), (Terms{{v.n.get(), 3}, {v.m_o.get(), 3}}));
}

TEST(Affine, TermsListCoefficientsEditedDirectlyByName) {
  Vars v;
  Affine a = *affine_of(v.ref(v.n));
  a.coeffs[v.m_o.get()] = 2;  // not in `order`
  a.coeffs[v.m_i.get()] = 5;
  EXPECT_EQ(a.terms(), (Terms{{v.n.get(), 1}, {v.m_i.get(), 5}, {v.m_o.get(), 2}}));
}

TEST(Affine, ProductsOfVariablesHaveNoAffineForm) {
  Vars v;
  EXPECT_FALSE(affine_of(binary(BinaryOp::Mul, v.ref(v.n), v.ref(v.m_o))));
  EXPECT_FALSE(affine_of(binary(BinaryOp::FloorDiv, v.ref(v.n), int_imm(2))));
}

}  // namespace
}  // namespace nautilus::scalar
