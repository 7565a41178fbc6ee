#include "core/matile/lower.h"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/layout/bank_conflicts.h"
#include "core/layout/printer.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/verifier.h"
#include "core/vrtile/printer.h"
#include "core/vrtile/verifier.h"

namespace nautilus::matile {
namespace {

using layout::layout_error;
using layout::LayoutError;
using VOp = vrtile::Op;
using VOpKind = vrtile::OpKind;
using VValue = vrtile::Value;
using VNode = vrtile::ValueNode;

// A failure of the lowering: unwinds to lower_to_matile, which returns it as the reason.
struct LowerError {
  std::string message;
};

// An index tile as constant + sum(coef * rank-0 value) + sum(coefs[k] * coordinate k).
struct Affine {
  int64_t constant = 0;
  std::vector<std::pair<const VNode*, int64_t>> atoms;  // in first-seen order
  std::vector<int64_t> coefs;

  bool scalar_only() const {
    return std::all_of(coefs.begin(), coefs.end(), [](int64_t c) { return c == 0; });
  }
  bool constant_only() const { return atoms.empty() && scalar_only(); }
  void add_atom(const VNode* atom, int64_t coef) {
    for (auto& [a, c] : atoms) {
      if (a == atom) {
        c += coef;
        return;
      }
    }
    atoms.emplace_back(atom, coef);
  }
  bool operator==(const Affine& other) const {
    if (constant != other.constant || coefs != other.coefs) return false;
    auto canonical = [](const Affine& a) {
      std::vector<std::pair<const VNode*, int64_t>> out;
      for (const auto& [atom, coef] : a.atoms) {
        if (coef != 0) out.emplace_back(atom, coef);
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    return canonical(*this) == canonical(other);
  }
};

std::optional<Affine> combine(const Affine& a, const Affine& b, int64_t sign) {
  if (a.coefs.size() != b.coefs.size()) return std::nullopt;
  Affine out = a;
  out.constant += sign * b.constant;
  for (const auto& [atom, coef] : b.atoms) out.add_atom(atom, sign * coef);
  for (size_t k = 0; k < out.coefs.size(); ++k) out.coefs[k] += sign * b.coefs[k];
  return out;
}

std::optional<Affine> scaled(const Affine& a, int64_t factor) {
  Affine out = a;
  out.constant *= factor;
  for (auto& [atom, coef] : out.atoms) coef *= factor;
  for (int64_t& c : out.coefs) c *= factor;
  return out;
}

// A global access matched as a window.
struct Window {
  std::vector<Affine> offsets;  // scalar parts, per buffer axis
  std::vector<int> tile_axes;
  std::vector<int64_t> bounds;
};

// How a dot runs.
struct OperandPlan {
  VValue source;              // the 16-bit tile the operand is (after peeling casts/permute)
  const VOp* load = nullptr;  // when the operand comes through shared memory
  bool transposed = false;    // the load's tile is the operand's transpose
};
struct DotPlan {
  bool mma = false;
  int warps_m = 0, warps_n = 0;
  // Read the next k step's fragments from shared memory before this step's MMAs, so ldmatrix
  // latency hides behind tensor-core work (costs one more step of fragment registers).
  bool prefetch_fragments = false;
  OperandPlan a, b;
};

struct SmemLoad {
  int alloc = -1;
  Value stage;  // the current stage inside a pipelined loop; null for stage 0
};

std::string key_of(const RegisterLayout& l) { return layout_text(l); }

// The shared-memory swizzle of a row-major [rows, columns] tile read by ldmatrix.x4: the one
// with the fewest wavefronts (ties: the earlier candidate). XORing the 16-byte chunk index with
// the row index needs the row bits, which start at bit log2(row bytes): a 128-byte row wants
// Swizzle<3,4,3> (byte units), a 256-byte row (bf16, 128 columns) Swizzle<3,4,4> -- with <3,4,3>
// rows r and r+4 of an ldmatrix phase share banks (measured: 8 instead of 4 wavefronts per
// ldmatrix.x4 on an H100). So the candidates are every field width at every distance up to rows
// of 1 KB. Counting wavefronts for 13 candidates was 40% of a search's compile time, and the
// answer depends only on the shape and element size, so it is computed once per process.
struct SwizzleChoice {
  layout::Swizzle swizzle{};
  int64_t wavefronts = -1;
  int64_t unswizzled_wavefronts = -1;
  std::string name = "unswizzled";
};

// The window of a [rows, columns] tile whose ldmatrix wavefronts are counted: at most 64 rows
// by 512 columns at the origin, read through the whole tile's layout (its row pitch), and the
// count scaled to the tile. An ldmatrix phase reads 8 rows of one 16-byte chunk, so its
// conflicts depend on the pitch and the swizzle, which the window keeps; the search compiles
// tiles of 128 x 6144 elements, whose full count took seconds per candidate swizzle.
std::pair<int64_t, int64_t> counted_window(int64_t rows, int64_t columns) {
  const auto prefix = [](int64_t extent, int64_t limit) {
    if (extent <= limit) return extent;
    for (int64_t size = limit; size >= 16; size -= 16) {
      if (extent % size == 0) return size;
    }
    return extent;
  };
  return {prefix(rows, 64), prefix(columns, 512)};
}

SwizzleChoice compute_swizzle(const std::vector<int64_t>& shape, int bytes) {
  const auto [counted_rows, counted_columns] = counted_window(shape[0], shape[1]);
  const int64_t scale = (shape[0] / counted_rows) * (shape[1] / counted_columns);
  std::vector<layout::Swizzle> candidates = {layout::kSwizzleNone};
  for (int shift = 3; shift <= 6; ++shift) {
    for (int bits = 1; bits <= 3; ++bits) candidates.push_back(layout::Swizzle{bits, 4, shift});
  }
  SwizzleChoice best;
  for (const layout::Swizzle& candidate : candidates) {
    Result<layout::Swizzle> sw = candidate.is_identity()
                                     ? Result<layout::Swizzle>(layout::Swizzle{})
                                     : layout::to_element_units(candidate, bytes);
    if (!sw) continue;
    // The window's coordinates at the whole tile's offsets: its row pitch is the tile's.
    const layout::ComposedLayout smem{
        *sw, layout::Layout(layout::tuple_of(counted_rows, counted_columns), layout::tuple_of(shape[1], 1))};
    int64_t wavefronts = 0;
    if (shape[0] % 16 == 0 && shape[1] % 16 == 0) {
      Result<layout::TVLayout> access = layout::tile_tv_layout(
          layout::ldmatrix_x4_addresses(), layout::tuple_of(counted_rows, counted_columns));
      if (!access) continue;
      Result<layout::BankConflicts> conflicts = layout::count_bank_conflicts(smem, bytes, *access, 8);
      if (!conflicts) continue;
      wavefronts = conflicts->wavefronts * scale;
    }
    if (candidate.is_identity()) best.unswizzled_wavefronts = wavefronts;
    if (best.wavefronts < 0 || wavefronts < best.wavefronts) {
      best.wavefronts = wavefronts;
      best.swizzle = *sw;
      best.name = layout::to_string(*sw);
    }
  }
  return best;
}

SwizzleChoice choose_swizzle(const std::vector<int64_t>& shape, int bytes) {
  static std::mutex mutex;
  static std::map<std::pair<std::vector<int64_t>, int>, SwizzleChoice> chosen;
  const std::pair<std::vector<int64_t>, int> key{shape, bytes};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = chosen.find(key); it != chosen.end()) return it->second;
  }
  SwizzleChoice choice = compute_swizzle(shape, bytes);
  std::lock_guard<std::mutex> lock(mutex);
  return chosen.emplace(key, std::move(choice)).first->second;
}

class KernelLowering {
 public:
  KernelLowering(const vrtile::Kernel& kernel, const LowerOptions& options)
      : vk_(kernel), options_(options), b_(options.warps) {}

  KernelPtr run() {
    analyze_region(*vk_.body, nullptr);
    plan_dots();
    assign_layouts();
    for (const vrtile::GridAxis& axis : vk_.grid) {
      env_[axis.var.get()] = b_.grid(axis.var->name, axis.extent);
    }
    memo_.emplace_back();
    b_.set_provenance(vk_.provenance);
    emit_region(*vk_.body);
    b_.set_provenance(vk_.provenance);
    return b_.finish_kernel(vk_.name, vk_.params);
  }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw LowerError{"kernel " + vk_.name + ": " + message};
  }
  int64_t threads() const { return b_.threads(); }

  // -------------------------------------------------------------------------------------------
  // Analysis: definitions, users, scopes, rematerializable values

  void analyze_region(const vrtile::Region& region, const VOp* loop) {
    for (const vrtile::OpPtr& op : region.ops) {
      for (size_t i = 0; i < op->operands.size(); ++i) users_[op->operands[i].get()].push_back(op.get());
      for (const VValue& r : op->results) {
        def_[r.get()] = op.get();
        scope_[r.get()] = loop;
        order_.push_back(r);
      }
      if (op->kind == VOpKind::For) {
        scope_[op->loop_var.get()] = op.get();
        for (const VValue& arg : op->block_args) {
          scope_[arg.get()] = op.get();
          order_.push_back(arg);
          carried_by_[arg.get()] = op.get();
        }
        for (const VValue& r : op->results) carried_by_[r.get()] = op.get();
        for (const vrtile::OpPtr& inner : op->body->ops) {
          if (inner->kind == VOpKind::Yield) loop_of_yield_[inner.get()] = op.get();
        }
        analyze_region(*op->body, op.get());
      }
    }
  }

  const VOp* def(const VValue& v) const {
    auto found = def_.find(v.get());
    return found == def_.end() ? nullptr : found->second;
  }

  // Rematerializable: a tile computed only from iota, full, rank-0 values, broadcasts,
  // permutes and element-wise ops; it is re-emitted in whatever layout a consumer needs.
  bool remat(const VValue& v) {
    if (v->type.rank() == 0) return false;
    auto found = remat_.find(v.get());
    if (found != remat_.end()) return found->second;
    const VOp* op = def(v);
    bool result = false;
    if (op && op->kind != VOpKind::For) {
      switch (op->kind) {
        case VOpKind::Iota:
        case VOpKind::Full: result = true; break;
        case VOpKind::Broadcast:
        case VOpKind::Permute:
        case VOpKind::Unary:
        case VOpKind::Binary:
        case VOpKind::Compare:
        case VOpKind::Logical:
        case VOpKind::Select:
        case VOpKind::Cast:
          result = std::all_of(op->operands.begin(), op->operands.end(), [&](const VValue& x) {
            return x->type.rank() == 0 || remat(x);
          });
          break;
        default: break;
      }
    }
    remat_[v.get()] = result;
    return result;
  }

  // -------------------------------------------------------------------------------------------
  // Affine index analysis and window matching

  std::optional<Affine> affine(const VValue& v) {
    if (v->type.dtype != DType::Index) return std::nullopt;
    const std::vector<int64_t>& shape = v->type.shape;
    Affine zero;
    zero.coefs.assign(shape.size(), 0);
    const VOp* op = def(v);
    if (v->type.rank() == 0) {
      if (op && op->kind == VOpKind::Full) {
        zero.constant = static_cast<int64_t>(op->constant);
        return zero;
      }
      if (op && op->kind == VOpKind::Binary && op->operands[0]->type.rank() == 0) {
        std::optional<Affine> a = affine(op->operands[0]), c = affine(op->operands[1]);
        if (a && c) {
          if (op->binary_op == BinaryOp::Add) return combine(*a, *c, 1);
          if (op->binary_op == BinaryOp::Sub) return combine(*a, *c, -1);
          if (op->binary_op == BinaryOp::Mul && c->constant_only()) return scaled(*a, c->constant);
          if (op->binary_op == BinaryOp::Mul && a->constant_only()) return scaled(*c, a->constant);
        }
      }
      zero.add_atom(v.get(), 1);  // a grid or loop variable, or an opaque scalar
      return zero;
    }
    if (!op) return std::nullopt;
    switch (op->kind) {
      case VOpKind::Iota:
        zero.coefs[0] = 1;
        return zero;
      case VOpKind::Full:
        zero.constant = static_cast<int64_t>(op->constant);
        return zero;
      case VOpKind::Broadcast: {
        std::optional<Affine> x = affine(op->operands[0]);
        if (!x) return std::nullopt;
        Affine out = *x;
        out.coefs.assign(shape.size(), 0);
        for (size_t i = 0; i < op->dims.size(); ++i) {
          out.coefs[static_cast<size_t>(op->dims[i])] = x->coefs[i];
        }
        return out;
      }
      case VOpKind::Permute: {
        std::optional<Affine> x = affine(op->operands[0]);
        if (!x) return std::nullopt;
        Affine out = *x;
        for (size_t i = 0; i < op->dims.size(); ++i) {
          out.coefs[i] = x->coefs[static_cast<size_t>(op->dims[i])];
        }
        return out;
      }
      case VOpKind::Binary: {
        std::optional<Affine> a = affine(op->operands[0]), c = affine(op->operands[1]);
        if (!a || !c) return std::nullopt;
        if (op->binary_op == BinaryOp::Add) return combine(*a, *c, 1);
        if (op->binary_op == BinaryOp::Sub) return combine(*a, *c, -1);
        if (op->binary_op == BinaryOp::Mul && c->constant_only()) return scaled(*a, c->constant);
        if (op->binary_op == BinaryOp::Mul && a->constant_only()) return scaled(*c, a->constant);
        return std::nullopt;
      }
      default: return std::nullopt;
    }
  }

  // Conjuncts of a mask of the form `index < bound` (through and, broadcasts), each tightening
  // the bound of the buffer axis whose index it tests. `axis_map` maps the mask's axes to the
  // access tile's axes.
  bool mask_bounds(const VValue& mask, const std::vector<int>& axis_map,
                   const std::vector<Affine>& indices, size_t rank, std::vector<int64_t>* bounds) {
    const VOp* op = def(mask);
    if (!op) return false;
    if (op->kind == VOpKind::Logical && op->logical_op == LogicalOp::And) {
      return mask_bounds(op->operands[0], axis_map, indices, rank, bounds) &&
             mask_bounds(op->operands[1], axis_map, indices, rank, bounds);
    }
    if (op->kind == VOpKind::Broadcast) {
      std::vector<int> inner;
      for (int d : op->dims) inner.push_back(axis_map[static_cast<size_t>(d)]);
      return mask_bounds(op->operands[0], inner, indices, rank, bounds);
    }
    if (op->kind != VOpKind::Compare) return false;
    VValue lhs = op->operands[0], rhs = op->operands[1];
    CompareOp cmp = op->compare_op;
    if (cmp == CompareOp::GT || cmp == CompareOp::GE) {
      std::swap(lhs, rhs);
      cmp = cmp == CompareOp::GT ? CompareOp::LT : CompareOp::LE;
    }
    if (cmp != CompareOp::LT && cmp != CompareOp::LE) return false;
    std::optional<Affine> index = affine(lhs), limit = affine(rhs);
    if (!index || !limit || !limit->constant_only()) return false;
    Affine lifted = *index;
    lifted.coefs.assign(rank, 0);
    for (size_t k = 0; k < index->coefs.size(); ++k) {
      lifted.coefs[static_cast<size_t>(axis_map[k])] += index->coefs[k];
    }
    const int64_t bound = limit->constant + (cmp == CompareOp::LE ? 1 : 0);
    for (size_t j = 0; j < indices.size(); ++j) {
      if (indices[j] == lifted) {
        (*bounds)[j] = std::min((*bounds)[j], bound);
        return true;
      }
    }
    return false;
  }

  std::optional<Window> match_window(const VOp& op, const std::vector<int64_t>& tile_shape) {
    const std::vector<VValue> indices = vrtile::access_indices(op);
    const std::vector<int64_t>& extents = op.buffer->shape;
    Window window;
    std::vector<Affine> full;
    std::vector<int> used(tile_shape.size(), 0);
    for (size_t j = 0; j < indices.size(); ++j) {
      std::optional<Affine> a = affine(indices[j]);
      if (!a) return std::nullopt;
      int axis = -1;
      for (size_t k = 0; k < a->coefs.size(); ++k) {
        if (a->coefs[k] == 0) continue;
        if (a->coefs[k] != 1 || axis >= 0) return std::nullopt;
        axis = static_cast<int>(k);
      }
      if (axis >= 0) used[static_cast<size_t>(axis)]++;
      full.push_back(*a);
      Affine scalar = *a;
      std::fill(scalar.coefs.begin(), scalar.coefs.end(), 0);
      window.offsets.push_back(scalar);
      window.tile_axes.push_back(axis);
      window.bounds.push_back(extents[j]);
    }
    for (size_t k = 0; k < used.size(); ++k) {
      if (used[k] > 1 || (used[k] == 0 && tile_shape[k] > 1)) return std::nullopt;
    }
    const VValue mask = vrtile::access_mask(op);
    if (mask) {
      std::vector<int> identity(tile_shape.size());
      for (size_t k = 0; k < identity.size(); ++k) identity[k] = static_cast<int>(k);
      if (!mask_bounds(mask, identity, full, tile_shape.size(), &window.bounds)) return std::nullopt;
    }
    return window;
  }

  // cp.async needs 16-byte vectors along the buffer's last axis, 16-byte aligned.
  bool async_copyable(const VOp& load, const Window& window) {
    if (!options_.use_async_copy) return false;
    const std::vector<int64_t>& tile = load.results[0]->type.shape;
    const std::vector<int64_t>& extents = load.buffer->shape;
    if (tile.empty() || extents.empty()) return false;
    const int bytes = dtype_bytes(load.buffer->dtype);
    if (16 % bytes != 0) return false;
    const int64_t vec = 16 / bytes;
    const size_t last = extents.size() - 1;
    if (window.tile_axes[last] != static_cast<int>(tile.size()) - 1) return false;
    if (tile.back() % vec != 0 || extents.back() % vec != 0) return false;
    const Affine& offset = window.offsets[last];
    if (offset.constant % vec != 0) return false;
    for (const auto& [atom, coef] : offset.atoms) {
      if (coef % vec != 0) return false;
    }
    return !vrtile::access_mask(load) || load.constant == 0.0;
  }

  // -------------------------------------------------------------------------------------------
  // Dot plans

  // The tile a dot operand stands for once exact f32 casts of 16-bit tiles are peeled off.
  OperandPlan peel(const VValue& operand, DType* narrow) {
    OperandPlan plan;
    VValue v = operand;
    auto peel_cast = [&](const VValue& x) -> VValue {
      const VOp* op = def(x);
      if (op && op->kind == VOpKind::Cast && x->type.dtype == DType::F32) {
        const DType from = op->operands[0]->type.dtype;
        if (from == DType::BF16 || from == DType::F16) return op->operands[0];
      }
      return nullptr;
    };
    if (VValue inner = peel_cast(v)) v = inner;
    const VOp* op = def(v);
    if (op && op->kind == VOpKind::Permute && op->dims == std::vector<int>{1, 0}) {
      VValue inner = op->operands[0];
      if (VValue narrower = peel_cast(inner)) inner = narrower;
      const VOp* load = def(inner);
      if (load && load->kind == VOpKind::Load && inner->type.dtype == v->type.dtype) {
        plan.source = v;
        plan.load = load;
        plan.transposed = true;
        *narrow = v->type.dtype;
        return plan;
      }
    }
    plan.source = v;
    op = def(v);
    if (op && op->kind == VOpKind::Load) plan.load = op;
    *narrow = v->type.dtype;
    return plan;
  }

  // Whether a dot operand is (up to exact casts and a transposition) a load from memory, i.e. a
  // candidate for the shared-memory operand path.
  bool peel_reaches_shared(const VValue& operand) {
    DType narrow = DType::F32;
    return peel(operand, &narrow).load != nullptr;
  }

  // Whether every use of a dot's result only carries it through a loop, accumulates into it
  // (as another dot's accumulator), converts it element-wise with uniform operands, or stores
  // it: then the MMA's warp arrangement is free.
  bool only_accumulated_and_stored(const VValue& v, int depth = 0) {
    if (depth > 16) return false;
    for (const VOp* user : users_[v.get()]) {
      switch (user->kind) {
        case VOpKind::Store:
          if (vrtile::stored_value(*user) != v) return false;
          break;
        case VOpKind::Cast:
        case VOpKind::Unary:
          if (!only_accumulated_and_stored(user->results[0], depth + 1)) return false;
          break;
        case VOpKind::Binary:
          for (const VValue& other : user->operands) {
            if (other != v && other->type.rank() != 0) return false;
          }
          if (!only_accumulated_and_stored(user->results[0], depth + 1)) return false;
          break;
        case VOpKind::Dot:
          if (user->operands.size() != 3 || user->operands[2] != v || user->operands[0] == v ||
              user->operands[1] == v) {
            return false;
          }
          if (!only_accumulated_and_stored(user->results[0], depth + 1)) return false;
          break;
        case VOpKind::Yield: {
          auto loop = loop_of_yield_.find(user);
          if (loop == loop_of_yield_.end()) return false;
          for (size_t i = 0; i < user->operands.size(); ++i) {
            if (user->operands[i] != v) continue;
            if (i >= loop->second->results.size() ||
                !only_accumulated_and_stored(loop->second->results[i], depth + 1)) {
              return false;
            }
          }
          break;
        }
        default: return false;
      }
    }
    return true;
  }

  // An mma operand computed element-wise from one loaded tile (a normalization applied to a
  // GEMM's activations: cast(X - mean) * rstd * gamma + beta) reads that tile through shared
  // memory like a plain operand: a 16-byte cp.async copy, issued stages-1 iterations ahead in a
  // pipelined loop, then ldmatrix into the fragment layout where the element-wise ops run.
  // Loaded straight into the fragment layout instead, every thread issues 4-byte global loads
  // whose latency nothing hides. The other inputs of the chain must be rank-0, broadcasts or
  // rematerializable (per-row or per-column vectors); anything else keeps the register path.
  const VOp* prologue_root(const VValue& source) {
    const VOp* root = nullptr;
    bool ok = true;
    std::function<void(const VValue&, int)> walk = [&](const VValue& v, int depth) {
      if (!ok || v->type.rank() == 0) return;
      const VOp* op = def(v);
      if (depth > 32 || !op || carried_by_.count(v.get())) {
        ok = false;
        return;
      }
      if (op->kind == VOpKind::Load) {
        if (v->type.shape != source->type.shape || (root && root != op)) ok = false;
        root = op;
        return;
      }
      if (op->kind == VOpKind::Broadcast || op->kind == VOpKind::Full ||
          op->kind == VOpKind::Iota || remat(v)) {
        return;
      }
      if (!vrtile::is_elementwise(op->kind) || v->type.shape != source->type.shape) {
        ok = false;
        return;
      }
      for (const VValue& x : op->operands) walk(x, depth + 1);
    };
    walk(source, 0);
    if (!ok || !root || root == def(source) || root->results[0]->type.rank() != 2) return nullptr;
    if (dtype_bytes(root->results[0]->type.dtype) != 2) return nullptr;  // ldmatrix: 16-bit
    std::optional<Window> window = match_window(*root, root->results[0]->type.shape);
    if (!window || !async_copyable(*root, *window)) return nullptr;
    return root;
  }

  void stage_prologue_load(const VValue& source) {
    const VOp* root = prologue_root(source);
    if (!root || smem_windows_.count(root)) return;
    smem_windows_[root] = *match_window(*root, root->results[0]->type.shape);
    register_loads_.insert(root);
    staged_register_loads_.insert(root);
  }

  void plan_dots() {
    for (const VValue& v : order_) {
      const VOp* op = def(v);
      if (!op || op->kind != VOpKind::Dot || dot_plans_.count(op)) continue;
      DotPlan plan;
      DType da = DType::F32, db = DType::F32;
      plan.a = peel(op->operands[0], &da);
      plan.b = peel(op->operands[1], &db);
      const int64_t M = op->operands[0]->type.shape[0], K = op->operands[0]->type.shape[1];
      const int64_t N = op->operands[1]->type.shape[1];
      int wm = options_.warps;
      while (wm > 1 && M % (16 * wm) != 0) wm /= 2;
      int wn = options_.warps / wm;
      // Warps side by side along N too when both operands come from shared memory and the
      // product only accumulates and is stored: each warp then loads (M/wm + N/wn)·K operand
      // elements per k step instead of (M/warps + N)·K (a 128x128 GEMM tile on 4 warps: 2x2
      // reads 8 ldmatrix.x4 per k16 instead of 10). A product that is reduced along a row or
      // feeds another MMA keeps whole rows in one warp (warps along M only).
      const auto through_shared = [&](const VValue& operand) {
        if (peel_reaches_shared(operand)) return true;
        DType narrow = DType::F32;
        return prologue_root(peel(operand, &narrow).source) != nullptr;
      };
      if (through_shared(op->operands[0]) && through_shared(op->operands[1]) &&
          only_accumulated_and_stored(op->results[0])) {
        int best_loads = -1;
        for (int m = options_.warps; m >= 1; m /= 2) {
          const int n = options_.warps / m;
          if (M % (16 * m) != 0 || N % (16 * n) != 0) continue;
          const int loads = static_cast<int>(M / m + N / n);
          if (best_loads < 0 || loads < best_loads) {
            best_loads = loads;
            wm = m;
            wn = n;
          }
        }
        // Only the accumulator is live beside the fragments: room for a second set.
        plan.prefetch_fragments = true;
      }
      plan.mma = options_.use_mma && da == db && (da == DType::BF16 || da == DType::F16) &&
                 M % (16 * wm) == 0 && N % (16 * wn) == 0 && K % 16 == 0;
      plan.warps_m = wm;
      plan.warps_n = wn;
      if (plan.mma) {
        for (OperandPlan* operand : {&plan.a, &plan.b}) {
          if (!operand->load) {
            stage_prologue_load(operand->source);
            continue;
          }
          std::optional<Window> window =
              match_window(*operand->load, operand->load->results[0]->type.shape);
          if (window && operand->load->results[0]->type.rank() == 2 &&
              async_copyable(*operand->load, *window)) {
            smem_windows_[operand->load] = *window;
          } else {
            operand->load = nullptr;
            if (operand->transposed) {
              // The register path reads the permuted tile itself.
              operand->transposed = false;
            }
          }
        }
      } else {
        plan.a = OperandPlan{op->operands[0], nullptr, false};
        plan.b = OperandPlan{op->operands[1], nullptr, false};
      }
      dot_plans_[op] = plan;
    }
    // Loads that also have users other than mma operands keep a register copy.
    for (const auto& [load, window] : smem_windows_) {
      for (const VOp* user : users_[load->results[0].get()]) {
        bool operand_only = false;
        auto found = dot_plans_.find(user);
        if (found != dot_plans_.end() && found->second.mma) operand_only = true;
        if (user->kind == VOpKind::Permute || user->kind == VOpKind::Cast) operand_only = true;
        if (!operand_only) register_loads_.insert(load);
      }
    }
  }

  // -------------------------------------------------------------------------------------------
  // Register layout assignment (lower.h rule 4)

  bool lives_in_registers(const VValue& v) {
    if (v->type.rank() == 0) return true;
    if (remat(v)) return false;
    const VOp* op = def(v);
    if (op && op->kind == VOpKind::Load && smem_windows_.count(op) && !register_loads_.count(op)) {
      return false;
    }
    return true;
  }

  RegisterLayout default_layout(const VValue& v) const {
    return v->type.rank() == 0 ? uniform_layout({}, threads()) : blocked_layout(v->type.shape, threads());
  }

  // The layout a reduce produces from an operand in `source` (falling back to blocked).
  RegisterLayout reduce_result_layout(const RegisterLayout& source, const VValue& operand, int axis) {
    Result<RegisterLayout> slice = slice_layout(source, operand->type.shape, axis);
    Result<ReducePlan> plan = reduce_plan(source, operand->type.shape, axis);
    if (slice && plan) return *slice;
    Result<RegisterLayout> blocked =
        slice_layout(blocked_layout(operand->type.shape, threads()), operand->type.shape, axis);
    if (!blocked) fail("no layout for reduce: " + blocked.error().message);
    return *blocked;
  }

  std::optional<RegisterLayout> anchor(const VValue& v) {
    auto found = layouts_.find(v.get());
    if (found != layouts_.end()) return found->second;
    return std::nullopt;
  }

  // Phase 1: layouts that follow from operands. Returns whether anything changed.
  bool propagate() {
    bool changed = false;
    auto set = [&](const VValue& v, const RegisterLayout& l) {
      if (layouts_.count(v.get())) return;
      layouts_[v.get()] = l;
      changed = true;
    };
    for (const VValue& v : order_) {
      if (!lives_in_registers(v) || layouts_.count(v.get())) continue;
      auto carried = carried_by_.find(v.get());
      if (carried != carried_by_.end()) {
        const VOp* loop = carried->second;
        size_t i = 0;
        while (i < loop->results.size() && loop->results[i] != v && loop->block_args[i] != v) ++i;
        const VValue& init = loop->operands[i];
        const VValue& yielded = loop->body->ops.back()->operands[i];
        if (lives_in_registers(init) && anchor(init) && !(init->type.rank() == 0 && !anchor(yielded))) {
          set(v, *anchor(init));
        } else if (lives_in_registers(yielded) && anchor(yielded)) {
          set(v, *anchor(yielded));
        } else if (v->type.rank() == 0) {
          set(v, uniform_layout({}, threads()));
        }
        continue;
      }
      const VOp* op = def(v);
      if (!op) {
        set(v, uniform_layout({}, threads()));
        continue;
      }
      switch (op->kind) {
        case VOpKind::Dot: {
          const DotPlan& plan = dot_plans_.at(op);
          if (plan.mma) {
            Result<RegisterLayout> c = mma_c_layout(v->type.shape[0], v->type.shape[1],
                                                    plan.warps_m, plan.warps_n);
            if (!c) fail(c.error().message);
            set(v, *c);
          } else {
            set(v, blocked_layout(v->type.shape, threads()));
          }
          break;
        }
        case VOpKind::Reduce: {
          const VValue& x = op->operands[0];
          if (!lives_in_registers(x)) {
            set(v, reduce_result_layout(blocked_layout(x->type.shape, threads()), x, op->axis));
          } else if (anchor(x)) {
            set(v, reduce_result_layout(*anchor(x), x, op->axis));
          }
          break;
        }
        case VOpKind::Permute: {
          const VValue& x = op->operands[0];
          if (lives_in_registers(x) && anchor(x)) {
            Result<RegisterLayout> p = permute_layout(*anchor(x), x->type.shape, op->dims);
            set(v, p ? *p : blocked_layout(v->type.shape, threads()));
          }
          break;
        }
        case VOpKind::Unary:
        case VOpKind::Binary:
        case VOpKind::Compare:
        case VOpKind::Logical:
        case VOpKind::Select:
        case VOpKind::Cast:
        case VOpKind::Full:
        case VOpKind::Iota:
          if (v->type.rank() == 0) {
            set(v, uniform_layout({}, threads()));
            break;
          }
          for (const VValue& x : op->operands) {
            if (lives_in_registers(x) && anchor(x)) {
              set(v, *anchor(x));
              break;
            }
          }
          break;
        default: break;  // loads and broadcasts: by demand
      }
    }
    return changed;
  }

  // Phase 2: a value without a layout takes the one its first placed consumer needs.
  bool demand() {
    bool changed = false;
    for (const VValue& v : order_) {
      if (!lives_in_registers(v) || layouts_.count(v.get())) continue;
      for (const VOp* user : users_[v.get()]) {
        std::optional<RegisterLayout> wanted;
        if (vrtile::is_elementwise(user->kind) && !user->results.empty() &&
            user->results[0]->type.shape == v->type.shape) {
          wanted = anchor(user->results[0]);
        } else if (user->kind == VOpKind::Dot) {
          const DotPlan& plan = dot_plans_.at(user);
          if (plan.mma && (plan.a.source == v || plan.b.source == v)) {
            const bool is_a = plan.a.source == v;
            Result<RegisterLayout> l =
                is_a ? mma_a_layout(v->type.shape[0], v->type.shape[1], plan.warps_m, plan.warps_n)
                     : mma_b_layout(v->type.shape[0], v->type.shape[1], plan.warps_m, plan.warps_n);
            if (l) wanted = *l;
          } else if (user->operands.size() == 3 && user->operands[2] == v) {
            wanted = anchor(user->results[0]);
          }
        } else if (user->kind == VOpKind::Broadcast && anchor(user->results[0])) {
          // The layout the broadcast reads without moving data: a per-column vector (LayerNorm's
          // gamma) is loaded straight into it instead of through a shared-memory conversion.
          const RegisterLayout source = projected(*anchor(user->results[0]),
                                                  user->results[0]->type.shape, user->dims,
                                                  v->type.shape);
          if (source.kind != LayoutKind::Uniform) wanted = source;
        } else if (user->kind == VOpKind::Yield || user->kind == VOpKind::For) {
          // Initial and yielded values follow the loop's carried layout (set in propagate).
        } else if (user->kind == VOpKind::Store || user->kind == VOpKind::Load) {
          continue;
        }
        if (wanted) {
          layouts_[v.get()] = *wanted;
          changed = true;
          break;
        }
      }
    }
    return changed;
  }

  void assign_layouts() {
    while (true) {
      while (propagate()) {
      }
      if (demand()) continue;
      bool all = true;
      for (const VValue& v : order_) {
        if (lives_in_registers(v) && !layouts_.count(v.get())) {
          layouts_[v.get()] = default_layout(v);
          all = false;
          break;
        }
      }
      if (all) return;
    }
  }

  RegisterLayout layout_for(const VValue& v) {
    auto found = layouts_.find(v.get());
    return found != layouts_.end() ? found->second : default_layout(v);
  }

  // -------------------------------------------------------------------------------------------
  // Emission helpers

  Value index_constant(int64_t value) {
    const std::string key = "const:" + std::to_string(value);
    if (Value* hit = memo_find(nullptr, key)) return *hit;
    Value c = b_.full(static_cast<double>(value), vrtile::index_scalar(),
                      uniform_layout({}, threads()), "c" + std::to_string(value));
    memo_.back()[{nullptr, key}] = c;
    return c;
  }

  // A canonical text of an affine scalar (atoms by name), the key under which an emitted
  // scalar with that value is remembered so that window offsets reuse it.
  static std::string affine_key(const Affine& a) {
    std::vector<std::pair<std::string, int64_t>> terms;
    for (const auto& [atom, coef] : a.atoms) {
      if (coef != 0) terms.emplace_back(atom->name, coef);
    }
    std::sort(terms.begin(), terms.end());
    std::string key = "affine:" + std::to_string(a.constant);
    for (const auto& [name, coef] : terms) key += "+" + std::to_string(coef) + "*" + name;
    return key;
  }

  // The MA value of a rank-0 VR value or a placed register value (null when not emitted).
  Value placed(const VValue& v) {
    auto found = env_.find(v.get());
    return found == env_.end() ? nullptr : found->second;
  }

  Value* memo_find(const VNode* v, const std::string& key) {
    for (auto scope = memo_.rbegin(); scope != memo_.rend(); ++scope) {
      auto found = scope->find({v, key});
      if (found != scope->end()) return &found->second;
    }
    return nullptr;
  }

  // A scratch allocation for conversions and reduces: row-major, unswizzled.
  int scratch(const std::string& name, DType dtype, std::vector<int64_t> shape,
              const std::string& purpose) {
    return b_.shared(name, dtype, shape, row_major_shared(shape, layout::Swizzle{}), 1, purpose);
  }

  bool register_only(const RegisterLayout& from, const RegisterLayout& to, const TileType& type) {
    if (from.threads() != to.threads()) return false;
    Result<std::vector<int32_t>> g =
        register_gather(from, type.element_count(), slot_elements(to), to.slots());
    return g.ok();
  }

  Value convert(const Value& value, const RegisterLayout& to, const std::string& name) {
    if (value->layout == to) return value;
    if (register_only(value->layout, to, value->type)) {
      return b_.convert_layout(value, to, false, -1, name);
    }
    const DType dtype = value->type.dtype == DType::Bool || value->type.dtype == DType::Index
                            ? DType::F32
                            : value->type.dtype;
    const int s = scratch(name + "_cvt", dtype, {value->type.element_count()},
                          "scratch of the layout conversion of %" + value->name);
    return b_.convert_layout(value, to, true, s, name);
  }

  // The layout a broadcast's source must have for the broadcast to `to` to be register-only:
  // `to` with the broadcast axes sliced away (uniform when that is impossible).
  RegisterLayout projected(const RegisterLayout& to, const std::vector<int64_t>& shape,
                           const std::vector<int>& dims, const std::vector<int64_t>& source_shape) {
    RegisterLayout l = to;
    std::vector<int64_t> current = shape;
    for (int axis = static_cast<int>(shape.size()) - 1; axis >= 0; --axis) {
      if (std::find(dims.begin(), dims.end(), axis) != dims.end()) continue;
      Result<RegisterLayout> s = slice_layout(l, current, axis);
      if (!s) return uniform_layout(source_shape, threads());
      l = *s;
      current.erase(current.begin() + axis);
    }
    return l;
  }

  // v in layout `to`: rematerialized, taken as placed, or converted.
  Value materialize(const VValue& v, const RegisterLayout& to) {
    const std::string key = key_of(to);
    if (Value* hit = memo_find(v.get(), key)) return *hit;
    Value result;
    if (remat(v)) {
      result = emit_compute(*def(v), v, to);
    } else {
      Value base = placed(v);
      if (!base) fail("%" + v->name + " is used before it was placed");
      result = convert(base, to, v->name);
    }
    memo_.back()[{v.get(), key}] = result;
    return result;
  }

  // Emits a data-movement or element-wise op of VR value v in layout `to`.
  Value emit_compute(const VOp& op, const VValue& v, const RegisterLayout& to) {
    const std::string& name = v->name;
    switch (op.kind) {
      case VOpKind::Iota: return b_.iota(op.extent, to, name);
      case VOpKind::Full: return b_.full(op.constant, v->type, to, name);
      case VOpKind::Broadcast: {
        const VValue& x = op.operands[0];
        RegisterLayout want = x->type.rank() == 0 ? layout_for(x)
                              : projected(to, v->type.shape, op.dims, x->type.shape);
        Value source = x->type.rank() == 0 ? scalar_value(x) : materialize(x, want);
        if (!register_only_move(RegisterMove::Broadcast, source, v, op.dims, to)) {
          source = convert(source, uniform_layout(x->type.shape, threads()), x->name);
        }
        return b_.broadcast(source, v->type.shape, op.dims, to, name);
      }
      case VOpKind::Permute: {
        const VValue& x = op.operands[0];
        std::vector<int> inverse(op.dims.size());
        for (size_t i = 0; i < op.dims.size(); ++i) inverse[static_cast<size_t>(op.dims[i])] = static_cast<int>(i);
        Result<RegisterLayout> want = permute_layout(to, v->type.shape, inverse);
        RegisterLayout source_layout = want ? *want : uniform_layout(x->type.shape, threads());
        Value source = materialize(x, source_layout);
        Result<RegisterLayout> natural = permute_layout(source->layout, x->type.shape, op.dims);
        if (natural && *natural == to) return b_.permute(source, op.dims, to, name);
        if (!register_only_move(RegisterMove::Permute, source, v, op.dims, to)) {
          source = convert(source, uniform_layout(x->type.shape, threads()), x->name);
        }
        return b_.permute(source, op.dims, to, name);
      }
      default: break;
    }
    std::vector<Value> operands;
    for (const VValue& x : op.operands) {
      // A rank-0 operand is used where it was placed, in the result's layout: a reduction's
      // result (every thread holds the sum after the butterfly) has the reduce's sliced layout,
      // which a loop-carried scalar's uniform one does not equal although both hold the value in
      // every thread (layernorm's one-pass statistics hoist such a reduction out of the loop).
      operands.push_back(x->type.rank() == 0 && v->type.rank() == 0
                             ? convert(scalar_value(x), to, x->name)
                             : materialize(x, to));
    }
    switch (op.kind) {
      case VOpKind::Unary: return b_.unary(op.unary_op, operands[0], name);
      case VOpKind::Binary: return b_.binary(op.binary_op, operands[0], operands[1], name);
      case VOpKind::Compare: return b_.compare(op.compare_op, operands[0], operands[1], name);
      case VOpKind::Logical: return b_.logical(op.logical_op, operands[0], operands[1], name);
      case VOpKind::Select: return b_.select(operands[0], operands[1], operands[2], name);
      case VOpKind::Cast: return b_.cast(operands[0], v->type.dtype, name);
      default: fail("cannot emit " + std::string(vrtile::op_kind_name(op.kind)) + " %" + name);
    }
  }

  bool register_only_move(RegisterMove move, const Value& source, const VValue& v,
                          const std::vector<int>& dims, const RegisterLayout& to) {
    return !register_move_error(move, source->layout, source->type.shape, to, v->type.shape,
                                std::vector<int64_t>(dims.begin(), dims.end()));
  }

  // A rank-0 VR value as an MA scalar (emitted at its definition).
  Value scalar_value(const VValue& v) {
    Value value = placed(v);
    if (!value) fail("scalar %" + v->name + " is used before its definition");
    return value;
  }

  // constant + sum(coef * atom) as a uniform index scalar, reusing an emitted scalar of the same
  // value. `loop_var` is replaced by `replacement` (a value) or `iteration` (a constant) when
  // given: pipelined copies address a later iteration. Null for 0.
  Value emit_offset(Affine a, const VNode* loop_var, const Value& replacement,
                    std::optional<int64_t> iteration = std::nullopt) {
    if (iteration) {
      for (auto& [atom, coef] : a.atoms) {
        if (atom == loop_var) {
          a.constant += coef * *iteration;
          coef = 0;
        }
      }
    }
    bool substituted = false;
    for (const auto& [atom, coef] : a.atoms) substituted |= coef != 0 && atom == loop_var && replacement;
    if (a.constant == 0 && std::all_of(a.atoms.begin(), a.atoms.end(),
                                       [](const auto& term) { return term.second == 0; })) {
      return nullptr;
    }
    const std::string key = affine_key(a) + (substituted ? "@" + replacement->name : "");
    if (Value* hit = memo_find(nullptr, key)) return *hit;
    Value sum;
    for (const auto& [atom, coef] : a.atoms) {
      if (coef == 0) continue;
      Value term = atom == loop_var && replacement ? replacement : placed_node(atom);
      if (coef != 1) term = b_.binary(BinaryOp::Mul, term, index_constant(coef), "");
      sum = sum ? b_.binary(BinaryOp::Add, sum, term, "") : term;
    }
    if (a.constant != 0) {
      Value c = index_constant(a.constant);
      sum = sum ? b_.binary(BinaryOp::Add, sum, c, "") : c;
    }
    memo_.back()[{nullptr, key}] = sum;
    return sum;
  }

  Value placed_node(const VNode* node) {
    auto found = env_.find(node);
    if (found == env_.end()) fail("index scalar %" + node->name + " is not available here");
    return found->second;
  }

  GlobalAccess window_access(const Window& w, const VNode* loop_var, const Value& replacement,
                             std::optional<int64_t> iteration = std::nullopt) {
    GlobalAccess access;
    access.form = GlobalAccess::Form::Window;
    for (const Affine& offset : w.offsets) {
      access.offsets.push_back(emit_offset(offset, loop_var, replacement, iteration));
    }
    access.tile_axes = w.tile_axes;
    access.bounds = w.bounds;
    return access;
  }

  // -------------------------------------------------------------------------------------------
  // Shared operands: allocation, swizzle choice, copies

  int smem_alloc_for(const VOp& load, int stages) {
    auto found = smem_alloc_.find(&load);
    if (found != smem_alloc_.end()) return found->second;
    const VValue& v = load.results[0];
    const std::vector<int64_t>& shape = v->type.shape;
    const int bytes = dtype_bytes(v->type.dtype);
    const SwizzleChoice chosen = choose_swizzle(shape, bytes);
    const layout::Swizzle& best = chosen.swizzle;
    const int64_t best_wavefronts = chosen.wavefronts, unswizzled = chosen.unswizzled_wavefronts;
    const std::string& choice = chosen.name;
    const std::string purpose = "tile of " + load.buffer->name + " (%" + v->name + "), " + choice +
                                ": " + std::to_string(best_wavefronts) +
                                " ldmatrix wavefronts, unswizzled " + std::to_string(unswizzled);
    const int id = b_.shared(v->name + "_smem", v->type.dtype, shape, row_major_shared(shape, best),
                             stages, purpose);
    smem_alloc_[&load] = id;
    return id;
  }

  void emit_copy(const VOp& load, int alloc, const Value& stage, const VNode* loop_var,
                 const Value& replacement, const Value& predicate,
                 std::optional<int64_t> iteration = std::nullopt) {
    const VValue& v = load.results[0];
    const std::vector<int64_t>& shape = v->type.shape;
    const int bytes = dtype_bytes(v->type.dtype);
    Result<layout::TVLayout> copy = layout_error("no copy layout");
    for (int64_t t = threads(); t >= 1 && !copy; t /= 2) {
      copy = layout::copy_row_major_16b(shape[0], shape[1], bytes, t);
    }
    if (!copy) fail("no 16-byte copy layout for %" + v->name + ": " + copy.error().message);
    SharedRef ref;
    ref.alloc = alloc;
    ref.stage = stage;
    ref.offsets.assign(shape.size(), 0);
    b_.async_copy(ref, load.buffer,
                  window_access(smem_windows_.at(&load), loop_var, replacement, iteration),
                  shape, *copy, 16 / bytes, predicate);
  }

  // -------------------------------------------------------------------------------------------
  // Emission of VR ops

  void emit_region(const vrtile::Region& region) {
    for (const vrtile::OpPtr& op : region.ops) {
      if (op->kind == VOpKind::Yield) continue;
      b_.set_provenance(op->provenance);
      emit(*op);
    }
  }

  // Whether the MA kernel needs v in registers: something stores, carries or computes with it.
  // Values that only feed shared-memory mma operands (Kᵀ's permute) or window-matched accesses
  // (index and mask tiles) are not emitted.
  bool needed(const VValue& v) {
    auto found = needed_.find(v.get());
    if (found != needed_.end()) return found->second;
    needed_[v.get()] = false;  // cycles only through loops, whose users decide below
    bool result = false;
    for (const VOp* user : users_[v.get()]) {
      switch (user->kind) {
        case VOpKind::Store:
          result = v == vrtile::stored_value(*user) ||
                   !match_window(*user, vrtile::stored_value(*user)->type.shape);
          break;
        case VOpKind::Yield:
        case VOpKind::For: result = true; break;
        case VOpKind::Load:
          if (!smem_windows_.count(user) &&
              !match_window(*user, user->results[0]->type.shape)) {
            result = needed(user->results[0]);
          }
          break;
        case VOpKind::Dot: {
          const DotPlan& plan = dot_plans_.at(user);
          result = !plan.mma || (user->operands.size() == 3 && user->operands[2] == v) ||
                   (plan.a.source == v && !plan.a.load) || (plan.b.source == v && !plan.b.load);
          break;
        }
        default:
          for (const VValue& r : user->results) result = result || needed(r);
          break;
      }
      if (result) break;
    }
    needed_[v.get()] = result;
    return result;
  }

  void emit(const VOp& op) {
    switch (op.kind) {
      case VOpKind::For: return emit_for(op);
      case VOpKind::Load: return emit_load(op);
      case VOpKind::Store: return emit_store(op);
      case VOpKind::Dot: return emit_dot(op);
      case VOpKind::Reduce:
        if (needed(op.results[0])) emit_reduce(op);
        return;
      default: break;
    }
    const VValue& v = op.results[0];
    // Scalars are always emitted (window offsets may name them); unused ones are removed by
    // remove_dead_ops afterwards.
    if (v->type.rank() > 0 && !needed(v)) return;
    if (remat(v)) return;  // emitted where used, in the layout needed there
    if (v->type.rank() == 0) {
      env_[v.get()] = emit_compute(op, v, uniform_layout({}, threads()));
      if (std::optional<Affine> a = affine(v); a && v->type.dtype == DType::Index) {
        memo_.back()[{nullptr, affine_key(*a)}] = env_[v.get()];
      }
      return;
    }
    env_[v.get()] = emit_compute(op, v, layout_for(v));
  }

  void emit_load(const VOp& op) {
    const VValue& v = op.results[0];
    auto smem = smem_windows_.find(&op);
    if (smem != smem_windows_.end()) {
      auto pipelined = pipelined_stage_.find(&op);
      if (pipelined == pipelined_stage_.end()) {
        // Copied where the VR load was: the barrier before protects readers of the previous
        // contents (the previous iteration), the wait and barrier after publish the tile.
        const int alloc = smem_alloc_for(op, 1);
        b_.barrier();
        emit_copy(op, alloc, nullptr, nullptr, nullptr, nullptr);
        b_.commit_group();
        b_.wait_group(0);
        b_.barrier();
        smem_loads_[&op] = SmemLoad{alloc, nullptr};
        hoist_a_fragments(op, alloc);
      } else {
        smem_loads_[&op] = SmemLoad{smem_alloc_.at(&op), pipelined->second};
      }
      if (!register_loads_.count(&op)) return;
      if (staged_register_loads_.count(&op)) {
        env_[v.get()] = read_staged(op, smem_loads_.at(&op));
        return;
      }
    }
    const RegisterLayout l = layout_for(v);
    std::optional<Window> window = match_window(op, v->type.shape);
    if (window) {
      env_[v.get()] = b_.global_load(op.buffer, window_access(*window, nullptr, nullptr), {},
                                     op.constant, v->type, l, v->name);
      return;
    }
    std::vector<Value> gather;
    const GlobalAccess access = gather_access(op, l, &gather);
    env_[v.get()] = b_.global_load(op.buffer, access, gather, op.constant, v->type, l, v->name);
  }

  // The register copy of a staged tile, read from its shared buffer (the current stage): with
  // ldmatrix when its layout is an mma fragment, element by element otherwise.
  Value read_staged(const VOp& load, const SmemLoad& smem) {
    const VValue& v = load.results[0];
    const RegisterLayout l = layout_for(v);
    const int64_t R = v->type.shape[0], C = v->type.shape[1];
    SharedRead read = SharedRead::Scalar;
    if (l.kind == LayoutKind::MmaA) {
      Result<RegisterLayout> fragment = mma_a_layout(R, C, l.warps_m, l.warps_n);
      if (fragment && *fragment == l) read = SharedRead::LdMatrixX4;
    } else if (l.kind == LayoutKind::MmaB && (C / (8 * l.warps_n)) % 2 == 0) {
      Result<RegisterLayout> fragment = mma_b_layout(R, C, l.warps_m, l.warps_n);
      if (fragment && *fragment == l) read = SharedRead::LdMatrixX4Trans;
    }
    SharedRef ref{smem.alloc, smem.stage, {0, 0}, false};
    return b_.shared_load(ref, read, v->type, l, v->name);
  }

  // The Gather form of a VR load's or store's access: its index tiles and optional mask,
  // materialized in layout `l`, appended to `gather` (the op's leading operands).
  GlobalAccess gather_access(const VOp& op, const RegisterLayout& l, std::vector<Value>* gather) {
    GlobalAccess access;
    access.form = GlobalAccess::Form::Gather;
    for (const VValue& index : vrtile::access_indices(op)) gather->push_back(materialize(index, l));
    if (const VValue mask = vrtile::access_mask(op)) {
      access.has_mask = true;
      gather->push_back(materialize(mask, l));
    }
    return access;
  }

  // A tile copied once (outside the loops that use it, like attention's Q) that is an mma A
  // operand is read into registers once, right after its copy; each k step slices it -- when
  // the fragments are small. Held fragments stay live through the whole loop beside its
  // accumulators: attention's Q at D = 128 on 4 warps (32 rows per warp) is 64 registers per
  // thread next to 128 of output accumulator, which spills; re-reading it with ldmatrix at each
  // k step costs shared bandwidth instead (FlashAttention-2 does the same).
  static constexpr int64_t kMaxHeldFragmentRegisters = 32;
  void hoist_a_fragments(const VOp& load, int alloc) {
    for (const auto& [dot, plan] : dot_plans_) {
      if (!plan.mma || plan.a.load != &load || hoisted_.count(&load)) continue;
      const VValue& source = plan.a.source;
      const int64_t M = source->type.shape[0], K = source->type.shape[1];
      const int64_t registers_per_thread =
          M / plan.warps_m * K * dtype_bytes(source->type.dtype) / 4 / 32;
      if (registers_per_thread > kMaxHeldFragmentRegisters) continue;
      Result<RegisterLayout> l = mma_a_layout(M, K, plan.warps_m, plan.warps_n);
      if (!l) fail(l.error().message);
      SharedRef ref{alloc, nullptr, {0, 0}, plan.a.transposed};
      hoisted_[&load] = b_.shared_load(ref, plan.a.transposed ? SharedRead::LdMatrixX4Trans
                                                               : SharedRead::LdMatrixX4,
                                       TileType{source->type.dtype, {M, K}}, *l, source->name + "_frag");
    }
  }

  void emit_store(const VOp& op) {
    const VValue stored = vrtile::stored_value(op);
    const RegisterLayout l = remat(stored) ? blocked_layout(stored->type.shape, threads()) : layout_for(stored);
    const Value value = materialize(stored, l);
    std::optional<Window> window = match_window(op, stored->type.shape);
    if (window) {
      b_.global_store(op.buffer, window_access(*window, nullptr, nullptr), {}, value);
      return;
    }
    std::vector<Value> gather;
    const GlobalAccess access = gather_access(op, l, &gather);
    b_.global_store(op.buffer, access, gather, value);
  }

  void emit_reduce(const VOp& op) {
    const VValue& x = op.operands[0];
    const VValue& v = op.results[0];
    RegisterLayout source = remat(x) ? blocked_layout(x->type.shape, threads()) : layout_for(x);
    Result<RegisterLayout> slice = slice_layout(source, x->type.shape, op.axis);
    Result<ReducePlan> plan = reduce_plan(source, x->type.shape, op.axis);
    if (!slice || !plan) {
      source = blocked_layout(x->type.shape, threads());
      slice = slice_layout(source, x->type.shape, op.axis);
      plan = reduce_plan(source, x->type.shape, op.axis);
      if (!slice || !plan) fail("reduce %" + v->name + ": " + (!slice ? slice.error() : plan.error()).message);
    }
    const Value operand = materialize(x, source);
    int scratch_alloc = -1;
    if (plan->cross_warp) {
      scratch_alloc = scratch(v->name + "_red", DType::F32, {b_.warps(), v->type.element_count()},
                              "scratch of the cross-warp reduce %" + v->name);
    }
    Value result = b_.reduce(op.reduce_op, operand, op.axis, *slice, plan->xor_masks, scratch_alloc,
                             v->name);
    const RegisterLayout wanted = layout_for(v);
    env_[v.get()] = result->layout == wanted ? result : convert(result, wanted, v->name);
  }

  void emit_dot(const VOp& op) {
    const VValue& v = op.results[0];
    const DotPlan& plan = dot_plans_.at(&op);
    const int64_t M = v->type.shape[0], N = v->type.shape[1];
    const int64_t K = op.operands[0]->type.shape[1];
    if (!plan.mma) {
      // FMA from shared memory: both operands are stored (any layout), fenced by barriers.
      const VValue &a = op.operands[0], &bb = op.operands[1];
      const Value av = materialize(a, remat(a) ? blocked_layout(a->type.shape, threads()) : layout_for(a));
      const Value bv = materialize(bb, remat(bb) ? blocked_layout(bb->type.shape, threads()) : layout_for(bb));
      auto found = fma_allocs_.find(&op);
      if (found == fma_allocs_.end()) {
        const int sa = scratch(v->name + "_a", a->type.dtype, a->type.shape, "operand a of fma dot %" + v->name);
        const int sb = scratch(v->name + "_b", bb->type.dtype, bb->type.shape, "operand b of fma dot %" + v->name);
        found = fma_allocs_.emplace(&op, std::make_pair(sa, sb)).first;
      }
      const SharedRef ra{found->second.first, nullptr, {0, 0}, false};
      const SharedRef rb{found->second.second, nullptr, {0, 0}, false};
      b_.barrier();
      b_.shared_store(ra, av);
      b_.shared_store(rb, bv);
      b_.barrier();
      const RegisterLayout l = layout_for(v);
      const Value acc = op.operands.size() == 3 ? materialize(op.operands[2], l)
                                                : b_.full(0.0, v->type, l, v->name + "_zero");
      env_[v.get()] = b_.fma_dot(ra, rb, acc, v->name);
      return;
    }
    const RegisterLayout c_layout = layout_for(v);
    Value acc = op.operands.size() == 3 ? materialize(op.operands[2], c_layout)
                                        : b_.full(0.0, v->type, c_layout, v->name + "_zero");
    const int wm = plan.warps_m, wn = plan.warps_n;
    auto layout_or_fail = [&](Result<RegisterLayout> l) {
      if (!l) fail(l.error().message);
      return *l;
    };
    const RegisterLayout a_step = layout_or_fail(mma_a_layout(M, 16, wm, wn));
    const RegisterLayout b_step = layout_or_fail(mma_b_layout(16, N, wm, wn));
    Value a_reg, b_reg;
    const bool a_hoisted = plan.a.load && hoisted_.count(plan.a.load);
    if (a_hoisted) a_reg = hoisted_.at(plan.a.load);
    if (!plan.a.load) a_reg = materialize(plan.a.source, layout_or_fail(mma_a_layout(M, K, wm, wn)));
    if (!plan.b.load) b_reg = materialize(plan.b.source, layout_or_fail(mma_b_layout(K, N, wm, wn)));
    const DType dtype = plan.a.source->type.dtype;
    auto load_step = [&](int64_t kk) -> std::pair<Value, Value> {
      const std::string step = "_k" + std::to_string(kk);
      Value a_k, b_k;
      if (plan.a.load && !a_hoisted) {
        const SmemLoad& s = smem_loads_.at(plan.a.load);
        SharedRef ref{s.alloc, s.stage, {0, kk * 16}, plan.a.transposed};
        if (plan.a.transposed) ref.offsets = {kk * 16, 0};
        a_k = b_.shared_load(ref, plan.a.transposed ? SharedRead::LdMatrixX4Trans : SharedRead::LdMatrixX4,
                             TileType{dtype, {M, 16}}, a_step, plan.a.source->name + step);
      } else {
        a_k = K == 16 ? a_reg
                      : b_.extract_slice(a_reg, {0, kk * 16}, {M, 16}, a_step, plan.a.source->name + step);
      }
      if (plan.b.load) {
        const SmemLoad& s = smem_loads_.at(plan.b.load);
        SharedRef ref{s.alloc, s.stage, {kk * 16, 0}, plan.b.transposed};
        if (plan.b.transposed) ref.offsets = {0, kk * 16};
        b_k = b_.shared_load(ref, plan.b.transposed ? SharedRead::LdMatrixX4 : SharedRead::LdMatrixX4Trans,
                             TileType{dtype, {16, N}}, b_step, plan.b.source->name + step);
      } else {
        b_k = K == 16 ? b_reg
                      : b_.extract_slice(b_reg, {kk * 16, 0}, {16, N}, b_step, plan.b.source->name + step);
      }
      return {a_k, b_k};
    };
    const int64_t steps = K / 16;
    std::pair<Value, Value> next = load_step(0);
    for (int64_t kk = 0; kk < steps; ++kk) {
      const std::pair<Value, Value> current = next;
      if (kk + 1 < steps && plan.prefetch_fragments) next = load_step(kk + 1);
      const std::string step = "_k" + std::to_string(kk);
      acc = b_.mma(current.first, current.second, acc, wm, wn,
                   kk + 1 == steps ? v->name : v->name + step);
      if (kk + 1 < steps && !plan.prefetch_fragments) next = load_step(kk + 1);
    }
    env_[v.get()] = acc;
  }

  // Loads of this loop's body that can be issued stages-1 iterations ahead.
  std::vector<const VOp*> pipelinable(const VOp& loop) {
    std::vector<const VOp*> out;
    for (const vrtile::OpPtr& op : loop.body->ops) {
      if (op->kind != VOpKind::Load || !smem_windows_.count(op.get())) continue;
      bool ok = true;
      for (const Affine& offset : smem_windows_.at(op.get()).offsets) {
        for (const auto& [atom, coef] : offset.atoms) {
          if (atom == loop.loop_var.get()) continue;
          auto where = scope_.find(atom);
          // Atoms defined in this body (or deeper) are not known ahead of time.
          if (where != scope_.end() && where->second == &loop) ok = false;
        }
      }
      if (ok) out.push_back(op.get());
    }
    return out;
  }

  void emit_for(const VOp& op) {
    const std::vector<const VOp*> loads = pipelinable(op);
    const int stages = std::max(1, options_.stages);
    for (const VOp* load : loads) smem_alloc_for(*load, stages);
    // Prologue: iterations 0 .. stages-2, one commit group each (empty past the end).
    if (!loads.empty() && stages >= 2) {
      for (int s = 0; s + 1 < stages; ++s) {
        if (s < op.extent) {
          for (const VOp* load : loads) {
            b_.set_provenance(load->provenance);
            emit_copy(*load, smem_alloc_.at(load), index_constant(s), op.loop_var.get(), nullptr,
                      nullptr, s);
          }
        }
        b_.commit_group();
      }
    }
    b_.set_provenance(op.provenance);
    std::vector<Value> inits;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      inits.push_back(materialize(op.operands[i], layout_for(op.block_args[i])));
    }
    std::vector<std::string> result_names, arg_names;
    for (const VValue& r : op.results) result_names.push_back(r->name);
    for (const VValue& a : op.block_args) arg_names.push_back(a->name);
    const std::vector<Value> results = b_.for_loop(
        op.loop_var->name, op.extent, inits,
        [&](const Value& var, const std::vector<Value>& carried) {
          env_[op.loop_var.get()] = var;
          for (size_t i = 0; i < carried.size(); ++i) env_[op.block_args[i].get()] = carried[i];
          memo_.emplace_back();
          if (!loads.empty()) emit_pipeline_step(op, loads, var, stages);
          emit_region(*op.body);
          b_.set_provenance(op.provenance);
          const vrtile::Op& yield = *op.body->ops.back();
          std::vector<Value> yielded;
          for (size_t i = 0; i < yield.operands.size(); ++i) {
            yielded.push_back(materialize(yield.operands[i], carried[i]->layout));
          }
          memo_.pop_back();
          return yielded;
        },
        result_names, arg_names, loads.empty() ? 0 : stages,
        op.trip_count ? scalar_value(op.trip_count) : nullptr);
    for (size_t i = 0; i < results.size(); ++i) env_[op.results[i].get()] = results[i];
    if (!loads.empty()) b_.wait_group(0);
  }

  // The top of a pipelined iteration i: wait for i's tiles, publish them, issue i+S-1.
  void emit_pipeline_step(const VOp& loop, const std::vector<const VOp*>& loads, const Value& var,
                          int stages) {
    const Value stage_count = index_constant(stages);
    if (stages == 1) {
      b_.barrier();
      for (const VOp* load : loads) {
        b_.set_provenance(load->provenance);
        emit_copy(*load, smem_alloc_.at(load), nullptr, loop.loop_var.get(), var, nullptr);
      }
      b_.commit_group();
      b_.wait_group(0);
      b_.barrier();
      for (const VOp* load : loads) pipelined_stage_[load] = nullptr;
      return;
    }
    b_.wait_group(stages - 2);
    b_.barrier();
    const Value next = b_.binary(BinaryOp::Add, var, index_constant(stages - 1), "next");
    const Value next_stage = b_.binary(BinaryOp::Mod, next, stage_count, "next_stage");
    const Value more = b_.compare(CompareOp::LT, next, index_constant(loop.extent), "more");
    for (const VOp* load : loads) {
      b_.set_provenance(load->provenance);
      emit_copy(*load, smem_alloc_.at(load), next_stage, loop.loop_var.get(), next, more);
    }
    b_.commit_group();
    const Value stage = b_.binary(BinaryOp::Mod, var, stage_count, "stage");
    for (const VOp* load : loads) pipelined_stage_[load] = stage;
  }

  const vrtile::Kernel& vk_;
  const LowerOptions& options_;
  Builder b_;
  std::unordered_map<const VNode*, const VOp*> def_;
  std::unordered_map<const VNode*, const VOp*> scope_;       // the For whose body defines it
  std::unordered_map<const VNode*, const VOp*> carried_by_;  // block args and For results
  std::unordered_map<const VOp*, const VOp*> loop_of_yield_;  // Yield -> the For it ends
  std::unordered_map<const VNode*, std::vector<const VOp*>> users_;
  std::vector<VValue> order_;
  std::unordered_map<const VNode*, bool> remat_;
  std::unordered_map<const VOp*, DotPlan> dot_plans_;
  std::map<const VOp*, Window> smem_windows_;
  std::unordered_set<const VOp*> register_loads_;
  std::unordered_set<const VOp*> staged_register_loads_;  // register copies read from shared
  std::unordered_map<const VNode*, RegisterLayout> layouts_;
  std::unordered_map<const VNode*, Value> env_;
  std::vector<std::map<std::pair<const VNode*, std::string>, Value>> memo_;
  std::unordered_map<const VOp*, int> smem_alloc_;
  std::unordered_map<const VOp*, SmemLoad> smem_loads_;
  std::unordered_map<const VOp*, Value> pipelined_stage_;
  std::unordered_map<const VOp*, std::pair<int, int>> fma_allocs_;
  std::unordered_map<const VNode*, bool> needed_;
  std::unordered_map<const VOp*, Value> hoisted_;  // A fragments read once after their copy
};

// Ops without effects whose results nobody reads (scalars computed for index tiles that window
// matching made unnecessary) are dropped, repeatedly, so the printed kernel shows only what runs.
bool removable(const Op& op) {
  switch (op.kind) {
    case OpKind::GlobalStore:
    case OpKind::AsyncCopy:
    case OpKind::CommitGroup:
    case OpKind::WaitGroup:
    case OpKind::Barrier:
    case OpKind::SharedStore:
    case OpKind::For:
    case OpKind::Yield: return false;
    default: return true;
  }
}

void count_uses(const Region& region, std::unordered_map<const ValueNode*, int>* uses) {
  for (const OpPtr& op : region.ops) {
    for (const Value& v : used_values(*op)) ++(*uses)[v.get()];
    if (op->body) count_uses(*op->body, uses);
  }
}

RegionPtr without_dead_ops(const RegionPtr& region,
                           const std::unordered_map<const ValueNode*, int>& uses, bool* changed) {
  std::vector<OpPtr> ops;
  for (const OpPtr& op : region->ops) {
    if (removable(*op) && std::none_of(op->results.begin(), op->results.end(), [&](const Value& r) {
          return uses.count(r.get()) != 0;
        })) {
      *changed = true;
      continue;
    }
    if (op->kind == OpKind::For) {
      RegionPtr body = without_dead_ops(op->body, uses, changed);
      if (body != op->body) {
        Op copy = *op;
        copy.body = body;
        ops.push_back(make_op(std::move(copy)));
        continue;
      }
    }
    ops.push_back(op);
  }
  return ops.size() == region->ops.size() && std::equal(ops.begin(), ops.end(), region->ops.begin())
             ? region
             : make_region(std::move(ops));
}

KernelPtr remove_dead_ops(KernelPtr kernel) {
  while (true) {
    std::unordered_map<const ValueNode*, int> uses;
    count_uses(*kernel->body, &uses);
    bool changed = false;
    RegionPtr body = without_dead_ops(kernel->body, uses, &changed);
    if (!changed) return kernel;
    Kernel copy = *kernel;
    copy.body = body;
    kernel = std::make_shared<const Kernel>(std::move(copy));
  }
}

}  // namespace

layout::Result<ModulePtr> lower_to_matile(const vrtile::ModulePtr& module,
                                          const LowerOptions& options) {
  if (!module) return layout_error("lower_to_matile: no module");
  if (options.warps != 1 && options.warps != 2 && options.warps != 4 && options.warps != 8) {
    return layout_error("lower_to_matile: warps must be 1, 2, 4 or 8, not " +
                        std::to_string(options.warps));
  }
  if (options.stages < 1 || options.stages > 8) {
    return layout_error("lower_to_matile: stages must be in 1..8, not " + std::to_string(options.stages));
  }
  if (options.arch != "sm_80" && options.arch != "sm_90a") {
    return layout_error("lower_to_matile: arch must be sm_80 or sm_90a, not " + options.arch);
  }
  const std::vector<std::string> problems = vrtile::verify(*module);
  if (!problems.empty()) {
    return layout_error("lower_to_matile: the VR module does not verify: " + problems.front());
  }
  auto out = std::make_shared<Module>();
  out->name = module->name;
  out->arch = options.arch;
  out->params = module->params;
  out->allocations = module->allocations;
  try {
    for (const vrtile::KernelPtr& kernel : module->kernels) {
      // A kernel's own launch attributes (the schedule's `launch`) override the defaults.
      LowerOptions kernel_options = options;
      if (kernel->launch) {
        kernel_options.warps = kernel->launch->warps;
        kernel_options.stages = kernel->launch->stages;
      }
      out->kernels.push_back(remove_dead_ops(KernelLowering(*kernel, kernel_options).run()));
    }
  } catch (const LowerError& error) {
    return layout_error("lower_to_matile: " + error.message);
  }
  const std::vector<std::string> errors = verify(*out);
  if (!errors.empty()) {
    return layout_error("lower_to_matile: internal error, the MA module does not verify: " +
                        errors.front());
  }
  return ModulePtr(out);
}

}  // namespace nautilus::matile
