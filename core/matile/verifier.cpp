#include "core/matile/verifier.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>
#include <utility>
#include <unordered_map>
#include <unordered_set>

#include "core/layout/printer.h"
#include "core/matile/hopper.h"
#include "core/matile/layouts.h"
#include "core/matile/printer.h"
#include "core/matile/visitor.h"
#include "core/scalar/verifier.h"

namespace nautilus::matile {
namespace {

bool is_index_scalar(const Value& v) {
  return v && v->type.dtype == DType::Index && v->type.shape.empty();
}

class KernelVerifier : public Visitor {
 public:
  KernelVerifier(const Kernel& kernel, const std::unordered_set<const scalar::BufferNode*>& declared,
                 std::string arch, std::vector<std::string>* errors)
      : kernel_(kernel), declared_(declared), arch_(std::move(arch)), errors_(errors) {}

  void run() {
    for (const Buffer& buffer : kernel_.params) {
      if (!buffer || !declared_.count(buffer.get())) {
        error("", "param " + (buffer ? buffer->name : std::string("<null>")) +
                      " is not a buffer of the module");
      } else {
        params_.insert(buffer.get());
      }
    }
    if (kernel_.warps < 1 || kernel_.warps > 32) error("", "warps must be in 1..32");
    check_shared();
    check_hopper_objects();
    scopes_.emplace_back();
    for (const GridAxis& axis : kernel_.grid) {
      if (axis.extent < 1) error("", "grid extents must be positive");
      if (!is_index_scalar(axis.var)) error("", "grid variables must be index scalars");
      define(axis.var, "grid");
    }
    if (kernel_.tile_group < 1) error("", "the tile order's group must be at least 1");
    if (kernel_.dynamic_tiles && !kernel_.persistent) {
      error("", "a dynamic tile scheduler walks a persistent kernel's tiles; this kernel is not persistent");
    }
    if (kernel_.tile_group > 1 && kernel_.grid.size() < 2) {
      error("", "a grouped tile order needs two grid axes, the kernel has " +
                    std::to_string(kernel_.grid.size()));
    }
    if (kernel_.grid.size() < 32 && (kernel_.reversed_axes >> kernel_.grid.size()) != 0) {
      error("", "the tile order reverses a grid axis the kernel does not have (it has " +
                    std::to_string(kernel_.grid.size()) + ")");
    }
    if (!kernel_.body) {
      error("", "no body");
      return;
    }
    region(*kernel_.body, false);
  }

 private:
  void error(const std::string& where, const std::string& message) {
    errors_->push_back("kernel " + kernel_.name + (where.empty() ? "" : ": " + where) + ": " +
                       message);
  }

  void check_shared() {
    int64_t end = 0;
    for (const SharedAlloc& alloc : kernel_.shared) {
      const std::string where = "shared " + alloc.name;
      if (alloc.byte_offset % 128 != 0) error(where, "not 128-byte aligned");
      if (alloc.alias_of >= 0) {
        // An alias reuses its base's bytes: the same element size, inside the base.
        const size_t base = static_cast<size_t>(alloc.alias_of);
        if (&alloc - kernel_.shared.data() <= alloc.alias_of || kernel_.shared[base].alias_of >= 0) {
          error(where, "aliases an allocation that is not an earlier one with bytes of its own");
        } else if (kernel_.shared[base].byte_offset != alloc.byte_offset ||
                   alloc.byte_size > kernel_.shared[base].byte_size ||
                   dtype_bytes(kernel_.shared[base].dtype) != dtype_bytes(alloc.dtype)) {
          error(where, "does not lie inside " + kernel_.shared[base].name +
                           " with the same element size, the allocation it aliases");
        }
      } else if (alloc.byte_offset < end) {
        error(where, "overlaps the previous allocation");
      }
      if (alloc.stages < 1) error(where, "needs at least one stage");
      int64_t elements = 1;
      for (int64_t extent : alloc.shape) {
        if (extent < 1) error(where, "extents must be positive");
        elements *= extent;
      }
      if (alloc.layout.size() != elements) error(where, "layout size differs from the shape");
      if (alloc.stage_elements < alloc.layout.cosize()) {
        error(where, "stage_elements is below the layout's cosize " +
                         std::to_string(alloc.layout.cosize()));
      }
      if (alloc.byte_size != global_bytes(alloc.dtype, int64_t{alloc.stages} * alloc.stage_elements)) {
        error(where, "byte_size is not stages * stage_elements * element bytes");
      }
      if (alloc.dtype == DType::I4 && (alloc.stage_elements % 32 != 0 || alloc.shape.empty() ||
                                       alloc.shape.back() % 32 != 0 || !alloc.layout.swizzle.is_identity())) {
        error(where, "an int4 allocation is packed two elements a byte: whole 16-byte rows of 32 "
                     "elements, unswizzled");
      }
      if (alloc.alias_of < 0) end = alloc.byte_offset + alloc.byte_size;
    }
    if (end > kernel_.shared_bytes) error("", "allocations end past shared_bytes");
  }

  void check_hopper_objects() {
    if ((!kernel_.mbarriers.empty() || !kernel_.tma_maps.empty()) && arch_ != "sm_90a") {
      error("", "mbarriers and tensor maps need sm_90a, the module is " + arch_);
    }
    for (const MBarrierAlloc& barrier : kernel_.mbarriers) {
      const std::string where = "mbarrier " + barrier.name;
      expect(barrier.count >= 1, where, "needs at least one slot");
      expect(barrier.arrivals >= 1 && barrier.arrivals < (int64_t{1} << 20), where,
             "arrival counts are in 1..2^20-1");
    }
    for (const TmaMap& map : kernel_.tma_maps) {
      const std::string where = "tensor_map " + map.name;
      if (!map.buffer) {
        error(where, "no buffer");
        continue;
      }
      if (!params_.count(map.buffer.get())) error(where, map.buffer->name + " is not a param of the kernel");
      if (!expect(map.box.size() == map.buffer->shape.size() && !map.box.empty() && map.box.size() <= 5,
                  where, "needs one box extent per buffer axis (rank 1..5)")) {
        continue;
      }
      for (int64_t extent : map.box) expect(extent >= 1 && extent <= 256, where, "box extents are in 1..256");
      const std::vector<int> tile_axes = tma_tile_axes(map);
      const int rank = static_cast<int>(map.box.size());
      if (!expect(tile_axes.size() == 2 && tile_axes[0] >= 0 && tile_axes[0] < tile_axes[1] &&
                      tile_axes[1] == rank - 1,
                  where, "the tile spans two increasing buffer axes, the second the last one")) {
        continue;
      }
      for (int axis = 0; axis < rank; ++axis) {
        if (axis == tile_axes[0] || axis == tile_axes[1]) continue;
        expect(map.box[static_cast<size_t>(axis)] == 1, where,
               "the box is 1 on axis " + std::to_string(axis) + ", outside the tile");
      }
      const int64_t inner_bytes = map.box.back() * dtype_bytes(map.buffer->dtype);
      expect(inner_bytes % 16 == 0, where, "the inner box extent must span a multiple of 16 bytes");
      expect(map.shared_layout || map.swizzle_bytes == 0 || inner_bytes <= map.swizzle_bytes, where,
             "the inner box (" + std::to_string(inner_bytes) + " bytes) exceeds the " +
                 std::to_string(map.swizzle_bytes) + "-byte swizzle span");
      // The global row pitch of every outer axis must be a multiple of 16 bytes.
      int64_t pitch = dtype_bytes(map.buffer->dtype);
      for (size_t k = map.buffer->shape.size(); k-- > 1;) {
        pitch *= map.buffer->shape[k];
        expect(pitch % 16 == 0, where, "global strides must be multiples of 16 bytes");
      }
      Result<layout::ComposedLayout> box = tma_tile_layout(map);
      if (!box) error(where, box.error().message);
      if (box && box->size() != std::accumulate(map.box.begin(), map.box.end(), int64_t{1},
                                                std::multiplies<int64_t>())) {
        error(where, "the shared layout does not cover the box");
      }
    }
  }

  // ---- values and scopes

  void define(const Value& value, const std::string& where) {
    if (!value) {
      error(where, "null value");
      return;
    }
    if (value->name.empty()) error(where, "a value has no name");
    if (!names_.insert(value->name).second) error(where, "value name %" + value->name + " is defined twice");
    scopes_.back().insert(value.get());
    check_layout(value, where);
  }

  bool visible(const Value& value) const {
    for (const auto& scope : scopes_) {
      if (scope.count(value.get())) return true;
    }
    return false;
  }

  void check_layout(const Value& value, const std::string& where) {
    const RegisterLayout& l = value->layout;
    const std::string what = "%" + value->name;
    for (int64_t extent : value->type.shape) {
      if (extent < 1) {
        error(where, what + " has a non-positive extent");
        return;
      }
    }
    if (l.tv.layout.rank() != 2) {
      error(where, what + " layout is not a (thread, slot) layout");
      return;
    }
    if (!(l.tv.tile == tile_tuple(value->type.shape))) {
      error(where, what + " layout tile " + layout::to_string(l.tv.tile) + " is not its shape");
      return;
    }
    if (l.threads() != threads()) {
      error(where, what + " layout has " + std::to_string(l.threads()) + " threads, " +
                       (role_ ? "the role " + role_->name : std::string("the CTA")) + " " +
                       std::to_string(threads()));
      return;
    }
    // Values of one kernel share few layouts (a broadcast chain has one): each (layout, tile)
    // is checked once, and without listing every slot, since the tiles of the search's worst
    // candidates hold tens of millions of elements.
    const std::string key = layout::to_string(l.tv.layout) + " of " + layout::to_string(l.tv.tile);
    auto known = covering_.find(key);
    if (known == covering_.end()) {
      LayoutCheck check;
      Result<layout::TVLayout> tv = layout::make_tv_layout(l.tv.layout, l.tv.tile);
      if (!tv) {
        check.tv_error = tv.error().message;
      } else {
        check.first_unheld = first_unheld_element(l, value->type.element_count());
      }
      known = covering_.emplace(key, std::move(check)).first;
    }
    const LayoutCheck& check = known->second;
    if (check.tv_error) {
      error(where, what + ": " + *check.tv_error);
    } else if (check.first_unheld >= 0) {
      error(where, what + " layout leaves element " + std::to_string(check.first_unheld) + " unheld");
    }
  }

  // The first element of the tile that no (thread, slot) of `l` holds, or -1. A layout whose
  // non-broadcast modes, sorted by stride, tile [0, elements) exactly (each stride the product
  // of the shapes below it) holds every element; others are enumerated.
  static int64_t first_unheld_element(const RegisterLayout& l, int64_t elements) {
    {
      const std::vector<int64_t> shapes = layout::leaves(l.tv.layout.shape());
      const std::vector<int64_t> strides = layout::leaves(l.tv.layout.stride());
      std::vector<std::pair<int64_t, int64_t>> modes;  // (stride, shape)
      bool affine_cover = shapes.size() == strides.size();
      for (size_t i = 0; affine_cover && i < shapes.size(); ++i) {
        if (strides[i] < 0) affine_cover = false;
        if (strides[i] > 0 && shapes[i] > 1) modes.emplace_back(strides[i], shapes[i]);
      }
      std::sort(modes.begin(), modes.end());
      int64_t covered = 1;
      for (const auto& [stride, shape] : modes) {
        if (stride != covered) affine_cover = false;
        covered *= shape;
      }
      if (affine_cover && covered == elements) return -1;
    }
    const layout::TVIndexTable indices(l.tv);
    std::vector<bool> held(static_cast<size_t>(elements), false);
    for (int64_t base : indices.thread) {
      for (int64_t offset : indices.value) {
        const int64_t e = base + offset;
        if (e >= 0 && e < elements) held[static_cast<size_t>(e)] = true;
      }
    }
    for (int64_t e = 0; e < elements; ++e) {
      if (!held[static_cast<size_t>(e)]) return e;
    }
    return -1;
  }

  void use(const Value& value, const std::string& where) {
    if (!value) {
      error(where, "missing operand");
      return;
    }
    if (!visible(value)) error(where, "%" + value->name + " is used before its definition or out of scope");
  }

  // ---- regions and ops

  void region(const Region& r, bool loop_body) {
    for (size_t i = 0; i < r.ops.size(); ++i) {
      if (!r.ops[i]) {
        error("", "null op");
        continue;
      }
      const Op& op = *r.ops[i];
      if (op.kind == OpKind::Yield && (!loop_body || i + 1 != r.ops.size())) {
        error(op_label(op), "a yield must end a for body");
      }
      visit(op);
    }
    if (loop_body && (r.ops.empty() || !r.ops.back() || r.ops.back()->kind != OpKind::Yield)) {
      error("", "a for body must end with a yield");
    }
  }

  bool expect(bool ok, const std::string& where, const std::string& message) {
    if (!ok) error(where, message);
    return ok;
  }

  const SharedAlloc* alloc_of(const SharedRef& ref, const std::string& where) {
    if (ref.alloc < 0 || ref.alloc >= static_cast<int>(kernel_.shared.size())) {
      error(where, "no shared allocation " + std::to_string(ref.alloc));
      return nullptr;
    }
    if (ref.stage) {
      use(ref.stage, where);
      expect(is_index_scalar(ref.stage), where, "a stage must be an index scalar");
    }
    const SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(ref.alloc)];
    expect(ref.offsets.size() == alloc.shape.size(), where, "window offsets do not match " + alloc.name);
    return &alloc;
  }

  // The window of `shape` (the op's tile) at `ref` lies inside the allocation.
  void check_window(const SharedRef& ref, const SharedAlloc& alloc,
                    const std::vector<int64_t>& shape, const std::string& where) {
    if (ref.offsets.size() != alloc.shape.size() || shape.size() != alloc.shape.size()) {
      error(where, "window rank differs from " + alloc.name);
      return;
    }
    if (ref.transposed && shape.size() != 2) {
      error(where, "only rank-2 windows can be transposed");
      return;
    }
    for (size_t k = 0; k < shape.size(); ++k) {
      const int64_t extent = ref.transposed ? shape[shape.size() - 1 - k] : shape[k];
      if (ref.offsets[k] < 0 || ref.offsets[k] + extent > alloc.shape[k]) {
        error(where, "window reaches outside " + alloc.name);
        return;
      }
    }
  }

  void check_access(const Op& op, const std::vector<int64_t>& tile_shape, const std::string& where) {
    if (!op.buffer) {
      error(where, "no buffer");
      return;
    }
    if (!params_.count(op.buffer.get())) error(where, op.buffer->name + " is not a param of the kernel");
    const size_t rank = op.buffer->shape.size();
    if (op.access.form == GlobalAccess::Form::Gather) return;
    if (op.access.offsets.size() != rank || op.access.tile_axes.size() != rank ||
        op.access.bounds.size() != rank) {
      error(where, "window needs one offset, tile axis and bound per buffer axis");
      return;
    }
    std::vector<int> seen(tile_shape.size(), 0);
    for (size_t j = 0; j < rank; ++j) {
      if (op.access.offsets[j]) {
        use(op.access.offsets[j], where);
        expect(is_index_scalar(op.access.offsets[j]), where, "window offsets must be index scalars");
      }
      const int axis = op.access.tile_axes[j];
      if (axis >= static_cast<int>(tile_shape.size()) || axis < -1) {
        error(where, "window tile axis out of range");
      } else if (axis >= 0) {
        seen[static_cast<size_t>(axis)]++;
      }
      if (op.access.bounds[j] > op.buffer->shape[j]) error(where, "window bound past the buffer's extent");
    }
    for (size_t k = 0; k < seen.size(); ++k) {
      if (seen[k] > 1) error(where, "tile axis " + std::to_string(k) + " addresses two buffer axes");
      if (seen[k] == 0 && tile_shape[k] > 1) {
        error(where, "tile axis " + std::to_string(k) + " addresses no buffer axis");
      }
    }
  }

  void check_gather(const Op& op, const Value& tile, const std::string& where) {
    if (op.access.form != GlobalAccess::Form::Gather || !op.buffer || !tile) return;
    const std::vector<Value> indices = gather_indices(op);
    expect(indices.size() == op.buffer->shape.size(), where, "needs one index tile per buffer axis");
    for (const Value& index : indices) {
      if (!index) continue;
      expect(index->type == TileType{DType::Index, tile->type.shape} && index->layout == tile->layout,
             where, "index tiles must be index tiles in the accessed tile's layout");
    }
    const Value mask = gather_mask(op);
    if (op.access.has_mask) {
      expect(mask && mask->type == TileType{DType::Bool, tile->type.shape} && mask->layout == tile->layout,
             where, "the mask must be a bool tile in the accessed tile's layout");
    }
  }

  void check_register_move(const Op& op, const std::string& where) {
    const Value& source = op.operands[0];
    const Value& result = op.results[0];
    std::vector<int64_t> argument;
    const RegisterMove move = register_move_of(op, &argument);
    if (std::optional<std::string> why = register_move_error(
            move, source->layout, source->type.shape, result->layout, result->type.shape, argument)) {
      error(where, "not register-only: " + *why);
    }
  }

  // The checks every op gets (operands in scope, result count, no null values), then its kind's
  // own checks (visit_<Kind>, below), then its results enter the scope.
  using Visitor::visit;
  void visit(const Op& op) override {
    const std::string where = op_label(op);
    if (op.kind != OpKind::For) {
      for (const Value& v : used_values(op)) use(v, where);
    } else {
      for (const Value& v : op.operands) use(v, where);
      if (op.trip_count) {
        use(op.trip_count, where);
        expect(is_index_scalar(op.trip_count), where, "a trip count must be an index scalar");
      }
      if (op.tile_loop) {
        expect(kernel_.persistent, where, "a tile loop walks a persistent kernel's tiles; this kernel is not persistent");
        expect(!op.trip_count && op.pipeline_stages == 0, where, "a tile loop has no trip count and no pipeline stages");
        if (kernel_.dynamic_tiles) {
          // The dynamic walk carries the tile's launch index as the first iter_arg (ir.h notes).
          if (expect(!op.operands.empty(), where,
                     "a dynamic tile loop carries its tile's launch index as its first iter_arg")) {
            expect(is_index_scalar(op.operands[0]), where, "the tile's launch index is an index scalar");
          }
        }
      }
    }
    const size_t expected_results =
        op.kind == OpKind::For ? op.operands.size()
        : (op.kind == OpKind::GlobalStore || op.kind == OpKind::AsyncCopy ||
           op.kind == OpKind::CommitGroup || op.kind == OpKind::WaitGroup ||
           op.kind == OpKind::Barrier || op.kind == OpKind::SharedStore || op.kind == OpKind::Yield ||
           (is_hopper(op.kind) && op.kind != OpKind::Wgmma && op.kind != OpKind::CtaIndex &&
            op.kind != OpKind::TileRead))
            ? 0
            : 1;
    if (is_hopper(op.kind) && arch_ != "sm_90a") error(where, "needs sm_90a, the module is " + arch_);
    if (role_ && inside_role_forbidden(op)) {
      error(where, std::string("cannot run inside role ") + role_->name + ": " + inside_role_forbidden(op));
    }
    if (op.results.size() != expected_results) {
      error(where, "has " + std::to_string(op.results.size()) + " results, expected " +
                       std::to_string(expected_results));
      return;
    }
    for (const Value& r : op.results) {
      if (!r) {
        error(where, "null result");
        return;
      }
    }
    for (const Value& v : op.operands) {
      if (!v) {
        error(where, "null operand");
        return;
      }
    }
    where_ = where;
    Visitor::visit(op);
    if (op.kind != OpKind::For) {
      for (const Value& r : op.results) define(r, where);
    }
  }

  void visit_For(const Op& op) override { for_op(op, op_label(op)); }

  void visit_Roles(const Op& op) override {
    const std::string& where = where_;
    if (!expect(role_ == nullptr, where, "roles cannot nest")) return;
    if (std::optional<std::string> why = roles_error(op, kernel_.warps)) error(where, *why);
    std::unordered_set<std::string> role_names;
    for (const WarpRole& role : op.roles) {
      expect(role_names.insert(role.name).second, where, "role name " + role.name + " is used twice");
      if (!role.body) {
        error(where, "role " + role.name + " has no body");
        continue;
      }
      role_ = &role;
      scopes_.emplace_back();
      region(*role.body, false);
      scopes_.pop_back();
      role_ = nullptr;
    }
  }

  void for_op(const Op& op, const std::string& where) {
    expect(op.extent >= 0, where, "negative trip count");
    expect(op.block_args.size() == op.operands.size(), where, "one block argument per iter_arg");
    scopes_.emplace_back();
    if (op.loop_var) {
      expect(is_index_scalar(op.loop_var), where, "the loop variable must be an index scalar");
      define(op.loop_var, where);
    } else {
      error(where, "no loop variable");
    }
    for (size_t i = 0; i < op.block_args.size() && i < op.operands.size(); ++i) {
      if (!op.block_args[i]) continue;
      expect(op.block_args[i]->type == op.operands[i]->type &&
                 op.block_args[i]->layout == op.operands[i]->layout,
             where, "block argument %" + op.block_args[i]->name + " differs from its iter_arg");
      define(op.block_args[i], where);
    }
    if (op.body) {
      region(*op.body, true);
      const OpPtr& last = op.body->ops.empty() ? nullptr : op.body->ops.back();
      if (last && last->kind == OpKind::Yield) {
        expect(last->operands.size() == op.operands.size(), where, "yields the wrong number of values");
        for (size_t i = 0; i < last->operands.size() && i < op.operands.size(); ++i) {
          if (!last->operands[i]) continue;
          expect(last->operands[i]->type == op.operands[i]->type &&
                     last->operands[i]->layout == op.operands[i]->layout,
                 where, "yielded %" + last->operands[i]->name + " differs from its iter_arg");
        }
      }
    } else {
      error(where, "no body");
    }
    scopes_.pop_back();
    for (size_t i = 0; i < op.results.size() && i < op.operands.size(); ++i) {
      expect(op.results[i]->type == op.operands[i]->type &&
                 op.results[i]->layout == op.operands[i]->layout,
             where, "result %" + op.results[i]->name + " differs from its iter_arg");
      define(op.results[i], where);
    }
  }

  // ---- each kind's own checks (`where_` names the op)

  bool operand_count(const Op& op, size_t n) {
    return expect(op.operands.size() == n, where_, "needs " + std::to_string(n) + " operands");
  }

  // Element-wise ops: every operand in the result's layout and shape. Inside a role, a scalar of
  // the CTA (a grid index) may be read as it is: every thread of the CTA holds it, so each of
  // the role's threads does.
  bool same_layouts(const Op& op) {
    const Value& result = op.results[0];
    for (const Value& v : op.operands) {
      const bool cta_scalar = role_ && v->type.rank() == 0 && result->type.rank() == 0 &&
                              v->layout == uniform_layout({}, kernel_.threads());
      if (!expect(cta_scalar || v->layout == result->layout, where_,
                  "operand %" + v->name + " is not in the result's layout")) {
        return false;
      }
      if (!expect(v->type.shape == result->type.shape, where_,
                  "operand %" + v->name + " has another shape")) {
        return false;
      }
    }
    return true;
  }

  void visit_Iota(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (operand_count(op, 0)) {
      expect(result->type == TileType{DType::Index, {op.extent}} && op.extent > 0, where,
             "iota gives index[n], n > 0");
    }
  }

  void visit_Full(const Op& op) override {
    operand_count(op, 0);
  }

  void visit_Unary(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (operand_count(op, 1) && same_layouts(op)) {
      expect(op.operands[0]->type.dtype == result->type.dtype, where, "dtype changes");
      expect(is_float(result->type.dtype) || (result->type.dtype == DType::Index &&
                                              (op.unary_op == UnaryOp::Neg ||
                                               op.unary_op == UnaryOp::Abs)),
             where, "operation not defined on " + std::string(dtype_name(result->type.dtype)));
    }
  }

  void visit_Binary(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (operand_count(op, 2) && same_layouts(op)) {
      expect(op.operands[0]->type.dtype == result->type.dtype &&
                 op.operands[1]->type.dtype == result->type.dtype,
             where, "operand dtypes differ");
      const bool index_only = op.binary_op == BinaryOp::FloorDiv || op.binary_op == BinaryOp::Mod;
      expect(result->type.dtype == DType::Index ? op.binary_op != BinaryOp::Div
                                                : is_float(result->type.dtype) && !index_only,
             where, "operation not defined on " + std::string(dtype_name(result->type.dtype)));
    }
  }

  void visit_Compare(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (operand_count(op, 2) && same_layouts(op)) {
      expect(op.operands[0]->type.dtype == op.operands[1]->type.dtype, where, "operand dtypes differ");
      expect(result->type.dtype == DType::Bool, where, "a comparison gives bool");
    }
  }

  void visit_Logical(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (operand_count(op, 2) && same_layouts(op)) {
      expect(op.operands[0]->type.dtype == DType::Bool && op.operands[1]->type.dtype == DType::Bool &&
                 result->type.dtype == DType::Bool,
             where, "logical ops take and give bool");
    }
  }

  void visit_Select(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (operand_count(op, 3) && same_layouts(op)) {
      expect(op.operands[0]->type.dtype == DType::Bool, where, "the condition must be bool");
      expect(op.operands[1]->type.dtype == result->type.dtype &&
                 op.operands[2]->type.dtype == result->type.dtype,
             where, "branches must have the result's dtype");
    }
  }

  void visit_Cast(const Op& op) override {
    if (operand_count(op, 1)) same_layouts(op);
  }

  void visit_Broadcast(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 1)) return;
    const TileType& s = op.operands[0]->type;
    bool ok = op.dims.size() == s.shape.size() && s.dtype == result->type.dtype;
    for (size_t i = 0; ok && i < op.dims.size(); ++i) {
      ok = op.dims[i] >= 0 && op.dims[i] < result->type.rank() && (i == 0 || op.dims[i] > op.dims[i - 1]) &&
           result->type.shape[static_cast<size_t>(op.dims[i])] == s.shape[i];
    }
    if (expect(ok, where, "broadcast dims do not match the shapes")) check_register_move(op, where);
  }

  void visit_Permute(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 1)) return;
    const TileType& s = op.operands[0]->type;
    std::vector<int> seen(s.shape.size(), 0);
    bool ok = op.dims.size() == s.shape.size() && s.dtype == result->type.dtype &&
              result->type.rank() == s.rank();
    for (size_t i = 0; ok && i < op.dims.size(); ++i) {
      ok = op.dims[i] >= 0 && op.dims[i] < s.rank() && !seen[static_cast<size_t>(op.dims[i])]++ &&
           result->type.shape[i] == s.shape[static_cast<size_t>(op.dims[i])];
    }
    if (expect(ok, where, "permute order does not match the shapes")) check_register_move(op, where);
  }

  void visit_ExtractSlice(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 1)) return;
    const TileType& s = op.operands[0]->type;
    bool ok = op.offsets.size() == s.shape.size() && result->type.rank() == s.rank() &&
              s.dtype == result->type.dtype;
    for (size_t k = 0; ok && k < op.offsets.size(); ++k) {
      ok = op.offsets[k] >= 0 && op.offsets[k] + result->type.shape[k] <= s.shape[k];
    }
    if (!expect(ok, where, "slice outside its source")) return;
    if (op.slice_interleave > 1) {
      // One k step of 16 along the one axis the slice shortens; its block of interleave steps
      // inside the source.
      const int64_t p = op.slice_interleave;
      int shortened = 0;
      bool step = true;
      for (size_t k = 0; k < op.offsets.size(); ++k) {
        if (result->type.shape[k] == s.shape[k]) {
          step = step && op.offsets[k] == 0;
          continue;
        }
        ++shortened;
        step = step && result->type.shape[k] == 16 && op.offsets[k] % 16 == 0 && s.shape[k] % (16 * p) == 0;
      }
      if (!expect(shortened == 1 && step, where,
                  "an interleaved slice takes one k step of 16 along one axis, whose extent is a multiple of "
                  "16 times the interleave " + std::to_string(p))) {
        return;
      }
    }
    check_register_move(op, where);
  }

  void visit_ConvertLayout(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 1)) return;
    if (!expect(op.operands[0]->type == result->type, where, "a conversion keeps the type")) return;
    if (op.via_shared) {
      expect(op.scratch >= 0 && op.scratch < static_cast<int>(kernel_.shared.size()), where,
             "a conversion through shared memory needs a scratch allocation");
    } else {
      check_register_move(op, where);
    }
  }

  void visit_Reduce(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 1)) return;
    const Value& x = op.operands[0];
    if (!expect(is_float(x->type.dtype) && op.axis >= 0 && op.axis < x->type.rank(), where,
                "reduces a float tile along an axis it has")) {
      return;
    }
    Result<RegisterLayout> slice = slice_layout(x->layout, x->type.shape, op.axis);
    if (!slice) {
      error(where, slice.error().message);
      return;
    }
    if (!(slice->tv == result->layout.tv)) {
      error(where, "the result layout is not the slice of the operand's (" + layout_text(*slice) + ")");
    }
    Result<ReducePlan> plan = reduce_plan(x->layout, x->type.shape, op.axis);
    if (!plan) {
      error(where, plan.error().message);
      return;
    }
    expect(plan->xor_masks == op.xor_masks, where, "shuffle masks differ from the layout's");
    expect(plan->cross_warp == (op.scratch >= 0), where,
           plan->cross_warp ? "warps must combine through a scratch allocation"
                            : "a scratch allocation is given but no warps combine");
  }

  void visit_Mma(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 3)) return;
    const Value &a = op.operands[0], &b = op.operands[1], &c = op.operands[2];
    if (!expect(a->type.rank() == 2 && b->type.rank() == 2 && c->type.rank() == 2, where,
                "operands must be matrices")) {
      return;
    }
    const int64_t M = a->type.shape[0], K = a->type.shape[1], N = b->type.shape[1];
    expect((a->type.dtype == DType::BF16 || a->type.dtype == DType::F16) &&
               b->type.dtype == a->type.dtype,
           where, "a and b must be bf16 or f16 of one dtype");
    expect(c->type == (TileType{DType::F32, {M, N}}) && b->type.shape[0] == K &&
               result->type == c->type,
           where, "shapes must be [M,K] x [K,N] + f32[M,N]");
    if (!expect(op.warps_m * op.warps_n == warps(), where,
                "the warp grid must cover the kernel's warps")) {
      return;
    }
    if (op.swapped && !expect(mma_swap_fits(M, N, op.warps_m, op.warps_n) && b->layout.column_interleave == 1,
                              where, "a swapped mma needs 1, 2, 4 or 8 rows on one warp along M, N a multiple "
                                     "of 16 per warp and B's columns not interleaved")) {
      return;
    }
    Result<RegisterLayout> la = mma_a_layout(M, K, op.warps_m, op.warps_n);
    // B and C share their columns' interleave (layouts.h); B's says which.
    const int interleave = b->layout.column_interleave;
    Result<RegisterLayout> lb = mma_b_layout(K, N, op.warps_m, op.warps_n, interleave);
    Result<RegisterLayout> lc = op.swapped ? mma_swapped_c_layout(M, N, op.warps_n)
                                           : mma_c_layout(M, N, op.warps_m, op.warps_n, interleave);
    if (!la || !lb || !lc) {
      error(where, !la ? la.error().message : !lb ? lb.error().message : lc.error().message);
      return;
    }
    // The messages name the expected layout; they are built only on failure, since the
    // search verifies every candidate and layout text is the verifier's costliest part.
    if (!(a->layout == *la)) error(where, "a is not in the mma A fragment layout " + layout_text(*la));
    if (!(b->layout == *lb)) error(where, "b is not in the mma B fragment layout " + layout_text(*lb));
    if (!(c->layout == *lc && result->layout == *lc)) {
      error(where, "c is not in the mma C fragment layout " + layout_text(*lc));
    }
  }

  void visit_FmaDot(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    if (!operand_count(op, 1)) return;
    const SharedAlloc* a = alloc_of(op.shared, where);
    const SharedAlloc* b = alloc_of(op.shared_b, where);
    const Value& acc = op.operands[0];
    if (!a || !b) return;
    if (!expect(acc->type.rank() == 2 && acc->type.dtype == DType::F32 && result->type == acc->type &&
                    result->layout == acc->layout && a->shape.size() == 2 && b->shape.size() == 2,
                where, "fma_dot needs matrices and an f32 accumulator")) {
      return;
    }
    const int64_t M = acc->type.shape[0], N = acc->type.shape[1];
    const int64_t K = op.shared.transposed ? a->shape[0] - op.shared.offsets[0]
                                           : a->shape[1] - op.shared.offsets[1];
    check_window(op.shared, *a, {M, K}, where);
    check_window(op.shared_b, *b, {K, N}, where);
  }

  void visit_GlobalLoad(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    check_access(op, result->type.shape, where);
    if (op.buffer) {
      expect(result->type.dtype == op.buffer->dtype, where, "a load gives the buffer's dtype");
      check_gather(op, result, where);
    }
  }

  void visit_GlobalStore(const Op& op) override {
    const std::string& where = where_;
    const Value value = stored_value(op);
    if (!expect(value != nullptr, where, "no stored value")) return;
    check_access(op, value->type.shape, where);
    if (op.buffer) {
      expect(value->type.dtype == op.buffer->dtype, where, "stores the buffer's dtype");
      expect(op.buffer->role != scalar::BufferRole::Input, where, "stores into an input");
      check_gather(op, value, where);
    }
  }

  void visit_AsyncCopy(const Op& op) override {
    const std::string& where = where_;
    check_access(op, op.tile_shape, where);
    const SharedAlloc* alloc = alloc_of(op.shared, where);
    if (!alloc || !op.buffer) return;
    expect(op.access.form == GlobalAccess::Form::Window, where, "cp.async copies windows");
    expect(alloc->dtype == op.buffer->dtype, where, "copies between one dtype");
    expect(global_bytes(alloc->dtype, op.vector_elements) == 16, where, "vectors are 16 bytes");
    expect(op.copy_layout.threads() <= threads(), where, "more copy threads than the CTA has");
    expect(op.copy_layout.tile == tile_tuple(op.tile_shape), where, "copy layout tile is not the window");
    if (op.predicate) {
      expect(op.predicate->type == TileType{DType::Bool, {}}, where, "the predicate is a bool scalar");
    }
    check_window(op.shared, *alloc, op.tile_shape, where);
  }

  void visit_WaitGroup(const Op& op) override {
    expect(op.extent >= 0, where_, "waits for a non-negative count");
  }

  void visit_SharedLoad(const Op& op) override {
    const std::string& where = where_;
    const Value& result = op.results[0];
    const SharedAlloc* alloc = alloc_of(op.shared, where);
    if (!alloc) return;
    const bool int4_as_bytes = result->type.dtype == DType::I4 && alloc->dtype == DType::I8;
    expect(result->type.dtype == alloc->dtype || int4_as_bytes, where, "reads the allocation's dtype");
    check_window(op.shared, *alloc, result->type.shape, where);
    if (op.shared_read == SharedRead::Scalar) return;
    expect(dtype_bytes(alloc->dtype) == 2, where, "ldmatrix reads 16-bit elements");
    const RegisterLayout& l = result->layout;
    if (!expect(result->type.rank() == 2 && (l.kind == LayoutKind::MmaA || l.kind == LayoutKind::MmaB),
                where, "ldmatrix gives an mma A or B fragment tile")) {
      return;
    }
    const int64_t R = result->type.shape[0], C = result->type.shape[1];
    Result<RegisterLayout> canonical = l.kind == LayoutKind::MmaA
                                           ? mma_a_layout(R, C, l.warps_m, l.warps_n)
                                           : mma_b_layout(R, C, l.warps_m, l.warps_n);
    if (!canonical) {
      error(where, canonical.error().message);
      return;
    }
    if (!(l == *canonical)) error(where, "the result is not in its fragment layout " + layout_text(*canonical));
    expect(l.warps_m * l.warps_n == warps(), where, "the warp grid must cover the kernel's warps");
    if (l.kind == LayoutKind::MmaB) {
      expect((C / (8 * l.warps_n)) % 2 == 0, where, "ldmatrix.x4 of B needs an even number of n atoms per warp");
    }
  }

  void visit_SharedStore(const Op& op) override {
    const std::string& where = where_;
    if (!operand_count(op, 1)) return;
    const SharedAlloc* alloc = alloc_of(op.shared, where);
    if (!alloc) return;
    // int4 tiles go through int8 scratch allocations a signed byte an element.
    const bool int4_as_bytes = op.operands[0]->type.dtype == DType::I4 && alloc->dtype == DType::I8;
    expect(op.operands[0]->type.dtype == alloc->dtype || int4_as_bytes, where, "stores the allocation's dtype");
    expect(alloc->dtype != DType::I4, where,
           "an int4 allocation is packed two elements a byte: only cp.async writes it (whole bytes)");
    check_window(op.shared, *alloc, op.operands[0]->type.shape, where);
  }


  // ---- Hopper kinds (ir.h notes, "Hopper")

  int64_t threads() const {
    return role_ ? int64_t{role_->warpgroups} * kWarpgroupThreads : kernel_.threads();
  }
  int warps() const { return static_cast<int>(threads() / kWarpSize); }

  // Ops whose CTA-wide barriers or per-thread cp.async groups have no meaning inside a role
  // (the other roles never reach the barrier: it would hang).
  static const char* inside_role_forbidden(const Op& op) {
    switch (op.kind) {
      case OpKind::Barrier: return "bar.sync 0 waits for the whole CTA; use a named barrier";
      case OpKind::ConvertLayout:
        return op.via_shared ? "a conversion through shared memory uses bar.sync 0" : nullptr;
      case OpKind::Reduce: return op.scratch >= 0 ? "a cross-warp reduce uses bar.sync 0" : nullptr;
      case OpKind::AsyncCopy:
      case OpKind::CommitGroup:
      case OpKind::WaitGroup:
        return "cp.async producers inside roles are not supported; use TMA";
      case OpKind::MBarrierInit: return "mbarriers are initialized before the roles start";
      default: return nullptr;
    }
  }

  bool check_barrier_ref(const BarrierRef& ref) {
    if (!expect(ref.barrier >= 0 && ref.barrier < static_cast<int>(kernel_.mbarriers.size()), where_,
                "no mbarrier " + std::to_string(ref.barrier))) {
      return false;
    }
    if (ref.index) expect(is_index_scalar(ref.index), where_, "an mbarrier slot must be an index scalar");
    return true;
  }

  const TmaMap* map_of(const Op& op) {
    if (!expect(op.tma_map >= 0 && op.tma_map < static_cast<int>(kernel_.tma_maps.size()), where_,
                "no tensor map " + std::to_string(op.tma_map))) {
      return nullptr;
    }
    const TmaMap& map = kernel_.tma_maps[static_cast<size_t>(op.tma_map)];
    if (!map.buffer) return nullptr;
    bool ok = expect(op.operands.size() == map.buffer->shape.size(), where_,
                     "needs one coordinate per axis of " + map.buffer->name);
    for (const Value& c : op.operands) {
      ok = expect(is_index_scalar(c), where_, "coordinates must be index scalars") && ok;
    }
    return ok ? &map : nullptr;
  }

  // A TMA box lands in (or leaves) a whole stage of an allocation laid out as the map says.
  void check_box_allocation(const Op& op, const TmaMap& map) {
    const SharedAlloc* alloc = alloc_of(op.shared, where_);
    if (!alloc) return;
    expect(alloc->dtype == map.buffer->dtype, where_, "copies between one dtype");
    expect(alloc->shape == tma_tile_box(map) && !op.shared.transposed &&
               std::all_of(op.shared.offsets.begin(), op.shared.offsets.end(),
                           [](int64_t o) { return o == 0; }),
           where_, "the allocation " + alloc->name + " must be the box, a whole stage");
    Result<layout::ComposedLayout> box = tma_tile_layout(map);
    if (box) {
      expect(alloc->layout == *box, where_,
             alloc->name + " is not laid out as " + map.name + " lands its box");
    }
    const int64_t atom = map.swizzle_bytes == 0 ? 128 : 8 * int64_t{map.swizzle_bytes};
    expect(alloc->byte_offset % atom == 0 &&
               (alloc->stage_elements * dtype_bytes(alloc->dtype)) % atom == 0,
           where_, "every stage of " + alloc->name + " must be aligned to the swizzle atom (" +
                       std::to_string(atom) + " bytes)");
  }

  void visit_MBarrierInit(const Op& op) override { check_barrier_ref(op.mbarrier); }

  void visit_MBarrierArrive(const Op& op) override {
    check_barrier_ref(op.mbarrier);
    expect(op.tx_bytes >= 0 && op.tx_bytes < (int64_t{1} << 20), where_, "expect_tx bytes are in 0..2^20-1");
    expect(op.arrivals_per_op >= 1 && op.arrivals_per_op <= threads(), where_,
           "arrivals per op are in 1..the executing threads");
    if (op.arrive_per_warp) {
      expect(op.tx_bytes == 0 && op.arrivals_per_op * kWarpSize == threads(), where_,
             "an arrive per warp is plain and counts one arrival per warp of the executing threads");
    }
  }

  void visit_MBarrierWait(const Op& op) override {
    check_barrier_ref(op.mbarrier);
    if (operand_count(op, 1)) expect(is_index_scalar(op.operands[0]), where_, "the parity is an index scalar");
  }

  void visit_NamedBarrier(const Op& op) override {
    expect(op.barrier_id >= 1 && op.barrier_id <= 15, where_, "named barrier ids are 1..15");
    expect(op.barrier_threads >= kWarpSize && op.barrier_threads % kWarpSize == 0 &&
               op.barrier_threads <= kernel_.threads(),
           where_, "a named barrier counts whole warps of the CTA");
    if (op.warpgroup_ids.empty()) {
      expect(op.barrier_threads >= threads() || op.arrive_only, where_,
             "bar.sync counts fewer threads than execute it");
      return;
    }
    // Per-warpgroup ids: one per warpgroup of the executing role, each 0 (skips) or 1..15.
    const int64_t warpgroups = threads() / kWarpgroupThreads;
    if (!expect(role_ != nullptr && role_->warpgroups > 1 &&
                    static_cast<int64_t>(op.warpgroup_ids.size()) == warpgroups,
                where_, "per-warpgroup barrier ids need one id per warpgroup of a role of several")) {
      return;
    }
    bool any = false;
    for (int id : op.warpgroup_ids) {
      expect(id >= 0 && id <= 15, where_, "per-warpgroup barrier ids are 0 (skip) or 1..15");
      any = any || id != 0;
    }
    expect(any, where_, "no warpgroup executes the per-warpgroup barrier");
    expect(op.barrier_threads >= kWarpgroupThreads || op.arrive_only, where_,
           "bar.sync counts fewer threads than a warpgroup");
  }

  void visit_TmaLoad(const Op& op) override {
    check_barrier_ref(op.mbarrier);
    expect(op.multicast_mask >= 0 && op.multicast_mask < (int64_t{1} << 16), where_,
           "the multicast mask has 16 bits");
    if (const TmaMap* map = map_of(op)) {
      expect(map->buffer->dtype != DType::I4, where_,
             "an int4 buffer is packed two elements a byte: staged by cp.async, not by TMA");
      check_box_allocation(op, *map);
    }
  }

  void visit_TmaStore(const Op& op) override {
    if (const TmaMap* map = map_of(op)) {
      expect(map->buffer->role != scalar::BufferRole::Input, where_, "stores into an input");
      check_box_allocation(op, *map);
    }
  }

  void visit_BulkWaitGroup(const Op& op) override {
    expect(op.extent >= 0, where_, "waits for a non-negative count");
  }

  void visit_WgmmaWaitGroup(const Op& op) override {
    expect(op.extent >= 0, where_, "waits for a non-negative count");
  }

  void visit_Wgmma(const Op& op) override {
    const std::string& where = where_;
    const bool rs = op.operands.size() == 2;
    if (!expect(op.operands.size() == 1 || rs, where, "needs [a,] c")) return;
    const Value& c = op.operands.back();
    const Value& result = op.results[0];
    if (!expect(threads() % kWarpgroupThreads == 0, where, "runs on whole warpgroups")) return;
    const int warpgroups = static_cast<int>(threads() / kWarpgroupThreads);
    if (!expect(c->type.rank() == 2 && c->type.dtype == DType::F32 && result->type == c->type, where,
                "the accumulator is an f32 matrix")) {
      return;
    }
    const int64_t M = c->type.shape[0], N = c->type.shape[1], K = op.extent;
    Result<RegisterLayout> acc = wgmma_accumulator_layout(M, N, warpgroups);
    if (!acc) {
      error(where, acc.error().message);
      return;
    }
    if (!(c->layout == *acc && result->layout == *acc)) {
      error(where, "c is not in the wgmma accumulator layout " + layout_text(*acc));
    }
    DType ab = DType::BF16;
    if (rs) {
      const Value& a = op.operands[0];
      ab = a->type.dtype;
      expect(a->type.shape == (std::vector<int64_t>{M, K}), where, "a must be [M, K]");
      Result<RegisterLayout> la = wgmma_a_layout(M, K, warpgroups);
      if (la && !(a->layout == *la)) error(where, "a is not in the wgmma A fragment layout " + layout_text(*la));
    } else if (const SharedAlloc* a = alloc_of(op.shared, where)) {
      ab = a->dtype;
      check_window(op.shared, *a, {M, K}, where);
    }
    // 16-bit operands of one dtype (k16 steps), or 8-bit floats in shared memory (k32 steps,
    // e4m3 and e5m2 in any pairing; no register A: the RS form's fragment is 16-bit).
    const bool eight_bit = !rs && is_eight_bit_float(ab);
    expect(ab == DType::BF16 || ab == DType::F16 || eight_bit, where,
           "a and b must be bf16 or f16 of one dtype, or fp8 (e4m3, e5m2) from shared memory");
    if (const SharedAlloc* b = alloc_of(op.shared_b, where)) {
      expect(eight_bit ? is_eight_bit_float(b->dtype) : b->dtype == ab, where,
             "a and b must be bf16 or f16 of one dtype, or fp8 (e4m3, e5m2) from shared memory");
      check_window(op.shared_b, *b, {K, N}, where);
    }
    const int64_t k_step = eight_bit ? 32 : 16;
    expect(K >= k_step && K % k_step == 0, where, "k must be a multiple of " + std::to_string(k_step));
  }

  // The dynamic tile scheduler (ir.h notes): only in a persistent kernel that has it.
  bool check_dynamic_scheduler() {
    return expect(kernel_.persistent && kernel_.dynamic_tiles, where_,
                  "the dynamic tile scheduler's ops need a persistent kernel with dynamic tiles");
  }

  // The tile ring: a one-element Index allocation, one slot per stage.
  void check_tile_ring(const SharedRef& ref) {
    const SharedAlloc* alloc = alloc_of(ref, where_);
    if (!alloc) return;
    expect(alloc->dtype == DType::Index && alloc->shape == std::vector<int64_t>{1}, where_,
           "the tile ring " + alloc->name + " holds one index element per slot");
    for (int64_t offset : ref.offsets) expect(offset == 0, where_, "reads the ring slot's one element");
  }

  void visit_CtaIndex(const Op& op) override {
    check_dynamic_scheduler();
    expect(is_index_scalar(op.results[0]), where_, "the CTA index is an index scalar");
  }

  void visit_TileFetch(const Op& op) override {
    check_dynamic_scheduler();
    check_tile_ring(op.shared);
    check_barrier_ref(op.mbarrier);
    if (!expect(op.buffer != nullptr, where_, "needs the tile counter's buffer")) return;
    expect(op.buffer->role == scalar::BufferRole::Workspace, where_,
           "the tile counter " + op.buffer->name + " must be a workspace buffer (zeroed before every launch)");
    expect(op.buffer->element_count() * dtype_bytes(op.buffer->dtype) >= 4, where_,
           "the tile counter " + op.buffer->name + " needs 4 bytes");
    expect(params_.count(op.buffer.get()) > 0, where_, op.buffer->name + " is not a param of the kernel");
  }

  void visit_TileRead(const Op& op) override {
    check_dynamic_scheduler();
    check_tile_ring(op.shared);
    expect(is_index_scalar(op.results[0]), where_, "the tile read is an index scalar");
  }

  void visit_StMatrix(const Op& op) override {
    const std::string& where = where_;
    if (!operand_count(op, 1)) return;
    const Value& value = op.operands[0];
    const SharedAlloc* alloc = alloc_of(op.shared, where);
    if (!alloc) return;
    expect(value->type.dtype == alloc->dtype && dtype_bytes(alloc->dtype) == 2, where,
           "stmatrix stores 16-bit elements of the allocation's dtype");
    check_window(op.shared, *alloc, value->type.shape, where);
    if (!expect(threads() % kWarpgroupThreads == 0 && value->type.rank() == 2, where,
                "stores a matrix held by whole warpgroups")) {
      return;
    }
    const int warpgroups = static_cast<int>(threads() / kWarpgroupThreads);
    Result<RegisterLayout> acc =
        wgmma_accumulator_layout(value->type.shape[0], value->type.shape[1], warpgroups);
    if (!acc) {
      error(where, acc.error().message);
      return;
    }
    expect(value->layout == *acc, where, "the value is not in the wgmma accumulator layout");
    expect(value->type.shape[1] % 16 == 0, where, "stmatrix.x4 stores 16 columns at a time");
  }

  const Kernel& kernel_;
  const std::unordered_set<const scalar::BufferNode*>& declared_;
  std::string arch_;
  std::vector<std::string>* errors_;
  const WarpRole* role_ = nullptr;  // the role whose body is being checked
  std::unordered_set<const scalar::BufferNode*> params_;
  std::vector<std::unordered_set<const ValueNode*>> scopes_;
  std::unordered_set<std::string> names_;
  // What check_layout found for one (layout, tile): make_tv_layout's refusal, or the first
  // element no (thread, slot) holds (-1: all held).
  struct LayoutCheck {
    std::optional<std::string> tv_error;
    int64_t first_unheld = -1;
  };
  std::unordered_map<std::string, LayoutCheck> covering_;  // "layout of tile" → its check
  std::string where_;  // the op being checked, for each kind's checks
};

}  // namespace

std::vector<std::string> verify(const Module& module) {
  std::vector<std::string> errors;
  std::unordered_set<const scalar::BufferNode*> declared;
  scalar::check_global_buffers(module.params, module.allocations, &declared, &errors);
  if (module.arch != "sm_80" && module.arch != "sm_90a") {
    errors.push_back("module " + module.name + ": unknown arch " + module.arch);
  }
  std::unordered_set<std::string> kernel_names;
  for (const KernelPtr& kernel : module.kernels) {
    if (!kernel) {
      errors.push_back("module " + module.name + ": null kernel");
      continue;
    }
    if (!kernel_names.insert(kernel->name).second) {
      errors.push_back("module " + module.name + ": kernel name " + kernel->name + " is used twice");
    }
    KernelVerifier(*kernel, declared, module.arch, &errors).run();
  }
  return errors;
}

}  // namespace nautilus::matile
