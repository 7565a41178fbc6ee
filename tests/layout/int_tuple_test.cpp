// IntTuple: structure queries, flattening, congruence and colexicographic coordinates.
#include "core/layout/int_tuple.h"

#include <gtest/gtest.h>

#include "core/layout/printer.h"
#include "tests/layout/family.h"

namespace nautilus::layout {
namespace {

IntTuple T(const char* text) { return parse_int_tuple(text).value(); }

TEST(IntTuple, LeafAndTupleQueries) {
  const IntTuple leaf = 8;
  EXPECT_TRUE(leaf.is_leaf());
  EXPECT_EQ(leaf.rank(), 1);
  EXPECT_EQ(depth(leaf), 0);
  EXPECT_EQ(product(leaf), 8);
  EXPECT_EQ(leaf.mode(0), leaf);

  const IntTuple nested = tuple_of(2, tuple_of(3, 4));
  EXPECT_TRUE(nested.is_tuple());
  EXPECT_EQ(nested.rank(), 2);
  EXPECT_EQ(depth(nested), 2);
  EXPECT_EQ(product(nested), 24);
  EXPECT_EQ(nested.mode(1), tuple_of(3, 4));
  EXPECT_EQ(to_string(nested), "(2,(3,4))");

  const IntTuple empty = IntTuple::tuple({});
  EXPECT_EQ(empty.rank(), 0);
  EXPECT_EQ(depth(empty), 1);
  EXPECT_EQ(product(empty), 1);
  EXPECT_EQ(to_string(empty), "()");
}

TEST(IntTuple, FlattenLeavesUnflatten) {
  const IntTuple t = T("((2,3),(4,(5,6)),7)");
  EXPECT_EQ(leaves(t), (std::vector<int64_t>{2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(flatten(t), T("(2,3,4,5,6,7)"));
  EXPECT_EQ(flatten(IntTuple(5)), IntTuple(5));
  EXPECT_EQ(unflatten({1, 2, 3, 4, 5, 6}, t), T("((1,2),(3,(4,5)),6)"));
  EXPECT_EQ(unflatten(leaves(t), t), t);
}

TEST(IntTuple, Congruence) {
  EXPECT_TRUE(congruent(T("(2,(3,4))"), T("(1,(2,6))")));
  EXPECT_FALSE(congruent(T("(2,(3,4))"), T("(1,2,6)")));
  EXPECT_FALSE(congruent(T("(2,3)"), T("6")));
  EXPECT_TRUE(congruent(T("5"), T("7")));

  // weakly_congruent(a, b): a may hold a leaf where b has a subtree.
  EXPECT_TRUE(weakly_congruent(T("5"), T("(2,(3,4))")));
  EXPECT_TRUE(weakly_congruent(T("(1,5)"), T("(2,(3,4))")));
  EXPECT_TRUE(weakly_congruent(T("(1,(2,3))"), T("(2,(3,4))")));
  EXPECT_FALSE(weakly_congruent(T("(2,(3,4))"), T("(1,5)")));
  EXPECT_FALSE(weakly_congruent(T("(1,2,3)"), T("(2,(3,4))")));
}

TEST(IntTuple, CoordinatesAreColexicographic) {
  EXPECT_EQ(coordinate_of(9, T("(4,8)")), T("(1,2)"));
  EXPECT_EQ(coordinate_of(9, T("(4,(2,4))")), T("(1,(0,1))"));
  // The last mode absorbs indices past the size.
  EXPECT_EQ(coordinate_of(40, T("(4,8)")), T("(0,10)"));
  EXPECT_EQ(index_of(T("(1,(0,1))"), T("(4,(2,4))")), 9);
  EXPECT_EQ(index_of(T("(1,2)"), T("(4,(2,4))")), 9);  // a leaf indexes a whole mode
  EXPECT_EQ(index_of(T("9"), T("(4,(2,4))")), 9);
}

// Over every shape of the family: coordinate_of and index_of are inverse on [0, size).
TEST(IntTuple, CoordinateRoundTripOverFamily) {
  for (const Layout& l : testing::small_layouts()) {
    const IntTuple& shape = l.shape();
    for (int64_t i = 0; i < product(shape); ++i) {
      const IntTuple c = coordinate_of(i, shape);
      ASSERT_TRUE(congruent(c, shape)) << to_string(shape);
      ASSERT_EQ(index_of(c, shape), i) << to_string(shape) << " " << to_string(c);
      const std::vector<int64_t> coords = leaves(c), extents = leaves(shape);
      for (size_t k = 0; k < coords.size(); ++k) {
        ASSERT_GE(coords[k], 0);
        ASSERT_LT(coords[k], extents[k]);
      }
    }
  }
}

}  // namespace
}  // namespace nautilus::layout
