// Rule 8 (lower.h): buffers held on chip for one CTA. A shared-scope intermediate of the scalar
// schedule (`cache_read(..., shared, at=r, readers=all)`: a row of X copied once per row and
// read by every pass over it) reaches the VR kernel as a parameter; here it becomes a shared
// allocation of the kernel instead of global scratch. The buffer is one-dimensional and every
// access is a window of the same width T at an offset that is a multiple of T, so the
// allocation is T elements wide with ceil(extent / T) stages and an access at offset k * T reads
// or writes stage k. A stored tile that is a plain global load goes straight from global memory
// by 16-byte cp.async (zero-filled past the row's end) when its rows are 16-byte aligned,
// otherwise through registers (ld.global, st.shared). Readers wait for the copies and a barrier
// before the first loop or load that reads the buffer:
//
//   before (VR, log_softmax's row kernel):       after (MA):
//     for c_o in 0..16 {                           shared X_shared : bf16[2048] stages 16
//       %X = load X[%r, c_o * 2048 + i0] ...       for c_o in 0..16 {
//       store X_shared[c_o * 2048 + i0], %X          cp.async X_shared[%c_o][0] <- X[%r, %3 + i0]
//     }                                              cp.async.commit_group
//     ... for c_o.1 in 0..16 {                     }
//       %x = load X_shared[c_o.1 * 2048 + i0]      cp.async.wait_group 0
//                                                  bar.sync
//                                                  ... for c_o.1 in 0..16 {
//                                                    %x = ld.shared X_shared[%c_o.1][0]
//
// A shared-scope buffer that does not take this form (several dimensions, windows of other
// widths, a copy refilled inside a loop that also reads it) is refused with that reason when
// the kernel would otherwise access it as memory (refuse_shared_buffer_in_global): global
// memory holds one copy for all CTAs, so CTAs working on different rows would overwrite each
// other's.
//
// A buffer marked tail=global (`cache_read(..., readers=all, tail=global)`) may be longer than
// the CTA's shared memory. Then only its leading `resident` stages are allocated (those that fit
// beside the kernel's other shared memory, less a reserve for the reductions' scratch); every
// loop over the stages is emitted in two parts, the iterations that touch resident stages and
// those that touch the tail. In the tail part the copy is skipped and the readers load their
// window from the copied tensor itself (the copy's source window, shifted to the stage), so the
// tail is read from global memory by each pass, from L2 after the first:
//
//   before (VR, softmax's row kernel, C = 128256, 63 stages):   after (MA, 55 stages on chip):
//     for c_o in 0..63 {                                  shared X_shared : bf16[2048] stages 55
//       %X = load X[%r, c_o * 2048 + i0] ...                for c_o in 0..55 { cp.async ... }
//       store X_shared[c_o * 2048 + i0], %X                 for c_o_tail in 0..8 { }
//     }                                                     cp.async.wait_group 0; bar.sync
//     for c2_o in 0..63 {                                   for c2_o in 0..55 {
//       %x = load X_shared[c2_o * 2048 + i0] ...              %x = ld.shared X_shared[%c2_o][0] ...
//                                                           for c2_o_tail in 0..8 {
//                                                             %x = global_load X[%r, (c2_o_tail
//                                                                    + 55) * 2048 + i0] ...
//
// The form needs every copy to be a cp.async of one window of a global tensor (the readers
// re-read that window) and every access's stage to be a constant or a positive multiple of one
// enclosing loop's variable plus a constant; otherwise the buffer is refused with the reason.
#include <algorithm>
#include <string>

#include "core/matile/hopper.h"
#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

using layout::layout_error;

namespace {

// The most shared memory one CTA may use on the target: the H100's 227 KB opt-in maximum, the
// A100's 163 KB.
int64_t shared_limit(const LowerOptions& options) {
  if (options.row_shared_budget > 0) return options.row_shared_budget;
  return options.arch == "sm_90a" ? kSharedBytesPerCta : 163 * 1024;
}

// Shared memory kept free beside a partly resident row (tail=global) for what the kernel
// allocates after the plan: the reductions' cross-warp scratch and layout conversions.
constexpr int64_t kRowTailReserveBytes = 4096;

struct Access {
  const VOp* op = nullptr;
  std::vector<const VOp*> loops;  // the Fors around it, outermost first
};

void collect_accesses(const vrtile::Region& region, const scalar::BufferNode* buffer,
                      std::vector<const VOp*>* loops, std::vector<Access>* out) {
  for (const vrtile::OpPtr& op : region.ops) {
    if ((op->kind == VOpKind::Load || op->kind == VOpKind::Store) && op->buffer.get() == buffer) {
      out->push_back(Access{op.get(), *loops});
    }
    if (op->kind == VOpKind::For && op->body) {
      loops->push_back(op.get());
      collect_accesses(*op->body, buffer, loops, out);
      loops->pop_back();
    }
  }
}

bool reads_buffer(const vrtile::Region& region, const scalar::BufferNode* buffer) {
  for (const vrtile::OpPtr& op : region.ops) {
    if (op->kind == VOpKind::Load && op->buffer.get() == buffer) return true;
    if (op->kind == VOpKind::For && op->body && reads_buffer(*op->body, buffer)) return true;
  }
  return false;
}

// The stage index of a window offset k * T: the affine offset divided by T, or nullopt when the
// offset is not a multiple of T for every value of its atoms.
std::optional<Affine> stage_of(const Affine& offset, int64_t tile) {
  if (!offset.scalar_only() || offset.constant % tile != 0) return std::nullopt;
  Affine stage = offset;
  stage.constant /= tile;
  for (auto& [atom, coef] : stage.atoms) {
    if (coef % tile != 0) return std::nullopt;
    coef /= tile;
  }
  return stage;
}

// The tile an access of a row buffer reads (a Load's result) or writes (a Store's value).
VValue accessed_tile(const VOp& op) {
  return op.kind == VOpKind::Load ? op.results[0] : vrtile::stored_value(op);
}

}  // namespace

void KernelLowering::plan_row_buffers() {
  for (const scalar::Buffer& param : vk_.params) {
    if (param->scope != scalar::MemoryScope::Shared) continue;
    if (param->shape.size() != 1) {
      row_buffer_refusals_[param.get()] =
          "it has " + std::to_string(param->shape.size()) + " dimensions (an on-chip row has one)";
      continue;
    }
    std::vector<Access> accesses;
    std::vector<const VOp*> loops;
    collect_accesses(*vk_.body, param.get(), &loops, &accesses);
    if (accesses.empty()) continue;
    const VOp* first = accesses.front().op;
    const VValue first_tile = accessed_tile(*first);
    if (first_tile->type.rank() != 1) {
      row_buffer_refusals_[param.get()] = "it is accessed in tiles of several dimensions";
      continue;
    }
    // Accesses of one width; or, for a row no longer than one tile, accesses that each cover
    // the whole row (a tile clamped to the row's length beside one that is not): then the
    // widest is the tile of the one stage.
    // The copies fill the whole stage (their layouts are the tile's), so they set its width.
    int64_t tile = first_tile->type.shape[0];
    int64_t widest = 0, copy_width = 0;
    bool one_stage = true;
    for (const Access& access : accesses) {
      const VValue t = accessed_tile(*access.op);
      if (t->type.rank() != 1 || t->type.shape[0] < param->shape[0]) {
        one_stage = false;
        break;
      }
      widest = std::max(widest, t->type.shape[0]);
      if (access.op->kind == VOpKind::Store) {
        if (copy_width != 0 && copy_width != t->type.shape[0]) one_stage = false;
        copy_width = t->type.shape[0];
      }
    }
    one_stage = one_stage && (copy_width == 0 || copy_width == widest);
    if (one_stage) tile = widest;
    std::string refusal;
    for (const Access& access : accesses) {
      const VOp& op = *access.op;
      const VValue t = accessed_tile(op);
      const char* what = op.kind == VOpKind::Load ? "read" : "written";
      if (t->type.rank() != 1 || (t->type.shape[0] != tile && !one_stage)) {
        refusal = "it is " + std::string(what) + " in tiles of " + vrtile::type_text(t->type) +
                  " and elsewhere in tiles of " + std::to_string(tile) +
                  " elements (an on-chip row has one tile width: tile its copy and its readers "
                  "alike)";
        break;
      }
      std::optional<Window> window = match_window(op, t->type.shape);
      if (!window || window->tile_axes[0] != 0 ||
          (!one_stage && !stage_of(window->offsets[0], tile))) {
        refusal = "a tile of it is " + std::string(what) + " at an offset that is not a whole "
                  "number of " + std::to_string(tile) + "-element tiles";
        break;
      }
      if (op.kind == VOpKind::Store) {
        // The copy's mask may only clip at the buffer's end (the padding of the last stage).
        if (window->bounds[0] < param->shape[0]) {
          refusal = "its copy is masked before the buffer's end";
        }
        // A refill inside a loop that also reads the buffer would need a barrier per
        // iteration before it.
        for (const VOp* loop : access.loops) {
          if (reads_buffer(*loop->body, param.get())) {
            refusal = "it is refilled inside loop " + loop->loop_var->name +
                      ", which also reads it";
          }
        }
        if (!refusal.empty()) break;
      }
    }
    if (!refusal.empty()) {
      row_buffer_refusals_[param.get()] = refusal;
      continue;
    }
    const int64_t stages = (param->shape[0] + tile - 1) / tile;
    const int64_t stage_bytes = tile * dtype_bytes(param->dtype);
    const int64_t bytes = stages * stage_bytes;
    const int64_t limit = shared_limit(options_);
    int64_t resident = stages;
    if (bytes + b_.shared_bytes() > limit) {
      const std::string what = "the on-chip buffer " + param->name + " (" +
                               std::to_string(param->shape[0]) + " " + dtype_name(param->dtype) +
                               " elements, " + std::to_string(bytes / 1024) + " KB in " +
                               std::to_string(stages) + " tiles of " + std::to_string(tile) +
                               ") does not fit the " + std::to_string(limit / 1024) +
                               " KB of shared memory of a " + options_.arch + " CTA";
      if (!param->tail_in_global) {
        fail(what + "; read it from global memory instead (no readers=all), or keep part of it "
                    "on chip (tail=global)");
      }
      resident = (limit - b_.shared_bytes() - kRowTailReserveBytes) / stage_bytes;
      if (resident < 1) fail(what + ", not even one tile of it");
    }
    RowBuffer row;
    row.tile = tile;
    row.single_stage = one_stage;
    row.stages = stages;
    row.resident = resident;
    const std::string purpose =
        resident == stages
            ? "on-chip copy of " + std::to_string(param->shape[0]) + " elements (" +
                  std::to_string(stages) + " tiles of " + std::to_string(tile) + ")"
            : "on-chip copy of the first " + std::to_string(resident) + " of " +
                  std::to_string(stages) + " tiles of " + std::to_string(tile) + " of " +
                  std::to_string(param->shape[0]) + " elements (the rest read from global)";
    row.alloc = b_.shared(param->name, param->dtype, {tile},
                          row_major_shared({tile}, layout::Swizzle{}), static_cast<int>(resident),
                          purpose);
    // Whether the copies zero-fill every stage: plan_row_buffer_copies.
    row_buffers_[param.get()] = row;
  }
}

void KernelLowering::refuse_shared_buffer_in_global(const scalar::BufferNode& buffer) const {
  const auto reason = row_buffer_refusals_.find(&buffer);
  fail("the on-chip buffer " + buffer.name + " (" + memory_scope_name(buffer.scope) +
       ") cannot be placed in shared memory: " +
       (reason != row_buffer_refusals_.end() ? reason->second
                                             : std::string("no rule places its accesses")) +
       "; global memory would hold one copy for all CTAs");
}

// The stage an access of a row buffer reads or writes (null: stage 0).
Value KernelLowering::row_stage(const VOp& op, const RowBuffer& row, Window* window) {
  const VValue t = accessed_tile(op);
  *window = *match_window(op, t->type.shape);
  if (row.single_stage) return emit_offset(Affine{}, nullptr, nullptr);
  return emit_offset(*stage_of(window->offsets[0], row.tile), nullptr, nullptr);
}

void KernelLowering::sync_row_buffers_before(const VOp& op) {
  for (auto& [buffer, row] : row_buffers_) {
    if (!row.dirty) continue;
    const bool reads = (op.kind == VOpKind::Load && op.buffer.get() == buffer) ||
                       (op.kind == VOpKind::For && op.body && reads_buffer(*op.body, buffer));
    if (!reads) continue;
    // The copies land at the wait; the barrier makes every thread's part visible to all.
    b_.wait_group(0);
    b_.barrier();
    for (auto& [other_buffer, other] : row_buffers_) other.dirty = false;
    return;
  }
}

// Whether a global load only feeds a row buffer's store that copies it by cp.async: then the
// load is not emitted into registers at all.
bool KernelLowering::copied_into_row_buffer(const VOp& load) {
  const auto found = users_.find(load.results[0].get());
  if (found == users_.end() || found->second.size() != 1) return false;
  const VOp* user = found->second.front();
  return user->kind == VOpKind::Store && row_buffers_.count(user->buffer.get()) &&
         row_async_copies_.count(user);
}

bool KernelLowering::emit_row_buffer_store(const VOp& op) {
  auto found = row_buffers_.find(op.buffer.get());
  if (found == row_buffers_.end()) return false;
  RowBuffer& row = found->second;
  // A tail stage stays in global memory: its readers load it from the copy's source.
  if (reads_row_tail(op, row)) return true;
  Window window;
  const Value stage = row_stage(op, row, &window);
  const VValue stored = vrtile::stored_value(op);
  SharedRef ref{row.alloc, stage, {0}, false};
  if (row_async_copies_.count(&op)) {
    const VOp& load = *def(stored);
    const int bytes = dtype_bytes(stored->type.dtype);
    Result<layout::TVLayout> copy = layout_error("no copy layout");
    for (int64_t t = threads(); t >= 1 && !copy; t /= 2) {
      copy = layout::copy_row_major_16b(1, row.tile, bytes, t);
    }
    if (!copy) fail("no 16-byte copy layout for %" + stored->name + ": " + copy.error().message);
    // A one-row copy: the column-major index of (0, c) is c, so the layout serves the 1-D tile.
    const layout::TVLayout line{copy->layout, tile_tuple({row.tile})};
    b_.async_copy(ref, load.buffer, window_access(*match_window(load, stored->type.shape), nullptr, nullptr),
                  stored->type.shape, line, 16 / bytes, nullptr);
    b_.commit_group();
  } else {
    const RegisterLayout l = layout_for(stored);
    b_.shared_store(ref, materialize(stored, l));
  }
  row.dirty = true;
  return true;
}

bool KernelLowering::emit_row_buffer_load(const VOp& op) {
  auto found = row_buffers_.find(op.buffer.get());
  if (found == row_buffers_.end()) return false;
  const RowBuffer& row = found->second;
  const VValue& v = op.results[0];
  Window window;
  if (reads_row_tail(op, row)) {
    // The copy's source window, moved to this access's offset and clipped to its bound.
    window = *match_window(op, v->type.shape);
    Window source = row.source_window;
    const size_t axis = static_cast<size_t>(row.source_axis);
    source.offsets[axis] = window.offsets[0];
    source.bounds[axis] = std::min(source.bounds[axis], window.bounds[0]);
    env_[v.get()] = b_.global_load(row.source->buffer, window_access(source, nullptr, nullptr), {},
                                   op.constant, v->type, layout_for(v), v->name);
    return true;
  }
  const Value stage = row_stage(op, row, &window);
  const RegisterLayout l = layout_for(v);
  Value value = b_.shared_load(SharedRef{row.alloc, stage, {0}, false}, SharedRead::Scalar,
                               v->type, l, v->name);
  // Past the window's bound the load yields `other`. The stages hold zeros past the buffer's
  // end when every copy zero-filled them; anything else takes a select.
  const VValue mask = vrtile::access_mask(op);
  const bool padding_is_other =
      row.zero_padded && op.constant == 0.0 && window.bounds[0] >= op.buffer->shape[0];
  if (mask && !padding_is_other) {
    const Value other = b_.full(op.constant, v->type, l, "");
    value = b_.select(materialize(mask, l), value, other, v->name);
  }
  env_[v.get()] = value;
  return true;
}

// Which row-buffer stores copy a global load by cp.async: the stored tile is a load of a
// global window with `other` 0 read by nothing else, and cp.async can copy it (16-byte
// vectors along rows whose pitch and offsets are 16-byte multiples).
void KernelLowering::plan_row_buffer_copies() {
  for (auto& [buffer, row] : row_buffers_) {
    std::vector<Access> accesses;
    std::vector<const VOp*> loops;
    collect_accesses(*vk_.body, buffer, &loops, &accesses);
    bool all_async = true;
    for (const Access& access : accesses) {
      const VOp& op = *access.op;
      if (op.kind != VOpKind::Store) continue;
      const VValue stored = vrtile::stored_value(op);
      const VOp* load = def(stored);
      bool async = load && load->kind == VOpKind::Load && load->buffer &&
                   load->buffer->scope == scalar::MemoryScope::Global &&
                   users_[stored.get()].size() == 1 && load->constant == 0.0 &&
                   (row.tile * dtype_bytes(stored->type.dtype)) % 16 == 0;
      if (async) {
        const std::optional<Window> window = match_window(*load, stored->type.shape);
        async = window && async_copyable(*load, *window);
      }
      if (async) {
        row_async_copies_.insert(&op);
      } else {
        all_async = false;
      }
    }
    row.zero_padded = row.zero_padded && all_async;
  }
  plan_row_buffer_tails();
}

// The stage of a row-buffer access (its matched window) as an affine function of the
// kernel's scalars; plan_row_buffers checked that it exists.
namespace {
Affine access_stage(int64_t tile, const std::optional<Window>& window) {
  return *stage_of(window->offsets[0], tile);
}
}  // namespace

// tail=global: where the tail is read from (the copies' common source window) and where each
// loop over the stages splits into its resident and tail parts.
void KernelLowering::plan_row_buffer_tails() {
  for (auto& [buffer, row] : row_buffers_) {
    if (row.resident == row.stages) continue;
    const std::string refusal = "the on-chip buffer " + buffer->name + " keeps " +
                                std::to_string(row.resident) + " of its " +
                                std::to_string(row.stages) + " tiles on chip (tail=global), but ";
    std::vector<Access> accesses;
    std::vector<const VOp*> loops;
    collect_accesses(*vk_.body, buffer, &loops, &accesses);
    for (const Access& access : accesses) {
      const VOp& op = *access.op;
      const VValue t = accessed_tile(op);
      const std::optional<Window> window = match_window(op, t->type.shape);
      if (op.kind == VOpKind::Store) {
        if (!row_async_copies_.count(&op)) {
          fail(refusal + "its copy is no cp.async of a global window (rows not 16-byte "
                         "aligned?), so its readers have no source for the tail");
        }
        const VOp& load = *def(t);
        const std::optional<Window> source = match_window(load, t->type.shape);
        int axis = -1;
        for (size_t d = 0; d < source->offsets.size(); ++d) {
          if (source->tile_axes[d] == 0 && source->offsets[d] == window->offsets[0]) {
            axis = static_cast<int>(d);
          }
        }
        if (axis < 0) fail(refusal + "its copy does not read its source at the buffer's offsets");
        // The source's other offsets must be available to every reader: defined outside loops.
        for (size_t d = 0; d < source->offsets.size(); ++d) {
          if (static_cast<int>(d) == axis) continue;
          for (const auto& [atom, coef] : source->offsets[d].atoms) {
            if (coef != 0 && scope_.count(atom)) {
              fail(refusal + "its copy's source offset depends on %" + atom->name +
                   ", defined inside a loop");
            }
          }
        }
        if (row.source && (row.source->buffer != load.buffer || row.source_axis != axis)) {
          fail(refusal + "its copies read different tensors");
        }
        row.source = &load;
        row.source_window = *source;
        row.source_axis = axis;
      }
      const Affine stage = access_stage(row.tile, window);
      const VOp* split_loop = nullptr;
      int64_t coef = 0;
      for (const auto& [atom, c] : stage.atoms) {
        if (c == 0) continue;
        const VOp* loop = nullptr;
        for (const VOp* l : access.loops) {
          if (l->loop_var.get() == atom) loop = l;
        }
        if (!loop || split_loop || c < 0 || loop->trip_count) {
          fail(refusal + "an access's tile index is not a positive multiple of one enclosing "
                         "loop's variable plus a constant");
        }
        split_loop = loop;
        coef = c;
      }
      if (!split_loop) continue;  // a constant stage: decided where it is emitted
      // The first iteration whose stage is past the resident ones.
      int64_t split = stage.constant >= row.resident
                          ? 0
                          : (row.resident - stage.constant + coef - 1) / coef;
      split = std::min(split, split_loop->extent);
      const auto [it, inserted] = row_loop_splits_.emplace(split_loop, split);
      if (!inserted && it->second != split) {
        fail(refusal + "loop " + split_loop->loop_var->name +
             " reaches the tail at different iterations for different accesses");
      }
    }
    if (!row.source) fail(refusal + "nothing copies into it");
  }
}

// Whether this access of a partly resident row touches a tail stage (in global memory).
bool KernelLowering::reads_row_tail(const VOp& op, const RowBuffer& row) {
  if (row.resident == row.stages) return false;
  const VValue t = accessed_tile(op);
  const Affine stage = access_stage(row.tile, match_window(op, t->type.shape));
  bool any_atom = false;
  for (const auto& [atom, coef] : stage.atoms) {
    if (coef == 0) continue;
    any_atom = true;
    if (tail_loop_vars_.count(atom)) return true;
  }
  return !any_atom && stage.constant >= row.resident;
}

// A loop over a partly resident row's stages: the iterations on chip, then those of the tail
// (its variable offset by the split), the carried values passing from one part to the next.
void KernelLowering::emit_split_row_loop(const VOp& op, int64_t split) {
  if (!pipelinable(op).empty()) {
    fail("loop " + op.loop_var->name + " over a partly resident row also pipelines shared "
         "copies of other operands; the two parts would need a ring each");
  }
  // Copies held back for a loop's prologue are published here: neither part has one.
  if (!held_copies_.empty()) publish_held_copies(0);
  const LoopStart start = loop_start(op);
  std::vector<Value> carried = start.inits;
  const auto part = [&](int64_t first, int64_t count, bool tail) {
    if (count <= 0) return;
    carried = b_.for_loop(
        op.loop_var->name + (tail ? "_tail" : ""), count, carried,
        [&](const Value& var, const std::vector<Value>& args) {
          memo_.emplace_back();
          env_[op.loop_var.get()] =
              first == 0 ? var
                         : b_.binary(BinaryOp::Add, var, index_constant(first), op.loop_var->name);
          for (size_t i = 0; i < args.size(); ++i) env_[op.block_args[i].get()] = args[i];
          if (tail) tail_loop_vars_.insert(op.loop_var.get());
          emit_region(*op.body);
          tail_loop_vars_.erase(op.loop_var.get());
          b_.set_provenance(op.provenance);
          std::vector<Value> yielded = yielded_values(op, args);
          memo_.pop_back();
          return yielded;
        },
        start.result_names, start.arg_names);
  };
  part(0, split, false);
  part(split, op.extent - split, true);
  for (size_t i = 0; i < op.results.size(); ++i) env_[op.results[i].get()] = carried[i];
}

}  // namespace nautilus::matile::lowering
