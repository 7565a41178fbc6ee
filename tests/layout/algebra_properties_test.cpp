// The defining properties of every layout operation, checked over whole small domains: every
// layout (or pair of layouts) of the enumerated family in family.h, every coordinate. Where an
// operation may fail, the tests also pin down *when* it must succeed, so a failure-happy
// implementation cannot pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "core/layout/layout.h"
#include "core/layout/printer.h"
#include "tests/layout/family.h"

namespace nautilus::layout {
namespace {

using testing::image;
using testing::image_set;
using testing::is_injective;
using testing::small_layouts;
using testing::small_rank2_layouts;
using testing::small_tilers;

// A is one arithmetic progression: coalesce(A) has a single mode.
bool is_linear(const Layout& a) { return coalesce(a).shape().is_leaf(); }

// True for the compact layouts of the family: A is a bijection onto [0, size(A)).
bool is_compact(const Layout& a) {
  const std::set<int64_t> offsets = image_set(a);
  return is_injective(a) && *offsets.rbegin() == a.size() - 1 && *offsets.begin() == 0;
}

// Sorted by stride, every nonzero-stride mode of filter(A) starts at a multiple of the extent
// below it: the layouts complement() must accept (checked here by brute force on the image).
bool is_admissible(const Layout& a) {
  // The image of an admissible injective layout is a union of its filtered modes' progressions
  // with strides that divide each other; test by reconstructing from the image: the sorted
  // filtered modes must satisfy d_{k+1} % (s_k d_k) == 0.
  const Layout f = filter(a);
  if (!is_injective(f)) return false;
  std::vector<std::pair<int64_t, int64_t>> modes;  // (stride, shape)
  const std::vector<int64_t> s = leaves(f.shape()), d = leaves(f.stride());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] > 1) modes.emplace_back(d[i], s[i]);
  }
  std::sort(modes.begin(), modes.end());
  int64_t covered = 1;
  for (const auto& [stride, shape] : modes) {
    if (stride % covered != 0) return false;
    covered = stride * shape;
  }
  return true;
}

// Per-member facts, computed once: the pair tests consult them ~800k times.
struct Facts {
  bool injective, compact, linear, admissible;
  Layout extended;  // coalesce(A): A past its domain, as composition defines it
};

const std::vector<Facts>& facts() {
  static const std::vector<Facts> all = [] {
    std::vector<Facts> out;
    for (const Layout& a : small_layouts()) {
      out.push_back({is_injective(a), is_compact(a), is_linear(a), is_admissible(a), coalesce(a)});
    }
    return out;
  }();
  return all;
}

TEST(AlgebraProperties, FamilyIsLargeAndVaried) {
  const auto& family = small_layouts();
  EXPECT_GT(family.size(), 700u);
  int nested = 0, broadcast = 0, holed = 0;
  for (const Layout& a : family) {
    nested += a.depth() > 1;
    broadcast += !is_injective(a);
    holed += is_injective(a) && !is_compact(a);
  }
  EXPECT_GT(nested, 40);
  EXPECT_GT(broadcast, 100);
  EXPECT_GT(holed, 100);
}

// Natural, hierarchical and 1-D coordinates name the same offsets.
TEST(AlgebraProperties, EvaluationAgreesOnAllCoordinateForms) {
  for (const Layout& a : small_layouts()) {
    for (int64_t i = 0; i < a.size(); ++i) {
      const IntTuple natural = coordinate_of(i, a.shape());
      ASSERT_EQ(a.evaluate(natural).value(), a(i)) << to_string(a);
      ASSERT_EQ(a.evaluate(i).value(), a(i)) << to_string(a);
      // By-mode 1-D coordinates: one index per top-level mode.
      if (a.shape().is_tuple()) {
        std::vector<IntTuple> per_mode;
        for (int k = 0; k < a.rank(); ++k)
          per_mode.emplace_back(index_of(natural.mode(k), a.shape().mode(k)));
        ASSERT_EQ(a.evaluate(IntTuple::tuple(per_mode)).value(), a(i)) << to_string(a);
      }
    }
    const std::vector<int64_t> offsets = image(a);
    for (int64_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(a(i), offsets[static_cast<size_t>(i)]) << to_string(a);
    ASSERT_EQ(a.cosize(), *std::max_element(offsets.begin(), offsets.end()) + 1) << to_string(a);
  }
}

TEST(AlgebraProperties, CompactLayoutsAndConcatenation) {
  for (const Layout& a : small_layouts()) {
    const Layout left = make_layout_left(a.shape());
    const Layout right = make_layout_right(a.shape());
    const std::vector<int64_t> extents = leaves(a.shape());
    for (int64_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(left(i), i) << to_string(left);
      // Row-major: the last leaf varies fastest.
      const std::vector<int64_t> c = leaves(coordinate_of(i, a.shape()));
      int64_t row_major = 0;
      for (size_t k = 0; k < c.size(); ++k) row_major = row_major * extents[k] + c[k];
      ASSERT_EQ(right(i), row_major) << to_string(right);
    }
    const Layout pair = concatenate({a, right});
    for (int64_t i = 0; i < pair.size(); ++i) {
      ASSERT_EQ(pair(i), a(i % a.size()) + right(i / a.size())) << to_string(pair);
    }
  }
}

TEST(AlgebraProperties, CoalesceKeepsTheFunctionAndIsMinimal) {
  for (const Layout& a : small_layouts()) {
    const Layout c = coalesce(a);
    ASSERT_EQ(c.size(), a.size());
    ASSERT_LE(c.depth(), 1);
    for (int64_t i = 0; i < a.size(); ++i)
      ASSERT_EQ(c(i), a(i)) << to_string(a) << " -> " << to_string(c);
    const std::vector<int64_t> s = leaves(c.shape()), d = leaves(c.stride());
    if (s.size() == 1 && s[0] == 1) {
      EXPECT_EQ(to_string(c), "1:0");
      continue;
    }
    for (size_t k = 0; k < s.size(); ++k) {
      ASSERT_GT(s[k], 1) << to_string(c);
      if (k > 0) {
        ASSERT_NE(d[k], s[k - 1] * d[k - 1]) << to_string(a) << " -> " << to_string(c);
      }
    }
    // By-mode: the rank stays and every mode keeps its function.
    const Layout by_mode = coalesce(a, tuple_of(1, 1, 1));
    ASSERT_EQ(by_mode.rank(), a.shape().is_leaf() ? 1 : a.rank()) << to_string(a);
    for (int k = 0; k < a.rank() && a.shape().is_tuple(); ++k) {
      ASSERT_EQ(by_mode.mode(k), coalesce(a.mode(k))) << to_string(a);
    }
  }
}

TEST(AlgebraProperties, FilterKeepsTheImage) {
  for (const Layout& a : small_layouts()) {
    const Layout f = filter(a);
    ASSERT_EQ(image_set(f), image_set(a)) << to_string(a);
    for (int64_t d : leaves(f.stride())) {
      if (f.size() > 1) {
        ASSERT_NE(d, 0) << to_string(f);
      }
    }
    const Layout z = filter_zeros(a);
    ASSERT_TRUE(congruent(z.shape(), a.shape()));
    ASSERT_EQ(image_set(z), image_set(a));
  }
}

TEST(AlgebraProperties, CompositionIsFunctionComposition) {
  int64_t composed = 0, pairs = 0;
  const auto& family = small_layouts();
  for (size_t ia = 0; ia < family.size(); ++ia) {
    const Layout& a = family[ia];
    const Layout& extended = facts()[ia].extended;
    const bool a_linear = facts()[ia].linear;
    for (const Layout& b : family) {
      ++pairs;
      const Result<Layout> r = composition(a, b);
      if (!r.ok()) {
        // A linear left operand (one progression, unbounded) composes with every right operand.
        ASSERT_FALSE(a_linear) << to_string(a) << " o " << to_string(b) << ": "
                               << r.error().message;
        continue;
      }
      ++composed;
      // Compatible: B's coordinates are coordinates of R (B's shape is coarser).
      ASSERT_EQ(r->size(), b.size()) << to_string(a) << " o " << to_string(b);
      ASSERT_TRUE(weakly_congruent(b.shape(), r->shape()))
          << to_string(a) << " o " << to_string(b) << " = " << to_string(*r);
      const std::vector<int64_t> r_image = image(*r), b_image = image(b);
      for (size_t i = 0; i < r_image.size(); ++i) {
        ASSERT_EQ(r_image[i], extended(b_image[i]))
            << to_string(a) << " o " << to_string(b) << " = " << to_string(*r) << " at " << i;
      }
    }
  }
  // Most pairs compose; the rest fail one of the stated conditions.
  EXPECT_GT(composed * 2, pairs) << composed << " of " << pairs;
}

// Composing with the compact layout of A's own shape is the identity: every leaf of the right
// operand steps over whole leaves of A, so the divisibility conditions always hold.
TEST(AlgebraProperties, CompositionWithTheIdentityOfAsShape) {
  for (const Layout& a : small_layouts()) {
    const Result<Layout> r = composition(a, make_layout_left(a.shape()));
    ASSERT_TRUE(r.ok()) << to_string(a) << ": " << r.error().message;
    for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ((*r)(i), a(i)) << to_string(a);
  }
}

TEST(AlgebraProperties, ComplementFillsTheCodomain) {
  int64_t checked_exact = 0;
  for (const Layout& a : small_layouts()) {
    const Layout f = filter(a);
    // The span of filter(A)'s modes: the largest s*d (1 when A has a single element).
    int64_t extent = 1;
    const std::vector<int64_t> fs = leaves(f.shape()), fd = leaves(f.stride());
    for (size_t k = 0; k < fs.size(); ++k) extent = std::max(extent, fs[k] * fd[k]);
    for (int64_t cotarget : {a.cosize(), int64_t{16}, int64_t{24}, int64_t{32}, 2 * extent}) {
      const Result<Layout> r = complement(a, cotarget);
      if (!r.ok()) {
        ASSERT_FALSE(is_admissible(a))
            << to_string(a) << " in " << cotarget << ": " << r.error().message;
        continue;
      }
      ASSERT_TRUE(is_admissible(a)) << to_string(a) << " complement " << to_string(*r);
      // Ordered, disjoint from A except at 0, and together with A covering at least [0, M).
      for (int64_t i = 1; i < r->size(); ++i) ASSERT_LT((*r)(i - 1), (*r)(i)) << to_string(*r);
      const std::set<int64_t> a_image = image_set(a);
      for (int64_t i = 1; i < r->size(); ++i) ASSERT_FALSE(a_image.count((*r)(i))) << to_string(*r);
      ASSERT_GE(f.size() * r->size(), cotarget);
      const Layout both = concatenate({f, *r});
      ASSERT_TRUE(is_injective(both)) << to_string(both);
      if (cotarget % extent == 0) {
        // A and its complement tile [0, M) exactly once.
        ASSERT_EQ(both.size(), cotarget) << to_string(both);
        ASSERT_EQ(both.cosize(), cotarget) << to_string(both);
        ++checked_exact;
      }
    }
  }
  EXPECT_GT(checked_exact, 500);
}

TEST(AlgebraProperties, RightInverse) {
  for (const Layout& a : small_layouts()) {
    const Layout r = right_inverse(a);
    for (int64_t i = 0; i < r.size(); ++i)
      ASSERT_EQ(a(r(i)), i) << to_string(a) << " " << to_string(r);
    if (is_compact(a)) {
      ASSERT_EQ(r.size(), a.size()) << to_string(a);  // a full inverse
    }
    if (a.size() > 1 && !image_set(a).count(1)) {
      ASSERT_EQ(r.size(), 1) << to_string(a);  // offset 1 is never reached
    }
  }
}

TEST(AlgebraProperties, LeftInverse) {
  for (const Layout& a : small_layouts()) {
    const Result<Layout> l = left_inverse(a);
    if (!is_injective(a)) {
      ASSERT_FALSE(l.ok()) << to_string(a);
      continue;
    }
    // Every injective member of the family has dividing sorted strides.
    ASSERT_TRUE(l.ok()) << to_string(a) << ": " << l.error().message;
    for (int64_t i = 0; i < a.size(); ++i)
      ASSERT_EQ((*l)(a(i)), i) << to_string(a) << " " << to_string(*l);
    if (is_compact(a)) {
      // Then L is also the right inverse.
      for (int64_t i = 0; i < a.size(); ++i) ASSERT_EQ(a((*l)(i)), i);
    }
  }
}

TEST(AlgebraProperties, LogicalDivideIsCompositionWithTileAndRest) {
  int64_t divided = 0;
  const auto& family = small_layouts();
  for (size_t ia = 0; ia < family.size(); ++ia) {
    const Layout& a = family[ia];
    const Layout& extended = facts()[ia].extended;
    for (size_t ib = 0; ib < family.size(); ++ib) {
      const Layout& b = family[ib];
      const Result<Layout> r = logical_divide(a, b);
      const Result<Layout> rest = complement(b, a.size());
      if (!rest.ok()) {
        ASSERT_FALSE(r.ok());
        continue;
      }
      const Layout tiler = concatenate({b, *rest});
      if (!r.ok()) {
        ASSERT_FALSE(composition(a, tiler).ok()) << r.error().message;
        continue;
      }
      ++divided;
      ASSERT_EQ(r->rank(), 2);
      ASSERT_EQ(r->size(), tiler.size());
      const std::vector<int64_t> r_image = image(*r), tiler_image = image(tiler);
      for (size_t i = 0; i < r_image.size(); ++i) {
        ASSERT_EQ(r_image[i], extended(tiler_image[i])) << to_string(a) << " / " << to_string(b);
      }
      // Mode 0 is the tile A o B: the first size(B) offsets.
      ASSERT_EQ(r->mode(0).size(), b.size());
      // An injective tile of an injective A whose size it divides: the tiles partition A.
      if (facts()[ia].injective && facts()[ib].compact && a.size() % b.size() == 0) {
        ASSERT_EQ(r->size(), a.size());
        ASSERT_EQ(image_set(*r), image_set(a)) << to_string(a) << " / " << to_string(b);
      }
    }
  }
  EXPECT_GT(divided, 100000);
}

TEST(AlgebraProperties, ZippedAndTiledDivideRearrangeLogicalDivide) {
  for (const Layout& a : small_rank2_layouts()) {
    for (const Layout& b0 : small_tilers()) {
      for (const Layout& b1 : {Layout(2, 1), Layout(1, 0)}) {
        const Tiler tiler{b0, b1};
        const Result<Layout> ld = logical_divide(a, tiler);
        const Result<Layout> zd = zipped_divide(a, tiler);
        const Result<Layout> td = tiled_divide(a, tiler);
        ASSERT_EQ(ld.ok(), zd.ok());
        ASSERT_EQ(ld.ok(), td.ok());
        if (!ld.ok()) continue;
        ASSERT_EQ(zd->mode(0), composition(a, tiler).value());
        ASSERT_EQ(td->rank(), 3);
        // The same offsets under the rearranged coordinates, written as 1-D indices:
        // logical ((t0,r0),(t1,r1)), zipped ((t0,t1),(r0,r1)), tiled ((t0,t1),r0,r1).
        const int64_t n_t0 = ld->mode(0).mode(0).size(), n_r0 = ld->mode(0).mode(1).size();
        const int64_t n_t1 = ld->mode(1).mode(0).size(), n_r1 = ld->mode(1).mode(1).size();
        for (int64_t t0 = 0; t0 < n_t0; ++t0) {
          for (int64_t r0 = 0; r0 < n_r0; ++r0) {
            for (int64_t t1 = 0; t1 < n_t1; ++t1) {
              for (int64_t r1 = 0; r1 < n_r1; ++r1) {
                const int64_t expected = (*ld)(t0 + n_t0 * r0 + n_t0 * n_r0 * (t1 + n_t1 * r1));
                const int64_t rearranged = t0 + n_t0 * t1 + n_t0 * n_t1 * (r0 + n_r0 * r1);
                ASSERT_EQ((*zd)(rearranged), expected) << to_string(a) << " / " << to_string(b0);
                ASSERT_EQ((*td)(rearranged), expected) << to_string(a) << " / " << to_string(b0);
              }
            }
          }
        }
      }
    }
  }
}

TEST(AlgebraProperties, LogicalProduct) {
  int64_t products = 0;
  const auto& family = small_layouts();
  for (size_t ia = 0; ia < family.size(); ++ia) {
    const Layout& a = family[ia];
    for (size_t ib = 0; ib < family.size(); ++ib) {
      const Layout& b = family[ib];
      const Result<Layout> r = logical_product(a, b);
      if (!r.ok()) {
        // Repetitions of a compact A form one linear mode, which composes with any B.
        ASSERT_FALSE(facts()[ia].compact)
            << to_string(a) << " x " << to_string(b) << ": " << r.error().message;
        continue;
      }
      ++products;
      ASSERT_EQ(r->rank(), 2);
      ASSERT_EQ(r->mode(0), a);
      ASSERT_EQ(r->size(), a.size() * b.size());
      // Each copy of A is A translated; copies at distinct elements of an injective B are
      // disjoint, so the product of injective layouts is injective.
      std::vector<int64_t> offsets = image(*r);
      const size_t a_size = static_cast<size_t>(a.size());
      for (size_t copy = 0; copy < offsets.size(); copy += a_size) {
        for (size_t i = 0; i < a_size; ++i) {
          ASSERT_EQ(offsets[copy + i], offsets[i] + offsets[copy]) << to_string(*r);
        }
      }
      if (facts()[ia].injective && facts()[ib].injective) {
        std::sort(offsets.begin(), offsets.end());
        ASSERT_TRUE(std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end())
            << to_string(a) << " x " << to_string(b) << " = " << to_string(*r);
      }
      if (facts()[ia].compact && facts()[ib].compact) {
        ASSERT_EQ(r->cosize(), r->size()) << to_string(*r);  // compact repetition of a compact tile
      }
    }
  }
  EXPECT_GT(products, 100000);
}

TEST(AlgebraProperties, BlockedAndRakedProducts) {
  for (const Layout& a : small_rank2_layouts()) {
    if (!is_injective(a)) continue;
    for (const Layout& b : small_rank2_layouts()) {
      if (!is_compact(b)) continue;
      const Result<Layout> blocked = blocked_product(a, b);
      const Result<Layout> raked = raked_product(a, b);
      ASSERT_EQ(blocked.ok(), logical_product(a, b).ok());
      ASSERT_EQ(raked.ok(), blocked.ok());
      if (!blocked.ok()) continue;
      const int64_t a0 = a.mode(0).size(), a1 = a.mode(1).size();
      const int64_t b0 = b.mode(0).size(), b1 = b.mode(1).size();
      ASSERT_EQ(blocked->mode(0).size(), a0 * b0);
      ASSERT_EQ(blocked->mode(1).size(), a1 * b1);
      ASSERT_TRUE(is_injective(*blocked));
      ASSERT_TRUE(is_injective(*raked));
      // Blocked: element (i, j) of block (p, q) sits at row i + a0*p, column j + a1*q; raked: at
      // row p + b0*i, column q + b1*j. Either way it is A(i, j) plus the block's origin.
      // (2-D coordinates as 1-D indices: (row, col) -> row + rows*col.)
      const int64_t rows = a0 * b0;
      for (int64_t p = 0; p < b0; ++p) {
        for (int64_t q = 0; q < b1; ++q) {
          const int64_t blocked_origin = (*blocked)(a0 * p + rows * a1 * q);
          ASSERT_EQ((*raked)(p + rows * q), blocked_origin);
          for (int64_t i = 0; i < a0; ++i) {
            for (int64_t j = 0; j < a1; ++j) {
              const int64_t in_a = a(i + a0 * j);
              ASSERT_EQ((*blocked)(i + a0 * p + rows * (j + a1 * q)), in_a + blocked_origin)
                  << to_string(a) << " blocked " << to_string(b);
              ASSERT_EQ((*raked)(p + b0 * i + rows * (q + b1 * j)), in_a + blocked_origin)
                  << to_string(a) << " raked " << to_string(b);
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace nautilus::layout
