// Loops and their software pipeline (lower.h rule 3): a For whose body loads shared operands at
// offsets known ahead of the iteration (they depend only on the loop variable and values from
// outside the loop) keeps `stages` buffers of each. A prologue issues iterations 0..S-2, one
// commit group each; iteration i waits until its group landed (wait_group S-2), synchronizes,
// issues iteration i+S-1 into the buffer iteration i-1 used (predicated off past the end) and
// computes on buffer i % S. With one stage every iteration copies, waits and synchronizes
// before computing. A pipelined loop inside another loop of the CTA synchronizes before its
// prologue: the outer loop's previous iteration read the same buffers. Loop-carried values keep
// the layouts rule 4 gave them:
//
//   before (VR):                            after (MA, 2 stages):
//     %acc = for k_o in 0..64                 cp.async A_smem[%c0][0, 0] <- A[%3 + i0, i1] ...
//         iter_args(%acc_i = %acc0) {         cp.async.commit_group
//       %A = load A[...]                      %acc = for k_o in 0..64 iter_args(...) pipeline 2 {
//       ...                                     cp.async.wait_group 0
//     }                                         bar.sync
//                                               %next = add %k_o, %c1
//                                               %next_stage = mod %next, %c2
//                                               %more = cmp lt %next, %c64
//                                               cp.async A_smem[%next_stage][0, 0] <- A[%3 + i0,
//                                                 %4 + i1] ... if %more
//                                               cp.async.commit_group
//                                               %stage = mod %k_o, %c2
//                                               ... reads of A_smem[%stage]
//                                             }
//                                             cp.async.wait_group 0
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

// Whether a window's offsets in `loop` depend only on the loop variable and values from outside
// the loop: then its copy can be issued iterations ahead.
bool KernelLowering::known_ahead(const VOp& loop, const Window& window) {
  for (const Affine& offset : window.offsets) {
    for (const auto& [atom, coef] : offset.atoms) {
      if (atom == loop.loop_var.get()) continue;
      auto where = scope_.find(atom);
      // Atoms defined in this body (or deeper) are not known ahead of time.
      if (where != scope_.end() && where->second == &loop) return false;
    }
  }
  return true;
}

// Loads of this loop's body that can be issued stages-1 iterations ahead.
std::vector<const VOp*> KernelLowering::pipelinable(const VOp& loop) {
  std::vector<const VOp*> out;
  for (const vrtile::OpPtr& op : loop.body->ops) {
    if (op->kind != VOpKind::Load || !smem_windows_.count(op.get())) continue;
    if (known_ahead(loop, smem_windows_.at(op.get()))) out.push_back(op.get());
  }
  return out;
}

// The vectors a pipelined loop loads beside its operand tiles -- a group's scales, a row of
// biases -- join its ring: copied stages-1 iterations ahead with the tiles and read back from
// shared memory. Loaded from global memory where they are used instead, each iteration waits a
// memory round trip for them however deep the ring is (the int8 weight GEMM at M 16 waited for
// its 64 scales in each of 32 iterations: 32.9 us where the weights alone take 5; at M 1 its
// one row of activations likewise). Only vectors: a 2-D tile of its own (a bias matrix) would
// take as much shared memory per stage as an operand.
void KernelLowering::plan_ring_vectors() {
  if (options_.consumers > 0 || options_.stages < 2) return;
  // One axis longer than 1: a vector, or a one-row tile (a decode step's activations, the A
  // operand of an mma with its atom's rows repeated, which ldmatrix cannot read).
  const auto is_vector = [](const std::vector<int64_t>& shape) {
    return std::count_if(shape.begin(), shape.end(), [](int64_t e) { return e > 1; }) <= 1;
  };
  std::function<void(const vrtile::Region&)> walk = [&](const vrtile::Region& region) {
    for (const vrtile::OpPtr& op : region.ops) {
      if (!op->body) continue;
      if (op->kind == VOpKind::For && !pipelinable(*op).empty()) {
        for (const vrtile::OpPtr& inner : op->body->ops) {
          if (inner->kind != VOpKind::Load || !is_vector(inner->results[0]->type.shape) ||
              smem_windows_.count(inner.get()) || row_buffers_.count(inner->buffer.get())) {
            continue;
          }
          std::optional<Window> window = match_window(*inner, inner->results[0]->type.shape);
          if (!window || !async_copyable(*inner, *window) || !known_ahead(*op, *window)) continue;
          smem_windows_[inner.get()] = *window;
          register_loads_.insert(inner.get());
          staged_register_loads_.insert(inner.get());
        }
      }
      walk(*op->body);
    }
  };
  walk(*vk_.body);
}

void KernelLowering::emit_for(const VOp& op) {
  struct Nesting {
    int& depth;
    explicit Nesting(int& d) : depth(++d) {}
    ~Nesting() { --depth; }
  } nesting(loop_nesting_);
  if (&op == ws_.loop) {
    if (!held_copies_.empty()) publish_held_copies(0);
    return emit_hopper_loop(op);
  }
  // Rule 8, tail=global: a loop over a row partly on chip runs its resident stages, then its tail.
  if (const auto split = row_loop_splits_.find(&op); split != row_loop_splits_.end()) {
    return emit_split_row_loop(op, split->second);
  }
  const std::vector<const VOp*> loads = pipelinable(op);
  const int stages = std::max(1, options_.stages);
  for (const VOp* load : loads) smem_alloc_for(*load, stages);
  // Prologue: iterations 0 .. stages-2, one commit group each (empty past the end). Tiles
  // copied once just before (attention's Q) are waited for after it, leaving the prologue's
  // groups in flight: the first ring tiles are requested without waiting for Q's round trip.
  int prologue_groups = 0;
  if (!loads.empty() && stages >= 2) {
    prologue_groups = stages - 1;
    // Inside another loop the ring's buffers were read by the previous iteration of that loop:
    // every thread must be done with them before the prologue overwrites them.
    if (loop_nesting_ > 1) b_.barrier();
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
  if (!held_copies_.empty()) publish_held_copies(prologue_groups);
  b_.set_provenance(op.provenance);
  const LoopStart start = loop_start(op);
  const std::vector<Value> results = b_.for_loop(
      op.loop_var->name, op.extent, start.inits,
      [&](const Value& var, const std::vector<Value>& carried) {
        env_[op.loop_var.get()] = var;
        for (size_t i = 0; i < carried.size(); ++i) env_[op.block_args[i].get()] = carried[i];
        memo_.emplace_back();
        if (!loads.empty()) emit_pipeline_step(op, loads, var, stages);
        emit_region(*op.body);
        b_.set_provenance(op.provenance);
        std::vector<Value> yielded = yielded_values(op, carried);
        memo_.pop_back();
        return yielded;
      },
      start.result_names, start.arg_names, loads.empty() ? 0 : stages,
      op.trip_count ? scalar_value(op.trip_count) : nullptr);
  for (size_t i = 0; i < results.size(); ++i) env_[op.results[i].get()] = results[i];
  if (!loads.empty()) b_.wait_group(0);
}

KernelLowering::LoopStart KernelLowering::loop_start(const VOp& loop) {
  LoopStart start;
  for (size_t i = 0; i < loop.operands.size(); ++i) {
    start.inits.push_back(materialize(loop.operands[i], layout_for(loop.block_args[i])));
  }
  for (const VValue& r : loop.results) start.result_names.push_back(r->name);
  for (const VValue& a : loop.block_args) start.arg_names.push_back(a->name);
  return start;
}

std::vector<Value> KernelLowering::yielded_values(const VOp& loop, const std::vector<Value>& carried) {
  const vrtile::Op& yield = *loop.body->ops.back();
  std::vector<Value> yielded;
  for (size_t i = 0; i < yield.operands.size(); ++i) {
    yielded.push_back(materialize(yield.operands[i], carried[i]->layout));
  }
  return yielded;
}

// The top of a pipelined iteration i: wait for i's tiles, publish them, issue i+S-1.
void KernelLowering::emit_pipeline_step(const VOp& loop, const std::vector<const VOp*>& loads,
                                        const Value& var, int stages) {
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

}  // namespace nautilus::matile::lowering
