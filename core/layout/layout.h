// CuTe-style layouts and their algebra.
//
// A Layout is a pair Shape:Stride of congruent IntTuples (int_tuple.h) and denotes a function
// from coordinates to integer offsets. Written in CuTe notation, `(4,8):(1,4)` is a 4x8
// column-major matrix and `(4,8):(8,1)` a row-major one.
//
// General notes on the semantics (they are CuTe's, so CuTe's documentation applies; the few
// places that deliberately differ say so at the operation):
//  * Evaluation. A natural coordinate c (congruent to the shape) maps to the inner product
//    A(c) = sum_k c_k * d_k over the leaves. A 1-D index i first becomes the natural coordinate
//    coordinate_of(i, shape) -- colexicographic, leftmost mode fastest -- so (4,8):(8,1) maps
//    index 5 to coordinate (1,1) and offset 9. Any coordinate weakly congruent to the shape
//    works: a leaf where the shape has a tuple is a 1-D index into that mode.
//  * Domain. The domain is [0, size(A)). Past it the last mode keeps counting (coordinate_of),
//    so A(i) is defined for every i >= 0. composition() extends its left operand this way, after
//    coalescing it, when the right operand's image reaches past size(A).
//  * size(A) = product of the shape; cosize(A) = 1 + the largest offset, i.e.
//    1 + sum (s_k - 1) * max(d_k, 0); rank and depth are those of the shape.
//  * Layouts are always valid: every shape leaf is >= 1 and the stride is congruent to the
//    shape. The constructor rejects anything else by throwing InvalidLayout (a programming
//    error); make_layout() and parse_layout() (printer.h) report it as a Result instead.
//  * Strides may be zero (broadcast) or negative. complement, left_inverse and the right
//    operand of composition reject negative strides with a reason; right_inverse skips them.
//  * Operations that can fail return Result<Layout> (result.h) with the reason; none asserts.
//
// Every operation below states its contract as CuTe does (@post) with a worked example in the
// printer's notation; the property tests in tests/layout check each @post over every
// coordinate of an enumerated family of small layouts.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/layout/int_tuple.h"
#include "core/layout/result.h"

namespace nautilus::layout {

class InvalidLayout : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

class Layout {
 public:
  // The trivial layout 1:0 (one element at offset 0).
  Layout() : shape_(1), stride_(0) {}
  // Throws InvalidLayout unless congruent(shape, stride) and every shape leaf is >= 1.
  Layout(IntTuple shape, IntTuple stride);

  const IntTuple& shape() const { return shape_; }
  const IntTuple& stride() const { return stride_; }
  int rank() const { return shape_.rank(); }
  int depth() const { return layout::depth(shape_); }
  int64_t size() const { return size_; }
  int64_t cosize() const;

  // layout<i>(A): the sublayout of mode i. Throws std::out_of_range unless 0 <= i < rank().
  Layout mode(int i) const;

  // A(i) for a 1-D index i >= 0 (see "Domain" above).
  // @post (4,8):(8,1)(5) == 9
  int64_t operator()(int64_t index) const;
  // mode(i)(index) without building the sublayout (evaluation loops call it per element).
  // @post ((4,8),2):((8,1),32).mode_offset(0, 5) == 9
  int64_t mode_offset(int i, int64_t index) const;
  // mode(i).size(), likewise.
  int64_t mode_size(int i) const { return product(shape_.mode(i)); }
  // A(c) for a coordinate c weakly congruent to the shape; an error when it is not.
  // @post (4,(2,4)):(1,(16,4))((3,(1,2))) == 3 + 16 + 8 == 27;  with c = (3,5): the same
  Result<int64_t> evaluate(const IntTuple& coordinate) const;

  bool operator==(const Layout& other) const {
    return shape_ == other.shape_ && stride_ == other.stride_;
  }

 private:
  IntTuple shape_;
  IntTuple stride_;
  int64_t size_ = 1;  // product(shape_), cached: evaluation loops ask for it constantly
};

// A Tiler <B0, B1, ...> applies layout Bi to mode i of the left operand (CuTe's by-mode
// composition, divide); modes of the left operand beyond the tiler's rank are left as they are.
using Tiler = std::vector<Layout>;

// ---- Construction ----------------------------------------------------------------------

// Shape:Stride, checked (congruent, shape leaves >= 1).
Result<Layout> make_layout(IntTuple shape, IntTuple stride);
// The compact column-major ("left") layout: strides are the exclusive prefix products of the
// shape's leaves in order.  make_layout_left((4,(2,3))) == (4,(2,3)):(1,(4,8))
Layout make_layout_left(const IntTuple& shape);
// The compact row-major ("right") layout: strides are the exclusive suffix products of the
// shape's leaves.  make_layout_right((4,(2,3))) == (4,(2,3)):(6,(3,1))
Layout make_layout_right(const IntTuple& shape);
// Concatenation (A, B, ...): a layout whose mode i is layouts[i]; A single layout becomes a
// rank-1 tuple (A), an empty list the empty layout ():() of size 1.
// @post concatenate({A, B})(a + size(A)*b) == A(a) + B(b)
// concatenate({4:1, (2,3):(8,16)}) == (4,(2,3)):(1,(8,16))
Layout concatenate(const std::vector<Layout>& layouts);

// ---- Simplification --------------------------------------------------------------------

// The simplest layout with the same 1-D function: flattens, drops size-1 modes and merges
// adjacent modes s0:d0, s1:d1 with d1 == s0*d0 into s0*s1:d0. A single remaining mode is a
// leaf layout; no mode at all gives 1:0.
// @post size(result) == size(A), depth(result) <= 1
// @post result(i) == A(i) for 0 <= i < size(A)
// @post no two adjacent modes of result satisfy d1 == s0*d0, and no mode has size 1
// coalesce((2,(1,6)):(1,(6,2))) == 12:1;  coalesce((2,4):(1,3)) == (2,4):(1,3)
Layout coalesce(const Layout& a);
// By-mode coalesce: where `profile` has a leaf, the corresponding sublayout is coalesced;
// where it has a tuple, coalesce recurses mode by mode. Modes of A beyond the profile's rank
// are kept as they are, profile modes beyond A's rank are ignored.
// coalesce((2,(1,6)):(1,(6,2)), (1,1)) == (2,6):(1,2)
Layout coalesce(const Layout& a, const IntTuple& profile);
// Replaces the shape of every stride-0 mode by 1, keeping the tree:
// filter_zeros((4,(2,3)):(1,(0,4))) == (4,(1,3)):(1,(0,4))
Layout filter_zeros(const Layout& a);
// coalesce(filter_zeros(A)): removes stride-0 and size-1 modes, leaving the layout of A's
// image (each offset once when A is injective on its nonzero-stride modes).
// filter((4,(2,3)):(1,(0,8))) == (4,3):(1,8)
Layout filter(const Layout& a);

// ---- Composition -----------------------------------------------------------------------

// R = A o B, the functional composition: B selects (and orders) offsets of A's 1-D domain.
// @post compatible(B, R): size(R) == size(B) and R's shape is B's with each leaf refined
// @post R(c) == A'(B(c)) for every coordinate c of B, where A' = coalesce(A): equal to A on
//       [0, size(A)) and extended past it along its last mode (B's image may reach past)
// Algorithm (CuTe's): coalesce A to modes (t_0:e_0, ..., t_m:e_m), the last one unbounded;
// for each leaf s:d of B (d == 0 gives s:0, s == 1 gives 1:0)
//  1. divide out the stride d from A's shape from the left (the *stride divisibility
//     condition*: at the mode t where the division stops with remaining stride d', d' divides
//     t -- or, beyond CuTe, all s elements fit inside that mode: (s-1)*d' < t), then
//  2. keep the first s elements (the *shape divisibility condition*: every mode that is used
//     whole must divide the remaining count; the last one used may be partial);
//  3. when B has several leaves, A o B is the concatenation of the leaves' results only if
//     adding their offsets never carries across a mode boundary of A: for every bounded mode
//     i, the largest coordinates along i that the leaves reach must sum to at most t_i - 1.
//     CuTe assumes this ("left-distributive when B is injective") without checking; here a
//     violation is an error instead of a wrong layout.
// A failed condition returns its name and the modes involved.
// (6,2):(8,2) o (4,3):(3,1) == ((2,2),3):((24,2),8)
// 20:2 o (5,4):(4,1) == (5,4):(8,2)
// (10,2):(16,4) o (5,4):(1,5) == (5,(2,2)):(16,(80,4))
// (4,2):(1,8) o 2:3 == 2:3 (fits inside mode 4:1);  (4,2):(1,8) o 4:3 -> error (stride
// divisibility: 3 vs mode 4:1);  (4,2):(1,8) o 3:2 -> error (shape divisibility: 3 vs 2)
Result<Layout> composition(const Layout& a, const Layout& b);
// By-mode composition with a tiler: mode i of the result is composition(mode(A, i), B_i).
// (12,(4,8)):(59,(13,1)) o <3:4, 8:2> == (3,(2,4)):(236,(26,1))
Result<Layout> composition(const Layout& a, const Tiler& b);

// ---- Complement and inverses -----------------------------------------------------------

// The layout of the "rest" of A up to the cotarget M: ordered (strides increasing), with an
// image disjoint from A's, such that (A, R) repeats A to cover at least [0, M).
// Stride-0 modes of A are ignored (filter). The others must have positive strides and, sorted
// by stride, each stride must be a multiple of the extent s*d of the mode below it (A is then
// injective and "admissible"); otherwise the reason is returned.
// @post R(i-1) < R(i) for 0 < i < size(R);  R(i) != A(j) for all i > 0, j
// @post size(filter(A))*size(R) >= M; when M is a multiple of E, the largest s*d of filter(A)'s
//       modes, (filter(A), R) is a bijection from [0, M) onto [0, M)
// complement(4:2, 24) == (2,3):(1,8)
// complement((2,2):(1,6), 24) == (3,2):(2,12)
// complement((2,2):(1,1), 8) -> error (not injective)
Result<Layout> complement(const Layout& a, int64_t cotarget);
// complement(A, cosize(A)): fills only the holes of A.
Result<Layout> complement(const Layout& a);

// The largest compact R with A(R(i)) == i for 0 <= i < size(R): the modes of coalesce(A)
// taken in increasing stride order starting at stride 1 while each stride equals the extent
// covered so far. 1:0 when A has no stride-1 mode. Never fails.
// @post A(R(i)) == i for 0 <= i < size(R)
// right_inverse((4,8):(8,1)) == (8,4):(4,1);  right_inverse(4:2) == 1:0
Layout right_inverse(const Layout& a);

// L with L(A(i)) == i for 0 <= i < size(A). Requires positive strides (after coalescing) and,
// sorted by stride, every stride a multiple of the previous one (the "left inverse
// divisibility condition") and at least the previous mode's extent s*d (no interleaving), which
// makes A injective. Offsets outside A's image map to unspecified indices. (CuTe also returns a
// quasi-inverse for non-injective layouts; here that is an error.)
// @post L(A(i)) == i for 0 <= i < size(A)
// left_inverse((4,8):(8,1)) == (8,4):(4,1);  left_inverse(4:2) == (2,4):(0,1)
Result<Layout> left_inverse(const Layout& a);

// ---- Divide (tiling) -------------------------------------------------------------------

// A / B = A o (B, complement(B, size(A))): mode 0 is the tile B of A, mode 1 iterates over
// the tiles.
// @post result(c) == A((B, complement(B, size(A)))(c))
// logical_divide((4,2,3):(2,1,8), 4:2) == ((2,2),(2,3)):((4,1),(2,8))
Result<Layout> logical_divide(const Layout& a, const Layout& b);
// By mode: mode i of the result is logical_divide(mode(A, i), B_i) = (Tile_i, Rest_i).
// Shapes:  A (M,N,L)  tiler <TM,TN>  ->  ((TM,RestM),(TN,RestN),L)
Result<Layout> logical_divide(const Layout& a, const Tiler& b);
// logical_divide by mode, then the tiles gathered in mode 0 and the rests in mode 1:
// ((TM,TN),(RestM,RestN,L)). Mode 0 equals composition(A, tiler).
Result<Layout> zipped_divide(const Layout& a, const Tiler& b);
// As zipped_divide with the rest modes unpacked: ((TM,TN),RestM,RestN,L).
Result<Layout> tiled_divide(const Layout& a, const Tiler& b);

// ---- Product (repetition) --------------------------------------------------------------

// A x B = (A, complement(A, size(A)*cosize(B)) o B): mode 0 is A, mode 1 places a translated
// copy of A at each element of B, in offsets A does not use. Requires A admissible for
// complement and the repetition composable with B.
// @post rank(result) == 2, result.mode(0) == A, size(result) == size(A)*size(B)
// @post result(a + size(A)*b) == A(a) + result(size(A)*b)
// @post when A and B are injective, result is injective
// logical_product((2,2):(4,1), 6:1) == ((2,2),(2,3)):((4,1),(2,8))
Result<Layout> logical_product(const Layout& a, const Layout& b);
// Rank-sensitive products: A and B are padded with 1:0 modes to the same rank R, then mode i
// of the result joins mode i of A with mode i of the repetition complement(A, ...) o B.
// blocked_product: mode i = (A_i, Rep_i) -- A is a contiguous block repeated across B.
// blocked_product((2,5):(5,1), (3,4):(1,3)) == ((2,3),(5,4)):((5,10),(1,30))
Result<Layout> blocked_product(const Layout& a, const Layout& b);
// raked_product: mode i = (Rep_i, A_i) -- copies of A interleave ("cyclic distribution").
// raked_product((2,5):(5,1), (3,4):(1,3)) == ((3,2),(4,5)):((10,5),(30,1))
Result<Layout> raked_product(const Layout& a, const Layout& b);

}  // namespace nautilus::layout
