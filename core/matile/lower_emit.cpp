// Emission of the VR ops the other rules leave (lower.h rule 5 and the rest): the kernel's ops
// in order, skipping values nothing in the MA kernel needs in registers (index and mask tiles
// that window matching absorbed, Kᵀ's permute read through a transposed window); loads and
// stores as window accesses when their indices and mask match, else as gathers of index tiles
// materialized in the value's layout; reduces with their shuffle plan and cross-warp scratch;
// scalars as uniform values, and window offsets as uniform index scalars that reuse an emitted
// scalar of the same affine value. A top-level store that a later top-level store of the same
// window overwrites, in a kernel that never loads the buffer, is not emitted
// (find_overwritten_stores); the wait for a tile copied once is held back over index
// arithmetic until something could read it (publish_held_copies, lower.h rule 3):
//
//   before (VR):                              after (MA):
//     %5 = add %4, %r_i : index[4]              %3 = mul %r_o, %2 : index
//     store Mx[%5], %1                          global_store Mx[%3 + i0] bounds [8192], %1
//     %g = load T[%idx] : f32[64]               %g = global_load T[%idx] : f32[64] #L1
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

Value KernelLowering::index_constant(int64_t value) {
  const std::string key = "const:" + std::to_string(value);
  if (Value* hit = memo_find(nullptr, key)) return *hit;
  Value c = b_.full(static_cast<double>(value), vrtile::index_scalar(),
                    uniform_layout({}, threads()), "c" + std::to_string(value));
  memo_.back()[{nullptr, key}] = c;
  return c;
}

// A canonical text of an affine scalar (atoms by name), the key under which an emitted
// scalar with that value is remembered so that window offsets reuse it.
std::string KernelLowering::affine_key(const Affine& a) {
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
Value KernelLowering::placed(const VValue& v) {
  auto found = env_.find(v.get());
  return found == env_.end() ? nullptr : found->second;
}

Value* KernelLowering::memo_find(const VNode* v, const std::string& key) {
  for (auto scope = memo_.rbegin(); scope != memo_.rend(); ++scope) {
    auto found = scope->find({v, key});
    if (found != scope->end()) return &found->second;
  }
  return nullptr;
}

// constant + sum(coef * atom) as a uniform index scalar, reusing an emitted scalar of the same
// value. `loop_var` is replaced by `replacement` (a value) or `iteration` (a constant) when
// given: pipelined copies address a later iteration. Null for 0.
Value KernelLowering::emit_offset(Affine a, const VNode* loop_var, const Value& replacement,
                                  std::optional<int64_t> iteration) {
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

Value KernelLowering::placed_node(const VNode* node) {
  auto found = env_.find(node);
  if (found == env_.end()) fail("index scalar %" + node->name + " is not available here");
  return found->second;
}

GlobalAccess KernelLowering::window_access(const Window& w, const VNode* loop_var,
                                           const Value& replacement,
                                           std::optional<int64_t> iteration) {
  GlobalAccess access;
  access.form = GlobalAccess::Form::Window;
  for (const Affine& offset : w.offsets) {
    access.offsets.push_back(emit_offset(offset, loop_var, replacement, iteration));
  }
  access.tile_axes = w.tile_axes;
  access.bounds = w.bounds;
  return access;
}

void KernelLowering::emit_region(const vrtile::Region& region) {
  for (const vrtile::OpPtr& op : region.ops) {
    if (op->kind == VOpKind::Yield) continue;
    b_.set_provenance(op->provenance);
    // A held copy is published before anything that could read shared memory or its tile; a
    // loop publishes it itself, after its prologue (emit_for).
    if (!held_copies_.empty() && op->kind != VOpKind::For && !holds_copy_across(*op)) {
      publish_held_copies(0);
    }
    emit(*op);
  }
  // Nothing held crosses the end of a region (a loop body's yield, the kernel's end).
  if (!held_copies_.empty()) publish_held_copies(0);
}

// Ops a held copy's wait may move past: register arithmetic on values other than the held
// tiles (index math, constants, masks). Loads, stores, dots, reductions and loops are not.
bool KernelLowering::holds_copy_across(const VOp& op) const {
  if (!computes_in_registers(op.kind)) return false;
  for (const VValue& operand : op.operands) {
    for (const HeldCopy& held : held_copies_) {
      if (operand == held.load->results[0]) return false;
    }
  }
  return true;
}

// Waits for the held copies (the `newer_groups` commit groups issued after them may stay in
// flight), publishes them to the CTA and reads the A fragments that are read once.
void KernelLowering::publish_held_copies(int newer_groups) {
  std::vector<HeldCopy> held;
  held.swap(held_copies_);
  b_.wait_group(newer_groups);
  b_.barrier();
  for (const HeldCopy& copy : held) hoist_a_fragments(*copy.load, copy.alloc);
}

// Whether the MA kernel needs v in registers: something stores, carries or computes with it.
// Values that only feed shared-memory mma operands (Kᵀ's permute) or window-matched accesses
// (index and mask tiles) are not emitted.
bool KernelLowering::needed(const VValue& v) {
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

void KernelLowering::emit(const VOp& op) {
  retire_wgmma_reads(op);
  if (!row_buffers_.empty()) sync_row_buffers_before(op);
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

void KernelLowering::emit_load(const VOp& op) {
  if (emit_row_buffer_load(op) || copied_into_row_buffer(op)) return;
  const VValue& v = op.results[0];
  auto smem = smem_windows_.find(&op);
  for (const TmaOperand& operand : ws_.operands) {
    if (operand.load != &op || !operand.once) continue;
    // Rule 6: the producer copies the tile once; the consumers wait for it here.
    // A persistent CTA's tile t waits for the t-th phase.
    const Value parity = ws_.tile_step ? b_.binary(BinaryOp::Mod, ws_.tile_step, index_constant(2), "once_phase")
                                       : index_constant(0);
    b_.mbarrier_wait(BarrierRef{ws_.once, nullptr}, parity);
    smem_loads_[&op] = SmemLoad{operand.alloc, nullptr};
    return;
  }
  if (smem != smem_windows_.end()) {
    auto pipelined = pipelined_stage_.find(&op);
    if (pipelined == pipelined_stage_.end()) {
      // Copied where the VR load was: the barrier before protects readers of the previous
      // contents (the previous iteration), the wait and barrier after publish the tile.
      const int alloc = smem_alloc_for(op, 1);
      b_.barrier();
      emit_copy(op, alloc, nullptr, nullptr, nullptr, nullptr);
      b_.commit_group();
      smem_loads_[&op] = SmemLoad{alloc, nullptr};
      if (!register_loads_.count(&op)) {
        // Read only by dots through shared memory: the wait is held back until something
        // needs the tile (emit_region), so a loop's ring prologue can go out before it.
        held_copies_.push_back(HeldCopy{&op, alloc});
        return;
      }
      b_.wait_group(0);
      b_.barrier();
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

// The Gather form of a VR load's or store's access: its index tiles and optional mask,
// materialized in layout `l`, appended to `gather` (the op's leading operands).
GlobalAccess KernelLowering::gather_access(const VOp& op, const RegisterLayout& l,
                                           std::vector<Value>* gather) {
  GlobalAccess access;
  access.form = GlobalAccess::Form::Gather;
  for (const VValue& index : vrtile::access_indices(op)) gather->push_back(materialize(index, l));
  if (const VValue mask = vrtile::access_mask(op)) {
    access.has_mask = true;
    gather->push_back(materialize(mask, l));
  }
  return access;
}

// A store is dead when a later store of the same kernel writes the same elements before
// anything reads them: the initial values of a split reduction's partials (split_k_update's
// Mx_part = -inf, L_part = 0, O_part = 0), which the loop keeps in registers and whose final
// values are stored at the end. Both stores sit in the kernel's top-level region, so both run
// in every CTA; equal windows (offsets, tile axes, bounds) of equal tile shapes write the same
// elements; and the kernel loads nothing from the buffer, so no CTA observes the first value.
// Dropping it saves its DRAM writes and the CTA's start:
//
//   global_store O_part[%n_s, %b, %5 + i0, i1] bounds [...], %zeros     <- not emitted
//   ... for n_o ... (the partials carried in registers)
//   global_store O_part[%98, %101, %106 + i0, i1] bounds [...], %O_part.1   (%98 = 0 + %n_s)
void KernelLowering::find_overwritten_stores() {
  std::unordered_set<std::string> loaded;
  std::vector<const vrtile::Region*> regions{vk_.body.get()};
  while (!regions.empty()) {
    const vrtile::Region* region = regions.back();
    regions.pop_back();
    for (const vrtile::OpPtr& op : region->ops) {
      if (op->kind == VOpKind::Load) loaded.insert(op->buffer->name);
      if (op->kind == VOpKind::For) regions.push_back(op->body.get());
    }
  }
  const std::vector<vrtile::OpPtr>& ops = vk_.body->ops;
  for (size_t i = 0; i < ops.size(); ++i) {
    const VOp& first = *ops[i];
    if (first.kind != VOpKind::Store || loaded.count(first.buffer->name)) continue;
    const std::vector<int64_t>& shape = vrtile::stored_value(first)->type.shape;
    const std::optional<Window> written = match_window(first, shape);
    if (!written) continue;
    for (size_t j = i + 1; j < ops.size(); ++j) {
      const VOp& later = *ops[j];
      if (later.kind != VOpKind::Store || later.buffer->name != first.buffer->name ||
          vrtile::stored_value(later)->type.shape != shape) {
        continue;
      }
      const std::optional<Window> again = match_window(later, shape);
      if (again && again->offsets == written->offsets && again->tile_axes == written->tile_axes &&
          again->bounds == written->bounds) {
        overwritten_stores_.insert(&first);
        break;
      }
    }
  }
}

void KernelLowering::emit_store(const VOp& op) {
  if (overwritten_stores_.count(&op)) return;
  if (emit_row_buffer_store(op)) return;
  const VValue stored = vrtile::stored_value(op);
  const RegisterLayout l = remat(stored) ? blocked_layout(stored->type.shape, threads()) : layout_for(stored);
  const Value value = materialize(stored, l);
  std::optional<Window> window = match_window(op, stored->type.shape);
  if (window) {
    if (emit_staged_store(op, *window, value)) return;  // rule 7
    b_.global_store(op.buffer, window_access(*window, nullptr, nullptr), {}, value);
    return;
  }
  std::vector<Value> gather;
  const GlobalAccess access = gather_access(op, l, &gather);
  b_.global_store(op.buffer, access, gather, value);
}

std::optional<KernelLowering::ReduceForm> KernelLowering::reduce_form(const VOp& op, std::string* error) {
  const VValue& x = op.operands[0];
  RegisterLayout source = remat(x) ? blocked_layout(x->type.shape, threads()) : layout_for(x);
  Result<RegisterLayout> slice = slice_layout(source, x->type.shape, op.axis);
  Result<ReducePlan> plan = reduce_plan(source, x->type.shape, op.axis);
  if (!slice || !plan) {
    source = blocked_layout(x->type.shape, threads());
    slice = slice_layout(source, x->type.shape, op.axis);
    plan = reduce_plan(source, x->type.shape, op.axis);
    if (!slice || !plan) {
      *error = (!slice ? slice.error() : plan.error()).message;
      return std::nullopt;
    }
  }
  return ReduceForm{source, *slice, *plan};
}

void KernelLowering::emit_reduce(const VOp& op) {
  const VValue& x = op.operands[0];
  const VValue& v = op.results[0];
  std::string error;
  const std::optional<ReduceForm> form = reduce_form(op, &error);
  if (!form) fail("reduce %" + v->name + ": " + error);
  const Value operand = materialize(x, form->source);
  int scratch_alloc = -1;
  if (form->plan.cross_warp) {
    scratch_alloc = scratch(v->name + "_red", DType::F32, {b_.warps(), v->type.element_count()},
                            "scratch of the cross-warp reduce %" + v->name);
  }
  Value result = b_.reduce(op.reduce_op, operand, op.axis, form->slice, form->plan.xor_masks, scratch_alloc,
                           v->name);
  const RegisterLayout wanted = layout_for(v);
  env_[v.get()] = result->layout == wanted ? result : convert(result, wanted, v->name);
}

}  // namespace nautilus::matile::lowering
