// Hierarchical integer tuples (CuTe's IntTuple): the shapes, strides and coordinates of layouts.
//
// An IntTuple is either an integer (a *leaf*) or a tuple of IntTuples, written in CuTe notation:
// `8`, `(4,8)`, `(2,(3,4))`. It is a plain value type (copyable, comparable). Terms used
// throughout core/layout:
//   rank   number of top-level modes; a leaf has rank 1.        rank((2,(3,4))) = 2
//   depth  nesting depth; a leaf has depth 0.                   depth((2,(3,4))) = 2
//   size   product of all leaves (1 for the empty tuple `()`).  size((2,(3,4))) = 24
//   mode   the i-th top-level element; a leaf's only mode is itself.
//   congruent(a, b)         same tree: both leaves, or tuples of equal rank whose modes are
//                           congruent. A shape and its stride are always congruent.
//   weakly_congruent(a, b)  a is a coarsening of b: where a has a leaf, b may hold any subtree;
//                           elsewhere the trees match. Coordinates need only be weakly
//                           congruent to their shape (a leaf stands for a 1-D index into a
//                           whole mode), so a 1-D index is a coordinate of every shape.
// Coordinates are *colexicographic*, as in CuTe: the leftmost mode varies fastest, so inside
// shape (4,8) the index 9 is the coordinate (1,2) (9 = 1 + 4*2).
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace nautilus::layout {

class IntTuple {
 public:
  IntTuple() : IntTuple(0) {}
  // Any integer converts implicitly to a leaf, so `Layout(IntTuple shape, ...)` accepts `8`.
  template <std::integral I>
  IntTuple(I value) : value_(static_cast<int64_t>(value)) {}  // NOLINT
  static IntTuple tuple(std::vector<IntTuple> elements) {
    IntTuple t;
    t.elements_ = std::make_shared<const std::vector<IntTuple>>(std::move(elements));
    return t;
  }

  bool is_leaf() const { return !elements_; }
  bool is_tuple() const { return static_cast<bool>(elements_); }
  int64_t value() const { return value_; }  // leaves only; 0 for a tuple
  // The top-level elements of a tuple; empty for a leaf.
  const std::vector<IntTuple>& elements() const { return elements_ ? *elements_ : no_elements(); }

  int rank() const { return elements_ ? static_cast<int>(elements_->size()) : 1; }
  // Mode i (0 <= i < rank()); mode(0) of a leaf is the leaf itself.
  const IntTuple& mode(int i) const {
    return elements_ ? (*elements_)[static_cast<size_t>(i)] : *this;
  }

  bool operator==(const IntTuple& other) const {
    if (is_leaf() || other.is_leaf()) return is_leaf() == other.is_leaf() && value_ == other.value_;
    return elements_ == other.elements_ || *elements_ == *other.elements_;
  }

 private:
  static const std::vector<IntTuple>& no_elements();

  int64_t value_ = 0;
  // A tuple's elements, shared between copies: IntTuples are immutable, so copying one (and so
  // a Layout) costs a reference count, which layout search does constantly. Null for a leaf.
  std::shared_ptr<const std::vector<IntTuple>> elements_;
};

// A tuple of the given elements: tuple_of(2, tuple_of(3, 4)) is (2,(3,4)).
template <class... Elements>
IntTuple tuple_of(Elements&&... elements) {
  return IntTuple::tuple({IntTuple(std::forward<Elements>(elements))...});
}

int depth(const IntTuple& t);
int64_t product(const IntTuple& t);
// The leaves in order (left to right, depth first): leaves((2,(3,4))) = [2, 3, 4].
std::vector<int64_t> leaves(const IntTuple& t);
// The leaves as a depth-1 tuple (a leaf stays a leaf): flatten((2,(3,4))) = (2,3,4).
IntTuple flatten(const IntTuple& t);
// `values` placed into the tree of `profile` (leaves in flatten order):
// unflatten([5,6,7], (2,(3,4))) = (5,(6,7)). Requires values.size() == leaves(profile).size().
IntTuple unflatten(const std::vector<int64_t>& values, const IntTuple& profile);

bool congruent(const IntTuple& a, const IntTuple& b);
bool weakly_congruent(const IntTuple& a, const IntTuple& b);

// Natural coordinate of a 1-D index >= 0 inside `shape` (colexicographic), congruent to `shape`:
// coordinate_of(9, (4,(2,4))) = (1,(0,1)). The last mode absorbs indices beyond size(shape),
// which is what makes a layout's 1-D function extend past its domain (CuTe's convention).
IntTuple coordinate_of(int64_t index, const IntTuple& shape);
// The 1-D index of a coordinate weakly congruent to `shape` (the compact column-major order);
// the inverse of coordinate_of on [0, size(shape)). A leaf coordinate at a tuple mode is itself
// a 1-D index into that mode. Requires weakly_congruent(coordinate, shape).
int64_t index_of(const IntTuple& coordinate, const IntTuple& shape);

// CuTe notation: 8, (4,8), (2,(3,4)), () for the empty tuple.
std::string to_string(const IntTuple& t);

}  // namespace nautilus::layout
