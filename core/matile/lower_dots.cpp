// Dots (lower.h rules 1 and 2): the plan of every dot -- mma.sync when its operands are 16-bit
// tiles (or exact f32 casts of them) of whole m16n8k16 steps, else FMA from shared memory; warps
// along M, or, when both operands come through shared memory and the product is only
// accumulated and stored, the warp grid that reads the fewest operand elements per k step --
// and which path each mma operand takes: a loaded tile through a shared window (cp.async, then
// ldmatrix at each k step), a tile computed element-wise from one loaded tile (a normalized
// activation) staged the same way and read whole into its fragment layout, or any other value
// materialized in registers. Then the emission of the planned dot, one 16-wide k step at a time:
//
//   before (VR):                                 after (MA, k = 32 on warps(2, 2)):
//     %a = load A[...] : bf16[128, 32]             %a_k0 = ldmatrix.x4 a_smem[%stage][0, 0]
//     %w = load B[...] : bf16[32, 128]             %w_k0 = ldmatrix.x4.trans w_smem[%stage][0, 0]
//     %acc1 = dot %a, %w, %acc_i                   %a_k1 = ldmatrix.x4 a_smem[%stage][0, 16]
//                                                  %w_k1 = ldmatrix.x4.trans w_smem[%stage][16, 0]
//                                                  %acc1_k0 = mma.m16n8k16 %a_k0, %w_k0, %acc_i
//                                                  %acc1 = mma.m16n8k16 %a_k1, %w_k1, %acc1_k0
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/matile/hopper.h"
#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

// The tile a dot operand stands for once exact f32 casts of 16-bit tiles are peeled off.
OperandPlan KernelLowering::peel(const VValue& operand, DType* narrow) {
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

// The 8-bit float tile a dot operand widens exactly (operand_narrowing's `cast(x : fp8 -> bf16)`,
// or a cast to f32 where the narrowing did not run), seen through a transposition before or after
// the cast: the load, whether the load's tile is the operand's transpose, and as the source the
// 8-bit tile (the load's own for a transposition after the cast). nullopt for anything else.
std::optional<OperandPlan> KernelLowering::peel_eight_bit(const VValue& operand) {
  const auto transposed_from = [&](const VValue& x) -> VValue {
    const VOp* op = def(x);
    if (op && op->kind == VOpKind::Permute && op->dims == std::vector<int>{1, 0}) return op->operands[0];
    return nullptr;
  };
  OperandPlan plan;
  VValue v = operand;
  if (VValue inner = transposed_from(v)) {
    v = inner;
    plan.transposed = true;
  }
  const VOp* cast = def(v);
  if (!cast || cast->kind != VOpKind::Cast) return std::nullopt;
  const DType wide = v->type.dtype;
  if (wide != DType::BF16 && wide != DType::F16 && wide != DType::F32) return std::nullopt;
  plan.source = cast->operands[0];
  if (!is_eight_bit_float(plan.source->type.dtype)) return std::nullopt;
  VValue loaded = plan.source;
  if (!plan.transposed) {
    if (VValue inner = transposed_from(loaded)) {
      loaded = inner;
      plan.transposed = true;
    }
  }
  const VOp* load = def(loaded);
  if (!load || load->kind != VOpKind::Load) return std::nullopt;
  plan.load = load;
  return plan;
}

// Whether `check` holds for every result of the loop that `yield` ends which carries `v` out of
// an iteration (false when the yield ends no known loop).
bool KernelLowering::loop_results_all(const VOp& yield, const VValue& v,
                                      const std::function<bool(const VValue&)>& check) const {
  auto loop = loop_of_yield_.find(&yield);
  if (loop == loop_of_yield_.end()) return false;
  for (size_t i = 0; i < yield.operands.size(); ++i) {
    if (yield.operands[i] != v) continue;
    if (i >= loop->second->results.size() || !check(loop->second->results[i])) return false;
  }
  return true;
}

// Whether every store that `v` reaches in the kernel (through element-wise ops, reductions,
// loop-carried values and further dots) writes a 16- or 8-bit buffer, or a wider intermediate
// whose contents reach only outputs of 16 bits or fewer (an unfused epilogue's f32 C_sum).
bool KernelLowering::stored_only_narrow(const VValue& v, int depth) {
  if (depth > 64) return false;
  for (const VOp* user : users_[v.get()]) {
    switch (user->kind) {
      case VOpKind::Store:
        if (dtype_bytes(user->buffer->dtype) > 2 && wide_output_buffers_.count(user->buffer->name)) return false;
        break;
      case VOpKind::Yield:
        if (!loop_results_all(*user, v, [&](const VValue& r) { return stored_only_narrow(r, depth + 1); })) {
          return false;
        }
        break;
      default:
        for (const VValue& r : user->results) {
          if (!stored_only_narrow(r, depth + 1)) return false;
        }
    }
  }
  return true;
}

// Rule 6 on 8-bit floats: a dot whose operands are both exact widenings of loaded fp8 tiles runs
// wgmma's 8-bit form (m64nNk32, e4m3 and e5m2 in any pairing) on the bytes themselves: the
// producer copies each fp8 tile by TMA as it is and the widening cast is never emitted (the
// products are the same: every fp8 value is exact in bf16 and f32). That form has no transpose
// bit, so both operands must be K-major in shared memory, which the TMA copy makes them only when
// they are K-major in global memory: A's tile [m, k] of a buffer contiguous along k, B's tile
// [n, k] likewise (B stored [N, K], torch._scaled_mm's layout). Any other dot keeps its 16-bit
// operands, widened in registers; the refusal, noted here, says why when rule 6 then finds no
// loaded tile for wgmma. The 8-bit form also accumulates with fewer bits than f32 (see the
// refusal below), so it is used only where the product reaches outputs of 16 bits or fewer.
//
//   before (VR):                               after (MA, sm_90a, consumers=2):
//     %A = load A[...] : fp8e4m3[128, 128]       tensor_map tm_A : A box [128, 128] swizzle 128
//     %B = load B[...] : fp8e4m3[128, 128]       tensor_map tm_B : B box [128, 128] swizzle 128
//     %Bt = permute %B, order [1, 0]             ... producer: tma.load A_ring[%s], B_ring[%s]
//     %A_bf16 = cast %A : bf16[128, 128]         ... consumers:
//     %Bt_bf16 = cast %Bt : bf16[128, 128]       %acc1 = wgmma A_ring[%s][0, 0], B_ring[%s]^T,
//     %acc1 = dot %A_bf16, %Bt_bf16, %acc           %acc, k 128   (4 x m64n128k32.e4m3.e4m3)
void KernelLowering::plan_eight_bit_wgmma(const VOp& op, DotPlan* plan) {
  if (op.operands.size() < 2) return;
  const std::optional<OperandPlan> a = peel_eight_bit(op.operands[0]);
  const std::optional<OperandPlan> b = peel_eight_bit(op.operands[1]);
  if (!a && !b) return;
  const std::string dot = "dot %" + op.results[0]->name;
  const auto refuse = [&](const std::string& why) { eight_bit_refusals_[&op] = dot + ": " + why; };
  if (!a || !b) {
    // The other operand's own dtype: a 16-bit tile, or what its widening cast reads (int8).
    const VValue& other = (a ? plan->b : plan->a).source;
    const VOp* widened = def(other);
    const DType other_dtype = widened && widened->kind == VOpKind::Cast ? widened->operands[0]->type.dtype
                                                                        : other->type.dtype;
    refuse(std::string("an fp8 operand times a ") + dtype_name(other_dtype) +
           " one; wgmma's 8-bit form takes two 8-bit float operands (e4m3 or e5m2) from shared "
           "memory, so the fp8 tile stays widened to 16 bits in registers");
    return;
  }
  if (a->transposed) {
    refuse("A reads the fp8 tile %" + a->load->results[0]->name + " of " + a->load->buffer->name +
           " M-major (contiguous along m); wgmma reads 8-bit operands only K-major (there is no "
           "transpose for 8-bit types): store A as [M, K]");
    return;
  }
  if (!b->transposed) {
    refuse("B reads the fp8 tile %" + b->load->results[0]->name + " of " + b->load->buffer->name +
           " N-major (stored [K, N], contiguous along n); wgmma reads 8-bit operands only K-major "
           "(there is no transpose for 8-bit types): store B as [N, K], torch._scaled_mm's layout");
    return;
  }
  const int64_t K = op.operands[0]->type.shape[1];
  if (K % 32 != 0) {
    refuse("a k extent of " + std::to_string(K) + ", not a multiple of 32 (one 8-bit wgmma reads k 32)");
    return;
  }
  if (!stored_only_narrow(op.results[0])) {
    refuse("the product reaches an output of 32 bits or more; wgmma's 8-bit form adds its products "
           "into the accumulator with fewer bits than f32 (about 14, DeepSeek-V3 report, sec. 3.3.2), "
           "within a 16-bit output's tolerance but not an f32 one's, so the operands stay widened");
    return;
  }
  plan->a = *a;
  plan->b = *b;
  plan->eight_bit = true;
}

// Whether a dot operand is (up to exact casts and a transposition) a load from memory, i.e. a
// candidate for the shared-memory operand path.
bool KernelLowering::peel_reaches_shared(const VValue& operand) {
  DType narrow = DType::F32;
  return peel(operand, &narrow).load != nullptr;
}

// Whether every use of a dot's result only carries it through a loop, accumulates into it
// (as another dot's accumulator), converts it element-wise with uniform operands, or stores
// it: then the MMA's warp arrangement is free.
bool KernelLowering::only_accumulated_and_stored(const VValue& v, int depth) {
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
        // With uniform operands, a vector broadcast along the other axis (a per-column scale)
        // or a loop-carried sum it is added to: each takes whatever layout the product takes.
        for (const VValue& other : user->operands) {
          if (other == v || other->type.rank() == 0) continue;
          if (carried_by_.count(other.get()) && other->type.shape == v->type.shape) continue;
          const VOp* broadcast = def(other);
          if (!broadcast || broadcast->kind != VOpKind::Broadcast || broadcast->operands.empty() ||
              broadcast->operands[0]->type.rank() > 1) {
            return false;
          }
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
      case VOpKind::Yield:
        if (!loop_results_all(*user, v, [&](const VValue& r) {
              return only_accumulated_and_stored(r, depth + 1);
            })) {
          return false;
        }
        break;
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
const VOp* KernelLowering::prologue_root(const VValue& source) {
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

// The 8-bit tile an mma operand widens with one cast (bf16 activations times int8 weights: the
// cast of W's [k, n] tile to bf16), when that tile is a load that a 16-byte cp.async can copy.
// Such an operand goes through a shared window like a 16-bit one, and each k step reads its
// bytes from there: loaded from global memory straight into the fragment layout instead, every
// element is a one-byte load at a whole row's stride (4 KB for a 4096-wide W) that nothing hides.
// Not in warp-specialized kernels, whose operands come from the TMA ring (rule 6).
const VOp* KernelLowering::widened_byte_load(const VValue& source) {
  if (options_.consumers > 0) return nullptr;
  const VOp* cast = def(source);
  if (!cast || cast->kind != VOpKind::Cast || cast->operands.size() != 1) return nullptr;
  const VValue& bytes = cast->operands[0];
  if (dtype_bytes(bytes->type.dtype) != 1 || bytes->type.rank() != 2 || carried_by_.count(bytes.get())) {
    return nullptr;
  }
  const VOp* load = def(bytes);
  if (!load || load->kind != VOpKind::Load) return nullptr;
  std::optional<Window> window = match_window(*load, bytes->type.shape);
  if (!window || !async_copyable(*load, *window)) return nullptr;
  return load;
}

// The global load a register operand is, through casts and permutes (null when it is computed,
// or read from a row buffer); *contiguous says whether the operand's `axis` is the buffer's
// last (contiguous) axis.
const VOp* KernelLowering::global_load_along(const VValue& operand, int axis, bool* contiguous) {
  VValue v = operand;
  for (int depth = 0; depth < 4; ++depth) {
    const VOp* op = def(v);
    if (!op) return nullptr;
    if (op->kind == VOpKind::Cast) {
      v = op->operands[0];
      continue;
    }
    if (op->kind == VOpKind::Permute) {
      axis = op->dims[static_cast<size_t>(axis)];
      v = op->operands[0];
      continue;
    }
    if (op->kind != VOpKind::Load || row_buffers_.count(op->buffer.get())) return nullptr;
    std::optional<Window> window = match_window(*op, v->type.shape);
    if (!window) return nullptr;
    *contiguous = window->tile_axes.back() == axis;
    return op;
  }
  return nullptr;
}

void KernelLowering::stage_prologue_load(const VValue& source) {
  const VOp* root = prologue_root(source);
  if (!root || smem_windows_.count(root)) return;
  smem_windows_[root] = *match_window(*root, root->results[0]->type.shape);
  register_loads_.insert(root);
  staged_register_loads_.insert(root);
}

void KernelLowering::plan_dots() {
  // The shared reads' form is decided here, with the widened 8-bit B operands' read widths.
  const scalar::SharedReads requested = requested_shared_reads();
  grouped_shared_reads_ = requested == scalar::SharedReads::Grouped;
  std::string refusal;        // why grouped reads would be slower, for the first B read narrowly
  bool int8_weights = false;  // a widened int8 B read in groups of kFewestGroupedWeightBytes or more
  for (const VValue& v : order_) {
    const VOp* op = def(v);
    if (!op || op->kind != VOpKind::Dot || dot_plans_.count(op)) continue;
    DotPlan plan;
    DType da = DType::F32, db = DType::F32;
    plan.a = peel(op->operands[0], &da);
    plan.b = peel(op->operands[1], &db);
    if (options_.consumers > 0) plan_eight_bit_wgmma(*op, &plan);
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
    // The 8-bit tiles the operands widen, read through shared memory a byte per lane.
    const VOp* a_bytes = widened_byte_load(plan.a.source);
    const VOp* b_bytes = widened_byte_load(plan.b.source);
    const auto through_shared = [&](const VValue& operand, const VOp* bytes) {
      if (bytes || peel_reaches_shared(operand)) return true;
      DType narrow = DType::F32;
      return prologue_root(peel(operand, &narrow).source) != nullptr;
    };
    if (through_shared(op->operands[0], a_bytes) && through_shared(op->operands[1], b_bytes) &&
        only_accumulated_and_stored(op->results[0])) {
      // Shared-memory wavefronts per element: an 8-bit operand read a byte per lane moves 32
      // elements per wavefront, ldmatrix 64 (16-bit) -- so its elements count twice.
      const int a_weight = a_bytes ? 2 : 1;
      const int b_weight = b_bytes ? 2 : 1;
      int best_loads = -1;
      for (int m = options_.warps; m >= 1; m /= 2) {
        const int n = options_.warps / m;
        if (M % (16 * m) != 0 || N % (16 * n) != 0) continue;
        const int loads = static_cast<int>(a_weight * M / m + b_weight * N / n);
        if (best_loads < 0 || loads < best_loads) {
          best_loads = loads;
          wm = m;
          wn = n;
        }
      }
      // Only the accumulator is live beside the fragments: room for a second set.
      plan.prefetch_fragments = true;
    }
    // ldmatrix.x4.trans reads B 16 columns at a time; a widened 8-bit B, read a byte per lane,
    // needs only whole n8 atoms per warp (a decode step's 16 x 32 tile on 4 warps). So does a
    // 16-bit B of 8 columns in all (a router's 8 experts: a small operand that stays in L1 and
    // L2), which is loaded straight into its fragment registers instead of through ldmatrix. A
    // wider B streamed that way (a decode step's keys, 32 columns on 4 warps) reads two bytes
    // per load from DRAM: measured 162.4 us for gqa_decode against 121.9 on the CUDA-core dot.
    const bool n8_registers = !b_bytes && N == 8 && wn == 1;
    // So does a narrow B that no copy stages (int4, widened from global memory straight into its
    // fragments): a decode step's 32 weight columns on 4 warps.
    // The global loads the operands are (through casts and permutes), looked up once per dot.
    bool a_contiguous = false, b_contiguous = false;
    const VOp* a_global = global_load_along(op->operands[0], 1, &a_contiguous);
    const VOp* b_global = global_load_along(op->operands[1], 0, &b_contiguous);
    const bool narrow_registers = b_global && !b_bytes && !through_shared(op->operands[1], nullptr) &&
                                  is_narrow_storage(b_global->buffer->dtype);
    // (Not a B packed along N, W[K, N]: its fragments would read single nibbles.)
    const int64_t n_atom = b_bytes || n8_registers || (narrow_registers && b_contiguous) ? 8 : 16;
    plan.mma = options_.use_mma && (plan.eight_bit || (da == db && (da == DType::BF16 || da == DType::F16))) &&
               mma_rows_fit(M, wm) && N % (n_atom * wn) == 0 && K % 16 == 0;
    if (plan.mma && n8_registers) {
      plan.b.load = nullptr;
      plan.b.transposed = false;
    }
    plan.warps_m = wm;
    plan.warps_n = wn;
    // Whether the tile's rows are all of A's rows (a decode step): each B tile is then read by
    // one CTA, streamed once.
    const VOp* activations = a_global;
    std::optional<Window> a_window =
        activations ? match_window(*activations, activations->results[0]->type.shape) : std::nullopt;
    bool every_row = false;
    for (size_t axis = 0; a_window && axis < a_window->tile_axes.size(); ++axis) {
      const int tile_axis = a_window->tile_axes[axis];
      if (tile_axis < 0 || activations->results[0]->type.shape[static_cast<size_t>(tile_axis)] != M) continue;
      every_row = activations->buffer->shape[axis] <= M;
    }
    // A 16-row tile of all of A's rows (a decode step of 16 tokens) times an int4 B read straight
    // into its fragments with its rows contiguous along k: A is loaded into its fragments too, so
    // that the k steps can interleave and B is read 16 bytes a lane (below) instead of a k pair --
    // one byte -- a load beside ldmatrix's A: 72.7 µs against 103.1 at 16 x 28672 x 8192 (H200).
    const bool int4_rows_along_k = narrow_registers && b_contiguous && b_global->buffer->dtype == DType::I4;
    const bool a_in_registers = M < 16 || (M == 16 && wm == 1 && every_row && int4_rows_along_k && !a_bytes);
    if (plan.mma && a_in_registers && plan.a.load) {
      // 1, 2, 4 or 8 rows (a decode step's head group) run on one warp along M with the atom's
      // rows repeated (layouts.h). ldmatrix reads 16-row A atoms; a short A operand is loaded
      // straight into its fragment registers (it is small: at most 8 rows), its repeated rows
      // from the same addresses.
      plan.a.load = nullptr;
      plan.a.transposed = false;
    }
    if (plan.mma) {
      for (OperandPlan* operand : {&plan.a, &plan.b}) {
        const VOp* bytes = operand == &plan.a ? a_bytes : b_bytes;
        if (!operand->load && bytes && (operand != &plan.a || !a_in_registers)) {
          operand->load = bytes;
          operand->widened = true;
        }
        if (!operand->load) {
          if (operand != &plan.a || !a_in_registers) stage_prologue_load(operand->source);
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
      plan.eight_bit = false;
    }
    if (requested != scalar::SharedReads::Elements && plan.mma && plan.b.widened && plan.b.load &&
        !plan.b.transposed && only_accumulated_and_stored(op->results[0])) {
      // A widened 8-bit B stored [K, N]: a thread's fragment bytes of one k row are one column
      // per atom, 8 columns apart, each its own ld.shared. With the atoms' columns interleaved
      // (layouts.h, mma_b_layout), those of p neighbouring atoms are neighbours and one
      // ld.shared of p bytes reads them (shared_read_plan); the product's layout follows, which
      // an accumulate-and-store epilogue takes as it is.
      const int64_t nt = N / (8 * plan.warps_n);
      int p = 1;
      while (p < 16 && nt % (2 * p) == 0) p *= 2;
      if (p < kFewestGroupedWeightBytes && refusal.empty()) {
        refusal = "the widened 8-bit %" + plan.b.load->results[0]->name + " would be read " + std::to_string(p) +
                  (p == 1 ? " byte" : " bytes") + " at a time (" + std::to_string(nt) +
                  " n8 atoms per warp); grouped reads pay off from " + std::to_string(kFewestGroupedWeightBytes);
      }
      int8_weights |= plan.b.load->results[0]->type.dtype == DType::I8;
      plan.column_interleave = p;
    }
    if (plan.mma && !plan.wgmma && !plan.a.load && !plan.b.load) {
      // Both operands go from global memory straight into their fragments (a decode step's
      // activations and a weight W[N, K]): with B's rows contiguous along k, the k steps
      // interleave so that a lane's k of p steps are 4p neighbours, read as one access of up to
      // 16 bytes (layouts.h, interleaved_k) instead of pairs, or single bytes of an int4 row.
      // Only a B whose fragment fits a thread's registers: a whole reduction held at once (an
      // untiled k of 2048 in a gated MLP step, 512 int4 a thread) is not read as a whole anyway,
      // and the model, which would take its loads as all in flight, priced such a kernel at a
      // sixth of its measured time (7.9 µs against 48.3 on the H200).
      constexpr int64_t kThreadRegisters = 255;
      const int64_t b_slots = K * N / (int64_t{32} * plan.warps_n);
      if (a_global && b_global && b_contiguous && b_slots <= kThreadRegisters) {
        const double element_bytes = b_global->buffer->dtype == DType::I4 ? 0.5 : dtype_bytes(b_global->buffer->dtype);
        int p = 1;
        while (2 * p <= K / 16 && (K / 16) % (2 * p) == 0 && 4 * (2 * p) * element_bytes <= 16) p *= 2;
        plan.k_interleave = p;
      }
    }
    if (plan.mma && !plan.wgmma && !plan.b.load && every_row && options_.stages >= 2) {
      // An int4 B read straight into its fragments, its rows contiguous along k (a weight
      // W[N, K]) that one CTA streams (a decode step's few rows of A), joins the loop's ring of
      // copies as its packed bytes: cp.async keeps stages - 1 tiles in flight where a global
      // load in the loop waits a memory round trip each iteration, and the fragments are read
      // back a row's run (up to 16 bytes) at a time. (Staged in a prefill, whose W tiles many
      // CTAs read, the 16-row tiles that then looked best ran at twice their estimate: 1326 µs
      // against 684.5 at 4096^3 on the H200.)
      // A 16-row A loaded into its fragments beside it (a_in_registers) joins the ring too, read
      // back from shared memory into its interleaved fragments.
      const auto stage_in_ring = [&](const VOp* load, bool packed_int4) {
        auto scope = load ? scope_.find(load->results[0].get()) : scope_.end();
        const VOp* loop = scope != scope_.end() ? scope->second : nullptr;
        if (!loop || loop->kind != VOpKind::For || smem_windows_.count(load)) return false;
        std::optional<Window> window = match_window(*load, load->results[0]->type.shape);
        if (!window || !async_copyable(*load, *window, packed_int4) || !known_ahead(*loop, *window)) return false;
        smem_windows_[load] = *window;
        register_loads_.insert(load);
        staged_register_loads_.insert(load);
        return true;
      };
      if (b_global && b_contiguous && b_global->buffer->dtype == DType::I4 && stage_in_ring(b_global, true) &&
          M == 16 && a_in_registers && a_global && def(plan.a.source) == a_global) {
        stage_in_ring(a_global, false);
      }
    }
    dot_plans_[op] = plan;
  }
  // Measured on the H200 (70B-class int8 decode, µs): 1 x 128 x 128 tiles, 4 bytes per read,
  // 65.5 grouped against 94.9 element-wise, and 63.1 with 8 bytes on 2 warps; 1 x 64 x 128 on 4
  // warps, 2 bytes per read, 90.2 against 95.0, but the same at 4096 x 4096 18.5 against 17.1;
  // one byte per read (16 columns on 2 warps) 15.2 against 13.7. An fp8 B (widened per element
  // either way) was faster grouped on some tiles and slower on others, so auto leaves it be.
  if (requested == scalar::SharedReads::Grouped) {
    grouped_shared_reads_ = refusal.empty();
    if (!refusal.empty()) b_.note("shared reads element by element, not grouped: " + refusal);
  } else if (requested == scalar::SharedReads::Auto) {
    grouped_shared_reads_ = int8_weights && refusal.empty();
  }
  if (!grouped_shared_reads_) {
    for (auto& [dot, plan] : dot_plans_) plan.column_interleave = 1;
  }
  // A product of 1, 2, 4 or 8 rows that is only accumulated and stored (a decode step's GEMV)
  // with B loaded into its fragments (not read from shared memory at each k step) is computed
  // swapped (layouts.h, mma_swapped_c_layout): half the instructions, and none of the register
  // copies that fill the direct form's repeated rows -- the int4 decode kernel issued 4 of them
  // per mma (ncu, H200): 6.2 µs against 7.0 at M 1, 4096^2. With B read by ldmatrix it measured
  // the same (gqa_decode's P V, 122.6 against 123.4 µs) and with a widened int8 B read a byte a
  // lane slower (11.3 against 9.3 µs), so those stay direct by default, as does a product that a
  // reduction or another MMA reads; mma=swapped swaps them all.
  const scalar::MmaForm form = requested_mma_form();
  for (auto& [dot, plan] : dot_plans_) {
    if (form == scalar::MmaForm::Direct || !plan.mma || plan.wgmma) continue;
    const int64_t M = dot->operands[0]->type.shape[0], N = dot->operands[1]->type.shape[1];
    if (plan.column_interleave != 1 || plan.a.load || !mma_swap_fits(M, N, plan.warps_m, plan.warps_n)) {
      if (form == scalar::MmaForm::Swapped && M < 16) {
        b_.note("mma of %" + dot->results[0]->name + " not swapped: it needs 1, 2, 4 or 8 rows, 16 columns a warp and "
                "B's columns not interleaved");
      }
      continue;
    }
    plan.swapped =
        form == scalar::MmaForm::Swapped || (!plan.b.load && only_accumulated_and_stored(dot->results[0]));
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

// One k step of a widened 8-bit operand (OperandPlan::widened): its bytes read from the shared
// window at `offsets`, one element per read, into the fragment layout, then widened to `type`.
Value KernelLowering::read_widened_step(const OperandPlan& operand, const std::vector<int64_t>& offsets,
                                        const TileType& type, const RegisterLayout& fragment,
                                        const std::string& step) {
  const SmemLoad& s = smem_loads_.at(operand.load);
  const VValue& bytes = operand.load->results[0];
  const Value raw = b_.shared_load(SharedRef{s.alloc, s.stage, offsets, false}, SharedRead::Scalar,
                                   TileType{bytes->type.dtype, type.shape}, fragment, bytes->name + step);
  return b_.cast(raw, type.dtype, operand.source->name + step);
}

void KernelLowering::emit_dot(const VOp& op) {
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
      // The dot reads A along k 16 bytes at a time, the lanes of a warp at several rows
      // (emit_mma.cpp). Rows whose pitch is a multiple of 128 bytes start in the same banks, so
      // each such read costs one wavefront per distinct row of the warp; a 16-byte pad per row
      // puts eight consecutive rows in distinct banks. (The router's gate kernel, A 64 x 256
      // bf16: ncu counted a third of its shared-load wavefronts as bank conflicts.)
      const int a_bytes = dtype_bytes(a->type.dtype);
      const std::vector<int64_t>& a_shape = a->type.shape;
      const bool pad_rows = a_shape.size() == 2 && a_shape[0] > 1 && 16 % a_bytes == 0 &&
                            (a_shape[1] * a_bytes) % 128 == 0;
      const int sa =
          pad_rows ? b_.shared(v->name + "_a", a->type.dtype, a_shape,
                               padded_row_major_shared(a_shape, 16 / a_bytes), 1,
                               "operand a of fma dot %" + v->name + ", rows padded by 16 bytes")
                   : scratch(v->name + "_a", a->type.dtype, a_shape, "operand a of fma dot %" + v->name);
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
  if (plan.wgmma) {
    // Rule 6: B (and A, unless it is a register tile: the RS form) sits in shared memory, in the
    // TMA ring or copied once; the loop around commits the group and waits for it before the
    // result is read (lower_hopper.cpp). The fence orders the registers just written (the
    // accumulator, a register A) before the asynchronous MMA reads them.
    Value a_registers;
    SharedRef a_shared;
    if (plan.a.load) {
      const SmemLoad& a = smem_loads_.at(plan.a.load);
      a_shared = SharedRef{a.alloc, a.stage, {0, 0}, plan.a.transposed};
    } else {
      Result<RegisterLayout> a_layout = wgmma_a_layout(M, K, options_.consumers);
      if (!a_layout) fail(a_layout.error().message);
      a_registers = materialize(plan.a.source, *a_layout);
    }
    const SmemLoad& b = smem_loads_.at(plan.b.load);
    pingpong_take_turn();  // pingpong=1: the iteration's first MMAs wait for the warpgroup's turn
    b_.wgmma_fence();
    env_[v.get()] = b_.wgmma(a_shared, a_registers,
                             SharedRef{b.alloc, b.stage, {0, 0}, plan.b.transposed}, K, acc,
                             v->name);
    ws_.in_flight.insert(v.get());
    ws_.uncommitted = true;
    if (a_registers) ws_.register_operand_in_flight = true;
    return;
  }
  const int wm = plan.warps_m, wn = plan.warps_n;
  auto layout_or_fail = [&](Result<RegisterLayout> l) {
    if (!l) fail(l.error().message);
    return *l;
  };
  const RegisterLayout a_step = layout_or_fail(mma_a_layout(M, 16, wm, wn));
  const RegisterLayout b_step = layout_or_fail(mma_b_layout(16, N, wm, wn, plan.column_interleave));
  Value a_reg, b_reg;
  const bool a_hoisted = plan.a.load && hoisted_.count(plan.a.load);
  if (a_hoisted) a_reg = hoisted_.at(plan.a.load);
  const int kp = plan.k_interleave;
  if (!plan.a.load) a_reg = materialize(plan.a.source, layout_or_fail(mma_a_layout(M, K, wm, wn, kp)));
  if (!plan.b.load) {
    b_reg = materialize(plan.b.source, layout_or_fail(mma_b_layout(K, N, wm, wn, plan.column_interleave, kp)));
  }
  const DType dtype = plan.a.source->type.dtype;
  auto load_step = [&](int64_t kk) -> std::pair<Value, Value> {
    const std::string step = "_k" + std::to_string(kk);
    Value a_k, b_k;
    if (plan.a.widened) {
      a_k = read_widened_step(plan.a, {0, kk * 16}, TileType{dtype, {M, 16}}, a_step, step);
    } else if (plan.a.load && !a_hoisted) {
      const SmemLoad& s = smem_loads_.at(plan.a.load);
      SharedRef ref{s.alloc, s.stage, {0, kk * 16}, plan.a.transposed};
      if (plan.a.transposed) ref.offsets = {kk * 16, 0};
      a_k = b_.shared_load(ref, plan.a.transposed ? SharedRead::LdMatrixX4Trans : SharedRead::LdMatrixX4,
                           TileType{dtype, {M, 16}}, a_step, plan.a.source->name + step);
    } else {
      a_k = K == 16 ? a_reg
                    : b_.extract_slice(a_reg, {0, kk * 16}, {M, 16}, a_step, plan.a.source->name + step, kp);
    }
    if (plan.b.widened) {
      b_k = read_widened_step(plan.b, {kk * 16, 0}, TileType{dtype, {16, N}}, b_step, step);
    } else if (plan.b.load) {
      const SmemLoad& s = smem_loads_.at(plan.b.load);
      SharedRef ref{s.alloc, s.stage, {kk * 16, 0}, plan.b.transposed};
      if (plan.b.transposed) ref.offsets = {0, kk * 16};
      b_k = b_.shared_load(ref, plan.b.transposed ? SharedRead::LdMatrixX4 : SharedRead::LdMatrixX4Trans,
                           TileType{dtype, {16, N}}, b_step, plan.b.source->name + step);
    } else {
      b_k = K == 16 ? b_reg
                    : b_.extract_slice(b_reg, {kk * 16, 0}, {16, N}, b_step, plan.b.source->name + step, kp);
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
                 kk + 1 == steps ? v->name : v->name + step, plan.swapped);
    if (kk + 1 < steps && !plan.prefetch_fragments) next = load_step(kk + 1);
  }
  env_[v.get()] = acc;
}

}  // namespace nautilus::matile::lowering
