// Layout basics and the worked examples of layout.h (which are CuTe's documented examples),
// plus every error an operation reports instead of asserting.
#include "core/layout/layout.h"

#include <gtest/gtest.h>

#include "core/layout/printer.h"

namespace nautilus::layout {
namespace {

Layout L(const char* text) { return parse_layout(text).value(); }
IntTuple T(const char* text) { return parse_int_tuple(text).value(); }

// EXPECT_LAYOUT(result, "text"): a successful Result<Layout> printing as `text`.
#define EXPECT_LAYOUT(result, text)             \
  do {                                          \
    const auto& r_ = (result);                  \
    ASSERT_TRUE(r_.ok()) << r_.error().message; \
    EXPECT_EQ(to_string(*r_), text);            \
  } while (0)

void expect_error(const Result<Layout>& result, const std::string& fragment) {
  ASSERT_FALSE(result.ok()) << "unexpectedly got " << to_string(*result);
  EXPECT_NE(result.error().message.find(fragment), std::string::npos) << result.error().message;
}

TEST(Layout, Queries) {
  const Layout a = L("(4,(2,4)):(1,(16,4))");
  EXPECT_EQ(a.rank(), 2);
  EXPECT_EQ(a.depth(), 2);
  EXPECT_EQ(a.size(), 32);
  EXPECT_EQ(a.cosize(), 3 + 16 + 12 + 1);
  EXPECT_EQ(to_string(a.mode(1)), "(2,4):(16,4)");
  EXPECT_THROW(a.mode(2), std::out_of_range);
  EXPECT_EQ(to_string(Layout()), "1:0");
  EXPECT_EQ(Layout().size(), 1);
  EXPECT_EQ(Layout().cosize(), 1);
  EXPECT_EQ(L("4:2").cosize(), 7);
  // Negative strides do not extend the cosize below 0.
  EXPECT_EQ(L("(4,2):(-1,8)").cosize(), 9);
}

TEST(Layout, Evaluation) {
  const Layout row_major = L("(4,8):(8,1)");
  EXPECT_EQ(row_major(5), 9);  // index 5 is coordinate (1,1)
  const Layout a = L("(4,(2,4)):(1,(16,4))");
  EXPECT_EQ(a.evaluate(T("(3,(1,2))")).value(), 27);
  EXPECT_EQ(a.evaluate(T("(3,5)")).value(), 27);  // 5 is (1,2) inside (2,4)
  EXPECT_EQ(a.evaluate(T("23")).value(), a(23));
  EXPECT_FALSE(a.evaluate(T("(1,2,3)")).ok());
  EXPECT_FALSE(a.evaluate(T("((1,1),2)")).ok());
  // Past the domain the last mode keeps counting.
  EXPECT_EQ(L("(2,3):(1,10)")(7), 1 + 3 * 10);
}

TEST(Layout, ConstructionIsChecked) {
  EXPECT_THROW(Layout(T("(2,3)"), T("(1,2,3)")), InvalidLayout);
  EXPECT_THROW(Layout(T("(2,0)"), T("(1,2)")), InvalidLayout);
  EXPECT_FALSE(make_layout(T("(2,(3,4))"), T("(1,2)")).ok());
  EXPECT_FALSE(make_layout(T("-1"), T("1")).ok());
  EXPECT_LAYOUT(make_layout(T("(2,(3,4))"), T("(1,(2,6))")), "(2,(3,4)):(1,(2,6))");
}

TEST(Layout, CompactLayouts) {
  EXPECT_EQ(to_string(make_layout_left(T("(4,(2,3))"))), "(4,(2,3)):(1,(4,8))");
  EXPECT_EQ(to_string(make_layout_right(T("(4,(2,3))"))), "(4,(2,3)):(6,(3,1))");
  EXPECT_EQ(to_string(make_layout_left(T("8"))), "8:1");
  EXPECT_EQ(to_string(make_layout_right(T("(4,8)"))), "(4,8):(8,1)");
}

TEST(Layout, Concatenate) {
  EXPECT_EQ(to_string(concatenate({L("4:1"), L("(2,3):(8,16)")})), "(4,(2,3)):(1,(8,16))");
  EXPECT_EQ(to_string(concatenate({L("4:1")})), "(4):(1)");
  EXPECT_EQ(to_string(concatenate({})), "():()");
  EXPECT_EQ(concatenate({}).size(), 1);
}

TEST(Layout, CoalesceExamples) {
  EXPECT_EQ(to_string(coalesce(L("(2,(1,6)):(1,(6,2))"))), "12:1");
  EXPECT_EQ(to_string(coalesce(L("(2,4):(1,3)"))), "(2,4):(1,3)");
  EXPECT_EQ(to_string(coalesce(L("(1,1):(5,7)"))), "1:0");
  EXPECT_EQ(to_string(coalesce(L("(2,3):(0,0)"))), "6:0");
  EXPECT_EQ(to_string(coalesce(L("(2,(1,6)):(1,(6,2))"), T("(1,1)"))), "(2,6):(1,2)");
  // Modes beyond the profile are kept; a leaf profile is a full coalesce.
  EXPECT_EQ(to_string(coalesce(L("((2,2),(2,2),(1,3)):((1,2),(8,16),(5,4))"), T("(1)"))),
            "(4,(2,2),(1,3)):(1,(8,16),(5,4))");
  EXPECT_EQ(to_string(coalesce(L("((2,2),(2,2)):((1,2),(4,8))"), T("1"))), "16:1");
}

TEST(Layout, Filter) {
  EXPECT_EQ(to_string(filter_zeros(L("(4,(2,3)):(1,(0,4))"))), "(4,(1,3)):(1,(0,4))");
  EXPECT_EQ(to_string(filter(L("(4,(2,3)):(1,(0,8))"))), "(4,3):(1,8)");
  EXPECT_EQ(to_string(filter(L("(4,(2,3)):(1,(0,4))"))), "12:1");
  EXPECT_EQ(to_string(filter(L("(4,2):(0,0)"))), "1:0");
}

TEST(Layout, CompositionExamples) {
  EXPECT_LAYOUT(composition(L("(6,2):(8,2)"), L("(4,3):(3,1)")), "((2,2),3):((24,2),8)");
  EXPECT_LAYOUT(composition(L("20:2"), L("(5,4):(4,1)")), "(5,4):(8,2)");
  EXPECT_LAYOUT(composition(L("(10,2):(16,4)"), L("(5,4):(1,5)")), "(5,(2,2)):(16,(80,4))");
  EXPECT_LAYOUT(composition(L("(12,(4,8)):(59,(13,1))"), Tiler{L("3:4"), L("8:2")}),
                "(3,(2,4)):(236,(26,1))");
  // Stride-0 and size-1 right operands.
  EXPECT_LAYOUT(composition(L("(4,2):(1,8)"), L("(3,2):(0,1)")), "(3,2):(0,1)");
  EXPECT_LAYOUT(composition(L("(4,2):(1,8)"), L("1:7")), "1:0");
  // The left operand extends past its size along its last mode.
  EXPECT_LAYOUT(composition(L("(4,2):(1,8)"), L("16:1")), "(4,4):(1,8)");
  // Leaves that fit inside one mode need no divisibility: A = 6:1 ++ 2:10, B = 2:4.
  EXPECT_LAYOUT(composition(L("(6,2):(1,10)"), L("2:4")), "2:4");
  EXPECT_LAYOUT(composition(L("(4,2):(1,8)"), L("2:3")), "2:3");
}

TEST(Layout, CompositionErrors) {
  expect_error(composition(L("(4,2):(1,8)"), L("4:3")), "stride divisibility");
  expect_error(composition(L("(4,2):(1,8)"), L("3:2")), "shape divisibility");
  expect_error(composition(L("(4,4):(4,1)"), L("6:1")), "shape divisibility");
  // A non-injective right operand whose leaves carry into the next mode of A.
  expect_error(composition(L("(2,2):(1,10)"), L("(2,2):(1,1)")), "overlap");
  expect_error(composition(L("8:1"), L("4:-1")), "negative stride");
  expect_error(composition(L("(4,4):(1,8)"), Tiler{L("2:1"), L("2:1"), L("2:1")}), "rank 2");
  expect_error(composition(L("(4,4):(1,8)"), Tiler{}), "empty");
  // A documented limitation: A(j*3) = 0, 9 is affine (2:9), but 3 does not divide mode 2:1.
  expect_error(composition(L("(2,3):(1,8)"), L("2:3")), "stride divisibility");
  // The message names both operands.
  expect_error(composition(L("(4,2):(1,8)"), L("4:3")), "composition (4,2):(1,8) o 4:3");
}

TEST(Layout, ComplementExamples) {
  EXPECT_LAYOUT(complement(L("4:1"), 24), "6:4");
  EXPECT_LAYOUT(complement(L("6:4"), 24), "4:1");
  EXPECT_LAYOUT(complement(L("(4,6):(1,4)"), 24), "1:0");
  EXPECT_LAYOUT(complement(L("4:2"), 24), "(2,3):(1,8)");
  EXPECT_LAYOUT(complement(L("(2,4):(1,6)"), 24), "3:2");
  EXPECT_LAYOUT(complement(L("(2,2):(1,6)"), 24), "(3,2):(2,12)");
  EXPECT_LAYOUT(complement(L("(2,2):(1,6)")), "3:2");     // up to cosize 8: the holes only
  EXPECT_LAYOUT(complement(L("(4,2):(0,1)"), 8), "4:2");  // broadcast modes are ignored
  EXPECT_LAYOUT(complement(L("1:0"), 5), "5:1");
  EXPECT_LAYOUT(complement(L("4:1"), 6), "2:4");  // rounds up: covers [0, 8)
}

TEST(Layout, ComplementErrors) {
  expect_error(complement(L("(2,2):(1,1)"), 8), "not injective");
  expect_error(complement(L("(2,3):(3,2)"), 12), "not injective");
  expect_error(complement(L("(2,2):(1,3)"), 12), "not a multiple");
  expect_error(complement(L("(2,2):(1,-2)"), 12), "negative stride");
  expect_error(complement(L("4:1"), 0), "cotarget");
}

TEST(Layout, Inverses) {
  EXPECT_EQ(to_string(right_inverse(L("(4,8):(8,1)"))), "(8,4):(4,1)");
  EXPECT_EQ(to_string(right_inverse(L("4:2"))), "1:0");
  EXPECT_EQ(to_string(right_inverse(L("(2,2):(1,1)"))), "2:1");
  EXPECT_EQ(to_string(right_inverse(L("(4,2,3):(1,2,4)"))), "4:1");
  EXPECT_EQ(to_string(right_inverse(L("(2,3):(3,1)"))), "(3,2):(2,1)");

  EXPECT_LAYOUT(left_inverse(L("(4,8):(8,1)")), "(8,4):(4,1)");
  EXPECT_LAYOUT(left_inverse(L("4:2")), "(2,4):(0,1)");
  EXPECT_LAYOUT(left_inverse(L("(2,2):(1,3)")), "(3,2):(1,2)");
  EXPECT_LAYOUT(left_inverse(L("(1,1):(3,5)")), "1:0");
  expect_error(left_inverse(L("(2,2):(0,1)")), "stride 0");
  expect_error(left_inverse(L("(2,2):(1,1)")), "not injective");
  expect_error(left_inverse(L("(2,3):(3,2)")), "interleaves");
  expect_error(left_inverse(L("(2,2):(2,5)")), "divisibility");
  expect_error(left_inverse(L("(2,2):(1,-2)")), "negative stride");
}

TEST(Layout, DivideExamples) {
  EXPECT_LAYOUT(logical_divide(L("(4,2,3):(2,1,8)"), L("4:2")), "((2,2),(2,3)):((4,1),(2,8))");
  // CuTe's 2-D example: A = (9,(4,8)):(59,(13,1)), tiler <3:3, (2,4):(1,8)>.
  const Layout a = L("(9,(4,8)):(59,(13,1))");
  const Tiler tiler{L("3:3"), L("(2,4):(1,8)")};
  Result<Layout> ld = logical_divide(a, tiler);
  ASSERT_TRUE(ld.ok()) << ld.error().message;
  EXPECT_EQ(to_string(ld->mode(0).shape()), "(3,3)");
  EXPECT_EQ(product(ld->mode(1).mode(0).shape()), 8);
  EXPECT_EQ(product(ld->mode(1).mode(1).shape()), 4);
  Result<Layout> zd = zipped_divide(a, tiler);
  ASSERT_TRUE(zd.ok()) << zd.error().message;
  EXPECT_EQ(to_string(composition(a, tiler).value()), "(3,(2,4)):(177,(13,2))");
  EXPECT_EQ(zd->mode(0), composition(a, tiler).value());
  EXPECT_EQ(zd->mode(1).size(), 12);
  Result<Layout> td = tiled_divide(a, tiler);
  ASSERT_TRUE(td.ok()) << td.error().message;
  EXPECT_EQ(td->rank(), 3);
  EXPECT_EQ(td->mode(0), zd->mode(0));
  EXPECT_EQ(td->mode(1), zd->mode(1).mode(0));
  EXPECT_EQ(td->mode(2), zd->mode(1).mode(1));
  // Untiled modes pass through to the rest.
  EXPECT_LAYOUT(zipped_divide(L("(8,4,2):(1,8,32)"), Tiler{L("4:1")}),
                "((4),(2,4,2)):((1),(4,8,32))");
  EXPECT_LAYOUT(tiled_divide(L("(8,4,2):(1,8,32)"), Tiler{L("4:1")}), "((4),2,4,2):((1),4,8,32)");
}

TEST(Layout, DivideErrors) {
  expect_error(logical_divide(L("8:1"), L("(2,2):(1,1)")), "logical_divide of 8:1 by (2,2):(1,1)");
  expect_error(logical_divide(L("8:1"), Tiler{L("2:1"), L("2:1")}), "rank 1");
  expect_error(zipped_divide(L("(4,4):(4,1)"), Tiler{L("(2,2):(1,1)")}), "zipped_divide");
  expect_error(tiled_divide(L("(4,4):(4,1)"), Tiler{}), "empty");
}

TEST(Layout, ProductExamples) {
  EXPECT_LAYOUT(logical_product(L("(2,2):(4,1)"), L("6:1")), "((2,2),(2,3)):((4,1),(2,8))");
  EXPECT_LAYOUT(blocked_product(L("(2,5):(5,1)"), L("(3,4):(1,3)")),
                "((2,3),(5,4)):((5,10),(1,30))");
  EXPECT_LAYOUT(raked_product(L("(2,5):(5,1)"), L("(3,4):(1,3)")), "((3,2),(4,5)):((10,5),(30,1))");
  // Ranks differ: the lower-rank operand is padded with 1:0 modes.
  EXPECT_LAYOUT(blocked_product(L("4:1"), L("(2,3):(1,2)")), "((4,2),(1,3)):((1,4),(0,8))");
  expect_error(logical_product(L("(2,2):(1,1)"), L("2:1")), "not injective");
  expect_error(blocked_product(L("(2,2):(1,1)"), L("2:1")), "blocked_product");
  expect_error(raked_product(L("(2,2):(1,1)"), L("2:1")), "raked_product");
}

TEST(Layout, BadResultAccessThrows) {
  const Result<Layout> failed = complement(L("(2,2):(1,1)"), 8);
  EXPECT_THROW((void)failed.value(), BadResultAccess);
  EXPECT_TRUE(Result<Layout>(Layout()).error().message.empty());
}

}  // namespace
}  // namespace nautilus::layout
