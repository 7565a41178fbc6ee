// Register layout assignment (lower.h rule 4): every value kept in registers gets one layout
// before anything is emitted. Layouts that follow from operands are propagated first (mma
// accumulators the C fragment, element-wise results their first placed operand's, reduce
// results the slice of their operand's, loop-carried values their initial or yielded value's);
// a value still without one then takes what its first placed consumer needs (an mma operand its
// fragment layout, a broadcast's source the layout it reads without moving data); whatever is
// left is blocked, and propagation starts again:
//
//   before (VR):                          after (the layouts, 4 warps):
//     %s = dot %q, %k : f32[64, 64]         %s       mma_c warps(4,1)
//     %m = reduce max %s, axis 1            %m       the slice of mma_c along axis 1
//     %p = exp2 (%s - broadcast %m)         %p       mma_c warps(4,1)
//     %pb = cast %p : bf16[64, 64]          %pb      mma_c, read as the next dot's A fragment
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

bool KernelLowering::lives_in_registers(const VValue& v) {
  if (v->type.rank() == 0) return true;
  if (remat(v)) return false;
  const VOp* op = def(v);
  if (op && op->kind == VOpKind::Load && smem_windows_.count(op) && !register_loads_.count(op)) {
    return false;
  }
  return true;
}

namespace {

// The tile axis along which an index tile steps by one element (an iota, broadcast, plus
// values uniform over the tile), or -1 when it does not (a gather, a stride) or is uniform.
template <typename Def>
int unit_step_axis(const VValue& index, const Def& def, int depth = 0) {
  const VOp* op = def(index);
  if (!op || depth > 16) return -1;
  auto uniform = [&](const VValue& x) {
    if (x->type.rank() == 0) return true;
    const VOp* d = def(x);
    return d && (d->kind == VOpKind::Full ||
                 (d->kind == VOpKind::Broadcast && d->operands[0]->type.rank() == 0));
  };
  switch (op->kind) {
    case VOpKind::Iota: return 0;
    case VOpKind::Broadcast: {
      const int axis = unit_step_axis(op->operands[0], def, depth + 1);
      return axis >= 0 && static_cast<size_t>(axis) < op->dims.size() ? op->dims[static_cast<size_t>(axis)] : -1;
    }
    case VOpKind::Binary:
      if (op->binary_op != scalar::BinaryOp::Add) return -1;
      if (uniform(op->operands[0])) return unit_step_axis(op->operands[1], def, depth + 1);
      if (uniform(op->operands[1])) return unit_step_axis(op->operands[0], def, depth + 1);
      return -1;
    default: return -1;
  }
}

}  // namespace

// Blocked, each thread holding runs of neighbours along the last axis: a run is one 16-byte
// access of the widest element type the kernel loads or stores in bulk tiles (at least one
// element per thread: 8 bf16, 4 f32), where
// one element per thread made every global load and store of a memory-bound kernel 2 bytes
// wide. Runs longer than one access of a wide type would split each 32-byte sector between two
// store instructions (an f32 output next to bf16 inputs: log-softmax ran 30% slower so). Every
// default layout of the kernel uses the same run, whatever its value's type, so that a bf16
// load, its f32 arithmetic and an index mask beside it share one layout and never convert.
RegisterLayout KernelLowering::default_layout(const VValue& v) const {
  if (v->type.rank() == 0) return uniform_layout({}, threads());
  int64_t widest = 2;
  for (const VValue& x : order_) {
    // Bulk tiles only: a row's few partial sums stored in f32 say nothing about the rows.
    if (x->type.rank() == 0 || x->type.element_count() <= threads()) continue;
    const VOp* op = def(x);
    if (op && op->kind == VOpKind::Load) widest = std::max<int64_t>(widest, dtype_bytes(op->buffer->dtype));
    auto users = users_.find(x.get());
    if (users == users_.end()) continue;
    for (const VOp* user : users->second) {
      if (user->kind == VOpKind::Store && is_float(x->type.dtype)) {
        widest = std::max<int64_t>(widest, dtype_bytes(user->buffer->dtype));
      }
    }
  }
  // A tile loaded transposed (Eo[t, e, h] read as [h, e]) runs along the axis its buffer's last
  // index steps along, so that its runs are contiguous in memory.
  int run_axis = v->type.rank() - 1;
  const VOp* op = def(v);
  if (op && op->kind == VOpKind::Load && v->type.rank() >= 2 && op->operands.size() >= op->buffer->shape.size() &&
      !op->buffer->shape.empty()) {
    const int axis = unit_step_axis(op->operands[op->buffer->shape.size() - 1],
                                    [this](const VValue& x) { return def(x); });
    if (axis >= 0) run_axis = axis;
  }
  return blocked_layout(v->type.shape, threads(), blocked_vector(v->type.shape, threads(), widest, run_axis),
                        run_axis);
}

// The layout a reduce produces from an operand in `source` (falling back to blocked).
RegisterLayout KernelLowering::reduce_result_layout(const RegisterLayout& source,
                                                    const VValue& operand, int axis) {
  Result<RegisterLayout> slice = slice_layout(source, operand->type.shape, axis);
  Result<ReducePlan> plan = reduce_plan(source, operand->type.shape, axis);
  if (slice && plan) return *slice;
  Result<RegisterLayout> blocked =
      slice_layout(blocked_layout(operand->type.shape, threads()), operand->type.shape, axis);
  if (!blocked) fail("no layout for reduce: " + blocked.error().message);
  return *blocked;
}

std::optional<RegisterLayout> KernelLowering::anchor(const VValue& v) {
  auto found = layouts_.find(v.get());
  if (found != layouts_.end()) return found->second;
  return std::nullopt;
}

// Phase 1: layouts that follow from operands. Returns whether anything changed.
bool KernelLowering::propagate() {
  bool changed = false;
  auto set = [&](const VValue& v, const RegisterLayout& l, std::string reason) {
    if (layouts_.count(v.get())) return;
    layouts_[v.get()] = l;
    layout_reasons_[v.get()] = std::move(reason);
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
        set(v, *anchor(init), "carried by loop " + loop->loop_var->name + ": its initial value %" + init->name + "'s");
      } else if (lives_in_registers(yielded) && anchor(yielded)) {
        set(v, *anchor(yielded), "carried by loop " + loop->loop_var->name + ": the yielded %" + yielded->name + "'s");
      } else if (v->type.rank() == 0) {
        set(v, uniform_layout({}, threads()), "a scalar carried by loop " + loop->loop_var->name);
      }
      continue;
    }
    const VOp* op = def(v);
    if (!op) {
      set(v, uniform_layout({}, threads()), "a scalar (a grid or loop index)");
      continue;
    }
    switch (op->kind) {
      case VOpKind::Dot: {
        const DotPlan& plan = dot_plans_.at(op);
        if (plan.mma) {
          Result<RegisterLayout> c =
              plan.swapped ? mma_swapped_c_layout(v->type.shape[0], v->type.shape[1], plan.warps_n)
                           : mma_c_layout(v->type.shape[0], v->type.shape[1], plan.warps_m, plan.warps_n,
                                          plan.column_interleave);
          if (!c) fail(c.error().message);
          set(v, *c, std::string("the accumulator fragment of ") +
                         (plan.wgmma ? "wgmma" : plan.swapped ? "the swapped mma.sync" : "mma.sync") +
                         ", warps " + std::to_string(plan.warps_m) + " x " + std::to_string(plan.warps_n));
        } else {
          set(v, blocked_layout(v->type.shape, threads()), "blocked: a dot on the CUDA cores (FMA)");
        }
        break;
      }
      case VOpKind::Reduce: {
        const VValue& x = op->operands[0];
        const std::string axis = std::to_string(op->axis);
        if (!lives_in_registers(x)) {
          set(v, reduce_result_layout(blocked_layout(x->type.shape, threads()), x, op->axis),
              "the slice along axis " + axis + " of a blocked layout (the reduced %" + x->name +
                  " is not in registers)");
        } else if (anchor(x)) {
          set(v, reduce_result_layout(*anchor(x), x, op->axis),
              "the slice along axis " + axis + " of the reduced %" + x->name + "'s layout");
        }
        break;
      }
      case VOpKind::Permute: {
        const VValue& x = op->operands[0];
        if (lives_in_registers(x) && anchor(x)) {
          Result<RegisterLayout> p = permute_layout(*anchor(x), x->type.shape, op->dims);
          set(v, p ? *p : blocked_layout(v->type.shape, threads()),
              p ? "the permuted layout of %" + x->name
                : "blocked: %" + x->name + "'s layout has no permuted form");
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
          set(v, uniform_layout({}, threads()), "a scalar");
          break;
        }
        for (const VValue& x : op->operands) {
          if (lives_in_registers(x) && anchor(x)) {
            set(v, *anchor(x), "element-wise: its first placed operand %" + x->name + "'s");
            break;
          }
        }
        break;
      default: break;  // loads and broadcasts: by demand
    }
  }
  return changed;
}

// The mma.sync fragment layout in which `plan`'s dot reads its operand `v` (A or B).
std::optional<RegisterLayout> KernelLowering::mma_fragment(const DotPlan& plan, const VValue& v) const {
  const int64_t rows = v->type.shape[0], columns = v->type.shape[1];
  Result<RegisterLayout> l = plan.a.source == v
                                 ? mma_a_layout(rows, columns, plan.warps_m, plan.warps_n, plan.k_interleave)
                                 : mma_b_layout(rows, columns, plan.warps_m, plan.warps_n, plan.column_interleave,
                                                plan.k_interleave);
  if (!l) return std::nullopt;
  return *l;
}

// Phase 2: a value without a layout takes the one its first placed consumer needs.
bool KernelLowering::demand() {
  bool changed = false;
  for (const VValue& v : order_) {
    if (!lives_in_registers(v) || layouts_.count(v.get())) continue;
    for (const VOp* user : users_[v.get()]) {
      std::optional<RegisterLayout> wanted;
      std::string reason;
      if (vrtile::is_elementwise(user->kind) && !user->results.empty() &&
          user->results[0]->type.shape == v->type.shape) {
        wanted = anchor(user->results[0]);
        if (wanted) reason = "wanted by its element-wise user %" + user->results[0]->name;
      } else if (user->kind == VOpKind::Dot) {
        const DotPlan& plan = dot_plans_.at(user);
        if (plan.mma && (plan.a.source == v || plan.b.source == v)) {
          wanted = mma_fragment(plan, v);
          reason = "wanted by dot %" + user->results[0]->name + " as its " +
                   (plan.a.source == v ? "A" : "B") + " fragment";
        } else if (user->operands.size() == 3 && user->operands[2] == v) {
          wanted = anchor(user->results[0]);
          reason = "wanted by dot %" + user->results[0]->name + " as its accumulator";
        }
      } else if (user->kind == VOpKind::Broadcast && anchor(user->results[0])) {
        // The layout the broadcast reads without moving data: a per-column vector (LayerNorm's
        // gamma) is loaded straight into it instead of through a shared-memory conversion.
        const RegisterLayout source = projected(*anchor(user->results[0]),
                                                user->results[0]->type.shape, user->dims,
                                                v->type.shape);
        if (source.kind != LayoutKind::Uniform) wanted = source;
        reason = "wanted by broadcast %" + user->results[0]->name + ": read without moving data";
      } else if (user->kind == VOpKind::Yield || user->kind == VOpKind::For) {
        // Initial and yielded values follow the loop's carried layout (set in propagate).
      } else if (user->kind == VOpKind::Store || user->kind == VOpKind::Load) {
        continue;
      }
      if (wanted) {
        layouts_[v.get()] = *wanted;
        layout_reasons_[v.get()] = reason;
        changed = true;
        break;
      }
    }
  }
  return changed;
}

void KernelLowering::assign_layouts() {
  while (true) {
    while (propagate()) {
    }
    if (demand()) continue;
    bool all = true;
    for (const VValue& v : order_) {
      if (lives_in_registers(v) && !layouts_.count(v.get())) {
        layouts_[v.get()] = default_layout(v);
        layout_reasons_[v.get()] =
            "blocked, the default: no operand or consumer fixed it (runs as wide as the kernel's "
            "widest global access)";
        all = false;
        break;
      }
    }
    if (all) return;
  }
}

namespace {

// Whether every thread holds the same elements in both layouts (in any slot order): a user
// wanting the other layout then reads the registers in place.
bool same_elements_per_thread(const RegisterLayout& a, const RegisterLayout& b) {
  const std::vector<int64_t> ea = slot_elements(a), eb = slot_elements(b);
  const int64_t sa = a.slots(), sb = b.slots();
  if (sa != sb || sa == 0 || ea.size() != eb.size()) return false;
  for (size_t t = 0; t * static_cast<size_t>(sa) < ea.size(); ++t) {
    std::vector<int64_t> x(ea.begin() + static_cast<std::ptrdiff_t>(t * sa),
                           ea.begin() + static_cast<std::ptrdiff_t>((t + 1) * sa));
    std::vector<int64_t> y(eb.begin() + static_cast<std::ptrdiff_t>(t * sb),
                           eb.begin() + static_cast<std::ptrdiff_t>((t + 1) * sb));
    std::sort(x.begin(), x.end());
    std::sort(y.begin(), y.end());
    if (x != y) return false;
  }
  return true;
}

}  // namespace

// LowerOptions::explain_layouts: one note per register tile, in program order, saying which
// rule fixed its layout, and which users wanted another one: read in place when each thread
// holds the same elements in both, else through a convert_layout. With
// LowerOptions::record_layout_reasons the same text (without the layout) goes to
// recorded_reasons_ instead, for Kernel::layout_reasons.
void KernelLowering::explain_layouts() {
  for (const VValue& v : order_) {
    auto found = layouts_.find(v.get());
    if (found == layouts_.end() || v->type.rank() == 0) continue;
    const RegisterLayout& chosen = found->second;
    std::string reason = layout_reasons_[v.get()];
    std::vector<std::string> others;
    auto users = users_.find(v.get());
    if (users != users_.end()) {
      for (const VOp* user : users->second) {
        if (user->results.empty()) continue;
        std::optional<RegisterLayout> wanted;
        if (vrtile::is_elementwise(user->kind) && user->results[0]->type.shape == v->type.shape) {
          wanted = anchor(user->results[0]);
        } else if (user->kind == VOpKind::Dot && dot_plans_.count(user)) {
          const DotPlan& plan = dot_plans_.at(user);
          if (plan.mma && !plan.wgmma && (plan.a.source == v || plan.b.source == v)) {
            wanted = mma_fragment(plan, v);
          }
        }
        if (wanted && layout_text(*wanted) != layout_text(chosen)) {
          others.push_back("%" + user->results[0]->name + " wanted " + layout_text(*wanted) +
                           (same_elements_per_thread(chosen, *wanted)
                                ? " (the same elements per thread: read in place)"
                                : " (a convert_layout)"));
        }
      }
    }
    if (!others.empty()) {
      reason += "; other layouts wanted: ";
      for (size_t i = 0; i < others.size(); ++i) reason += (i ? ", " : "") + others[i];
    }
    if (options_.record_layout_reasons) recorded_reasons_[v->name] = reason;
    if (options_.explain_layouts) b_.note("layout of %" + v->name + ": " + layout_text(chosen) + "; " + reason);
  }
}

RegisterLayout KernelLowering::layout_for(const VValue& v) {
  auto found = layouts_.find(v.get());
  return found != layouts_.end() ? found->second : default_layout(v);
}

// The layout a broadcast's source must have for the broadcast to `to` to be register-only:
// `to` with the broadcast axes sliced away (uniform when that is impossible).
RegisterLayout KernelLowering::projected(const RegisterLayout& to,
                                         const std::vector<int64_t>& shape,
                                         const std::vector<int>& dims,
                                         const std::vector<int64_t>& source_shape) {
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

}  // namespace nautilus::matile::lowering
