// Analysis of the VR kernel before anything is placed (lower.h rules 2 and 4 read it): where
// each value is defined, who uses it, which loop's body defines it and which loop carries it;
// which tiles are rematerializable (built only from iota, full, scalars, broadcasts and
// element-wise ops, re-emitted in whatever layout a consumer needs); index tiles as affine
// forms; and global accesses matched as windows (one tile coordinate per buffer axis, offsets
// uniform, masks of the form index < bound):
//
//   before (VR):                                   after (the matched window):
//     %r_i = iota 4 : index[4]                       X[%3 + i0, %17 + i1]
//     %20 = broadcast %5, dims [0] : index[4, 1024]    offsets  %3 = r_o * 4, %17 = c2_o * 1024
//     %19 = add %18, %c2_i : index[1024]               tile axes 0, 1
//     %21 = broadcast %19, dims [1] : index[4, 1024]   bounds   [8192, 4096]
//     %X = load X[%20, %21] : bf16[4, 1024]
#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

namespace {

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

}  // namespace

void KernelLowering::analyze_region(const vrtile::Region& region, const VOp* loop) {
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

bool computes_in_registers(VOpKind kind) {
  switch (kind) {
    case VOpKind::Full:
    case VOpKind::Iota:
    case VOpKind::Broadcast:
    case VOpKind::Permute:
    case VOpKind::Unary:
    case VOpKind::Binary:
    case VOpKind::Compare:
    case VOpKind::Logical:
    case VOpKind::Select:
    case VOpKind::Cast: return true;
    default: return false;
  }
}

// Rematerializable: a tile computed only from iota, full, rank-0 values, broadcasts,
// permutes and element-wise ops; it is re-emitted in whatever layout a consumer needs.
bool KernelLowering::remat(const VValue& v) {
  if (v->type.rank() == 0) return false;
  auto found = remat_.find(v.get());
  if (found != remat_.end()) return found->second;
  const VOp* op = def(v);
  bool result = false;
  if (op && computes_in_registers(op->kind)) {
    result = op->kind == VOpKind::Iota || op->kind == VOpKind::Full ||
             std::all_of(op->operands.begin(), op->operands.end(),
                         [&](const VValue& x) { return x->type.rank() == 0 || remat(x); });
  }
  remat_[v.get()] = result;
  return result;
}

std::optional<Affine> KernelLowering::affine(const VValue& v) {
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
bool KernelLowering::mask_bounds(const VValue& mask, const std::vector<int>& axis_map,
                                 const std::vector<Affine>& indices, size_t rank,
                                 std::vector<int64_t>* bounds) {
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

std::optional<Window> KernelLowering::match_window(const VOp& op,
                                                   const std::vector<int64_t>& tile_shape) {
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
bool KernelLowering::async_copyable(const VOp& load, const Window& window, bool packed_int4) {
  if (!options_.use_async_copy) return false;
  const std::vector<int64_t>& tile = load.results[0]->type.shape;
  const std::vector<int64_t>& extents = load.buffer->shape;
  if (tile.empty() || extents.empty()) return false;
  // An int4 buffer is packed two elements a byte, and so is its shared tile (32 elements are 16
  // bytes), which only the reads of a register operand that plan_dots stages unpack: every
  // other reader of shared tiles takes a byte an element.
  if ((load.buffer->dtype == DType::I4) != packed_int4) return false;
  const int bytes = dtype_bytes(load.buffer->dtype);
  if (16 % bytes != 0) return false;
  const int64_t vec = load.buffer->dtype == DType::I4 ? 32 : 16 / bytes;
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

}  // namespace nautilus::matile::lowering
