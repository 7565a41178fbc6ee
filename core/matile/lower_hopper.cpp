// Warp specialization on sm_90a (lower.h rule 6): the kernel's main loop -- the one top-level
// For whose dots read loaded tiles -- is split between two roles. A producer warpgroup runs the
// loop's copies alone: for every iteration it waits until the consumers released the ring slot,
// announces the bytes on the slot's `full` mbarrier and issues one TMA copy per operand tile.
// The consumer warpgroups run the rest of the kernel; in the loop they wait on `full`, issue the
// dots as wgmma reading both operands from the slot, keep one group of MMAs in flight and release
// the previous iteration's slot on `empty` once wgmma.wait_group 1 retired it. Every operand tile
// lands in the canonical wgmma layout of its major-ness (a row-major A: K-major; a row-major B:
// MN-major), which is also the layout TMA fills box by box (layout/tma.h).
//
//   before (VR, launch consumers=2, stages=4):  after (MA, sm_90a):
//     %acc0 = broadcast 0.0 : f32[128, 128]       mbarrier full[4] arrivals 1, empty[4] arrivals 1
//     %acc = for k_o in 0..64                     tensor_map tm_A : A box [128, 64] swizzle 128
//         iter_args(%acc_i = %acc0) {             roles {
//       %A = load A[...] : bf16[128, 64]            role producer warpgroups 1 registers 40 {
//       %B = load B[...] : bf16[64, 128]              for k_o in 0..64 {
//       %acc1 = dot %A, %B, %acc_i                      mbarrier.wait empty[%s] parity %released
//       yield %acc1                                     mbarrier.arrive.expect_tx full[%s] 32768
//     }                                                 tma.load A_ring[%s] <- tm_A[%m0, %k0] ...
//     store C[...], cast(%acc)                        } }
//                                                   role consumers warpgroups 2 registers 232 {
//                                                     mbarrier.wait full[%s] parity %phase
//                                                     wgmma.fence; %acc1 = wgmma ...; commit
//                                                     %acc = for k_o in 0..63 { (the same, then)
//                                                       wgmma.wait_group 1; arrive empty[prev] }
//                                                     wgmma.wait_group 0; cast; global_store
//                                                   } }
//
// The first iteration is peeled: the loop releases each slot one iteration late, and the first
// iteration has no slot before it to release.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "core/layout/tma.h"
#include "core/layout/wgmma.h"
#include "core/matile/hopper.h"
#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

namespace {

constexpr int kProducerRegisters = 40;
constexpr int64_t kSharedBytesPerCta = 227 * 1024;  // the H100's opt-in maximum per block

bool sixteen_bit(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// The canonical wgmma layout of a loaded tile, over the tile's own (axis 0, axis 1)
// coordinates, with the widest swizzle whose atom divides the tile. Buffers are row-major, so
// the tile's axis 1 is contiguous: the tile is K-major when its mn (A's rows, B's columns) is
// axis 0, MN-major when it is axis 1.
struct RingLayout {
  layout::ComposedLayout layout;
  int swizzle_bytes = 0;
};
layout::Result<RingLayout> ring_layout(int element_bytes, const std::vector<int64_t>& shape,
                                       bool mn_is_axis0) {
  const layout::OperandMajor major = mn_is_axis0 ? layout::OperandMajor::K : layout::OperandMajor::MN;
  const int64_t mn = shape[mn_is_axis0 ? 0 : 1], k = shape[mn_is_axis0 ? 1 : 0];
  std::string reasons;
  for (layout::SwizzleMode mode : {layout::SwizzleMode::B128, layout::SwizzleMode::B64,
                                   layout::SwizzleMode::B32}) {
    auto tile = layout::wgmma_shared_layout(major, mode, element_bytes, mn, k);
    if (!tile) {
      reasons += std::string(reasons.empty() ? "" : "; ") + tile.error().message;
      continue;
    }
    RingLayout out{*tile, layout::swizzle_span_bytes(mode)};
    if (!mn_is_axis0) {
      const layout::Layout& l = tile->layout;
      out.layout.layout = layout::concatenate({l.mode(1), l.mode(0)});
    }
    return out;
  }
  return layout::layout_error(reasons);
}

}  // namespace

void KernelLowering::plan_warp_specialization() {
  const int consumers = options_.consumers;
  const int64_t rows = 64 * int64_t{consumers};
  const auto name = [](const VOp* op) { return "%" + op->results[0]->name; };

  // The main loop: the top-level loop whose dots read loaded tiles.
  std::vector<const VOp*> loops;
  std::string why_not;  // the first loaded dot operand that no copy engine can read
  for (const vrtile::OpPtr& op : vk_.body->ops) {
    if (op->kind != VOpKind::For) continue;
    for (const vrtile::OpPtr& inner : op->body->ops) {
      auto plan = dot_plans_.find(inner.get());
      if (plan == dot_plans_.end()) continue;
      if (plan->second.a.load && plan->second.b.load) {
        loops.push_back(op.get());
        break;
      }
      for (const VValue& operand : {inner->operands[0], inner->operands[1]}) {
        DType narrow = DType::F32;
        const VOp* load = peel(operand, &narrow).load;
        if (!load || !why_not.empty()) continue;
        const int64_t pitch = load->buffer->shape.back() * dtype_bytes(load->buffer->dtype);
        why_not = "; operand " + name(load) + " reads " + load->buffer->name + ", whose rows of " +
                  std::to_string(pitch) + " bytes " +
                  (pitch % 16 == 0 ? "it cannot read as whole 16-byte chunks"
                                   : "are not a multiple of 16 bytes, which TMA needs");
      }
    }
  }
  if (loops.empty()) {
    fail("warp_spec: no top-level loop of the kernel has a dot whose operands are loaded tiles "
         "a TMA producer can copy" + why_not);
  }
  if (loops.size() > 1) {
    fail("warp_spec: " + std::to_string(loops.size()) + " loops have dots on loaded tiles; the "
         "warp-specialized form takes one main loop");
  }
  const VOp& loop = *loops.front();
  if (options_.stages < 2) {
    fail("warp_spec: a ring of one stage deadlocks: the consumers keep an iteration's MMAs in "
         "flight while the producer fills the next stage; take stages >= 2");
  }
  if (loop.trip_count) {
    fail("warp_spec: the main loop " + loop.loop_var->name + " stops early (a trip count), which "
         "the producer and the consumers would have to agree on");
  }
  const std::vector<const VOp*> ahead = pipelinable(loop);

  // Every dot of the loop becomes a wgmma on two ring operands. Per operand load: whether its
  // tile's mn is axis 0 (A's rows; B's columns are axis 1; swapped for a transposed operand).
  std::vector<std::pair<const VOp*, bool>> mn_axis0;
  const auto note_operand = [&](const VOp* load, bool mn_is_axis0) {
    for (const auto& [seen, axis0] : mn_axis0) {
      if (seen != load) continue;
      if (axis0 != mn_is_axis0) {
        fail("warp_spec: " + name(load) + " is read both K-major and MN-major by the loop's dots");
      }
      return;
    }
    mn_axis0.emplace_back(load, mn_is_axis0);
  };
  for (const vrtile::OpPtr& inner : loop.body->ops) {
    if (inner->kind != VOpKind::Dot) continue;
    DotPlan& plan = dot_plans_.at(inner.get());
    const VValue& v = inner->results[0];
    const std::string dot = "warp_spec: dot %" + v->name;
    const int64_t M = v->type.shape[0], N = v->type.shape[1];
    const int64_t K = inner->operands[0]->type.shape[1];
    if (!plan.mma || !plan.a.load || !plan.b.load || !sixteen_bit(plan.a.source->type.dtype)) {
      fail(dot + " does not read both operands as 16-bit loaded tiles, which wgmma needs");
    }
    if (M != rows) {
      fail(dot + " has " + std::to_string(M) + " rows; " + std::to_string(consumers) +
           " consumer warpgroup(s) of wgmma take " + std::to_string(rows) + " (64 each)");
    }
    if (N % 8 != 0 || N > 256) {
      fail(dot + " has " + std::to_string(N) + " columns; wgmma takes 8 to 256, in steps of 8");
    }
    if (K % 16 != 0) fail(dot + " has a k extent of " + std::to_string(K) + ", not a multiple of 16");
    const bool carried = inner->operands.size() == 3 &&
                         std::find(loop.block_args.begin(), loop.block_args.end(),
                                   inner->operands[2]) != loop.block_args.end();
    if (!carried) fail(dot + " does not accumulate into a value the main loop carries");
    // The MMAs stay in flight until the next iteration: their result may only be carried.
    for (const VOp* user : users_[v.get()]) {
      const bool yielded = user->kind == VOpKind::Yield && loop_of_yield_.count(user) &&
                           loop_of_yield_.at(user) == &loop;
      const bool accumulated = user->kind == VOpKind::Dot && user->operands.size() == 3 &&
                               user->operands[2] == v && user->operands[0] != v &&
                               user->operands[1] != v;
      if (!yielded && !accumulated) {
        fail(dot + " is used inside the main loop (by " + std::string(vrtile::op_kind_name(user->kind)) +
             "); the warp-specialized form keeps the loop's MMAs in flight until the loop ends, so "
             "their results may only be carried to the next iteration");
      }
    }
    for (const VOp* load : {plan.a.load, plan.b.load}) {
      if (std::find(ahead.begin(), ahead.end(), load) == ahead.end()) {
        fail(dot + ": operand " + name(load) + " is not loaded at offsets known before the iteration");
      }
      if (register_loads_.count(load)) {
        fail(dot + ": operand " + name(load) + " is also used in registers, which the TMA ring "
             "does not provide");
      }
    }
    note_operand(plan.a.load, !plan.a.transposed);
    note_operand(plan.b.load, plan.b.transposed);
    plan.wgmma = true;
    plan.warps_m = 4 * consumers;
    plan.warps_n = 1;
    plan.prefetch_fragments = false;
  }
  for (const VOp* load : ahead) {
    if (std::none_of(mn_axis0.begin(), mn_axis0.end(), [&](const auto& m) { return m.first == load; })) {
      fail("warp_spec: " + name(load) + " is copied ahead in the main loop but is no wgmma "
           "operand; the producer copies only the dots' operands");
    }
  }

  // Each operand: a 2-D window of the whole buffer, in the canonical layout TMA can fill.
  ws_.loop = &loop;
  int64_t ring_bytes = 0;
  for (const VOp* load : ahead) {
    const bool mn_is_axis0 =
        std::find_if(mn_axis0.begin(), mn_axis0.end(), [&](const auto& m) { return m.first == load; })
            ->second;
    const Window& window = smem_windows_.at(load);
    const Buffer& buffer = load->buffer;
    const std::vector<int64_t>& shape = load->results[0]->type.shape;
    const std::string what = "warp_spec: operand " + name(load);
    if (buffer->shape.size() != 2) {
      fail(what + " reads the rank-" + std::to_string(buffer->shape.size()) + " buffer " +
           buffer->name + "; the tensor maps are 2-D for now");
    }
    if (window.tile_axes != std::vector<int>{0, 1}) {
      fail(what + " does not take the axes of " + buffer->name + " in order");
    }
    if (window.bounds != buffer->shape) {
      fail(what + " is masked inside " + buffer->name + "; TMA zero-fills only past its end");
    }
    for (const Affine& offset : window.offsets) {
      for (const auto& [atom, coef] : offset.atoms) {
        if (coef == 0 || atom == loop.loop_var.get()) continue;
        if (scope_.count(atom) || carried_by_.count(atom)) {
          fail(what + " has an offset (%" + atom->name + ") computed inside a loop, which the "
               "producer cannot compute ahead");
        }
      }
    }
    const int e = dtype_bytes(load->results[0]->type.dtype);
    layout::Result<RingLayout> ring = ring_layout(e, shape, mn_is_axis0);
    if (!ring) fail(what + ": no canonical wgmma layout fits its tile: " + ring.error().message);
    layout::GlobalTensor global;
    global.shape = {buffer->shape[0], buffer->shape[1]};
    global.strides = {buffer->shape[1], 1};
    layout::Result<layout::TmaTilePlan> boxes = layout::plan_tma_tile(ring->layout, e, global);
    if (!boxes) fail(what + ": TMA cannot fill its tile: " + boxes.error().message);
    TmaOperand operand;
    operand.load = load;
    operand.layout = ring->layout;
    operand.swizzle_bytes = ring->swizzle_bytes;
    operand.bytes = shape[0] * shape[1] * e;
    ring_bytes += operand.bytes;
    ws_.operands.push_back(operand);
  }
  ws_.tx_bytes = ring_bytes;
  if (ring_bytes * options_.stages > kSharedBytesPerCta) {
    fail("warp_spec: " + std::to_string(options_.stages) + " stages of " +
         std::to_string(ring_bytes / 1024) + " KB exceed the " +
         std::to_string(kSharedBytesPerCta / 1024) + " KB of shared memory of a CTA; take fewer "
         "stages or smaller tiles");
  }
}

void KernelLowering::emit_warp_specialized() {
  const int stages = options_.stages;
  for (TmaOperand& operand : ws_.operands) {
    const VValue& v = operand.load->results[0];
    operand.alloc = b_.shared(v->name + "_ring", v->type.dtype, v->type.shape, operand.layout,
                              stages, "TMA ring of %" + v->name);
    smem_alloc_[operand.load] = operand.alloc;
    const auto box = tma_box_layout(v->type.dtype, v->type.shape, operand.swizzle_bytes);
    const bool row_major = box && *box == operand.layout;
    operand.map = b_.tma_map("tm_" + v->name, operand.load->buffer, v->type.shape,
                             operand.swizzle_bytes,
                             row_major ? std::nullopt : std::optional(operand.layout));
  }
  ws_.full = b_.mbarrier("full", stages, 1, "stage filled by the producer's TMA copies");
  // Every consumer thread releases a stage for itself once its warpgroup's MMAs on it retired:
  // no barrier among the consumers per iteration.
  const int64_t consumer_threads = int64_t{options_.consumers} * kWarpgroupThreads;
  ws_.empty = b_.mbarrier("empty", stages, consumer_threads,
                          "stage released by every consumer thread");
  b_.mbarrier_init(ws_.full);
  b_.mbarrier_init(ws_.empty);
  b_.barrier();
  // Each role computes its own index scalars (a role's values have its own thread count).
  const auto kernel_env = env_;
  const int consumers = options_.consumers;
  const int consumer_registers =
      std::min(240, ((kRegistersPerWarpgroupThread - kProducerRegisters) / consumers) / 8 * 8);
  // A role's values hold its own threads: the grid indices are copied into each role.
  const auto enter_role = [&] {
    env_ = kernel_env;
    memo_.emplace_back();
    for (const vrtile::GridAxis& axis : vk_.grid) {
      env_[axis.var.get()] = b_.binary(BinaryOp::Add, index_constant(0), kernel_env.at(axis.var.get()),
                                       axis.var->name);
    }
  };
  b_.roles({{"producer", 1, kProducerRegisters,
             [&] {
               enter_role();
               emit_producer();
               memo_.pop_back();
             }},
            {"consumers", consumers, consumer_registers, [&] {
               enter_role();
               emit_region(*vk_.body);
               memo_.pop_back();
             }}});
}

// Where iteration k sits in the ring: its slot k % S and the parity (k / S) % 2 of the slot's
// phase that iteration fills.
std::pair<Value, Value> KernelLowering::ring_position(const Value& k) {
  const Value stages = index_constant(options_.stages);
  const Value slot = b_.binary(BinaryOp::Mod, k, stages, "slot");
  const Value round = b_.binary(BinaryOp::FloorDiv, k, stages, "round");
  return {slot, b_.binary(BinaryOp::Mod, round, index_constant(2), "phase")};
}

// The producer: the index scalars of the copies' offsets (the top-level scalars before the main
// loop), then the loop of copies.
void KernelLowering::emit_producer() {
  const VOp& loop = *ws_.loop;
  memo_.emplace_back();
  for (const vrtile::OpPtr& op : vk_.body->ops) {
    if (op.get() == &loop) break;
    if (op->kind == VOpKind::For || op->kind == VOpKind::Store || op->kind == VOpKind::Load ||
        op->results.empty()) {
      continue;
    }
    const auto scalar = [](const VValue& v) { return v->type.rank() == 0; };
    if (std::all_of(op->results.begin(), op->results.end(), scalar) &&
        std::all_of(op->operands.begin(), op->operands.end(), scalar)) {
      b_.set_provenance(op->provenance);
      emit(*op);
    }
  }
  b_.set_provenance(loop.provenance);
  b_.for_loop(
      loop.loop_var->name, loop.extent, {},
      [&](const Value& k, const std::vector<Value>&) {
        memo_.emplace_back();
        const auto [slot, phase] = ring_position(k);
        // The consumers released this slot's previous round (the first round passes at once).
        const Value released = b_.binary(BinaryOp::Sub, index_constant(1), phase, "released");
        b_.mbarrier_wait(BarrierRef{ws_.empty, slot}, released);
        b_.mbarrier_arrive(BarrierRef{ws_.full, slot}, ws_.tx_bytes);
        for (const TmaOperand& operand : ws_.operands) {
          b_.set_provenance(operand.load->provenance);
          std::vector<Value> coordinates;
          for (const Affine& offset : smem_windows_.at(operand.load).offsets) {
            const Value c = emit_offset(offset, loop.loop_var.get(), k);
            coordinates.push_back(c ? c : index_constant(0));
          }
          b_.tma_load(SharedRef{operand.alloc, slot, {0, 0}, false}, operand.map, coordinates,
                      BarrierRef{ws_.full, slot});
        }
        b_.set_provenance(loop.provenance);
        memo_.pop_back();
        return std::vector<Value>{};
      });
  memo_.pop_back();
}

// One iteration of the consumers' main loop: wait for the slot, issue the dots as wgmma on it,
// commit them as one group; returns the values the iteration yields.
std::vector<Value> KernelLowering::emit_hopper_iteration(const VOp& loop, const Value& k,
                                                          const std::vector<Value>& carried) {
  memo_.emplace_back();
  const auto [slot, phase] = ring_position(k);
  b_.mbarrier_wait(BarrierRef{ws_.full, slot}, phase);
  env_[loop.loop_var.get()] = k;
  for (size_t i = 0; i < carried.size(); ++i) env_[loop.block_args[i].get()] = carried[i];
  for (const TmaOperand& operand : ws_.operands) pipelined_stage_[operand.load] = slot;
  b_.wgmma_fence();
  emit_region(*loop.body);
  b_.set_provenance(loop.provenance);
  b_.wgmma_commit_group();
  std::vector<Value> yielded = yielded_values(loop, carried);
  memo_.pop_back();
  return yielded;
}

void KernelLowering::emit_hopper_loop(const VOp& loop) {
  const int stages = options_.stages;
  const LoopStart start = loop_start(loop);
  std::vector<Value> results = emit_hopper_iteration(loop, index_constant(0), start.inits);
  if (loop.extent > 1) {
    results = b_.for_loop(
        loop.loop_var->name + "_rest", loop.extent - 1, results,
        [&](const Value& j, const std::vector<Value>& carried) {
          memo_.emplace_back();  // the body's constants stay in the body
          const Value k = b_.binary(BinaryOp::Add, j, index_constant(1), loop.loop_var->name);
          std::vector<Value> yielded = emit_hopper_iteration(loop, k, carried);
          // This iteration's MMAs may still run; the previous iteration's have retired.
          b_.wgmma_wait_group(1);
          b_.mbarrier_arrive(BarrierRef{ws_.empty, b_.binary(BinaryOp::Mod, j, index_constant(stages),
                                                             "retired")},
                             0, threads());
          memo_.pop_back();
          return yielded;
        },
        start.result_names, start.arg_names);
  }
  b_.wgmma_wait_group(0);
  b_.mbarrier_arrive(BarrierRef{ws_.empty, index_constant((loop.extent - 1) % stages)}, 0, threads());
  for (size_t i = 0; i < results.size(); ++i) env_[loop.results[i].get()] = results[i];
}

}  // namespace nautilus::matile::lowering
