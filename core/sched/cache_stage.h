// The part cache_read and cache_write share: a compact local buffer for the region of a tensor
// that one iteration of a loop touches, the index map into it, and the copy nest between the two.
//
// In one iteration of the stage's loop L a dimension of the tensor is either fixed (its index
// does not change inside the iteration) or runs over offset + [lo, hi) (region.h), where the
// offset is a sum of coefficient · loop over loops down to L. The local buffer keeps the
// dimensions that run over more than one value, each of width hi − lo, and drops the others.
// Inside a block only its iteration variables are visible, so the local index is computed from
// the tensor index x alone:
//
//   no offset (L does not move the dimension)      x − lo
//   offset, all coefficients multiples of g ≥ hi    x mod g − lo    (x = offset + r, lo ≤ r < hi)
//
// e.g. a key tile n = n_o * 8 + n_i read at n_o gives K_shared[n mod 8, d]. A dimension whose
// windows overlap or leave gaps smaller than their width (a coefficient below hi) cannot be
// mapped this way and is refused with the reason.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "core/scalar/ir.h"
#include "core/sched/decision.h"
#include "core/sched/loop_nest.h"
#include "core/sched/region.h"

namespace nautilus::sched {

struct CachedDim {
  // Fixed in the iteration: the index over loop variables (the copy's binding), and no range.
  scalar::Expr fixed;
  IndexRange range;         // otherwise the values in one iteration
  int64_t modulus = 0;      // local index = x mod modulus − lo (0: x − lo)

  bool kept() const { return !fixed && range.width() > 1; }
};

// The dimension for `range` of a tensor dimension of `extent`; nullopt with a reason naming
// `what` when it cannot be mapped to a compact local dimension.
std::optional<CachedDim> range_dim(IndexRange range, int64_t extent, const std::string& what,
                                   std::string* reason);

// The local buffer's shape (the kept dimensions' widths; [1] when none is kept).
std::vector<int64_t> local_shape(const std::vector<CachedDim>& dims);

// The local indices of the tensor indices `indices` (one per dimension, over some block's
// iteration variables).
std::vector<scalar::Expr> local_indices(const std::vector<CachedDim>& dims,
                                        const std::vector<scalar::Expr>& indices);

// The usage reason when `decision` has a keyword other than at=LOOP; empty when it has none.
std::string check_at_keyword(const Decision& decision, std::string_view signature);

// The depth in `path` of the stage loop `at`, or 0 (the whole nest) without one; nullopt with the
// reason when the block has no loop of that name around it.
std::optional<size_t> stage_depth(const BlockPath& path, const std::optional<std::string>& at,
                                  std::string* reason);

// "shared" / "register" → the scope; nullopt otherwise.
std::optional<scalar::MemoryScope> parse_cache_scope(const std::string& name);
// "shared" → "_shared", "register" → "_reg".
std::string cache_suffix(scalar::MemoryScope scope);

// A nest with one block `name` over the region: an iteration variable per dimension of `tensor`
// named `iter_names[d]`, bound to the dimension's fixed index or to offset + loop + lo (a loop
// per dimension wider than one element, named after the variable and made fresh against
// `taken`), with a predicate keeping moving indices inside the tensor. Its body copies
// `local[local index] = tensor[x]` when `into_local`, else `tensor[x] = local[local index]`.
scalar::Stmt build_copy_nest(const std::string& name, const scalar::Buffer& tensor,
                             const scalar::Buffer& local, const std::vector<CachedDim>& dims,
                             const std::vector<std::string>& iter_names, bool into_local,
                             std::set<std::string>* taken, scalar::Provenance provenance);

}  // namespace nautilus::sched
