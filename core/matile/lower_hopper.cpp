// Warp specialization on sm_90a (lower.h rule 6): the kernel's main loop -- the one top-level
// For whose dots read loaded tiles -- is split between two roles. A producer warpgroup runs the
// copies alone: first the tiles loaded once before the loop (attention's query tile), on their
// own mbarrier; then, for every iteration, it waits until the consumers released the ring slot,
// announces the bytes on the slot's `full` mbarrier and issues one TMA copy per operand tile.
// The consumer warpgroups run the rest of the kernel; in the loop they wait on `full` and issue
// each dot as a wgmma reading B (and A, unless A is a register tile: the RS form, attention's
// P·V) from shared memory. A GEMM keeps one group of MMAs in flight and releases the previous
// iteration's slot once wgmma.wait_group 1 retired it; a loop that reads a dot's result inside
// the iteration (attention's scores feed the softmax) waits for every group there, which also
// retires the previous iteration's MMAs and so releases their slot. Every operand tile lands in
// the canonical wgmma layout of its major-ness (a row-major A: K-major; a row-major B:
// MN-major), which is also the layout TMA fills box by box (layout/tma.h); a tile of a buffer of
// rank 3 to 5 (one head of K[b, h, n, d]) is a box of extent 1 on the other axes. fp8 tiles
// (plan_eight_bit_wgmma, lower_dots.cpp) are copied as bytes and must both be K-major: an fp8
// ring tile [128, 128] is Sw<3,4,3> o (128,128):(128,1), read by m64nNk32 wgmmas.
//
//   before (VR, launch consumers=2, stages=4):  after (MA, sm_90a):
//     %acc0 = broadcast 0.0 : f32[128, 128]       mbarrier full[4] arrivals 1, empty[4] arrivals 8
//     %acc = for k_o in 0..64                     tensor_map tm_A : A box [128, 64] swizzle 128
//         iter_args(%acc_i = %acc0) {             roles {
//       %A = load A[...] : bf16[128, 64]            role producer warpgroups 1 registers 40 {
//       %B = load B[...] : bf16[64, 128]              for k_o in 0..64 {
//       %acc1 = dot %A, %B, %acc_i                      mbarrier.wait empty[%s] parity %released
//       yield %acc1                                     mbarrier.arrive.expect_tx full[%s] 32768
//     }                                                 tma.load A_ring[%s] <- tm_A[%m0, %k0] ...
//     store C[...], cast(%acc)                        } }
//                                                   role consumers warpgroups 2 registers 232 {
//                                                     %acc = for k_o in 0..64 {
//                                                       mbarrier.wait full[%s] parity %phase
//                                                       wgmma.fence; %acc1 = wgmma ...; commit
//                                                       wgmma.wait_group 1; arrive empty[prev] per warp }
//                                                     wgmma.wait_group 0; arrive empty[last]
//                                                     cast; global_store
//                                                   } }
//
// No iteration is peeled: iteration 0 releases the last slot on behalf of iteration -1, and the
// producer's first wait on that slot expects that release; so a loop with a trip count (causal
// attention's skipped tiles) runs the same protocol in both roles, even with no iteration.
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

// The producer's setmaxnreg: 40 beside one or two consumers; beside three, 32, so that each
// consumer keeps 160 (FlashAttention-3's split for three consumer warpgroups).
int producer_registers(int consumers) { return consumers >= 3 ? 32 : 40; }

// The registers the roles' budgets share: the CTA's at launch (role_register_pool: 504 beside
// two consumers, 512 beside three).
int register_pool(int consumers) { return role_register_pool(4 * (consumers + 1)); }

// The setmaxnreg budget of each consumer warpgroup: what the producer leaves of the pool, split
// among the consumers, in steps of 8, at most 240.
int consumer_registers(int consumers) {
  return std::min(240, ((register_pool(consumers) - producer_registers(consumers)) / consumers) / 8 * 8);
}

// The most a consumer may take when its main loop needs it: the producer keeps 24, the least
// setmaxnreg allows (it only issues TMA copies and waits; FlashAttention-3 gives it 24 beside two
// consumers): 240 beside one or two consumers, 160 beside three.
constexpr int kLeanProducerRegisters = 24;
int most_consumer_registers(int consumers) {
  return std::min(240, ((register_pool(consumers) - kLeanProducerRegisters) / consumers) / 8 * 8);
}

bool sixteen_bit(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

}  // namespace

// The canonical wgmma layout of a loaded tile, over the tile's own (axis 0, axis 1)
// coordinates, with the widest swizzle whose atom divides the tile. Buffers are row-major, so
// the tile's axis 1 is contiguous: the tile is K-major when its mn (A's rows, B's columns) is
// axis 0, MN-major when it is axis 1.
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


layout::Result<layout::TmaTilePlan> plan_buffer_tile(const Buffer& buffer, int outer_axis,
                                                     const layout::ComposedLayout& tile, int element_bytes) {
  const size_t a0 = static_cast<size_t>(outer_axis);
  int64_t outer_stride = 1;
  for (size_t axis = a0 + 1; axis < buffer->shape.size(); ++axis) outer_stride *= buffer->shape[axis];
  layout::GlobalTensor global;
  global.shape = {buffer->shape[a0], buffer->shape.back()};
  global.strides = {outer_stride, 1};
  return layout::plan_tma_tile(tile, element_bytes, global);
}

void KernelLowering::plan_warp_specialization() {
  const int consumers = options_.consumers;
  const int64_t rows = 64 * int64_t{consumers};
  const auto name = [](const VOp* op) { return "%" + op->results[0]->name; };

  // The main loop: the top-level loop whose dots read a loaded B tile.
  std::vector<const VOp*> loops;
  std::string why_not;  // the first loaded dot operand that no copy engine can read
  for (const vrtile::OpPtr& op : vk_.body->ops) {
    if (op->kind != VOpKind::For) continue;
    for (const vrtile::OpPtr& inner : op->body->ops) {
      auto plan = dot_plans_.find(inner.get());
      if (plan == dot_plans_.end()) continue;
      if (plan->second.b.load) {
        loops.push_back(op.get());
        break;
      }
      // Why B, the operand the ring must carry, is no loaded tile.
      if (!why_not.empty()) continue;
      const auto eight_bit = eight_bit_refusals_.find(inner.get());
      if (eight_bit != eight_bit_refusals_.end()) {
        why_not = "; " + eight_bit->second;
        continue;
      }
      DType narrow = DType::F32;
      const VOp* load = peel(inner->operands[1], &narrow).load;
      if (!load) {
        why_not = "; the B operand %" + inner->operands[1]->name + " of dot %" +
                  inner->results[0]->name + " is computed, not a loaded tile";
        continue;
      }
      const int64_t pitch = load->buffer->shape.back() * dtype_bytes(load->buffer->dtype);
      why_not = "; operand " + name(load) + " reads " + load->buffer->name + ", whose rows of " +
                std::to_string(pitch) + " bytes " +
                (pitch % 16 == 0 ? "the lowering does not copy as one window of whole 16-byte "
                                   "chunks (a tile longer than the buffer's axis, or indices "
                                   "that are not a rectangular block of it)"
                                 : "are not a multiple of 16 bytes, which TMA needs");
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
  if (options_.pingpong && consumers < 2) {
    fail("warp_spec pingpong: the consumer warpgroups take turns on the tensor cores, so it needs "
         "consumers >= 2; with " + std::to_string(consumers) + " there is no other warpgroup");
  }
  if (options_.stages < 2) {
    fail("warp_spec: a ring of one stage deadlocks: the consumers keep an iteration's MMAs in "
         "flight while the producer fills the next stage; take stages >= 2");
  }
  stage_register_tiles(loop);
  const std::vector<const VOp*> ahead = pipelinable(loop);
  // A load before the main loop, at the kernel's top level, that a dot of the loop reads (the
  // query tile of attention): the producer copies it once.
  const auto loaded_once = [&](const VOp* load) {
    return std::find_if(vk_.body->ops.begin(), vk_.body->ops.end(),
                        [&](const vrtile::OpPtr& op) { return op.get() == load; }) != vk_.body->ops.end();
  };

  // Every dot of the loop becomes a wgmma reading B (and A, unless A is a register tile: the RS
  // form) from shared memory. Per operand load: whether its tile's mn is axis 0 (A's rows; B's
  // columns are axis 1; swapped for a transposed operand).
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
  std::vector<const VOp*> once;
  for (const vrtile::OpPtr& inner : loop.body->ops) {
    if (inner->kind != VOpKind::Dot) continue;
    DotPlan& plan = dot_plans_.at(inner.get());
    const VValue& v = inner->results[0];
    const std::string dot = "warp_spec: dot %" + v->name;
    const int64_t M = v->type.shape[0], N = v->type.shape[1];
    const int64_t K = inner->operands[0]->type.shape[1];
    if (!plan.mma || !plan.b.load || !(plan.eight_bit || sixteen_bit(plan.b.source->type.dtype))) {
      const auto eight_bit = eight_bit_refusals_.find(inner.get());
      fail(dot + " does not read its B operand as a 16-bit loaded tile or as a K-major fp8 one, which "
           "wgmma needs" + (eight_bit == eight_bit_refusals_.end() ? "" : "; " + eight_bit->second));
    }
    if (M != rows) {
      fail(dot + " has " + std::to_string(M) + " rows; " + std::to_string(consumers) +
           " consumer warpgroup(s) of wgmma take " + std::to_string(rows) + " (64 each)");
    }
    if (N % 8 != 0 || N > 256) {
      fail(dot + " has " + std::to_string(N) + " columns; wgmma takes 8 to 256, in steps of 8");
    }
    const int64_t k_step = plan.eight_bit ? 32 : 16;  // one wgmma reads 32 bytes of k
    if (K % k_step != 0) {
      fail(dot + " has a k extent of " + std::to_string(K) + ", not a multiple of " + std::to_string(k_step));
    }
    // ptxas compiles the kernel under the registers of its launch (64K over every warpgroup's
    // threads: 128 beside three consumers), whatever setmaxnreg grants later, and one wgmma
    // holds its whole f32 accumulator fragment (N / 2 registers per thread) plus about 26 for
    // its operands: m64n256 beside three consumers fails ("insufficient registers (128) ...
    // register target of 154", CUDA 13), m64n192 compiles.
    const int64_t launch_registers = 65536 / ((consumers + 1) * kWarpgroupThreads);
    constexpr int64_t kWgmmaOperandRegisters = 26;
    if (N / 2 + kWgmmaOperandRegisters > launch_registers) {
      fail(dot + " has " + std::to_string(N) + " columns; one wgmma's accumulator (" +
           std::to_string(N / 2) + " registers) and operands exceed the " +
           std::to_string(launch_registers) + " registers ptxas compiles a kernel of " +
           std::to_string(consumers + 1) + " warpgroups under; take fewer columns or consumers");
    }
    for (const VOp* load : {plan.a.load, plan.b.load}) {
      if (!load) continue;  // A in registers
      const bool ring = std::find(ahead.begin(), ahead.end(), load) != ahead.end();
      if (!ring && !loaded_once(load)) {
        fail(dot + ": operand " + name(load) + " is loaded neither at offsets known before the "
             "iteration nor once before the loop");
      }
      if (!ring && std::find(once.begin(), once.end(), load) == once.end()) once.push_back(load);
      if (register_loads_.count(load)) {
        fail(dot + ": operand " + name(load) + " is also used in registers, which the TMA copy "
             "does not provide");
      }
    }
    if (plan.a.load) note_operand(plan.a.load, !plan.a.transposed);
    note_operand(plan.b.load, plan.b.transposed);
    plan.wgmma = true;
    plan.warps_m = 4 * consumers;
    plan.warps_n = 1;
    plan.prefetch_fragments = false;
  }
  // The consumers hold every dot result of the loop and every register A operand at once (the
  // scores, P and the output accumulator of attention): more than their setmaxnreg budget spills,
  // which a package build refuses. Beside the tiles, addresses, indices and the softmax's row
  // values take about scalar_registers: measured with ptxas, a 128 x 176 attention tile
  // at d 128 (196 registers of tiles) spills under 232, a 128 x 128 one (160) does not.
  // Three consumers (160 registers each, FlashAttention-3's split for d 64) need no margin: the
  // 192 x 128 tile at d 64 (128 registers of tiles, 32 more carried when overlapped) compiles
  // without spills, while 192 x 160 overlapped (152 + 40) spills 84 bytes and 192 x 192 not
  // overlapped (176) 8 bytes (ptxas of CUDA 13, 2026-11-27). With a partial last key tile the
  // overlapped 192 x 128 tile is at the edge: 1000 keys spill 12 bytes, 1100 and 2000 none.
  const bool tight_budget = consumers >= 3;
  const int64_t scalar_registers = tight_budget ? 0 : 40;
  const int64_t consumer_threads = int64_t{consumers} * kWarpgroupThreads;
  int64_t tile_registers = 0;
  for (const vrtile::OpPtr& inner : loop.body->ops) {
    if (inner->kind != VOpKind::Dot) continue;
    const std::vector<int64_t>& c = inner->results[0]->type.shape;
    tile_registers += c[0] * c[1] / consumer_threads;  // f32 accumulator
    const DotPlan& plan = dot_plans_.at(inner.get());
    if (!plan.a.load) {
      const std::vector<int64_t>& a = plan.a.source->type.shape;
      tile_registers += a[0] * a[1] * dtype_bytes(plan.a.source->type.dtype) / 4 / consumer_threads;
    }
  }
  for (const VOp* load : ahead) {
    if (staged_register_loads_.count(load)) continue;  // read in registers (stage_register_tiles)
    if (std::none_of(mn_axis0.begin(), mn_axis0.end(), [&](const auto& m) { return m.first == load; })) {
      fail("warp_spec: " + name(load) + " is copied ahead in the main loop but is no wgmma "
           "operand; the producer copies only the dots' operands");
    }
  }
  // The loop's results that dots produce stay in flight across the back edge: the next
  // iteration's block argument is read only after a wait (emit_hopper_loop).
  ws_ = WarpSpecialization{};
  const vrtile::Op& yield = *loop.body->ops.back();
  for (size_t i = 0; i < yield.operands.size() && i < loop.block_args.size(); ++i) {
    const VOp* producer = def(yield.operands[i]);
    if (producer && producer->kind == VOpKind::Dot) ws_.carried_in_flight.push_back(loop.block_args[i].get());
  }

  // Each operand: a window of its buffer over two axes, the second the contiguous one, in the
  // canonical layout TMA can fill.
  ws_.loop = &loop;
  // With overlap=1 the values carried to the next iteration (P, the rescale factors) add theirs,
  // and a partial last tile (loads masked at the buffer's end) keeps its bound mask's index tiles
  // live beside them: measured with ptxas, a 128 x 128 attention tile at d 128 overlapped (192
  // registers of tiles) fits 232 when the keys fill whole tiles and spills 42 registers' worth
  // when they do not; at d 64 and d 80 (160 and 168) both fit.
  int64_t deferred_registers = 0, others = scalar_registers;
  bool masked_tail = false;
  if (options_.overlap) {
    plan_overlap(loop);
    for (const VValue& v : ws_.deferred) {
      deferred_registers += (v->type.element_count() * dtype_bytes(v->type.dtype) + 3) / 4 / consumer_threads;
    }
    masked_tail = std::any_of(ahead.begin(), ahead.end(), [](const VOp* load) { return load->has_mask; });
    // Re-measured once register A operands were packed above their fence (2026-11-28): the
    // GQA variant's 128 x 128 tile at d 128 over 8191 keys spills 20 bytes at 232, none at 240.
    if (masked_tail) others += 8;
  }
  // A persistent kernel whose main loop stops early per tile (causal attention's skip_masked)
  // keeps the trip count, the split loops' bounds and the ring position live beside the tiles:
  // measured with ptxas, B2 H32 S8192 d 64 causal on three consumers spills 196 bytes persistent
  // and none with one CTA per tile; the full rows' persistent kernels fit (2026-11-27).
  const bool persistent = vk_.launch && vk_.launch->persistent;
  if (tight_budget && persistent && loop.trip_count) others += 8;
  // The consumers take more than the default split when their main loop needs it, up to
  // most_consumer_registers, the producer giving up the difference.
  const int64_t budget = most_consumer_registers(consumers);
  const int64_t needed = tile_registers + deferred_registers + others;
  if (needed > budget) {
    fail(std::string(options_.overlap ? "warp_spec overlap" : "warp_spec") +
         ": the main loop's dot results and register operands take about " +
         std::to_string(tile_registers) + " registers per consumer thread" +
         (options_.overlap ? " and the values carried to the next iteration " +
                                 std::to_string(deferred_registers) + " more"
                           : std::string()) +
         ", which with its other values" + (masked_tail ? " (and the masks of a partial last tile)" : "") +
         (tight_budget && persistent && loop.trip_count ? " (and a persistent tile loop's early stop)" : "") +
         " exceeds the consumers' budget of " + std::to_string(budget) + " and would spill; take smaller tiles" +
         (options_.overlap ? " or overlap=0" : ""));
  }
  ws_.consumer_registers = consumer_registers(consumers);
  ws_.producer_registers = producer_registers(consumers);
  if (needed > ws_.consumer_registers) {
    ws_.consumer_registers = static_cast<int>((needed + 7) / 8 * 8);
    ws_.producer_registers = first_role_registers_left(4 * (consumers + 1), int64_t{consumers} * ws_.consumer_registers);
    b_.note("registers: consumers " + std::to_string(ws_.consumer_registers) + ", producer " +
            std::to_string(ws_.producer_registers) + " (setmaxnreg): the main loop needs about " +
            std::to_string(needed) + " per consumer thread, above the default " +
            std::to_string(consumer_registers(consumers)));
  }
  int64_t ring_bytes = 0, once_bytes = 0;
  std::vector<const VOp*> operands = ahead;
  operands.insert(operands.end(), once.begin(), once.end());
  for (const VOp* load : operands) {
    const bool is_once = std::find(once.begin(), once.end(), load) != once.end();
    // A tile read in registers (stage_register_tiles) lands like a K-major operand: its
    // contiguous axis in 128-byte swizzled panels.
    const auto mn = std::find_if(mn_axis0.begin(), mn_axis0.end(), [&](const auto& m) { return m.first == load; });
    const bool mn_is_axis0 = mn == mn_axis0.end() || mn->second;
    const std::vector<int64_t>& shape = load->results[0]->type.shape;
    const std::string what = "warp_spec: operand " + name(load);
    const TmaTile tile = plan_tma_operand(*load, smem_windows_.at(load), loop, is_once, mn_is_axis0);
    if (!tile.refusal.empty()) fail(what + tile.refusal);
    const int e = dtype_bytes(load->results[0]->type.dtype);
    const std::vector<int>& tile_axes = tile.tile_axes;
    const std::optional<RingLayout>& ring = tile.ring;
    TmaOperand operand;
    operand.load = load;
    operand.layout = ring->layout;
    operand.swizzle_bytes = ring->swizzle_bytes;
    operand.bytes = shape[0] * shape[1] * e;
    operand.once = is_once;
    operand.tile_axes = tile_axes;
    (is_once ? once_bytes : ring_bytes) += operand.bytes;
    ws_.operands.push_back(operand);
  }
  ws_.tx_bytes = ring_bytes;
  ws_.once_tx_bytes = once_bytes;
  plan_early_release(loop);
  // The ring's bytes: every operand at `stages`, or with early release the early operands at
  // their own depth.
  const int64_t late_bytes = ring_bytes - ws_.early_tx_bytes;
  if (ws_.early_tx_bytes > 0) ws_.early_stages = options_.early_stages > 0 ? options_.early_stages : options_.stages;
  if (ws_.early_tx_bytes * ws_.early_stages + late_bytes * options_.stages + once_bytes > kSharedBytesPerCta) {
    const std::string rings =
        ws_.early_tx_bytes == 0
            ? std::to_string(options_.stages) + " stages of " + std::to_string(ring_bytes / 1024) + " KB"
            : std::to_string(ws_.early_stages) + " stages of the early operands (" +
                  std::to_string(ws_.early_tx_bytes / 1024) + " KB) and " + std::to_string(options_.stages) +
                  " of the others (" + std::to_string(late_bytes / 1024) + " KB)";
    fail("warp_spec: " + rings + (once_bytes ? " and " + std::to_string(once_bytes / 1024) + " KB copied once" : "") +
         " exceed the " + std::to_string(kSharedBytesPerCta / 1024) + " KB of shared memory of "
         "a CTA; take fewer stages or smaller tiles");
  }
  if (options_.overlap && options_.stages < 3 && ws_.early_tx_bytes == 0) {
    fail("warp_spec overlap: the consumers hold two stages of the ring (the iteration's and the "
         "previous one's, which the deferred MMAs read), so " + std::to_string(options_.stages) +
         " stages leave the producer none to fill ahead; take stages >= 3");
  }
}

// Whether the producer can copy `load`'s tile with TMA, and how: the buffer axes its two tile
// axes span and its layout in the ring (K-major when `mn_is_axis0`). `refusal` says why not,
// after the operand's name.
KernelLowering::TmaTile KernelLowering::plan_tma_operand(const VOp& load, const Window& window, const VOp& loop,
                                                         bool once, bool mn_is_axis0) {
  TmaTile out;
  const Buffer& buffer = load.buffer;
  const std::vector<int64_t>& shape = load.results[0]->type.shape;
  const int rank = static_cast<int>(buffer->shape.size());
  if (buffer->dtype == DType::I4) {
    out.refusal = " reads the int4 buffer " + buffer->name + ", packed two elements a byte; TMA "
                  "copies bytes as they are, and the consumers read a byte an element";
    return out;
  }
  if (rank < 2 || rank > 5 || shape.size() != 2) {
    out.refusal = " reads the rank-" + std::to_string(rank) + " buffer " + buffer->name +
                  "; tensor maps take ranks 2 to 5";
    return out;
  }
  // The buffer axes of the tile's axes 0 and 1 (window.tile_axes maps buffer axes to tile axes).
  out.tile_axes = {-1, -1};
  for (int axis = 0; axis < rank; ++axis) {
    const int t = window.tile_axes[static_cast<size_t>(axis)];
    if (t == 0 || t == 1) out.tile_axes[static_cast<size_t>(t)] = axis;
  }
  if (out.tile_axes[0] < 0 || out.tile_axes[0] >= out.tile_axes[1] || out.tile_axes[1] != rank - 1) {
    out.refusal = " does not take two axes of " + buffer->name + " in order, the second its last";
    return out;
  }
  if (window.bounds != buffer->shape) {
    out.refusal = " is masked inside " + buffer->name + "; TMA zero-fills only past its end";
    return out;
  }
  for (const Affine& offset : window.offsets) {
    for (const auto& [atom, coef] : offset.atoms) {
      if (coef == 0 || (!once && atom == loop.loop_var.get())) continue;
      const auto scope = scope_.find(atom);
      if ((scope != scope_.end() && scope->second) || carried_by_.count(atom)) {
        out.refusal = " has an offset (%" + atom->name + ") computed inside a loop, which the "
                      "producer cannot compute ahead";
        return out;
      }
    }
  }
  const int e = dtype_bytes(load.results[0]->type.dtype);
  layout::Result<RingLayout> ring = ring_layout(e, shape, mn_is_axis0);
  if (!ring) {
    out.refusal = ": no canonical wgmma layout fits its tile: " + ring.error().message;
    return out;
  }
  layout::Result<layout::TmaTilePlan> boxes = plan_buffer_tile(buffer, out.tile_axes[0], ring->layout, e);
  if (!boxes) {
    out.refusal = ": TMA cannot fill its tile: " + boxes.error().message;
    return out;
  }
  out.ring = *ring;
  return out;
}

// Tiles the consumers read in registers rather than as wgmma operands -- the gated MLP's G and
// U, whose silu(G) * U is the down projection's A -- join the ring when TMA can copy them and
// the ring still fits: the producer copies them with the operands, and the consumers read them
// from the ring slot in their register layout. Loaded from global memory inside the iteration
// instead, every iteration waits a memory round trip before its wgmma however deep the ring is
// (the gated MLP's down projection: 2958 of 3938 us on the H200). Tiles that do not fit stay
// global loads, with a note.
//
//   before (consumers):                           after:
//     mbarrier.wait full[%slot]                     producer: tma.load G_ring[%slot] <- tm_G[...]
//     %G = global_load G[...] : f32[128, 32]        consumers: mbarrier.wait full[%slot]
//     %A = cast(silu(%G) * %U) : bf16[128, 32]                 %G = shared_load G_ring[%slot] ...
//     wgmma %A, Wd_ring[%slot], %acc
void KernelLowering::stage_register_tiles(const VOp& loop) {
  const int64_t stages = std::max(1, options_.stages);
  const auto tile_bytes = [](const VOp& load) {
    return load.results[0]->type.element_count() * dtype_bytes(load.results[0]->type.dtype);
  };
  // What the ring shares the CTA's shared memory with: the tiles copied once before the loop
  // (attention's Q).
  int64_t once_bytes = 0;
  for (const vrtile::OpPtr& op : vk_.body->ops) {
    if (op->kind == VOpKind::Load && smem_windows_.count(op.get())) once_bytes += tile_bytes(*op);
  }
  int64_t stage_bytes = 0;
  std::vector<const VOp*> candidates;
  for (const vrtile::OpPtr& op : loop.body->ops) {
    if (op->kind != VOpKind::Load) continue;
    const std::vector<int64_t>& shape = op->results[0]->type.shape;
    if (smem_windows_.count(op.get())) {
      if (known_ahead(loop, smem_windows_.at(op.get()))) stage_bytes += tile_bytes(*op);
      continue;
    }
    if (shape.size() == 2 && shape[0] > 1 && shape[1] > 1 && !row_buffers_.count(op->buffer.get())) {
      candidates.push_back(op.get());
    }
  }
  for (const VOp* load : candidates) {
    const std::vector<int64_t>& shape = load->results[0]->type.shape;
    std::optional<Window> window = match_window(*load, shape);
    if (!window || !known_ahead(loop, *window)) continue;
    const std::string what = "warp_spec: %" + load->results[0]->name + " (" + load->buffer->name + ")";
    const TmaTile tile = plan_tma_operand(*load, *window, loop, false, true);
    if (!tile.refusal.empty()) {
      b_.note(what + " stays a global load in the consumers: the tile" + tile.refusal);
      continue;
    }
    // The consumers read the tile element by element, which addresses one swizzle panel per
    // row: a row wider than the swizzle span lands in several (a hierarchical mode).
    const layout::Layout& inner = tile.ring->layout.layout;
    if (inner.rank() != 2 || !inner.shape().mode(0).is_leaf() || !inner.shape().mode(1).is_leaf()) {
      b_.note(what + " stays a global load in the consumers: its rows of " +
              std::to_string(shape[1] * dtype_bytes(load->results[0]->type.dtype)) + " bytes span several " +
              std::to_string(tile.ring->swizzle_bytes) + "-byte swizzle panels, which element-wise shared reads "
              "do not address");
      continue;
    }
    const int64_t bytes = tile_bytes(*load);
    if ((stage_bytes + bytes) * stages + once_bytes > kSharedBytesPerCta) {
      b_.note(what + " stays a global load in the consumers: " + std::to_string(stages) + " stages of " +
              std::to_string((stage_bytes + bytes) / 1024) + " KB with it exceed a CTA's shared memory" +
              (once_bytes > 0 ? " beside the " + std::to_string(once_bytes / 1024) + " KB copied once" : std::string()));
      ++register_tiles_without_room_;
      continue;
    }
    stage_bytes += bytes;
    smem_windows_[load] = *window;
    register_loads_.insert(load);
    staged_register_loads_.insert(load);
  }
}

// Which ring operands the consumers release in their own iteration. An operand qualifies when
// every dot reading it is a wgmma of the loop's top level that runs in its iteration (not late)
// and the iteration reads that dot's result itself (not as another wgmma's accumulator): the
// wait before that read retires the dot, and with it the operand's last read. Attention's K
// qualifies (QKᵀ's scores feed the softmax); V does not (P·V accumulates into O, which only the
// next iteration, or with overlap=1 the next iteration's late part, reads), nor do a GEMM's A
// and B. With both groups present the ring releases them apart: K's slot is refilled while V's
// is still read, so with overlap=1 a ring of two slots leaves the producer one to fill ahead
// (FlashAttention-3's separate K and V pipelines), where one release per slot needs three.
//
//   one group (stages=3, overlap=1):            early release (stages=2, overlap=1):
//     wait full[k]; S = Q·K[k]; O += P·V[k-1]     wait full[k]; S = Q·K[k]; O += P·V[k-1]
//     wait_group 1; softmax                       wait_group 1; arrive early_empty[k]; softmax
//     wait_group 0; arrive empty[k-1]             wait_group 0; arrive empty[k-1]
//   producer: wait empty[j]; copy K, V           producer: wait early_empty[j]; copy K;
//                                                           wait empty[j]; copy V
void KernelLowering::plan_early_release(const VOp& loop) {
  ws_.early_readers.clear();
  ws_.early_tx_bytes = 0;
  for (TmaOperand& operand : ws_.operands) operand.early = false;
  if (options_.ring_release == LowerOptions::RingRelease::Together) return;
  // Three consumers have no register margin (160 each, FlashAttention-3's split for d 64): the
  // early group's own slot index and barrier waits spilled 4 bytes at B8 H32 S2048 d 64
  // overlapped (ptxas of CUDA 13, 2026-11-28), so they keep one release group.
  if (options_.consumers >= 3) return;
  // A dot in a nested loop is retired by waits that are not the iteration's own.
  bool nested_dot = false;
  const std::function<void(const vrtile::Region&)> scan = [&](const vrtile::Region& region) {
    for (const vrtile::OpPtr& op : region.ops) {
      if (op->kind == VOpKind::Dot) nested_dot = true;
      if (op->body) scan(*op->body);
    }
  };
  for (const vrtile::OpPtr& op : loop.body->ops) {
    if (op->body) scan(*op->body);
  }
  if (nested_dot) return;
  std::unordered_set<const VNode*> read_in_iteration;
  for (const vrtile::OpPtr& op : loop.body->ops) {
    if (op->kind == VOpKind::Yield || ws_.late.count(op.get())) continue;
    const auto plan = dot_plans_.find(op.get());
    const bool wgmma_dot = op->kind == VOpKind::Dot && plan != dot_plans_.end() && plan->second.wgmma;
    for (size_t i = 0; i < op->operands.size(); ++i) {
      if (!(wgmma_dot && i == 2)) read_in_iteration.insert(op->operands[i].get());
    }
  }
  std::unordered_set<const VNode*> readers;
  int64_t early_bytes = 0;
  bool late_group = false;
  for (TmaOperand& operand : ws_.operands) {
    if (operand.once) continue;
    bool read = false, early = true;
    std::vector<const VNode*> results;
    for (const vrtile::OpPtr& op : loop.body->ops) {
      if (op->kind != VOpKind::Dot) continue;
      const DotPlan& plan = dot_plans_.at(op.get());
      if (plan.a.load != operand.load && plan.b.load != operand.load) continue;
      read = true;
      results.push_back(op->results[0].get());
      if (!plan.wgmma || ws_.late.count(op.get()) || !read_in_iteration.count(op->results[0].get())) early = false;
    }
    operand.early = read && early;
    if (operand.early) {
      early_bytes += operand.bytes;
      readers.insert(results.begin(), results.end());
    } else {
      late_group = true;
    }
  }
  if (early_bytes == 0 || !late_group) {
    for (TmaOperand& operand : ws_.operands) operand.early = false;
    return;
  }
  ws_.early_readers = std::move(readers);
  ws_.early_tx_bytes = early_bytes;
}

// A consumer iteration's waits for its stages: `full` at the ring's slot, and with early release
// `early_full` at the early rings' own slot, which it returns (the ring's slot otherwise). Each
// copied operand is read from its own ring's slot.
Value KernelLowering::wait_ring_stages(const Value& ring_k, const Value& slot, const Value& phase) {
  b_.mbarrier_wait(BarrierRef{ws_.full, slot}, phase);
  Value early_slot = slot;
  if (ws_.early_full >= 0) {
    const auto [own_slot, own_phase] = ring_position(ring_k, ws_.early_stages);
    b_.mbarrier_wait(BarrierRef{ws_.early_full, own_slot}, own_phase);
    early_slot = own_slot;
  }
  for (const TmaOperand& operand : ws_.operands) {
    if (!operand.once) pipelined_stage_[operand.load] = operand.early ? early_slot : slot;
  }
  return early_slot;
}

// At the start of each consumer iteration (and overlap=1's peeled first one).
void KernelLowering::begin_early_release(const Value& slot) {
  ws_.current_slot = slot;
  ws_.early_pending = ws_.early_readers;
  ws_.early_released = ws_.early_empty < 0;
}

// After a wait that retired `retired`: once every early reader of the iteration has retired,
// its slot's early operands are released.
void KernelLowering::retire_early_readers(const std::unordered_set<const VNode*>& retired) {
  if (ws_.early_released) return;
  for (const VNode* r : retired) ws_.early_pending.erase(r);
  if (!ws_.early_pending.empty()) return;
  arrive_released(BarrierRef{ws_.early_empty, ws_.current_slot});
  ws_.early_released = true;
}

void KernelLowering::check_early_release() {
  if (!ws_.early_released) {
    fail("internal: warp_spec: a main-loop iteration ended before the wait that retires the dots "
         "reading its early ring operands");
  }
}

void KernelLowering::emit_warp_specialized() {
  const int stages = options_.stages;
  for (TmaOperand& operand : ws_.operands) {
    const VValue& v = operand.load->results[0];
    operand.alloc = b_.shared(v->name + (operand.once ? "_tile" : "_ring"), v->type.dtype,
                              v->type.shape, operand.layout,
                              operand.once ? 1 : operand.early ? ws_.early_stages : stages,
                              operand.once ? "%" + v->name + ", copied once by TMA"
                              : operand.early ? "TMA ring of %" + v->name + ", each slot released in the iteration that reads it"
                                              : "TMA ring of %" + v->name);
    smem_alloc_[operand.load] = operand.alloc;
    if (operand.early) b_.set_released_in_iteration(operand.alloc);
    const auto box = tma_box_layout(v->type.dtype, v->type.shape, operand.swizzle_bytes);
    const bool row_major = box && *box == operand.layout;
    const Buffer& buffer = operand.load->buffer;
    std::vector<int64_t> map_box(buffer->shape.size(), 1);
    map_box[static_cast<size_t>(operand.tile_axes[0])] = v->type.shape[0];
    map_box[static_cast<size_t>(operand.tile_axes[1])] = v->type.shape[1];
    const int rank = static_cast<int>(buffer->shape.size());
    const bool trailing = operand.tile_axes == std::vector<int>{rank - 2, rank - 1};
    operand.map = b_.tma_map("tm_" + v->name, buffer, map_box, operand.swizzle_bytes,
                             row_major ? std::nullopt : std::optional(operand.layout),
                             trailing ? std::vector<int>{} : operand.tile_axes);
  }
  const bool early_release = ws_.early_tx_bytes > 0;
  ws_.full = b_.mbarrier("full", stages, 1,
                         early_release ? "stage of the operands released by the next iteration filled by TMA"
                                       : "stage filled by the producer's TMA copies");
  // Every consumer warp releases a stage for its own lanes once its warpgroup's MMAs on it
  // retired: no barrier among the consumers per iteration, and one atomic per warp, not per thread.
  const int64_t consumer_warps = release_arrivals(int64_t{options_.consumers} * kWarpgroupThreads);
  ws_.empty = b_.mbarrier("empty", stages, consumer_warps,
                          "stage released by every consumer warp");
  if (ws_.once_tx_bytes > 0) {
    ws_.once = b_.mbarrier("once", 1, 1, "the tiles copied once, before the main loop");
    if (ws_.persistent) {
      ws_.once_empty = b_.mbarrier("once_empty", 1, consumer_warps,
                                   "the consumers' main loop is done with the tiles copied once");
    }
  }
  if (ws_.dynamic_tiles) {
    ws_.tile_ring = b_.shared("tile_ring", DType::Index, {1}, row_major_shared({1}, layout::Swizzle{}), 2,
                              "the launch index of each role's next tile, fetched by the producer");
    ws_.tile_full = b_.mbarrier("tile_full", 2, 1, "the producer wrote the next tile's index");
    ws_.tile_empty = b_.mbarrier("tile_empty", 2, consumer_warps + release_arrivals(kWarpgroupThreads),
                                 "every warp of both roles read the next tile's index");
  }
  if (early_release) {
    ws_.early_full = b_.mbarrier("early_full", ws_.early_stages, 1,
                                 "stage of the early operands filled by TMA");
    ws_.early_empty = b_.mbarrier("early_empty", ws_.early_stages, consumer_warps,
                                  "stage of the early operands released by every consumer warp in the iteration that reads it");
    b_.set_early_release(ws_.early_empty);
  }
  b_.mbarrier_init(ws_.full);
  b_.mbarrier_init(ws_.empty);
  if (ws_.early_full >= 0) b_.mbarrier_init(ws_.early_full);
  if (ws_.early_empty >= 0) b_.mbarrier_init(ws_.early_empty);
  if (ws_.tile_full >= 0) b_.mbarrier_init(ws_.tile_full);
  if (ws_.tile_empty >= 0) b_.mbarrier_init(ws_.tile_empty);
  if (ws_.once >= 0) b_.mbarrier_init(ws_.once);
  if (ws_.once_empty >= 0) b_.mbarrier_init(ws_.once_empty);
  b_.barrier();
  // Each role computes its own index scalars (a role's values have its own thread count).
  const auto kernel_env = env_;
  const int consumers = options_.consumers;
  const int budget = ws_.consumer_registers;
  // A role's values hold its own threads: the grid indices are copied into each role.
  const auto enter_role = [&] {
    env_ = kernel_env;
    memo_.emplace_back();
    for (const vrtile::GridAxis& axis : vk_.grid) {
      env_[axis.var.get()] = b_.binary(BinaryOp::Add, index_constant(0), kernel_env.at(axis.var.get()),
                                       axis.var->name);
    }
  };
  const auto producer = [&] {
    enter_role();
    emit_producer();
    memo_.pop_back();
  };
  const auto consumer = [&] {
    enter_role();
    emit_region(*vk_.body);
    memo_.pop_back();
  };
  if (!ws_.persistent) {
    b_.roles({{"producer", 1, ws_.producer_registers, producer},
              {"consumers", consumers, budget, consumer}});
    return;
  }
  b_.roles({{"producer", 1, ws_.producer_registers, [&] { emit_persistent_role(producer, false); }},
            {"consumers", consumers, budget, [&] { emit_persistent_role(consumer, true); }}});
}

// A role of a persistent kernel: its tile loop, carrying the ring iterations of the tiles done.
// The consumers' last slot of each tile is released by the next tile's first iteration (on
// behalf of iteration -1 of the tile, as for the CTA's first); after the last tile they release
// it here, so the ring sees one release per iteration plus iteration -1's, as without tiles.
void KernelLowering::emit_persistent_role(const std::function<void()>& body, bool consumers) {
  memo_.emplace_back();  // the role's own constants
  // Ping-pong turns continue from tile to tile (every consumer warpgroup runs the same tiles and
  // iterations): one seed before the tile loop and one closing wait after it. Inside the tile
  // loop, the seed's and the closing wait's branches on the warpgroup make ptxas serialize
  // every wgmma of the loop (C7520: 1622.7 against 946.3 µs, causal d 128 B2 H16 S8192, H100).
  if (consumers) pingpong_seed();
  ws_.pingpong_per_tile = false;
  // With the dynamic scheduler the loop also carries its tile's launch index (first), starting
  // at the CTA's own index.
  const bool dynamic = ws_.dynamic_tiles;
  const size_t ring_arg = dynamic ? 1 : 0;
  std::vector<Value> inits = {index_constant(0)};
  std::vector<std::string> result_names = {"ring_end"}, arg_names = {"ring_base"};
  if (dynamic) {
    // The tile ring's constants, at the role's scope: the code after the loop uses them too.
    index_constant(1);
    index_constant(2);
    inits.insert(inits.begin(), b_.cta_index("first_tile"));
    result_names.insert(result_names.begin(), "tile_end");
    arg_names.insert(arg_names.begin(), "tile");
  }
  const std::vector<Value> ends = b_.for_tiles(
      "tile_step", inits,
      [&](const Value& step, const std::vector<Value>& carried) {
        ws_.ring_base = carried[ring_arg];
        ws_.tile_step = step;
        ws_.ring_advance = nullptr;
        body();
        // The producer asks for the next tile once it has issued this one's copies: the ring
        // keeps it a few key tiles ahead of the consumers, so the atomic's latency hides behind
        // their last iterations. Asking at the tile's start instead claimed a tile a whole tile
        // ahead, before the CTA knew when it would be free: on causal rows, whose tiles differ
        // in length, CTAs still busy with long tiles held the last ones (8.7% slower than one
        // CTA per tile at B1 H16 S16384 d 128 causal, H100).
        if (dynamic && !consumers) fetch_next_tile(step);
        if (!ws_.ring_advance) fail("warp_spec persistent: the role's tile ran no main loop");
        const Value next = b_.binary(BinaryOp::Add, carried[ring_arg], ws_.ring_advance, "ring_next");
        ws_.ring_base = nullptr;
        ws_.tile_step = nullptr;
        std::vector<Value> yielded = {next};
        if (dynamic) yielded.insert(yielded.begin(), read_next_tile(step));
        return yielded;
      },
      result_names, arg_names);
  const Value ring_end = ends[ring_arg];
  ws_.pingpong_per_tile = true;
  if (consumers) {
    pingpong_drain();
    arrive_released(BarrierRef{ws_.empty, slot_before(ring_end, {"ring_prev", "last"})});
    if (ws_.bulk_stores) b_.bulk_wait_group(0, /*read=*/true);  // the last tile's store
  }
  memo_.pop_back();
}

// The tile ring's slot of tile step `step` (its next tile's index): step % 2, in round step / 2.
void KernelLowering::fetch_next_tile(const Value& step) {
  const Value two = index_constant(2);
  const Value slot = b_.binary(BinaryOp::Mod, step, two, "tile_slot");
  const Value round = b_.binary(BinaryOp::FloorDiv, step, two, "tile_round");
  // The slot's previous round was read by every thread of both roles (a fresh barrier passes a
  // wait on parity 1 at once, as for the operand ring).
  const Value released = b_.binary(
      BinaryOp::Mod, b_.binary(BinaryOp::Add, round, index_constant(1), "tile_round_1"), two, "tile_released");
  b_.mbarrier_wait(BarrierRef{ws_.tile_empty, slot}, released);
  b_.tile_fetch(SharedRef{ws_.tile_ring, slot, {0}}, ws_.tile_counter, BarrierRef{ws_.tile_full, slot});
  b_.mbarrier_arrive(BarrierRef{ws_.tile_full, slot});
}

Value KernelLowering::read_next_tile(const Value& step) {
  const Value two = index_constant(2);
  const Value slot = b_.binary(BinaryOp::Mod, step, two, "tile_slot");
  const Value phase = b_.binary(BinaryOp::Mod, b_.binary(BinaryOp::FloorDiv, step, two, "tile_round"), two,
                                "tile_phase");
  b_.mbarrier_wait(BarrierRef{ws_.tile_full, slot}, phase);
  const Value next = b_.tile_read(SharedRef{ws_.tile_ring, slot, {0}}, "next_tile");
  // Every thread releases its own read (no barrier among a role's threads first).
  arrive_released(BarrierRef{ws_.tile_empty, slot});
  return next;
}

Value KernelLowering::ring_iteration(const Value& k) {
  if (!ws_.ring_base) return k;
  return b_.binary(BinaryOp::Add, ws_.ring_base, k, "ring_k");
}

Value KernelLowering::ring_trips(const VOp& loop) {
  const Value trips = loop_trips(loop);
  if (!loop.trip_count) return trips;
  return b_.binary(BinaryOp::Max, trips, index_constant(options_.overlap ? 1 : 0), "ring_trips");
}

void KernelLowering::finish_ring(const Value& advance) {
  if (ws_.persistent) {
    ws_.ring_advance = advance;
    if (ws_.once_empty >= 0 && !ws_.once_released) {
      arrive_released(BarrierRef{ws_.once_empty, nullptr});
    }
    ws_.once_released = false;
    return;
  }
  arrive_released(BarrierRef{ws_.empty, slot_before(advance, {"trips_prev", "last"})});
}

// Where iteration k sits in the ring: its slot k % S and the parity (k / S) % 2 of the slot's
// phase that iteration fills.
std::pair<Value, Value> KernelLowering::ring_position(const Value& k, int depth) {
  const Value stages = index_constant(depth > 0 ? depth : options_.stages);
  const Value slot = b_.binary(BinaryOp::Mod, k, stages, "slot");
  const Value round = b_.binary(BinaryOp::FloorDiv, k, stages, "round");
  return {slot, b_.binary(BinaryOp::Mod, round, index_constant(2), "phase")};
}

// The slot of iteration k - 1: for k = 0 the last slot, which iteration -1 stands for. `names`:
// of the iteration k + S - 1 and of the slot.
Value KernelLowering::slot_before(const Value& k, const std::pair<std::string, std::string>& names) {
  const Value stages = index_constant(options_.stages);
  return b_.binary(BinaryOp::Mod,
                   b_.binary(BinaryOp::Add, k, index_constant(options_.stages - 1), names.first),
                   stages, names.second);
}

// The iterations a main loop runs: its extent, or fewer by its trip count.
Value KernelLowering::loop_trips(const VOp& loop) {
  const Value extent = index_constant(loop.extent);
  if (!loop.trip_count) return extent;
  return b_.binary(BinaryOp::Min, extent, scalar_value(loop.trip_count), "trips");
}

// The copy of one TMA operand into `stage` of its allocation, its box origin at the window's
// offsets (the loop variable taking `k`).
void KernelLowering::emit_tma_copy(const TmaOperand& operand, const Value& stage, const Value& k,
                                   int barrier) {
  b_.set_provenance(operand.load->provenance);
  std::vector<Value> coordinates;
  for (const Affine& offset : smem_windows_.at(operand.load).offsets) {
    const Value c = k ? emit_offset(offset, ws_.loop->loop_var.get(), k) : emit_offset(offset, nullptr, nullptr);
    coordinates.push_back(c ? c : index_constant(0));
  }
  b_.tma_load(SharedRef{operand.alloc, stage, {0, 0}, false}, operand.map, coordinates,
              BarrierRef{barrier, stage});
}

// The producer: the index scalars of the copies' offsets (the top-level scalars before the main
// loop), the tiles copied once, then the loop of copies into the ring.
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
  if (ws_.once >= 0) {
    b_.set_provenance(loop.provenance);
    if (ws_.once_empty >= 0) {
      // The previous tile's consumers are done with the tiles (a fresh barrier passes parity 1).
      const Value parity = b_.binary(
          BinaryOp::Mod, b_.binary(BinaryOp::Add, ws_.tile_step, index_constant(1), "step_1"),
          index_constant(2), "once_free");
      b_.mbarrier_wait(BarrierRef{ws_.once_empty, nullptr}, parity);
    }
    b_.mbarrier_arrive(BarrierRef{ws_.once, nullptr}, ws_.once_tx_bytes);
    for (const TmaOperand& operand : ws_.operands) {
      if (operand.once) emit_tma_copy(operand, nullptr, nullptr, ws_.once);
    }
  }
  b_.set_provenance(loop.provenance);
  const int stages = options_.stages;
  // overlap=1 runs the consumers' iteration 0 whatever the trip count (emit_overlapped_loop):
  // the producer fills its stage even when the trip count is 0.
  Value producer_trips = loop.trip_count ? scalar_value(loop.trip_count) : nullptr;
  if (producer_trips && options_.overlap) {
    producer_trips = b_.binary(BinaryOp::Max, producer_trips, index_constant(1), "filled_trips");
  }
  b_.for_loop(
      loop.loop_var->name, loop.extent, {},
      [&](const Value& local_k, const std::vector<Value>&) {
        memo_.emplace_back();
        const Value k = ring_iteration(local_k);
        const auto [slot, phase] = ring_position(k);
        // Iteration k refills its slot once the consumers released the slot's previous round:
        // after `round` releases of the slot, one more for the last slot, which the consumers'
        // first iteration releases on behalf of iteration -1 (emit_hopper_loop). A fresh
        // barrier passes a wait on parity 1 at once.
        const Value round = b_.binary(BinaryOp::FloorDiv, k, index_constant(stages), "round");
        const Value last_slot = b_.binary(BinaryOp::FloorDiv, slot, index_constant(stages - 1), "last_slot");
        const Value releases = b_.binary(BinaryOp::Add, round, last_slot, "releases");
        const Value released = b_.binary(
            BinaryOp::Mod, b_.binary(BinaryOp::Add, releases, index_constant(1), "releases_1"),
            index_constant(2), "released");
        if (ws_.early_empty >= 0) {
          // The early operands' slot k % E was released by iteration k - E itself (no release
          // on behalf of iteration -1): after k / E releases.
          const auto [early_slot, early_phase] = ring_position(k, ws_.early_stages);
          const Value early_free = b_.binary(BinaryOp::Sub, index_constant(1), early_phase, "early_free");
          b_.mbarrier_wait(BarrierRef{ws_.early_empty, early_slot}, early_free);
          b_.mbarrier_arrive(BarrierRef{ws_.early_full, early_slot}, ws_.early_tx_bytes);
          for (const TmaOperand& operand : ws_.operands) {
            if (!operand.once && operand.early) emit_tma_copy(operand, early_slot, local_k, ws_.early_full);
          }
        }
        b_.mbarrier_wait(BarrierRef{ws_.empty, slot}, released);
        b_.mbarrier_arrive(BarrierRef{ws_.full, slot}, ws_.tx_bytes - ws_.early_tx_bytes);
        for (const TmaOperand& operand : ws_.operands) {
          if (!operand.once && !operand.early) emit_tma_copy(operand, slot, local_k, ws_.full);
        }
        b_.set_provenance(loop.provenance);
        memo_.pop_back();
        return std::vector<Value>{};
      },
      {}, {}, 0, producer_trips);
  if (ws_.persistent) ws_.ring_advance = ring_trips(loop);
  memo_.pop_back();
}

// Before a consumer op reads a wgmma result still in flight (not as another wgmma's
// accumulator): commit the open group and wait for every group; the first such wait of an
// iteration retired the previous iteration's MMAs, so it releases their slot.
void KernelLowering::retire_wgmma_reads(const VOp& op) {
  if (!ws_.in_iteration || ws_.in_flight.empty()) return;
  const bool wgmma_dot = op.kind == VOpKind::Dot && dot_plans_.count(&op) && dot_plans_.at(&op).wgmma;
  bool reads = false;
  for (size_t i = 0; i < op.operands.size(); ++i) {
    if (wgmma_dot && i == 2) continue;  // accumulating in place keeps the MMAs' order
    if (ws_.in_flight.count(op.operands[i].get())) reads = true;
  }
  if (!reads) return;
  const bool retires_once_readers =
      !ws_.once_readers.empty() &&
      std::all_of(ws_.once_readers.begin(), ws_.once_readers.end(),
                  [&](const VNode* result) { return ws_.in_flight.count(result) > 0; });
  const std::unordered_set<const VNode*> retired = ws_.in_flight;
  if (ws_.uncommitted) b_.wgmma_commit_group();
  ws_.uncommitted = false;
  if (ws_.issue_late) {
    // overlap=1: the previous iteration's late MMAs (P·V) go out behind this iteration's first
    // group, and only that group is waited for; they run on while the iteration goes on, and
    // the iteration's end waits for them and releases their slot. With pingpong=1 the turn
    // passes once both groups are issued (FlashAttention-3's order).
    ws_.in_flight.clear();
    issue_late_part();
    pingpong_pass_turn();
    b_.wgmma_wait_group(1);
    retire_early_readers(retired);
    if (retires_once_readers) release_once_tiles_in_last_iteration();
    return;
  }
  pingpong_pass_turn();
  b_.wgmma_wait_group(0);
  ws_.in_flight.clear();
  ws_.register_operand_in_flight = false;
  retire_early_readers(retired);
  release_previous_slot();
  if (retires_once_readers) release_once_tiles_in_last_iteration();
}

bool KernelLowering::reads_tile_copied_once(const DotPlan& plan) const {
  return std::any_of(ws_.operands.begin(), ws_.operands.end(), [&](const TmaOperand& operand) {
    return operand.once && (operand.load == plan.a.load || operand.load == plan.b.load);
  });
}

void KernelLowering::plan_once_release(const VOp& loop) {
  ws_.once_readers.clear();
  ws_.once_release_bodies = ws_.once_release_emitted = 0;
  if (!ws_.persistent || ws_.once_empty < 0 || !loop.body) return;
  const auto reads_once = [&](const VOp& op) {
    if (op.kind != VOpKind::Dot) return false;
    const auto plan = dot_plans_.find(&op);
    return plan == dot_plans_.end() || reads_tile_copied_once(plan->second);  // unplanned: assume so
  };
  bool nested_reader = false;
  const std::function<void(const vrtile::Region&)> scan_nested = [&](const vrtile::Region& region) {
    for (const vrtile::OpPtr& op : region.ops) {
      if (reads_once(*op)) nested_reader = true;
      if (op->body) scan_nested(*op->body);
    }
  };
  std::unordered_set<const VNode*> readers;
  for (const vrtile::OpPtr& op : loop.body->ops) {
    if (op->body) scan_nested(*op->body);
    if (!reads_once(*op)) continue;
    const auto plan = dot_plans_.find(op.get());
    if (plan == dot_plans_.end() || !plan->second.wgmma || ws_.late.count(op.get()) || op->results.empty()) {
      return;  // read late, or not by a wgmma that an iteration's wait retires
    }
    readers.insert(op->results[0].get());
  }
  if (!nested_reader) ws_.once_readers = std::move(readers);
}

// Emitted after the wait that retired the iteration's reads of the tiles copied once: arrives
// on once_empty when k is the loop's last iteration, or iteration 0 of a loop of no trips
// (which overlap=1 runs all the same). Every other iteration skips it: a loop of at most one
// trip stands for the branch.
void KernelLowering::release_once_tiles_in_last_iteration() {
  const VOp& loop = *ws_.loop;
  const Value k = env_.at(loop.loop_var.get());
  const Value trips = loop_trips(loop);
  // k + 2 - trips: 1 in the last iteration, at most 0 before it, 2 in a loop of no trips.
  const Value from_end = b_.binary(BinaryOp::Sub, b_.binary(BinaryOp::Add, k, index_constant(2), "k_2"),
                                   trips, "from_end");
  const Value release = b_.binary(BinaryOp::Min, b_.binary(BinaryOp::Max, from_end, index_constant(0), "last_1"),
                                  index_constant(1), "releases_once");
  arrive_once_empty_if("once_release", release);
  ++ws_.once_release_emitted;
}

// An arrive on once_empty in a loop of `trips` (0 or 1) trips: the branch the MA IR has no op for.
void KernelLowering::arrive_once_empty_if(const std::string& name, const Value& trips) {
  b_.for_loop(
      name, 1, {},
      [&](const Value&, const std::vector<Value>&) {
        arrive_released(BarrierRef{ws_.once_empty, nullptr});
        return std::vector<Value>{};
      },
      {}, {}, 0, trips);
}

// After a main loop whose iterations release the tiles copied once: every body did (or none
// did, and the release stays after the loop), and a loop that ran no iteration releases them
// here (overlap=1's first iteration runs whatever the trip count, and released them there).
void KernelLowering::finish_once_release(const VOp& loop) {
  if (ws_.once_release_emitted == 0) return;
  if (ws_.once_release_emitted != ws_.once_release_bodies) {
    fail("internal: the tiles copied once are released in " + std::to_string(ws_.once_release_emitted) +
         " of the main loop's " + std::to_string(ws_.once_release_bodies) + " iteration bodies");
  }
  ws_.once_released = true;
  if (options_.overlap || !loop.trip_count) return;
  const Value none = b_.binary(BinaryOp::Max, b_.binary(BinaryOp::Sub, index_constant(1), loop_trips(loop), "no_trips"),
                               index_constant(0), "releases_once_after");
  arrive_once_empty_if("once_release_after", none);
}

// overlap=1: emits the previous iteration's late part that the iteration holds back, as its
// own committed group.
void KernelLowering::issue_late_part() {
  const std::function<void()> issue = std::move(ws_.issue_late);
  ws_.issue_late = nullptr;
  issue();
  if (ws_.uncommitted) b_.wgmma_commit_group();
  ws_.uncommitted = false;
}

// Every thread of the role releases what it did: one arrive per warp once its lanes converged,
// or (arrive_per_warp off, for comparisons) one per thread. The barrier expects
// release_arrivals(threads) of them.
void KernelLowering::arrive_released(BarrierRef bar) {
  if (options_.arrive_per_warp) {
    b_.mbarrier_arrive_per_warp(std::move(bar), threads());
  } else {
    b_.mbarrier_arrive(std::move(bar), 0, threads());
  }
}

int64_t KernelLowering::release_arrivals(int64_t threads) const {
  return options_.arrive_per_warp ? threads / kWarpSize : threads;
}

void KernelLowering::release_previous_slot() {
  if (ws_.released) return;
  ws_.released = true;
  arrive_released(BarrierRef{ws_.empty, ws_.previous_slot});
}

// The consumers' main loop. Iteration k waits for its slot, issues each dot as a wgmma (fenced,
// since registers they read may have just been written), and releases the slot of iteration
// k - 1 once its MMAs retired: at the first wait for a result inside the iteration (a dot whose
// scores feed a softmax), or else at the end after wgmma.wait_group 1 (one group in flight, a
// GEMM). Iteration 0 releases the last slot on behalf of iteration -1, which the producer
// expects; so no iteration is peeled and a trip count works alike in both roles.
void KernelLowering::emit_hopper_loop(const VOp& loop) {
  if (ws_.pingpong_per_tile) pingpong_seed();
  plan_once_release(loop);
  if (options_.overlap) {
    emit_overlapped_loop(loop);
    pingpong_end_loop();
    return;
  }
  const LoopStart start = loop_start(loop);
  const Value trip_count = loop.trip_count ? scalar_value(loop.trip_count) : nullptr;
  const std::vector<Value> results = b_.for_loop(
      loop.loop_var->name, loop.extent, start.inits,
      [&](const Value& k, const std::vector<Value>& carried) {
        memo_.emplace_back();
        const Value ring_k = ring_iteration(k);
        const auto [slot, phase] = ring_position(ring_k);
        const Value early_slot = wait_ring_stages(ring_k, slot, phase);
        env_[loop.loop_var.get()] = k;
        for (size_t i = 0; i < carried.size(); ++i) env_[loop.block_args[i].get()] = carried[i];
        ws_.in_iteration = true;
        ws_.released = false;
        ws_.register_operand_in_flight = false;
        ws_.uncommitted = false;
        ws_.in_flight = {ws_.carried_in_flight.begin(), ws_.carried_in_flight.end()};
        ws_.previous_slot = slot_before(ring_k, {"k_prev", "retired"});
        ws_.turn_to_take = options_.pingpong;
        begin_early_release(early_slot);
        ++ws_.once_release_bodies;
        emit_region(*loop.body);
        b_.set_provenance(loop.provenance);
        if (ws_.uncommitted) b_.wgmma_commit_group();
        pingpong_pass_turn();  // a GEMM: the turn passes once the iteration's MMAs are issued
        // This iteration's MMAs may still run past its end (the previous iteration's have
        // retired), unless one reads an A fragment from registers: the emitted body declares
        // its values afresh each iteration, and ptxas reuses those registers for the next A
        // fragment while the tensor cores still read them (a gated MLP whose A is silu(G) * U
        // read wrong values on the H100).
        const int keep_in_flight = ws_.register_operand_in_flight ? 0 : 1;
        if (!ws_.released) {
          b_.wgmma_wait_group(keep_in_flight);
          release_previous_slot();
        } else if (keep_in_flight == 0) {
          b_.wgmma_wait_group(0);
        }
        ws_.register_operand_in_flight = false;
        ws_.in_iteration = false;
        check_early_release();
        std::vector<Value> yielded = yielded_values(loop, carried);
        memo_.pop_back();
        return yielded;
      },
      start.result_names, start.arg_names, 0, trip_count);
  b_.wgmma_wait_group(0);
  pingpong_end_loop();
  finish_once_release(loop);
  // The last iteration's slot (the last slot, for the -1 of a loop that ran no iteration).
  finish_ring(ring_trips(loop));
  for (size_t i = 0; i < results.size(); ++i) env_[loop.results[i].get()] = results[i];
}

// pingpong=1: the consumer warpgroups take turns issuing their iterations' MMAs, so that the
// softmax (or epilogue) of one runs while the tensor cores work on the other's (FlashAttention-3's
// ping-pong; CUTLASS's ping-pong GEMM). Warpgroup g has named barrier kPingPongBarrierId + g,
// which counts two warpgroups: in each iteration it waits there (bar.sync) before its first
// wgmma, and once that group (with overlap=1, also the previous iteration's P·V) is issued it
// arrives (bar.arrive) on the next warpgroup's barrier, g + 1 modulo the consumers. The last
// warpgroup's seed arrival on warpgroup 0's barrier before the loop lets warpgroup 0 start; the
// last warpgroup's final arrival is left over after the loop, and warpgroup 0 consumes it with
// one more bar.sync (it waits only until that warpgroup issued its last MMAs), so every barrier
// ends the main loop with no thread arrived. A persistent kernel's consumers seed before their
// tile loop and close after it: the turns run on from one tile's last iteration to the next
// tile's first.
//
//   bar.arrive [-, 1] by warpgroup, 256            the seed: warpgroup 1 arrives for warpgroup 0
//   for k_o ... { mbarrier.wait full[%slot] ...
//     bar.sync [1, 2] by warpgroup, 256            wait for the turn
//     wgmma.fence; %S = wgmma ...; wgmma.commit_group
//     bar.arrive [2, 1] by warpgroup, 256          pass the turn
//     wgmma.wait_group 0; softmax ... }
//   bar.sync [1, -] by warpgroup, 256              warpgroup 0 consumes the leftover arrival
namespace {
constexpr int kPingPongBarrierId = 1;  // clear of the role barriers (8 up) and the emitter's (15 down)
constexpr int64_t kPingPongThreads = 2 * kWarpgroupThreads;  // the waiting and the arriving warpgroup
}  // namespace

void KernelLowering::pingpong_seed() {
  if (!options_.pingpong) return;
  std::vector<int> ids(static_cast<size_t>(options_.consumers), 0);
  ids.back() = kPingPongBarrierId;  // the last warpgroup arrives on warpgroup 0's barrier
  b_.warpgroup_barrier(ids, kPingPongThreads, /*arrive_only=*/true);
}

void KernelLowering::pingpong_take_turn() {
  if (!ws_.turn_to_take) return;
  ws_.turn_to_take = false;
  ws_.turn_to_pass = true;
  std::vector<int> ids;
  for (int g = 0; g < options_.consumers; ++g) ids.push_back(kPingPongBarrierId + g);
  b_.warpgroup_barrier(ids, kPingPongThreads, /*arrive_only=*/false);
}

void KernelLowering::pingpong_pass_turn() {
  if (!ws_.turn_to_pass) return;
  ws_.turn_to_pass = false;
  std::vector<int> ids;
  for (int g = 0; g < options_.consumers; ++g) ids.push_back(kPingPongBarrierId + (g + 1) % options_.consumers);
  b_.warpgroup_barrier(ids, kPingPongThreads, /*arrive_only=*/true);
}

void KernelLowering::pingpong_end_loop() {
  ws_.turn_to_take = ws_.turn_to_pass = false;
  if (ws_.pingpong_per_tile) pingpong_drain();
}

void KernelLowering::pingpong_drain() {
  if (!options_.pingpong) return;
  ws_.turn_to_take = ws_.turn_to_pass = false;
  std::vector<int> ids(static_cast<size_t>(options_.consumers), 0);
  ids.front() = kPingPongBarrierId;
  b_.warpgroup_barrier(ids, kPingPongThreads, /*arrive_only=*/false);
}

// overlap=1: which ops of the main loop run one iteration late. The late ops are those that
// depend on a dot accumulator the loop carries (attention's O: its rescale and P·V), and the
// broadcasts only they read; the values of the iteration they read (P, the rescale factors) are
// carried to the next iteration. The loop must read some dot result inside the iteration (the
// scores), which is what the late MMAs overlap with.
void KernelLowering::plan_overlap(const VOp& loop) {
  const std::string what = "warp_spec overlap: ";
  const auto& ops = loop.body->ops;
  const vrtile::Op& yield = *ops.back();
  std::unordered_set<const VNode*> late_values;
  for (size_t i = 0; i < yield.operands.size() && i < loop.block_args.size(); ++i) {
    const VOp* producer = def(yield.operands[i]);
    if (producer && producer->kind == VOpKind::Dot) {
      ws_.late_args.push_back(i);
      late_values.insert(loop.block_args[i].get());
    }
  }
  if (ws_.late_args.empty()) fail(what + "the main loop carries no dot accumulator to defer");
  for (const vrtile::OpPtr& op : ops) {
    if (op->kind == VOpKind::Yield) continue;
    if (std::none_of(op->operands.begin(), op->operands.end(),
                     [&](const VValue& x) { return late_values.count(x.get()) > 0; })) {
      continue;
    }
    if (op->kind == VOpKind::For) fail(what + "a nested loop reads the accumulator %" + op->operands[0]->name);
    ws_.late.insert(op.get());
    for (const VValue& r : op->results) late_values.insert(r.get());
  }
  // Layout-only ops that only late ops read move along (a broadcast of the rescale factors is
  // cheaper to repeat than to carry).
  for (bool changed = true; changed;) {
    changed = false;
    for (auto op = ops.rbegin(); op != ops.rend(); ++op) {
      if (ws_.late.count(op->get()) || ((*op)->kind != VOpKind::Broadcast && (*op)->kind != VOpKind::Permute)) continue;
      const std::vector<const VOp*>& users = users_[(*op)->results[0].get()];
      if (users.empty() || !std::all_of(users.begin(), users.end(), [&](const VOp* u) { return ws_.late.count(u) > 0; })) continue;
      ws_.late.insert(op->get());
      changed = true;
    }
  }
  std::unordered_set<const VNode*> body_values;
  bool reads_dot_result = false;
  for (const vrtile::OpPtr& op : ops) {
    if (op->kind == VOpKind::Yield) continue;
    const bool late = ws_.late.count(op.get()) > 0;
    for (size_t i = 0; i < op->operands.size(); ++i) {
      const VValue& x = op->operands[i];
      if (!late) {
        if (late_values.count(x.get())) {
          fail(what + "%" + (op->results.empty() ? x->name : op->results[0]->name) +
               " reads %" + x->name + ", which depends on the accumulator the overlap defers");
        }
        const VOp* producer = def(x);
        const bool accumulating = op->kind == VOpKind::Dot && i == 2;
        if (producer && producer->kind == VOpKind::Dot && body_values.count(x.get()) && !accumulating) {
          reads_dot_result = true;
        }
        continue;
      }
      // A late op's operand from the iteration: carried, unless the late ops recompute it.
      const bool block_arg = std::any_of(loop.block_args.begin(), loop.block_args.end(),
                                         [&](const VValue& a) { return a == x; });
      const VOp* producer = def(x);
      if (late_values.count(x.get()) || (!body_values.count(x.get()) && !block_arg) ||
          (producer && ws_.late.count(producer))) {
        continue;
      }
      if (producer && producer->kind == VOpKind::Load) continue;  // the ring's previous slot
      if (x->type.rank() > 0 && !needed(x)) continue;  // a shared-memory operand's view (Vᵀ)
      if (x->type.rank() > 0 && remat(x)) {
        fail(what + "the deferred %" + op->results[0]->name + " reads %" + x->name +
             ", an index value of the iteration");
      }
      if (std::find(ws_.deferred.begin(), ws_.deferred.end(), x) != ws_.deferred.end()) continue;
      ws_.deferred.push_back(x);
      ws_.deferred_readers.push_back(op.get());
    }
    for (const VValue& r : op->results) body_values.insert(r.get());
  }
  if (!reads_dot_result) {
    fail(what + "the main loop reads no dot result inside the iteration, so there is nothing for "
         "the deferred MMAs to overlap with (a GEMM keeps one group in flight already)");
  }
}

// The previous iteration's late ops, on its values: the loop variable `k` (that iteration's),
// the accumulators `late_args` and the `deferred` values it computed, its ring slot. The values
// of the current iteration's scope are set aside meanwhile, and restored after.
std::vector<Value> KernelLowering::emit_late_part(const VOp& loop, const Value& k,
                                                  const std::vector<Value>& late_args,
                                                  const std::vector<Value>& deferred) {
  std::vector<std::pair<const VNode*, Value>> saved_env;
  const auto bind = [&](const VNode* node, const Value& value) {
    auto found = env_.find(node);
    saved_env.emplace_back(node, found == env_.end() ? nullptr : found->second);
    env_[node] = value;
  };
  bind(loop.loop_var.get(), k);
  for (size_t i = 0; i < ws_.late_args.size(); ++i) bind(loop.block_args[ws_.late_args[i]].get(), late_args[i]);
  for (size_t i = 0; i < ws_.deferred.size(); ++i) bind(ws_.deferred[i].get(), deferred[i]);
  const auto saved_memo = memo_;
  memo_.resize(ws_.loop_memo_depth);
  memo_.emplace_back();
  const Value slot = ring_position(ring_iteration(k)).first;
  const Value early_slot = ws_.early_empty >= 0 ? ring_position(ring_iteration(k), ws_.early_stages).first : slot;
  std::vector<std::pair<const VOp*, std::optional<SmemLoad>>> saved_loads;
  for (const TmaOperand& operand : ws_.operands) {
    if (operand.once) continue;
    auto found = smem_loads_.find(operand.load);
    saved_loads.emplace_back(operand.load, found == smem_loads_.end() ? std::nullopt : std::optional(found->second));
    smem_loads_[operand.load] = SmemLoad{operand.alloc, operand.early ? early_slot : slot};
  }
  for (const vrtile::OpPtr& op : loop.body->ops) {
    if (!ws_.late.count(op.get())) continue;
    b_.set_provenance(op->provenance);
    emit(*op);
  }
  b_.set_provenance(loop.provenance);
  const vrtile::Op& yield = *loop.body->ops.back();
  std::vector<Value> results;
  for (size_t i = 0; i < ws_.late_args.size(); ++i) {
    results.push_back(materialize(yield.operands[ws_.late_args[i]], late_args[i]->layout));
  }
  for (const auto& [load, smem] : saved_loads) {
    if (smem) smem_loads_[load] = *smem;
    else smem_loads_.erase(load);
  }
  memo_ = saved_memo;
  for (auto entry = saved_env.rbegin(); entry != saved_env.rend(); ++entry) {
    if (entry->second) env_[entry->first] = entry->second;
    else env_.erase(entry->first);
  }
  return results;
}

// overlap=1: the layout a deferred value travels in, the one its late reader takes it in (as
// emit_compute materializes operands), so the late part converts nothing. Computed inside the
// consumers' role, for their threads.
RegisterLayout KernelLowering::carried_layout(const VValue& x, const VOp& reader) {
  if (x->type.rank() == 0) return uniform_layout({}, threads());  // a tile-skip predicate
  if (reader.kind == VOpKind::Broadcast) {
    return projected(layout_for(reader.results[0]), reader.results[0]->type.shape, reader.dims, x->type.shape);
  }
  if (reader.kind == VOpKind::Dot) {
    const DotPlan& plan = dot_plans_.at(&reader);
    if (plan.a.source != x || plan.a.load) return layout_for(x);
    Result<RegisterLayout> a = wgmma_a_layout(reader.results[0]->type.shape[0], x->type.shape[1], options_.consumers);
    if (!a) fail(a.error().message);
    return *a;
  }
  return vrtile::is_elementwise(reader.kind) ? layout_for(reader.results[0]) : layout_for(x);
}

// overlap=1: the consumers' loop software-pipelined by one iteration (FlashAttention-3's
// intra-warpgroup overlap). Iteration k issues its first MMAs (QKᵀ), then the late MMAs of
// iteration k - 1 (O rescaled, P·V on the previous ring slot), waits only for its own first
// group, and runs its softmax while P·V computes; its end waits for P·V and releases the
// previous slot. Iteration 0's early part runs before the loop, always (the producer fills a
// stage for it even when the trip count is 0, and its values are then selected away), and the
// last iteration's late part after the loop, in a loop of at most one iteration; the ring
// protocol is that of emit_hopper_loop: one release per iteration plus iteration -1's.
//
//   %m, %l, %P, %c = wait full[0]; S = wgmma; softmax; (select: trip count > 0)
//   %m, %l, %P, %c, %O = for n_o in 0..E-1 trip max(%T - 1, 0) {
//     wait full[k]; S = wgmma Q·K[k]; commit; O = O * %c; O = wgmma %P·V[k-1]; commit
//     wgmma.wait_group 1; softmax(S) -> %P', %c'; wgmma.wait_group 0; arrive empty[k-1] }
//   %O = for last in 0..1 trip min(%T, 1) { O = O * %c; O = wgmma %P·V[T-1]; wait_group 0 }
void KernelLowering::emit_overlapped_loop(const VOp& loop) {
  const LoopStart start = loop_start(loop);
  const vrtile::Op& yield = *loop.body->ops.back();
  const Value trip_count = loop.trip_count ? scalar_value(loop.trip_count) : nullptr;
  std::vector<size_t> early_args;
  for (size_t i = 0; i < loop.block_args.size(); ++i) {
    if (std::find(ws_.late_args.begin(), ws_.late_args.end(), i) == ws_.late_args.end()) early_args.push_back(i);
  }
  const size_t n_early = early_args.size(), n_deferred = ws_.deferred.size();
  std::vector<RegisterLayout> carried_layouts;
  for (size_t d = 0; d < n_deferred; ++d) {
    carried_layouts.push_back(carried_layout(ws_.deferred[d], *ws_.deferred_readers[d]));
  }
  ws_.loop_memo_depth = memo_.size();

  // Iteration k's early part: wait for its slot, emit the ops that are not late (the hook in
  // retire_wgmma_reads issues the previous iteration's late part where `late` is set), and
  // return the early block arguments' yields and the deferred values.
  const auto early_part = [&](const Value& k, const std::vector<Value>& early_carried,
                              const std::function<void()>& late) {
    const Value ring_k = ring_iteration(k);
    const auto [slot, phase] = ring_position(ring_k);
    const Value early_slot = wait_ring_stages(ring_k, slot, phase);
    env_[loop.loop_var.get()] = k;
    for (size_t i = 0; i < n_early; ++i) env_[loop.block_args[early_args[i]].get()] = early_carried[i];
    ws_.in_iteration = true;
    ws_.released = false;
    ws_.uncommitted = false;
    ws_.in_flight.clear();
    ws_.issue_late = late;
    ws_.previous_slot = slot_before(ring_k, {"k_prev", "retired"});
    ws_.turn_to_take = options_.pingpong;
    begin_early_release(early_slot);
    ++ws_.once_release_bodies;
    for (const vrtile::OpPtr& op : loop.body->ops) {
      if (op->kind == VOpKind::Yield || ws_.late.count(op.get())) continue;
      b_.set_provenance(op->provenance);
      emit(*op);
    }
    b_.set_provenance(loop.provenance);
    if (ws_.uncommitted) b_.wgmma_commit_group();
    ws_.uncommitted = false;
    if (ws_.issue_late) issue_late_part();  // nothing read a wgmma result: at the end
    pingpong_pass_turn();
    if (!ws_.released) {
      b_.wgmma_wait_group(0);
      release_previous_slot();
    }
    ws_.in_iteration = false;
    check_early_release();
    std::vector<Value> out;
    for (size_t i = 0; i < n_early; ++i) {
      out.push_back(materialize(yield.operands[early_args[i]], early_carried[i]->layout));
    }
    for (size_t d = 0; d < n_deferred; ++d) out.push_back(materialize(ws_.deferred[d], carried_layouts[d]));
    return out;
  };
  // Iteration 0's early part, always run: a branch around its wgmma would make ptxas serialize
  // the MMAs. With a trip count of 0 the producer still fills stage 0 (emit_producer), so the
  // early part computes on real tiles, and its values are dropped for the initial ones.
  std::vector<Value> inits;
  for (size_t i : early_args) inits.push_back(start.inits[i]);
  for (size_t d = 0; d < n_deferred; ++d) {
    inits.push_back(b_.full(0.0, ws_.deferred[d]->type, carried_layouts[d], ws_.deferred[d]->name + "_none"));
  }
  memo_.emplace_back();
  std::vector<Value> state = early_part(index_constant(0), inits, nullptr);
  memo_.pop_back();
  if (trip_count) {
    const Value ran = b_.compare(CompareOp::GT, trip_count, index_constant(0), "ran");
    for (size_t i = 0; i < state.size(); ++i) {
      const Value& value = state[i];
      const Value ran_tile = b_.broadcast(ran, value->type.shape, {}, value->layout, "ran");
      state[i] = b_.select(ran_tile, value, inits[i], value->name + "_first");
    }
  }
  for (size_t i : ws_.late_args) state.push_back(start.inits[i]);

  // Iterations 1 .. T-1: the early part of k, the late part of k - 1 inside it.
  if (loop.extent > 1) {
    Value steady_trips;
    if (trip_count) {
      steady_trips = b_.binary(BinaryOp::Max, b_.binary(BinaryOp::Sub, trip_count, index_constant(1), "trips_1"),
                               index_constant(0), "steady");
    }
    std::vector<std::string> names;
    for (size_t i : early_args) names.push_back(start.arg_names[i]);
    for (const VValue& d : ws_.deferred) names.push_back(d->name + "_prev");
    for (size_t i : ws_.late_args) names.push_back(start.arg_names[i]);
    state = b_.for_loop(
        loop.loop_var->name, loop.extent - 1, state,
        [&](const Value& i, const std::vector<Value>& carried) {
          memo_.emplace_back();
          const Value k = b_.binary(BinaryOp::Add, i, index_constant(1), loop.loop_var->name + "_k");
          const Value k_prev = i;
          const std::vector<Value> early(carried.begin(), carried.begin() + static_cast<std::ptrdiff_t>(n_early));
          const std::vector<Value> deferred(carried.begin() + static_cast<std::ptrdiff_t>(n_early),
                                            carried.begin() + static_cast<std::ptrdiff_t>(n_early + n_deferred));
          const std::vector<Value> late(carried.begin() + static_cast<std::ptrdiff_t>(n_early + n_deferred), carried.end());
          std::vector<Value> late_results;
          std::vector<Value> out = early_part(k, early, [&] { late_results = emit_late_part(loop, k_prev, late, deferred); });
          out.insert(out.end(), late_results.begin(), late_results.end());
          memo_.pop_back();
          return out;
        },
        {}, names, 0, steady_trips);
  }

  // The last iteration's late part, in a loop of at most one iteration (none when the trip count
  // is 0).
  const std::vector<Value> deferred_last(state.begin() + static_cast<std::ptrdiff_t>(n_early),
                                         state.begin() + static_cast<std::ptrdiff_t>(n_early + n_deferred));
  const std::vector<Value> late_last(state.begin() + static_cast<std::ptrdiff_t>(n_early + n_deferred), state.end());
  const Value trips = loop_trips(loop);
  const auto last_late_part = [&](const std::vector<Value>& carried) {
    memo_.emplace_back();
    const Value k = b_.binary(BinaryOp::Sub, trips, index_constant(1), "k_last");
    ws_.in_iteration = true;
    ws_.in_flight.clear();
    ws_.uncommitted = false;
    std::vector<Value> out = emit_late_part(loop, k, carried, deferred_last);
    if (ws_.uncommitted) b_.wgmma_commit_group();
    ws_.uncommitted = false;
    b_.wgmma_wait_group(0);
    ws_.in_flight.clear();
    ws_.in_iteration = false;
    memo_.pop_back();
    return out;
  };
  // Every early part has retired. When no late op reads a tile copied once (attention: QK^T,
  // an early op, is the query tile's last reader), a persistent CTA's producer may load the
  // next tile's under this tile's last P.V and epilogue, not only under the epilogue.
  const bool late_reads_once = std::any_of(ws_.late.begin(), ws_.late.end(), [&](const VOp* op) {
    return op->kind == VOpKind::Dot && reads_tile_copied_once(dot_plans_.at(op));
  });
  finish_once_release(loop);
  if (ws_.persistent && ws_.once_empty >= 0 && !late_reads_once && !ws_.once_released) {
    arrive_released(BarrierRef{ws_.once_empty, nullptr});
    ws_.once_released = true;
  }
  const std::vector<Value> late_results =
      trip_count ? b_.for_loop(loop.loop_var->name + "_last", 1, late_last,
                               [&](const Value&, const std::vector<Value>& carried) { return last_late_part(carried); },
                               {}, {}, 0, b_.binary(BinaryOp::Min, trip_count, index_constant(1), "any"))
                 : last_late_part(late_last);
  for (size_t i = 0; i < n_early; ++i) env_[loop.results[early_args[i]].get()] = state[i];
  for (size_t i = 0; i < ws_.late_args.size(); ++i) env_[loop.results[ws_.late_args[i]].get()] = late_results[i];
  // The last iteration's slot (stage 0, which the producer filled for iteration 0 alone, when
  // the trip count is 0).
  const Value filled = b_.binary(BinaryOp::Max, trips, index_constant(1), "filled");
  finish_ring(filled);
}

}  // namespace nautilus::matile::lowering
