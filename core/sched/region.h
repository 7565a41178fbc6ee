// Index ranges per iteration of a loop, and loop nests rebuilt to cover them: the analysis that
// compute_at and reverse_compute_at share.
//
// Moving a block under a loop L of another nest means running it, in each iteration of L, only
// over the part of its iteration space that iteration needs (compute_at) or can use
// (reverse_compute_at). These passes read that part off the other block's bindings. A binding
// produced by lowering, split and tile is affine in the enclosing loop variables with
// non-negative coefficients, e.g. `m = m_o * 4 + m_i`. Its range during one iteration of the loops
// down to L is
//
//   [offset + lo, offset + hi)   offset = the terms over loops down to L (fixed in the iteration)
//                                lo, hi = constant + the least and one past the greatest value of
//                                         the terms over loops below L
//
// so with L = m_o and m_i in 0..4, `m_o * 4 + m_i` ranges over [m_o * 4 + 0, m_o * 4 + 4). The
// range is the interval hull of the values the binding takes in the iteration; predicates are not
// consulted, so it may hold a few values more (the overhang of a split that does not divide).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/scalar/affine.h"
#include "core/scalar/ir.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

// The affine form of an index expression (scalar/affine.h), its terms() in order of first
// appearance. Stricter than scalar::affine_of and reading negation too: nullopt when `expr` is
// not affine (floordiv, mod, a product of two variables), is not of index type, or a
// coefficient overflows.
std::optional<scalar::Affine> affine_form(const scalar::Expr& expr);

// `expr` with every maximal index subexpression that is affine with positive coefficients
// rewritten as Σ coefficient · variable + constant, variables in order of first appearance:
// `(m_o * 2 + m_i) * 4 + (j_o * 3 + j_i)` becomes `m_o * 8 + m_i * 4 + j_o * 3 + j_i`. Index
// arithmetic is exact, so values do not change. Split applies it to the bindings and predicates
// it rewrites, so that repeated splits read as one mixed-radix sum.
scalar::Expr simplify_index(const scalar::Expr& expr);

// The values of an index during one iteration of the loops down to some loop L: [offset + lo,
// offset + hi), offset = Σ coefficient · variable over loops down to L, outermost first.
struct IndexRange {
  std::vector<std::pair<const scalar::For*, int64_t>> offset;
  int64_t lo = 0;
  int64_t hi = 0;
  // A loop inside the iteration runs along it, even one of a single step (a tile of one row):
  // a nest rebuilt over the range keeps a loop there, so its tile has the same axes.
  bool looped = false;

  int64_t width() const { return hi - lo; }
  bool operator==(const IndexRange& other) const {
    return offset == other.offset && lo == other.lo && hi == other.hi;
  }
  // The largest value of `offset` over all iterations.
  int64_t max_offset() const;
  // `m_o * 4 + [0, 4)`, for reasons.
  std::string to_string() const;
};

// The range of `binding` (over the loops of `path`) in one iteration of the loops path.stmts[0]
// .. path.stmts[depth]. nullopt, with a reason naming `what`, when the binding is not affine or
// has a negative coefficient or constant.
std::optional<IndexRange> range_in_iteration(const scalar::Expr& binding, const BlockPath& path,
                                             size_t depth, const std::string& what,
                                             std::string* reason);

// Widens `into` to cover `other` as well. False (and `into` unchanged) when their offsets differ,
// since the union of two intervals that move differently is not an interval of this form.
bool merge_ranges(IndexRange* into, const IndexRange& other);

// Intersects a range that does not move (empty offset) with [0, extent).
void clip_range(IndexRange* range, int64_t extent);

// Whether the ranges of distinct iterations are disjoint: the offset's coefficients, smallest
// first, are each at least the width of everything below them (a mixed radix, gaps allowed).
bool iterations_disjoint(const IndexRange& range);

// How a block writes its buffer, when every store in its init and body is
// `X[v_0, ..., v_r-1] = ...` with the same distinct spatial iteration variables (the form
// lowering gives every block): X and, for each dimension, the index of its iteration variable.
struct StoreIndexing {
  scalar::Buffer buffer;
  std::vector<size_t> iter_of_dim;
};
std::optional<StoreIndexing> store_indexing(const scalar::Block& block, std::string* reason);

// The index into block.iter_vars of the iteration variable `index` is; nullopt when `index` is
// anything else (compute_at and reverse_compute_at follow only direct indexing).
std::optional<size_t> iter_var_index(const scalar::Block& block, const scalar::Expr& index);

// The part of each dimension of its tensor (store_indexing) that the block at the end of `path`
// writes in one iteration of the loops down to path.stmts[depth], clipped to the tensor. Every
// element of an iteration's part in the tensor is final at the end of that iteration and
// written by no other iteration. nullopt, with a reason, when a reduction of the block runs
// across those loops (values are final only after them) or parts of different iterations
// overlap (region.h's ranges are hulls).
std::optional<std::vector<IndexRange>> parts_written(const BlockPath& path, size_t depth,
                                                     std::string* reason);

// Whether `reader`, run over `ranges` (one per iteration variable) in one iteration of the
// loops down to path.stmts[depth], reads only elements of `input` that the block at the end of
// `writer_path` (under that loop, and run before `reader` in the iteration) has written in the
// same iteration. "" when it does; otherwise the reason.
std::string uncovered_read(const scalar::Block& reader, const std::vector<IndexRange>& ranges,
                           const scalar::BufferNode* input, const BlockPath& writer_path,
                           size_t depth);

// `block` as a new loop nest that runs iteration variable i over ranges[i] (in the scope of the
// loops the offsets refer to). In iteration-variable order, each range wider than one element
// gets a serial loop named after its variable (made fresh against `taken`, which grows); the
// binding is offset + loop variable + lo, and the predicate keeps every binding that could pass
// its extent below it. Init and body are shared with `block`, so the old block must go.
scalar::Stmt build_region_nest(const scalar::Block& block, const std::vector<IndexRange>& ranges,
                               std::set<std::string>* taken);

}  // namespace nautilus::sched
