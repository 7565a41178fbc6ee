#include "core/cost/analytical_model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <set>
#include <limits>
#include <mutex>
#include <optional>
#include <queue>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/layout/bank_conflicts.h"
#include "core/matile/hopper.h"
#include "core/matile/layouts.h"
#include "core/matile/split_masked.h"
#include "core/matile/visitor.h"
#include "core/support/launch_order.h"

namespace nautilus::cost {
namespace {

using matile::Kernel;
using matile::LayoutKind;
using matile::Op;
using matile::OpKind;
using matile::Region;
using matile::Value;
using matile::ValueNode;

// Registers every thread needs besides the register tiles: thread and lane indices, hoisted
// address offsets, loop counters (2 more per buffer pointer, counted separately).
constexpr int kBaseRegisters = 16;
// Registers of an mma operand that ptxas streams fragment by fragment (an ldmatrix result used
// only by one mma): two ldmatrix.x4 results in flight.
constexpr int kStreamedOperandRegisters = 8;
// A kernel whose register tiles need more than this many times the registers a thread can have
// keeps whole rows of a reduction per thread (arrays of thousands of values): they live in local
// memory, which L1 cannot hold, and every op over them goes to L2.
constexpr int kLocalArrayFactor = 2;
// L2 serves local memory at about this fraction of the shared-memory bandwidth of an SM.
constexpr double kLocalMemorySlowdown = 8.0;
// Resident warps per scheduler at which the pipes overlap fully.
constexpr double kWarpsPerSchedulerToOverlap = 4.0;
// The rate at which a warp-specialized kernel's consumers issue their element-wise work when
// each scheduler holds one consumer warp (one consumer warpgroup, one CTA per SM), relative to
// two or more: a lone warp waits out each dependent instruction's latency, which a second warp
// would fill. Measured on the H200 (ncu, 2026-11-29, prefix_lm, 64-row tiles on one consumer
// against 128-row tiles on two): issue slots busy 26.5% against 38.0%, 0.70 of the rate; the
// consumer loop's samples 31% fixed-latency waits, 27% issuing.
constexpr double kLoneConsumerWarpIssueRate = 0.70;
// Reads that fit in this fraction of L2 are read from DRAM once per kernel.
constexpr double kL2ResidentFraction = 0.5;
// The share of the chip's DRAM bandwidth a wave on a fraction f of the SMs reaches: f^0.6
// (measured on the H200, see the wave's dram_share).
constexpr double kDramReachExponent = 0.6;
// A CTA-wide barrier on the dependency chain: bar.sync itself and the shared-memory round trip
// around it (a st.shared before, the dependent ld.shared after, ~30 cycles each), during which
// the CTA's warps issue nothing.
constexpr double kBarrierCycles = 100.0;
// The most the pipes overlap when barriers align the warps of each CTA: each CTA's stream is
// then a dependency chain of phases (S = Q K^T, then the softmax on its result, then P V), so a
// quarter of the other pipes' time stays exposed however many CTAs there are. Free-running
// warps (no barrier in a loop) interleave their phases and can overlap fully.
constexpr double kMaxOverlap = 0.75;
// The registers a thread can hold (255 on sm_80 and sm_90): the register estimate's bound for
// tiles it assumes ptxas streams.
constexpr int64_t kThreadRegisterLimit = 255;
// Bytes one shared-memory wavefront moves (32 banks x 4 bytes).
constexpr double kWavefrontBytes = 128.0;
// Hopper's asynchronous machine (ir.h notes, "Hopper"). Fixed latencies, in SM cycles, of the
// ops that synchronize the roles of a warp-specialized kernel; they have no work of their own
// but sit on its dependency chain. Estimates of the order of magnitude, not measurements:
// HOPPER_TWILL_HEXCUTE.md (pitfall 7) asks for them to be calibrated by microbenchmark before
// the solver relies on them. They matter where the ring is shallow (a stage handed from the
// producer to the consumers and back every iteration), not where it hides them.
//   mbarrier.try_wait.parity: the spin loop's round trip to the barrier in shared memory and
//   the wake-up after the phase completes (the handoff between roles).
constexpr double kMBarrierWaitCycles = 60.0;
//   mbarrier.arrive[.expect_tx]: one shared-memory atomic by an elected thread.
constexpr double kMBarrierArriveCycles = 10.0;
//   mbarrier.init of an array and fence.mbarrier_init (once per CTA).
constexpr double kMBarrierInitCycles = 20.0;
//   bar.sync id, n among roles: no st/ld.shared round trip around it (kBarrierCycles has one).
constexpr double kNamedBarrierCycles = 30.0;
//   fence.proxy.async.shared::cta: drains the thread's generic shared writes.
constexpr double kProxyFenceCycles = 20.0;
//   cp.async.bulk.tensor issue by one elected thread (descriptor, coordinates, mbarrier).
constexpr double kTmaIssueCycles = 20.0;
//   The dynamic tile scheduler's fetch (TileFetch): one global atomic add by the producer's
//   elected thread, which waits for its answer at L2 (a round trip, as a global load's) before
//   writing it into the tile ring; once per tile, issued before the tile's copies.
constexpr double kTileFetchCycles = 600.0;
//   wgmma.fence / commit_group / wait_group and cp.async.bulk.commit_group: issue only (the
//   wait's real cost is the MMA it waits for, which the ring's period accounts).
constexpr double kAsyncGroupCycles = 4.0;
// Grid-dimension combinations evaluated for a trip count before giving up (full range).
constexpr int64_t kMaxTripCountPoints = 4096;
// Grids up to this many CTAs are listed one by one when their CTAs do different amounts of work.
constexpr int64_t kMaxListedCtas = int64_t{1} << 20;

// ------------------------------------------------------------------------------------------
// Which grid axes and loops a value depends on: grid axis i is bit i (up to 8 axes), loop j is
// bit 8 + j; loops past the 56th share the last bit (then every access depends on them, which
// only loses reuse).
using DepMask = uint64_t;
constexpr int kGridBits = 8;
constexpr DepMask kGridMask = (DepMask{1} << kGridBits) - 1;

DepMask loop_bit(int loop_index) { return DepMask{1} << std::min(kGridBits + loop_index, 63); }

// Work of one CTA, per execution of a region.
struct Work {
  double tensor_flops = 0.0;
  double alu_ops = 0.0;      // lane operations on the CUDA cores (an FMA is one)
  // Of the widening of narrow storage (int4 nibbles, int8), the lane operations that run on the
  // INT32 pipe (shifts, prmt, lop3, integer adds), which sm_90 has half as many lanes of.
  double int_ops = 0.0;
  double float_flops = 0.0;  // the FLOPs among them (an FMA is two)
  double special_ops = 0.0;
  double shared_bytes = 0.0;  // wavefronts x 128: a conflicted or narrow access costs more
  double mma_ops = 0.0;       // Mma ops (one k step of a warp tile each)
  double barriers = 0.0;      // CTA-wide barriers (each reduce across warps or convert through
                              // shared memory has two)
  // Hopper. Of tensor_flops, those issued by wgmma (they run at the wgmma rate, the rest at
  // mma.sync's); the fixed latencies of the synchronizing ops (cycles, see kMBarrierWaitCycles);
  // bulk wait_groups that wait for a TMA store's flight.
  double wgmma_flops = 0.0;
  // Of wgmma_flops, those of the 8-bit form (fp8 operands, m64nNk32): twice the 16-bit rate.
  double wgmma_8bit_flops = 0.0;
  double sync_cycles = 0.0;
  double store_waits = 0.0;

  void add(const Work& other, double times) {
    tensor_flops += other.tensor_flops * times;
    wgmma_flops += other.wgmma_flops * times;
    wgmma_8bit_flops += other.wgmma_8bit_flops * times;
    sync_cycles += other.sync_cycles * times;
    store_waits += other.store_waits * times;
    alu_ops += other.alu_ops * times;
    int_ops += other.int_ops * times;
    float_flops += other.float_flops * times;
    special_ops += other.special_ops * times;
    shared_bytes += other.shared_bytes * times;
    barriers += other.barriers * times;
    mma_ops += other.mma_ops * times;
  }
};

// A global access of the kernel, with how often one CTA executes it.
struct Access {
  double bytes = 0.0;       // per execution
  // The access's traffic at the L2 per execution: the 32-byte sectors its warp instructions
  // touch (a sector read or written in part costs the L2 a whole request). Negative: `bytes`.
  double l2_bytes = -1.0;
  double executions = 0.0;  // per CTA, every enclosing loop's trips
  double distinct = 0.0;    // per CTA, only the trips of loops its offsets depend on
  DepMask deps = 0;
  bool write = false;
  // The global buffer it touches (null where the op names none): a read of the part of a
  // buffer the same CTA read before is served by L2 (step 2).
  const void* buffer = nullptr;
};

// A region (the kernel body or one loop body) with its own ops' work, excluding nested loops.
struct Segment {
  Work work;                // per execution
  double executions = 1.0;  // per CTA
  int stages = 0;           // the loop's pipeline depth (0: not pipelined / kernel body)
  double read_bytes = 0.0;  // global reads issued per execution
  double async_read_bytes = 0.0;  // of which cp.async or TMA (issued without waiting for the data)
  // Of the plain global loads, those issued before the segment's first wgmma: in a consumer's
  // ring iteration they delay its MMAs (the gated MLP's G and U feed the A operand), where loads
  // after the wgmma issue overlap with the MMAs in flight (a score bias of attention).
  double reads_before_wgmma = 0.0;
  bool innermost = true;    // no loop nested inside
  // Hopper. The role whose body holds the region (-1: outside a Roles op; a role's body is a
  // segment of its own); whether it is a loop; the TMA bytes it loads and stores per execution;
  // the ring it runs on: the fewest stages of the allocations its TMA loads fill (0: none) and
  // the wgmma groups a consumer keeps in flight when it releases a stage (the pending count of
  // the wgmma.wait_group before its plain mbarrier.arrive); its mbarrier waits and wgmmas.
  int role = -1;
  bool loop = false;
  int depth = 0;            // loops around it, itself included (0: a role's or the kernel's body)
  double tma_read_bytes = 0.0;
  double tma_write_bytes = 0.0;
  int ring_stages = 0;
  int release_lag = 0;
  double mbarrier_waits = 0.0;
  bool has_wgmma = false;
  double last_wgmma_pending = -1.0;  // while walking: the latest wgmma.wait_group's count
  // wgmma flops per execution that stay in flight past a wgmma.wait_group N >= 1 inside the
  // body (warp_spec overlap=1: P·V runs beside the softmax), and while walking, the flops of
  // the open group and of the committed groups not yet retired.
  double overlapped_wgmma_flops = 0.0;
  double open_group_flops = 0.0;
  std::vector<double> groups_in_flight;
};

// A role of a warp-specialized kernel (the Roles op), as the estimate needs it.
struct RoleInfo {
  std::string name;
  int warpgroups = 0;
  int max_registers = 0;
};

double lanes(const Value& value) {
  return static_cast<double>(value->layout.threads()) * static_cast<double>(value->layout.slots());
}

bool is_16bit_float(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// How a window load or store reaches memory, from its register layout and the buffer's row
// pitches: the bytes of the 32-byte sectors its warp instructions touch, and the elements one
// thread loads or stores per instruction (consecutive slots at consecutive, aligned addresses, up to 16 bytes, as the
// emitter vectorizes them). The window's uniform offsets are taken as aligned. From the wgmma
// accumulator layout a warp's bf16 store writes 8 rows of 16 bytes (4-byte pairs: 8 sectors for
// 128 bytes), or of 8 bytes with an odd row pitch (2-byte elements: 8 sectors for 64 bytes); a
// staged epilogue's row-wise layout writes 64 or 512 contiguous bytes, and 512 (plus 8 sectors per
// row: the misaligned start, the head and the tail) when its rows are realigned.
// A load goes through L1, which keeps the lines of the tile while its instructions run: its
// L2 traffic is the distinct sectors of the whole tile (`through_l1`), where a store's is the
// sectors of every warp instruction.
struct WindowTraffic {
  double sector_bytes = 0.0;  // per execution of the access, all warps
  int64_t vector = 1;
};
std::optional<WindowTraffic> window_traffic(const Op& op, const Value& value, bool through_l1) {
  const matile::GlobalAccess& access = op.access;
  if (!op.buffer || access.form != matile::GlobalAccess::Form::Window) return std::nullopt;
  const std::vector<int64_t>& buffer_shape = op.buffer->shape;
  const std::vector<int64_t>& shape = value->type.shape;
  const size_t rank = buffer_shape.size();
  if (rank == 0 || access.tile_axes.size() != rank) return std::nullopt;
  const matile::RegisterLayout& layout = value->layout;
  const int64_t threads = layout.threads(), slots = layout.slots();
  if (threads * slots > (int64_t{1} << 20) || threads % 32 != 0) return std::nullopt;
  const int64_t bytes = dtype_bytes(op.buffer->dtype);
  // An int4 buffer: two elements a byte, its sectors at half the element offsets, and runs of up
  // to 32 elements (16 bytes) read as one access, as planned_int4_load reads them.
  const bool packed = op.buffer->dtype == DType::I4;
  std::vector<int64_t> stride(rank, 1);
  for (size_t j = rank - 1; j-- > 0;) stride[j] = stride[j + 1] * buffer_shape[j + 1];
  // Realigned rows (ir.h, GlobalAccess::realign_rows) go out as 16-byte vectors whatever the
  // pitch: counted as at a pitch rounded up to 16 bytes, plus per row the sector its misaligned
  // start adds and the 7 one-sector requests of its head and tail, stored one element per
  // instruction (ncu, H100: 37.1 M L1 store sectors for lm_head against 37.8 M from 2-byte runs).
  const bool realign = access.realign_rows;
  if (realign) {
    const int64_t full = 16 / bytes;
    for (size_t j = 0; j + 1 < rank; ++j) stride[j] = (stride[j] + full - 1) / full * full;
  }
  std::string key = matile::layout_text(layout) + "|" + std::to_string(bytes) + (packed ? "|int4" : "") + (realign ? "|realign" : "") +
                    (through_l1 ? "|l1" : "");
  for (size_t j = 0; j < rank; ++j) key += "|" + std::to_string(access.tile_axes[j]) + ":" + std::to_string(stride[j]);
  for (int64_t e : shape) key += "|" + std::to_string(e);
  // The search costs the same stores of the same tiles many times.
  static std::mutex mutex;
  static std::unordered_map<std::string, WindowTraffic> known;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  std::vector<int64_t> flat(static_cast<size_t>(threads * slots), 0);
  std::vector<int64_t> coordinates;
  for (int64_t t = 0; t < threads; ++t) {
    for (int64_t v = 0; v < slots; ++v) {
      matile::coordinates_into(layout.tv.index(t, v), shape, coordinates);
      int64_t offset = 0;
      for (size_t j = 0; j < rank; ++j) {
        const int a = access.tile_axes[j];
        if (a >= 0 && static_cast<size_t>(a) < coordinates.size()) offset += coordinates[static_cast<size_t>(a)] * stride[j];
      }
      flat[static_cast<size_t>(t * slots + v)] = offset;
    }
  }
  const auto at = [&](int64_t t, int64_t v) { return flat[static_cast<size_t>(t * slots + v)]; };
  WindowTraffic traffic;
  for (int64_t n = packed ? 32 : 16 / bytes; n > 1; n /= 2) {
    bool ok = slots % n == 0;
    for (size_t j = 0; j + 1 < rank && ok; ++j) ok = buffer_shape[j] == 1 || stride[j] % n == 0;
    for (int64_t t = 0; t < threads && ok; ++t) {
      for (int64_t v = 0; v < slots && ok; v += n) {
        ok = at(t, v) % n == 0;
        for (int64_t k = 1; k < n && ok; ++k) ok = at(t, v + k) == at(t, v) + k;
      }
    }
    if (ok) {
      traffic.vector = n;
      break;
    }
  }
  std::vector<int64_t> sectors;
  const auto count = [&] {
    std::sort(sectors.begin(), sectors.end());
    traffic.sector_bytes +=
        32.0 * static_cast<double>(std::unique(sectors.begin(), sectors.end()) - sectors.begin());
    sectors.clear();
  };
  for (int64_t warp = 0; warp < threads / 32; ++warp) {
    for (int64_t v = 0; v < slots; v += traffic.vector) {
      for (int64_t lane = 0; lane < 32; ++lane) {
        for (int64_t k = 0; k < traffic.vector; ++k) {
          const int64_t address = packed ? at(warp * 32 + lane, v + k) / 2 : at(warp * 32 + lane, v + k) * bytes;
          sectors.push_back(address >= 0 ? address / 32 : (address - 31) / 32);
        }
      }
      if (!through_l1) count();
    }
  }
  if (through_l1) count();
  if (realign) {
    double rows = 1.0;
    for (size_t j = 0; j + 1 < shape.size(); ++j) rows *= static_cast<double>(shape[j]);
    traffic.sector_bytes += 32.0 * 8.0 * rows;
  }
  std::lock_guard<std::mutex> lock(mutex);
  known.emplace(key, traffic);
  return traffic;
}

int value_registers(const Value& value) {
  if (value->type.rank() == 0 && value->layout.kind == LayoutKind::Uniform) {
    return value->type.dtype == DType::Index ? 1 : (is_float(value->type.dtype) ? 1 : 0);
  }
  if (!is_float(value->type.dtype)) return 0;  // index and mask tiles fold into their users
  // An 8-bit tile is an array of bytes in the emitted code, and ptxas keeps each element in a
  // register of its own (it packs 16-bit pairs for mma, never bytes).
  if (is_narrow_storage(value->type.dtype)) return static_cast<int>(value->layout.slots());
  // Slots that repeat an element (an mma A fragment of fewer than 16 rows) are the same loads:
  // ptxas keeps each element once.
  int64_t held = value->layout.slots();
  if (matile::repeats_in_a_thread(value->layout)) {
    std::set<int64_t> elements;
    for (int64_t v = 0; v < held; ++v) elements.insert(value->layout.tv.index(0, v));
    held = static_cast<int64_t>(elements.size());
  }
  const int64_t bytes = held * dtype_bytes(value->type.dtype);
  return static_cast<int>((bytes + 3) / 4);
}

bool is_view(const Op& op) {
  return op.kind == OpKind::Broadcast || op.kind == OpKind::Permute ||
         op.kind == OpKind::ExtractSlice || (op.kind == OpKind::ConvertLayout && !op.via_shared);
}

// ------------------------------------------------------------------------------------------
// Step 3's register estimate: the largest sum of live register tiles at any op.
// How the emitter groups an element-wise shared read's slots into instructions
// (matile::shared_read_plan); one slot per instruction in the default element-wise form, when
// the allocation is unknown, or when the plan reads nothing together (SharedReadPlan::
// reads_together: the emitter then reads element-wise).
matile::SharedReadPlan read_plan(const Kernel& kernel, const Op& op) {
  const Value& value = op.results[0];
  if (!kernel.grouped_shared_reads || op.shared.alloc < 0 ||
      op.shared.alloc >= static_cast<int>(kernel.shared.size())) {
    matile::SharedReadPlan singles;
    for (int64_t v = 0; v < value->layout.slots(); ++v) singles.groups.push_back({v});
    return singles;
  }
  return matile::shared_read_plan(kernel.shared[static_cast<size_t>(op.shared.alloc)], op.shared, value->layout,
                                  value->type.shape, value->type.dtype);
}

class RegisterEstimate : public matile::Visitor {
 public:
  explicit RegisterEstimate(const Kernel& kernel) : kernel_(kernel) {}

  int run() {
    for (const matile::GridAxis& axis : kernel_.grid) define(axis.var, 0, 1);
    count_uses(*kernel_.body);
    mark_hoisted_bytes(*kernel_.body);
    visit(*kernel_.body);
    std::vector<int64_t> delta(static_cast<size_t>(next_position_) + 2, 0);
    for (const auto& [value, def] : def_) {
      const int regs = regs_.at(value);
      if (regs == 0) continue;
      int last = def;
      if (auto it = last_use_.find(value); it != last_use_.end()) last = std::max(last, it->second);
      const int end = std::max(last, def + 1);
      delta[static_cast<size_t>(def)] += regs;
      delta[static_cast<size_t>(end)] -= regs;
    }
    int64_t live = 0, peak = 0;
    for (int64_t d : delta) {
      live += d;
      peak = std::max(peak, live);
    }
    return static_cast<int>(peak) + kBaseRegisters + 2 * static_cast<int>(kernel_.params.size());
  }

 private:
  struct Loop {
    int start = 0;
    int end = 0;
  };

  void define(const Value& value, int position, int regs) {
    if (!value) return;
    def_[value.get()] = position;
    regs_[value.get()] = regs;
  }

  const ValueNode* root(const ValueNode* value) const {
    for (int guard = 0; guard < 64; ++guard) {
      auto it = alias_.find(value);
      if (it == alias_.end()) return value;
      value = it->second;
    }
    return value;
  }

  // Uses of each value (to find ldmatrix results used by exactly one mma), and whether every
  // use is a slot-wise op (element-wise or a store) in the region that defines it. (Reduces are
  // not: counting their operands as streamed undercounts the row-reduction kernels by a third.)
  void count_uses(const Region& body) {
    matile::for_each_op_with_region(body, [&](const Op& op, const Region& region) {
      for (const Value& result : op.results) def_region_[result.get()] = &region;
      const bool slot_wise = is_slot_wise_consumer(op.kind);
      for (const Value& used : matile::used_values(op)) {
        ++uses_[used.get()];
        users_[used.get()].push_back(&op);
        auto def = def_region_.find(used.get());
        if (!slot_wise || def == def_region_.end() || def->second != &region) {
          not_slot_wise_.insert(used.get());
        }
      }
    });
  }

  // The byte fragments (hoisted_bytes) of each region in program order; the first half of each
  // region's are marked early.
  void mark_hoisted_bytes(const Region& body) {
    std::unordered_map<const Region*, std::vector<const ValueNode*>> by_region;
    matile::for_each_op_with_region(body, [&](const Op& op, const Region& region) {
      if (hoisted_bytes(op)) by_region[&region].push_back(op.results[0].get());
    });
    for (const auto& [region, values] : by_region) {
      for (size_t i = 0; i < values.size(); ++i) early_bytes_[values[i]] = 2 * i < values.size();
    }
  }

  static bool is_slot_wise_consumer(OpKind kind) {
    return kind == OpKind::Unary || kind == OpKind::Binary || kind == OpKind::Select ||
           kind == OpKind::Cast || kind == OpKind::Compare || kind == OpKind::GlobalStore;
  }

  // An element-wise float result consumed only slot by slot: ptxas computes it into its users
  // one slot at a time, never holding the whole tile.
  bool evaluated_slot_by_slot(const Op& op) const {
    if (op.kind != OpKind::Unary && op.kind != OpKind::Binary && op.kind != OpKind::Select &&
        op.kind != OpKind::Cast) {
      return false;
    }
    const ValueNode* result = op.results[0].get();
    return uses_.count(result) && !not_slot_wise_.count(result);
  }

  // An 8-bit tile loaded from global memory whose only users are casts that keep their result
  // (to a 16-bit mma operand, say): ptxas converts each byte as it arrives, so the converted
  // tile holds the registers and the bytes hold none. (Casts evaluated slot by slot do not
  // count: then the bytes wait in registers for the rest of their expression.)
  // Not when the tile has more slots than a thread has registers: its loads are all issued at the
  // op (the emitter reads the whole tile there), and ptxas cannot keep that many in flight (an
  // int4 tile of 1024 x 64 read into registers by 128 threads, 512 bytes a thread: 14 KB of
  // spills, 23x slower than estimated; H200, 2026-11-29).
  bool converted_as_loaded(const Op& op) const {
    if (op.kind != OpKind::GlobalLoad || op.results.size() != 1 ||
        !is_narrow_storage(op.results[0]->type.dtype) ||
        op.results[0]->layout.slots() > kThreadRegisterLimit) {
      return false;
    }
    auto users = users_.find(op.results[0].get());
    if (users == users_.end()) return false;
    for (const Op* user : users->second) {
      if (user->kind != OpKind::Cast || evaluated_slot_by_slot(*user)) return false;
    }
    return true;
  }

  // A 16-bit mma operand converted from an 8-bit tile and read only by mma, whole or through
  // per-k-step slices: ptxas converts the elements just before the mma that reads them, like a
  // streamed ldmatrix, rather than holding the whole converted tile.
  // Register-only views between (an int4 weight's layout conversion that moves nothing) count as
  // the tile itself.
  bool converted_fragments(const Op& op) const {
    if (op.kind != OpKind::Cast || op.operands.empty() || !is_narrow_storage(op.operands[0]->type.dtype)) {
      return false;
    }
    return read_only_by_mma(op.results[0].get(), 0);
  }
  bool read_only_by_mma(const ValueNode* value, int depth) const {
    auto users = users_.find(value);
    if (users == users_.end() || depth > 4) return false;
    for (const Op* user : users->second) {
      if (user->kind == OpKind::ExtractSlice || user->kind == OpKind::Mma) continue;
      if (!is_view(*user) || !read_only_by_mma(user->results[0].get(), depth + 1)) return false;
    }
    return true;
  }

  // An 8-bit fragment read from shared memory only to be widened into mma operands: the
  // emitted code reads it byte by byte, and ptxas keeps each byte in its own register from its
  // load to its conversion, issuing the loads of about the first half of the loop iteration's
  // k steps at the iteration's top, ahead of the first mma. Fitted to NVRTC 13.0 on sm_90a, FP8
  // GEMM on 4 warps: 64 x 128 x 64 holds 2 of its 4 k steps' 48 bytes (estimate 186, ptxas 187);
  // 128 x 64 x 128 holds 4 of 8 and spills, where streaming one step predicted 149 registers.
  bool hoisted_bytes(const Op& op) const {
    if (op.kind != OpKind::SharedLoad || op.results.size() != 1 || !is_narrow_storage(op.results[0]->type.dtype)) {
      return false;
    }
    auto users = users_.find(op.results[0].get());
    if (users == users_.end()) return false;
    for (const Op* user : users->second) {
      if (user->kind != OpKind::Cast || !converted_fragments(*user)) return false;
    }
    return true;
  }

  // The registers an 8-bit fragment's reads land in: a word per 4 bytes of each read (the
  // emitter reads neighbouring bytes of a lane together, matile::shared_read_plan), which
  // ptxas keeps until the bytes' conversions.
  int packed_read_registers(const Op& op) const {
    int registers = 0;
    for (const std::vector<int64_t>& group : read_plan(kernel_, op).groups) {
      registers += static_cast<int>((group.size() * static_cast<size_t>(dtype_bytes(op.results[0]->type.dtype)) + 3) / 4);
    }
    return registers;
  }

  bool streamed(const Op& op) const {
    if (op.kind != OpKind::SharedLoad || op.shared_read == matile::SharedRead::Scalar) return false;
    auto it = uses_.find(op.results[0].get());
    return it != uses_.end() && it->second == 1;
  }

  void use(const Value& value, int position, const std::vector<int>& enclosing) {
    if (!value) return;
    const ValueNode* source = root(value.get());
    auto def = def_.find(source);
    if (def == def_.end()) return;
    int at = position;
    // Used inside a loop it was defined outside of: live through that whole loop.
    for (int loop : enclosing) {
      if (def->second < loops_[static_cast<size_t>(loop)].start) {
        at = std::max(at, loops_[static_cast<size_t>(loop)].end);
        break;  // `enclosing` runs outermost first
      }
    }
    int& last = last_use_[source];
    last = std::max(last, at);
  }

  // Numbers the ops in program order (a loop takes a position before its body and one after)
  // and records each value's definition and last use.
  void visit_For(const Op& op) override {
    const int position = next_position_++;
    for (const Value& init : op.operands) use(init, position, enclosing_);
    use(op.trip_count, position, enclosing_);
    const int loop = static_cast<int>(loops_.size());
    loops_.push_back({position, position});
    define(op.loop_var, position, 1);
    for (const Value& arg : op.block_args) define(arg, position, value_registers(arg));
    // The end is known only after the body; uses inside need it, so number the body once
    // to find it, then record the uses.
    const int body_start = next_position_;
    const int body_size = count_ops(op.body.get());
    loops_[static_cast<size_t>(loop)].end = body_start + body_size;
    enclosing_.push_back(loop);
    if (op.body) visit(*op.body);
    enclosing_.pop_back();
    const int end = next_position_++;
    loops_[static_cast<size_t>(loop)].end = end;
    for (const Value& result : op.results) define(result, end, value_registers(result));
  }

  void visit_op(const Op& op) override {
    const int position = next_position_++;
    for (const Value& used : matile::used_values(op)) use(used, position, enclosing_);
    for (const Value& result : op.results) {
      if (is_view(op) && !op.operands.empty()) {
        alias_[result.get()] = root(op.operands[0].get());
        define(result, position, 0);
      } else if (op.kind == OpKind::Full || op.kind == OpKind::Iota) {
        define(result, position, result->type.rank() == 0 ? 0 : value_registers(result));
        if (op.kind == OpKind::Full) regs_[result.get()] = 0;
      } else if (evaluated_slot_by_slot(op) || converted_as_loaded(op)) {
        define(result, position, 0);
      } else if (op.kind == OpKind::GlobalLoad && op.buffer && op.buffer->dtype == DType::I4) {
        // An int4 tile read in runs arrives as words of packed nibbles, and ptxas extracts each
        // nibble where it is used: the words hold the registers (NVRTC 13.0, sm_90a: the
        // 70B-class decode's 16 x 128 tile on 2 warps, 32 nibbles a thread in runs of 8, takes 32
        // registers in all). Elements read one by one (int4_at) take a register each.
        const std::optional<WindowTraffic> traffic = window_traffic(op, result, /*through_l1=*/true);
        const int64_t run = traffic ? traffic->vector : 1;
        const int64_t slots = result->layout.slots();
        define(result, position, static_cast<int>(run >= 8 ? (slots + 7) / 8 : (slots + run - 1) / run));
      } else if (op.kind == OpKind::SharedLoad && result->type.dtype == DType::I4) {
        // Packed int4 read from shared memory in runs (packed_int4_shared_load): its words.
        define(result, position, static_cast<int>((result->layout.slots() + 7) / 8));
      } else if (auto bytes = early_bytes_.find(result.get()); bytes != early_bytes_.end()) {
        // The first half of a loop body's byte fragments live from the body's top
        // (hoisted_bytes says why).
        const bool early = bytes->second && !enclosing_.empty();
        const int top = early ? loops_[static_cast<size_t>(enclosing_.back())].start + 1 : position;
        define(result, top, packed_read_registers(op));
      } else if (streamed(op) || converted_fragments(op)) {
        define(result, position, std::min(kStreamedOperandRegisters, value_registers(result)));
      } else {
        define(result, position, value_registers(result));
      }
    }
  }

  // The positions a region's ops take: one per op, and one more per loop (its end).
  static int count_ops(const Region* region) {
    if (!region) return 0;
    int count = 0;
    matile::for_each_op(*region, [&](const Op& op) { count += op.kind == OpKind::For ? 2 : 1; });
    return count;
  }

  const Kernel& kernel_;
  std::vector<int> enclosing_;  // the loops around the op being numbered, outermost first
  int next_position_ = 1;
  std::vector<Loop> loops_;
  std::unordered_map<const ValueNode*, int> def_;
  std::unordered_map<const ValueNode*, int> regs_;
  std::unordered_map<const ValueNode*, int> last_use_;
  std::unordered_map<const ValueNode*, const ValueNode*> alias_;
  std::unordered_map<const ValueNode*, int> uses_;
  std::unordered_map<const ValueNode*, std::vector<const Op*>> users_;
  std::unordered_map<const ValueNode*, const Region*> def_region_;
  std::unordered_set<const ValueNode*> not_slot_wise_;
  // The byte fragments of hoisted_bytes(), true for those live from their loop body's top.
  std::unordered_map<const ValueNode*, bool> early_bytes_;
};

// ------------------------------------------------------------------------------------------
// Steps 1 and 2: the work of one CTA, its segments and its global accesses.
class WorkWalk : public matile::Visitor {
 public:
  explicit WorkWalk(const Kernel& kernel) : kernel_(kernel) {
    for (size_t i = 0; i < kernel.grid.size(); ++i) {
      if (!kernel.grid[i].var) continue;
      grid_axis_[kernel.grid[i].var.get()] = static_cast<int>(i);
      deps_[kernel.grid[i].var.get()] = i < kGridBits ? DepMask{1} << i : kGridMask;
    }
    if (kernel.body) {
      matile::for_each_op(*kernel.body, [&](const Op& op) {
        for (const Value& used : matile::used_values(op)) users_[used.get()].push_back(&op);
      });
    }
  }

  void run() {
    segments_.push_back(Segment{});
    segment_ = 0;
    visit(kernel_);
  }

  const std::vector<Segment>& segments() const { return segments_; }
  const std::vector<Access>& accesses() const { return accesses_; }
  // The roles of the kernel's Roles op (empty without warp specialization).
  const std::vector<RoleInfo>& roles() const { return roles_; }

  // The work of `op` alone, as if it stood in the kernel body (op_work()).
  OpWork work_of_op(const Op& op) {
    segments_.assign(1, Segment{});
    accesses_.clear();
    cost_op(op, 0, 1.0, {});
    const Work& work = segments_[0].work;
    OpWork result{work.tensor_flops, work.alu_ops + work.int_ops, work.special_ops, work.shared_bytes,
                  work.barriers, 0.0};
    result.wgmma_flops = work.wgmma_flops;
    result.wgmma_8bit_flops = work.wgmma_8bit_flops;
    result.sync_cycles = work.sync_cycles;
    for (const Access& access : accesses_) result.global_bytes += access.bytes;
    return result;
  }
  // Every CTA's trips of the outermost loop whose trip count depends on the grid (skip_masked's
  // causal loops), summed with its siblings' at that depth (the two halves of a split loop), in
  // launch order; empty when every CTA runs the same loops.
  const std::vector<double>& cta_trips() const { return cta_trips_; }

 private:
  struct LoopContext {
    DepMask bit = 0;
    double trips = 0.0;
    // Iterations that issue their look-ahead copy (iteration i copies for i + stages - 1, which
    // exists while it is below the extent): min(trips, extent - stages + 1), averaged.
    double lookahead_copies = 0.0;
    int stages = 0;
  };

  DepMask deps_of(const Value& value) const {
    if (!value) return 0;
    auto it = deps_.find(value.get());
    return it == deps_.end() ? 0 : it->second;
  }

  // The uniform index value for one grid point, or nullopt when it is not a function of grid
  // variables and constants through + - * floordiv mod min max.
  std::optional<int64_t> evaluate(const Value& value, const std::vector<int64_t>& point,
                                  int depth) const {
    if (!value || depth > 48) return std::nullopt;
    if (auto axis = grid_axis_.find(value.get()); axis != grid_axis_.end()) {
      return point[static_cast<size_t>(axis->second)];
    }
    auto def = def_.find(value.get());
    if (def == def_.end()) return std::nullopt;
    const Op& op = *def->second;
    if (op.kind == OpKind::Full) {
      if (!std::isfinite(op.constant) || std::abs(op.constant) > 1e15) return std::nullopt;
      return static_cast<int64_t>(op.constant);
    }
    if (op.kind != OpKind::Binary || op.operands.size() != 2) return std::nullopt;
    const std::optional<int64_t> a = evaluate(op.operands[0], point, depth + 1);
    const std::optional<int64_t> b = evaluate(op.operands[1], point, depth + 1);
    if (!a || !b) return std::nullopt;
    switch (op.binary_op) {
      case matile::BinaryOp::Add:
        return *a + *b;
      case matile::BinaryOp::Sub:
        return *a - *b;
      case matile::BinaryOp::Mul:
        return *a * *b;
      case matile::BinaryOp::Max:
        return std::max(*a, *b);
      case matile::BinaryOp::Min:
        return std::min(*a, *b);
      case matile::BinaryOp::FloorDiv:
      case matile::BinaryOp::Div:
        if (*b == 0) return std::nullopt;
        return *a / *b - ((*a % *b != 0) && ((*a < 0) != (*b < 0)) ? 1 : 0);
      case matile::BinaryOp::Mod: {
        if (*b == 0) return std::nullopt;
        const int64_t r = *a % *b;
        return r != 0 && ((r < 0) != (*b < 0)) ? r + *b : r;
      }
    }
    return std::nullopt;
  }

  // The loop's trips, min(trips, cap), averaged over the grid points its trip count depends on.
  // With `per_cta`, also every CTA's trips in launch order (blockIdx.x fastest), when the count
  // depends on the grid and the grid is small enough to list.
  // `first`: for the masked half of a split loop, the trip count of the half before it, whose
  // iterations this loop's come after (the cap then applies to first + trips).
  double average_trips(const Op& loop, double cap, std::vector<double>* per_cta = nullptr,
                       const Value& first = nullptr) const {
    const double extent = std::min(static_cast<double>(std::max<int64_t>(loop.extent, 0)), cap);
    if (!loop.trip_count) return extent;
    const DepMask deps = deps_of(loop.trip_count) | deps_of(first);
    if (deps & ~kGridMask) return extent;  // depends on a loop: assume the full range
    std::vector<int> axes;
    int64_t points = 1;
    for (size_t i = 0; i < kernel_.grid.size() && i < kGridBits; ++i) {
      if (!(deps & (DepMask{1} << i))) continue;
      axes.push_back(static_cast<int>(i));
      points *= std::max<int64_t>(kernel_.grid[i].extent, 1);
      if (points > kMaxTripCountPoints) return extent;
    }
    std::vector<int64_t> point(kernel_.grid.size(), 0);
    double sum = 0.0;
    std::vector<double> per_point;
    for (int64_t p = 0; p < points; ++p) {
      int64_t rest = p;
      for (int axis : axes) {
        const int64_t e = std::max<int64_t>(kernel_.grid[static_cast<size_t>(axis)].extent, 1);
        point[static_cast<size_t>(axis)] = rest % e;
        rest /= e;
      }
      const std::optional<int64_t> trips = evaluate(loop.trip_count, point, 0);
      if (!trips) return extent;
      double clamped = std::clamp(static_cast<double>(*trips), 0.0, extent);
      if (first) {
        const std::optional<int64_t> before = evaluate(first, point, 0);
        if (!before) return extent;
        const double start = std::max(static_cast<double>(*before), 0.0);
        clamped = std::max(0.0, std::min(start + clamped, extent) - std::min(start, extent));
      }
      sum += clamped;
      if (per_cta) per_point.push_back(clamped);
    }
    if (per_cta && !axes.empty()) list_per_cta(axes, per_point, per_cta);
    return sum / static_cast<double>(points);
  }

  // Expands trips per point of the dependent grid axes (`axes`, the first fastest) to trips per
  // CTA in launch order over the whole grid.
  void list_per_cta(const std::vector<int>& axes, const std::vector<double>& per_point,
                    std::vector<double>* per_cta) const {
    int64_t ctas = 1;
    for (const matile::GridAxis& axis : kernel_.grid) {
      ctas *= std::max<int64_t>(axis.extent, 1);
      if (ctas > kMaxListedCtas) return;
    }
    per_cta->resize(static_cast<size_t>(ctas));
    std::vector<int64_t> extents;
    for (const matile::GridAxis& axis : kernel_.grid) extents.push_back(std::max<int64_t>(axis.extent, 1));
    std::vector<int64_t> coordinates(extents.size(), 0);
    for (int64_t cta = 0; cta < ctas; ++cta) {
      // The grid point of the CTA launched cta-th (the tile order's, when it groups or
      // reverses an axis: the longest tiles of a causal attention first shorten the tail).
      if (kernel_.tile_group > 1 || kernel_.reversed_axes != 0) {
        grid_point_in_launch_order(cta, extents, kernel_.tile_group, &coordinates,
                                   kernel_.reversed_axes);
      } else {
        int64_t rest = cta;
        for (size_t i = 0; i < extents.size(); ++i) {
          coordinates[i] = rest % extents[i];
          rest /= extents[i];
        }
      }
      int64_t point = 0, scale = 1;
      for (size_t i = 0; i < kernel_.grid.size(); ++i) {
        const int64_t e = extents[i];
        const int64_t coordinate = coordinates[i];
        if (std::find(axes.begin(), axes.end(), static_cast<int>(i)) != axes.end()) {
          point += coordinate * scale;
          scale *= e;
        }
      }
      (*per_cta)[static_cast<size_t>(cta)] = per_point[static_cast<size_t>(point)];
    }
  }

  void record_access(double bytes, DepMask deps, bool write, double executions,
                     const std::vector<LoopContext>& loops, double factor,
                     const void* buffer = nullptr) {
    Access access;
    access.buffer = buffer;
    access.bytes = bytes;
    access.executions = executions * factor;
    double distinct = factor;
    for (const LoopContext& loop : loops) {
      if (deps & loop.bit) distinct *= loop.trips;
    }
    access.distinct = distinct;
    access.deps = deps;
    access.write = write;
    accesses_.push_back(access);
  }

  DepMask access_deps(const Op& op) const {
    DepMask deps = 0;
    for (const Value& offset : op.access.offsets) deps |= deps_of(offset);
    for (const Value& index : matile::gather_indices(op)) deps |= deps_of(index);
    if (const Value mask = matile::gather_mask(op)) deps |= deps_of(mask);
    return deps;
  }

  // Every op of a region in order, in the segment of the loop around it (`segment_`, inside
  // `loops_`). A loop right after another may be the second half of a split loop.
  using matile::Visitor::visit;
  void visit(const Region& region) override {
    const Op* outer_previous = previous_loop_;
    previous_loop_ = nullptr;
    matile::Visitor::visit(region);
    previous_loop_ = outer_previous;
  }

  void visit(const Op& op) override {
    for (const Value& result : op.results) def_[result.get()] = &op;
    matile::Visitor::visit(op);
  }

  void visit_For(const Op& op) override {
    if (matile::only_synchronizes(op)) return;  // an arrive taken in one iteration: no work
    if (op.tile_loop) {
      // A persistent kernel's tile loop: the estimate is per tile, as for one CTA per tile (the
      // grid variables keep their meaning); the state it carries (a ring position) is uniform.
      DepMask init_deps = 0;
      for (const Value& init : op.operands) init_deps |= deps_of(init);
      if (op.loop_var) deps_[op.loop_var.get()] = 0;
      for (const Value& arg : op.block_args) deps_[arg.get()] = init_deps;
      if (op.body) visit(*op.body);
      for (const Value& result : op.results) deps_[result.get()] = init_deps;
      return;
    }
    // The masked half of a split loop continues the unmasked half's iterations; its
    // variable's offset depends on the grid only to say where the halves meet, so for
    // reuse it depends on the loop alone (the halves read the tiles the loop read).
    Value first_trips;
    if (previous_loop_) {
      if (const Value offset = matile::split_loop_offset(*previous_loop_, op)) {
        loop_offsets_.insert(offset.get());
        first_trips = previous_loop_->trip_count;
      }
    }
    walk_for(op, first_trips);
    previous_loop_ = &op;
  }

  // Warp specialization: each role's body is a segment of its own (its ops run on the role's
  // threads only, concurrently with the other roles'), executed as often as the Roles op.
  void visit_Roles(const Op& op) override {
    const size_t segment = segment_;
    for (const matile::WarpRole& role : op.roles) {
      Segment body;
      body.executions = segments_[segment].executions;
      body.role = static_cast<int>(roles_.size());
      roles_.push_back({role.name, role.warpgroups, role.max_registers});
      segments_.push_back(body);
      segment_ = segments_.size() - 1;
      if (role.body) visit(*role.body);
      segment_ = segment;
    }
  }

  void visit_op(const Op& op) override {
    DepMask deps = 0;
    for (const Value& used : matile::used_values(op)) deps |= deps_of(used);
    if (!op.results.empty() && loop_offsets_.count(op.results[0].get())) {
      deps = loops_.empty() ? 0 : loops_.back().bit;
    }
    for (const Value& result : op.results) deps_[result.get()] = deps;
    cost_op(op, segment_, segments_[segment_].executions, loops_);
  }

  // An int4 load read in runs (window_traffic's vector) whose only readers, through
  // register-only views, are casts to a 16-bit float: the emitter widens its nibbles a pair at a
  // time from the loaded words (codegen paired_int4_widening).
  bool widened_in_pairs(const Op& load) {
    if (load.kind == OpKind::GlobalLoad) {
      const std::optional<WindowTraffic> traffic = window_traffic(load, load.results[0], /*through_l1=*/true);
      if (!traffic || traffic->vector < 2) return false;
    }
    std::function<bool(const ValueNode*, int)> widened = [&](const ValueNode* value, int depth) {
      auto found = users_.find(value);
      if (found == users_.end() || depth > 4) return false;
      for (const Op* user : found->second) {
        if (user->kind == OpKind::Cast && is_16bit_float(user->results[0]->type.dtype)) continue;
        if (user->kind != OpKind::Permute || !widened(user->results[0].get(), depth + 1)) return false;
      }
      return true;
    };
    return widened(load.results[0].get(), 0);
  }

  void walk_for(const Op& op, const Value& first_trips) {
    const size_t segment = segment_;
    const int loop_index = next_loop_++;
    const DepMask bit = loop_bit(loop_index);
    DepMask init_deps = 0;
    for (const Value& init : op.operands) init_deps |= deps_of(init);
    if (op.loop_var) deps_[op.loop_var.get()] = bit;
    for (const Value& arg : op.block_args) deps_[arg.get()] = init_deps | bit;
    std::vector<double> per_cta;
    const bool list_trips = cta_trips_.empty() || loops_.size() == cta_trips_depth_;
    const double trips = average_trips(op, std::numeric_limits<double>::infinity(),
                                       list_trips ? &per_cta : nullptr);
    if (!per_cta.empty() && trips > 0.0) {
      if (cta_trips_.empty()) {
        cta_trips_ = std::move(per_cta);
        cta_trips_depth_ = loops_.size();
      } else if (per_cta.size() == cta_trips_.size()) {
        // A loop split in two (split_masked_loops): each CTA runs the trips of both.
        for (size_t i = 0; i < per_cta.size(); ++i) cta_trips_[i] += per_cta[i];
      }
    }
    const double lookahead =
        op.pipeline_stages >= 2
            ? average_trips(
                  op, std::max(0.0, static_cast<double>(op.extent - (op.pipeline_stages - 1))),
                  nullptr, first_trips)
            : trips;
    segments_[segment].innermost = false;
    Segment inner;
    inner.executions = segments_[segment].executions * trips;
    inner.stages = op.pipeline_stages;
    inner.role = segments_[segment].role;
    inner.loop = true;
    inner.depth = static_cast<int>(loops_.size()) + 1;
    segments_.push_back(inner);
    const size_t inner_index = segments_.size() - 1;
    if (op.body && trips > 0.0) {
      loops_.push_back({bit, trips, lookahead, op.pipeline_stages});
      segment_ = inner_index;
      visit(*op.body);
      segment_ = segment;
      loops_.pop_back();
    }
    for (const Value& result : op.results) deps_[result.get()] = init_deps | bit;
  }

  void cost_op(const Op& op, size_t segment_index, double executions,
               const std::vector<LoopContext>& loops) {
    Segment& segment = segments_[segment_index];
    Work& work = segment.work;
    const Value result = op.results.empty() ? nullptr : op.results[0];
    const bool needs_result = op.kind != OpKind::GlobalStore && op.kind != OpKind::SharedStore &&
                              op.kind != OpKind::AsyncCopy && op.kind != OpKind::CommitGroup &&
                              op.kind != OpKind::WaitGroup && op.kind != OpKind::Barrier &&
                              op.kind != OpKind::Yield && op.kind != OpKind::For &&
                              !matile::is_hopper(op.kind);  // Wgmma checks its own operands
    if (needs_result && !result) return;  // malformed (the verifier reports it); costs nothing
    switch (op.kind) {
      case OpKind::Full:
      case OpKind::Broadcast:
      case OpKind::Permute:
      case OpKind::ExtractSlice:
      case OpKind::CommitGroup:
      case OpKind::WaitGroup:
      case OpKind::Yield:
      case OpKind::For:
        return;
      case OpKind::Barrier:
        work.barriers += 1;
        return;
      case OpKind::Iota:
      case OpKind::Compare:
      case OpKind::Logical:
      case OpKind::Select:
        work.alu_ops += lanes(result);
        return;
      case OpKind::Cast: {
        const bool pairs = is_16bit_float(result->type.dtype) && !op.operands.empty() &&
                           op.operands[0]->type.dtype == DType::F32;
        // int4 to bf16 / f16: a prmt and a lop3 (INT32) and an fma a pair (int4x2_to_bf16x2);
        // to f32: an integer add and a float subtraction an element (int8_to_float).
        if (!op.operands.empty() && op.operands[0]->type.dtype == DType::I4) {
          const bool half = is_16bit_float(result->type.dtype);
          work.int_ops += lanes(result);
          work.alu_ops += lanes(result) * (half ? 0.5 : 1.0);
          return;
        }
        work.alu_ops += lanes(result) * (pairs ? 0.5 : 1.0);
        return;
      }
      case OpKind::Unary: {
        const double n = lanes(result);
        if (!is_float(result->type.dtype)) {
          work.alu_ops += n;
          return;
        }
        work.float_flops += n;
        switch (op.unary_op) {
          case matile::UnaryOp::Neg:
          case matile::UnaryOp::Abs:
            work.alu_ops += n;
            break;
          case matile::UnaryOp::Exp2:
          case matile::UnaryOp::Log2:
          case matile::UnaryOp::Rsqrt:
            work.special_ops += n;
            break;
          case matile::UnaryOp::Exp:
          case matile::UnaryOp::Log:
          case matile::UnaryOp::Tanh:
            work.special_ops += n;
            work.alu_ops += n;
            break;
          case matile::UnaryOp::Sqrt:
            work.special_ops += n;
            work.alu_ops += 2 * n;
            break;
          case matile::UnaryOp::Sigmoid:
            work.special_ops += 2 * n;
            work.alu_ops += 3 * n;
            break;
        }
        return;
      }
      case OpKind::Binary: {
        const double n = lanes(result);
        if (is_float(result->type.dtype)) {
          work.float_flops += n;
          if (op.binary_op == matile::BinaryOp::Div) {
            work.special_ops += n;  // the reciprocal of div.rn.f32
            work.alu_ops += 6 * n;  // its Newton steps and the range check
          } else {
            work.alu_ops += n;
          }
        } else {
          const bool slow = op.binary_op == matile::BinaryOp::FloorDiv ||
                            op.binary_op == matile::BinaryOp::Mod ||
                            op.binary_op == matile::BinaryOp::Div;
          work.alu_ops += n * (slow ? 8 : 1);
        }
        return;
      }
      case OpKind::ConvertLayout:
        if (op.via_shared) {
          work.shared_bytes += kWavefrontBytes * (scratch_wavefronts(op.operands[0], op.scratch) +
                                                  scratch_wavefronts(result, op.scratch));
          work.alu_ops += lanes(result);
          work.barriers += 2;
        }
        return;
      case OpKind::Reduce: {
        if (op.operands.empty()) return;
        const Value& x = op.operands[0];
        const double threads = static_cast<double>(kernel_.threads());
        const double out_slots = static_cast<double>(result->layout.slots());
        const double combines =
            threads * std::max(0.0, static_cast<double>(x->layout.slots()) - out_slots);
        const double steps = static_cast<double>(op.xor_masks.size());
        double total = combines + steps * threads * out_slots;
        work.shared_bytes += steps * threads * out_slots * 4;  // shuffles share the crossbar
        if (op.scratch >= 0) {
          // Each warp stores its partials (one st.shared per slot), then every thread loads the
          // partials of the warps: at least one wavefront per warp instruction.
          const double warps = kernel_.warps;
          const double stores = warps * out_slots, loads = warps * out_slots * warps;
          work.shared_bytes +=
              std::max(warps * static_cast<double>(result->type.element_count()) * 4,
                       stores * kWavefrontBytes) +
              std::max(threads * out_slots * warps * 4, loads * kWavefrontBytes);
          total += threads * out_slots * warps;
          work.barriers += 2;
        }
        work.alu_ops += total;
        if (is_float(result->type.dtype)) work.float_flops += total;
        return;
      }
      case OpKind::Mma: {
        if (op.operands.size() < 3) return;
        const std::vector<int64_t>& a = op.operands[0]->type.shape;
        const std::vector<int64_t>& c = op.operands[2]->type.shape;
        if (a.size() != 2 || c.size() != 2) return;
        // A tile of fewer than 16 rows still issues whole m16 atoms (its rows repeat); swapped,
        // its rows are the instruction's 8 columns and B's columns its 16 rows.
        const int64_t rows = op.swapped ? 8 : 16 * op.warps_m * matile::mma_m_atoms(c[0], op.warps_m);
        work.tensor_flops +=
            2.0 * static_cast<double>(rows) * static_cast<double>(c[1]) * static_cast<double>(a[1]);
        work.mma_ops += 1;
        return;
      }
      case OpKind::FmaDot: {
        if (op.shared.alloc < 0 || op.shared.alloc >= static_cast<int>(kernel_.shared.size()) ||
            op.shared.offsets.size() < 2) {
          return;
        }
        const matile::SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(op.shared.alloc)];
        if (alloc.shape.size() < 2) return;
        const double k =
            static_cast<double>(op.shared.transposed ? alloc.shape[0] - op.shared.offsets[0]
                                                     : alloc.shape[1] - op.shared.offsets[1]);
        const double fmas = lanes(result) * std::max(k, 0.0);
        work.alu_ops += fmas;
        work.float_flops += 2 * fmas;
        work.shared_bytes += 2 * fmas * dtype_bytes(alloc.dtype);
        return;
      }
      case OpKind::GlobalLoad: {
        // int4 buffers are packed: half a byte an element, and each element takes its
        // extraction (two shifts: the nibble to the word's top, then back with its sign).
        // Widened a nibble pair at a time straight from the words (paired_int4_widening), the
        // extraction is one shift a word (0.25 an element) and the rest is the cast's work.
        const DType stored = op.buffer ? op.buffer->dtype : result->type.dtype;
        const double bytes = static_cast<double>(global_bytes(stored, result->type.element_count()));
        work.shared_bytes += lanes(result) * (stored == DType::I4 ? 0.5 : dtype_bytes(result->type.dtype));
        if (stored == DType::I4) {
          // The nibble's shift to the word's top and back (INT32), or one shift a word.
          work.int_ops += lanes(result) * (widened_in_pairs(op) ? 0.25 : 2.0);
        } else {
          work.alu_ops += lanes(result);
        }
        segment.read_bytes += bytes;
        if (!segment.has_wgmma) segment.reads_before_wgmma += bytes;
        record_access(bytes, access_deps(op), false, executions, loops, 1.0, op.buffer.get());
        // The L2 serves whole 32-byte sectors: a tile whose rows are a few bytes of a long
        // row-major buffer (a decode GEMV's 2 int8 columns per CTA) requests many times its bytes.
        // Replicated layouts (several threads load one element) count its sectors once.
        if (const std::optional<WindowTraffic> traffic = window_traffic(op, result, /*through_l1=*/true)) {
          accesses_.back().l2_bytes = std::max(traffic->sector_bytes, bytes);
        }
        return;
      }
      case OpKind::GlobalStore: {
        const Value value = matile::stored_value(op);
        if (!value) return;
        const double bytes = static_cast<double>(value->type.element_count()) *
                             dtype_bytes(op.buffer ? op.buffer->dtype : value->type.dtype);
        work.shared_bytes += lanes(value) * dtype_bytes(value->type.dtype);
        const std::optional<WindowTraffic> traffic = window_traffic(op, value, /*through_l1=*/false);
        work.alu_ops += lanes(value) / static_cast<double>(traffic ? traffic->vector : 1);
        record_access(bytes, access_deps(op), true, executions, loops, 1.0);
        // At least the bytes themselves: a replicated layout's holders store once.
        if (traffic) accesses_.back().l2_bytes = std::max(traffic->sector_bytes, bytes);
        return;
      }
      case OpKind::AsyncCopy: {
        double elements = 1.0;
        for (int64_t e : op.tile_shape) elements *= static_cast<double>(e);
        const double bytes =
            static_cast<double>(global_bytes(op.buffer ? op.buffer->dtype : DType::BF16, static_cast<int64_t>(elements)));
        // A pipelined loop predicates its look-ahead copies off past the end.
        double factor = 1.0;
        if (op.predicate && !loops.empty() && loops.back().stages >= 2 &&
            loops.back().trips > 0.0) {
          factor = loops.back().lookahead_copies / loops.back().trips;
        }
        work.shared_bytes += bytes * factor;
        work.alu_ops +=
            elements / static_cast<double>(std::max<int64_t>(op.vector_elements, 1)) * factor;
        segment.read_bytes += bytes * factor;
        segment.async_read_bytes += bytes * factor;
        record_access(bytes, access_deps(op), false, executions, loops, factor, op.buffer.get());
        return;
      }
      case OpKind::SharedLoad:
        if (result->type.dtype == DType::I4) {
          // Packed two elements a byte, read in runs of up to 16 bytes a lane (codegen
          // packed_int4_shared_load): a warp's read is at least one wavefront however few bytes
          // each lane takes (a standard B fragment's k pairs: a byte a lane); each nibble's
          // extraction as from global memory.
          const double reads = static_cast<double>(packed_int4_reads(op));
          const double lane_bytes = static_cast<double>(result->layout.slots()) * 0.5 / std::max(reads, 1.0);
          const double warps = static_cast<double>(result->layout.threads()) / kWarpSize;
          work.shared_bytes += kWavefrontBytes * warps * reads * std::max(1.0, kWarpSize * lane_bytes / kWavefrontBytes);
          work.alu_ops += static_cast<double>(result->layout.threads()) * reads;
          work.int_ops += lanes(result) * (widened_in_pairs(op) ? 0.25 : 2.0);
          return;
        }
        if (op.shared_read == matile::SharedRead::Scalar && dtype_bytes(result->type.dtype) == 1) {
          // 8-bit elements. By default one ld.shared per element at its own swizzled offset: a
          // warp instruction per slot, each as many wavefronts as its banks need, and the
          // instruction and its address per element. Grouped (Kernel::grouped_shared_reads),
          // one ld.shared per group of neighbouring bytes at a hoisted address, as the emitter
          // reads them (matile::shared_read_plan; a widened B with interleaved atoms reads a
          // row's bytes of several atoms at once), and per element of a group of several the
          // shift that takes it out of the loaded word (an int8 -> bf16 cast right after takes
          // its bytes from the words instead, so for the int8 weights this counts more than the
          // emitter issues); elements that repeat an earlier one are register copies.
          const matile::SharedReadPlan plan = read_plan(kernel_, op);
          work.shared_bytes += kWavefrontBytes * element_read_wavefronts(op, plan);
          if (!kernel_.grouped_shared_reads || !plan.reads_together()) {
            work.alu_ops += 2.0 * lanes(result);
            return;
          }
          double per_thread = 0.0;  // instructions, and extractions from a loaded word
          for (const std::vector<int64_t>& group : plan.groups) {
            per_thread += 1.0 + (group.size() > 1 ? static_cast<double>(group.size()) : 0.0);
          }
          work.alu_ops += static_cast<double>(result->layout.threads()) * per_thread;
          return;
        }
        work.shared_bytes += lanes(result) * dtype_bytes(result->type.dtype);
        return;
      case OpKind::SharedStore: {
        const Value value = matile::stored_value(op);
        if (value) work.shared_bytes += lanes(value) * dtype_bytes(value->type.dtype);
        return;
      }
      // Hopper's asynchronous machine (ir.h notes, "Hopper").
      case OpKind::Roles:
        return;  // visit_Roles walks the roles' bodies; the split itself costs nothing
      case OpKind::MBarrierInit:
        work.sync_cycles += kMBarrierInitCycles;
        return;
      case OpKind::MBarrierArrive: {
        work.sync_cycles += kMBarrierArriveCycles;
        // A plain arrive releases a stage: the wgmma groups still in flight then are the ones
        // the consumer holds stages for.
        const bool early_release = op.mbarrier.barrier >= 0 &&
                                   op.mbarrier.barrier < static_cast<int>(kernel_.mbarriers.size()) &&
                                   kernel_.mbarriers[static_cast<size_t>(op.mbarrier.barrier)].early_release;
        if (op.tx_bytes == 0 && segment.last_wgmma_pending >= 0 && !early_release) {
          segment.release_lag =
              std::max(segment.release_lag, static_cast<int>(segment.last_wgmma_pending));
        }
        return;
      }
      case OpKind::MBarrierWait:
        work.sync_cycles += kMBarrierWaitCycles;
        segment.mbarrier_waits += 1;
        return;
      case OpKind::NamedBarrier:
        work.sync_cycles += kNamedBarrierCycles;
        return;
      case OpKind::FenceProxyAsync:
        work.sync_cycles += kProxyFenceCycles;
        return;
      case OpKind::TmaLoad: {
        // One elected thread issues the box: no per-thread issue and no register staging.
        // The box lands in shared memory (a write through the SM's shared data path, like a
        // cp.async's) and reads global memory with the reuse rule of every other read.
        const double bytes = tma_bytes(op);
        work.shared_bytes += bytes;
        work.sync_cycles += kTmaIssueCycles;
        segment.read_bytes += bytes;
        segment.async_read_bytes += bytes;
        segment.tma_read_bytes += bytes;
        if (op.shared.alloc >= 0 && op.shared.alloc < static_cast<int>(kernel_.shared.size())) {
          const int stages = std::max(1, kernel_.shared[static_cast<size_t>(op.shared.alloc)].stages);
          segment.ring_stages =
              segment.ring_stages > 0 ? std::min(segment.ring_stages, stages) : stages;
        }
        record_access(bytes, operand_deps(op), false, executions, loops, 1.0);
        return;
      }
      case OpKind::TmaStore: {
        const double bytes = tma_bytes(op);
        work.shared_bytes += bytes;
        work.sync_cycles += kTmaIssueCycles;
        segment.tma_write_bytes += bytes;
        record_access(bytes, operand_deps(op), true, executions, loops, 1.0);
        return;
      }
      case OpKind::BulkCommitGroup:
        work.sync_cycles += kAsyncGroupCycles;
        return;
      case OpKind::BulkWaitGroup:
        // The stores in flight must have read (or written) their shared source: a global
        // write's latency, charged on the chain by the estimate (it knows the device).
        work.store_waits += 1;
        return;
      case OpKind::WgmmaFence:
        work.sync_cycles += kAsyncGroupCycles;
        return;
      case OpKind::WgmmaCommitGroup:
        work.sync_cycles += kAsyncGroupCycles;
        segment.groups_in_flight.push_back(segment.open_group_flops);
        segment.open_group_flops = 0.0;
        return;
      case OpKind::WgmmaWaitGroup: {
        work.sync_cycles += kAsyncGroupCycles;
        const int64_t pending = std::max<int64_t>(op.extent, 0);
        segment.last_wgmma_pending = static_cast<double>(pending);
        std::vector<double>& groups = segment.groups_in_flight;
        if (static_cast<int64_t>(groups.size()) > pending) {
          groups.erase(groups.begin(), groups.end() - pending);
          if (pending > 0) {
            for (double flops : groups) segment.overlapped_wgmma_flops += flops;
          }
        }
        return;
      }
      case OpKind::Wgmma: {
        // wgmma.mma_async m64nNk16 over M / 64 warpgroups: 2*M*N*K at the wgmma rate (twice
        // that for the 8-bit form, m64nNk32 on fp8 operands: kEightBitWgmmaSpeedup). Its
        // shared operands are read by the tensor cores from shared memory, per warpgroup
        // instruction: each warpgroup its 64 rows of A (SS form; RS takes A from registers)
        // and the whole of B, so two warpgroups side by side along M read B twice.
        const Value& c = op.operands.empty() ? nullptr : op.operands.back();
        if (!c || c->type.shape.size() != 2) return;
        const double m = static_cast<double>(c->type.shape[0]);
        const double n = static_cast<double>(c->type.shape[1]);
        const double k = static_cast<double>(std::max<int64_t>(op.extent, 0));
        const double flops = 2.0 * m * n * k;
        work.tensor_flops += flops;
        work.wgmma_flops += flops;
        if (shared_dtype_bytes(op.shared_b) == 1) work.wgmma_8bit_flops += flops;
        work.mma_ops += 1;
        segment.open_group_flops += flops;
        const double warpgroups = std::max(1.0, std::ceil(m / 64.0));
        const bool register_a = op.operands.size() >= 2;
        if (!register_a) work.shared_bytes += m * k * shared_dtype_bytes(op.shared);
        work.shared_bytes += warpgroups * k * n * shared_dtype_bytes(op.shared_b);
        segment.has_wgmma = true;
        return;
      }
      case OpKind::CtaIndex:
        return;
      case OpKind::TileFetch:
        work.sync_cycles += kTileFetchCycles;
        return;
      case OpKind::TileRead:
        work.shared_bytes += 4.0;  // one broadcast word
        work.sync_cycles += kMBarrierArriveCycles;
        return;
      case OpKind::StMatrix: {
        // stmatrix writes each element once (8x8 matrices, 16-byte rows: no replication).
        const Value value = op.operands.empty() ? nullptr : op.operands[0];
        if (value) {
          work.shared_bytes += static_cast<double>(value->type.element_count()) *
                               dtype_bytes(value->type.dtype);
        }
        return;
      }
    }
  }

  // The box bytes of a TmaLoad / TmaStore (matile::tma_box_bytes of its map).
  double tma_bytes(const Op& op) const {
    if (op.tma_map < 0 || op.tma_map >= static_cast<int>(kernel_.tma_maps.size())) return 0.0;
    return static_cast<double>(matile::tma_box_bytes(kernel_.tma_maps[static_cast<size_t>(op.tma_map)]));
  }

  // The element size of a shared window's allocation (16-bit when it is not known).
  double shared_dtype_bytes(const matile::SharedRef& ref) const {
    if (ref.alloc < 0 || ref.alloc >= static_cast<int>(kernel_.shared.size())) return 2.0;
    return dtype_bytes(kernel_.shared[static_cast<size_t>(ref.alloc)].dtype);
  }

  // The grid axes and loops a TMA copy's coordinates depend on.
  DepMask operand_deps(const Op& op) const {
    DepMask deps = 0;
    for (const Value& coordinate : op.operands) deps |= deps_of(coordinate);
    return deps;
  }

  // Wavefronts of the warp instructions, one per slot of `value`, whose lane `l` accesses the
  // element `element(l, slot)` of allocation `alloc`: warp 0's bank conflicts, counted exactly,
  // times the warps (the warps' accesses are alike); nullopt when an address is unusable. The
  // first kCountedScratchSlots slots are counted and the rest scaled from them: a thread's slots
  // repeat one access pattern along the tile, and a row of thousands of slots per thread (a
  // reduction over a 32000-wide vocabulary) made this count the search's largest cost.
  std::optional<double> counted_wavefronts(const Value& value, const matile::SharedAlloc& alloc,
                                           const std::function<int64_t(int64_t, int64_t)>& element,
                                           const matile::SharedReadPlan* plan = nullptr) const {
    // One warp instruction per slot, or per group of `plan` (each lane reading the group's
    // elements from its first one's address).
    const int64_t instructions = plan ? static_cast<int64_t>(plan->groups.size()) : value->layout.slots();
    const int bytes = dtype_bytes(alloc.dtype);
    const int64_t lanes_in_warp = std::min<int64_t>(kWarpSize, value->layout.threads());
    const int64_t counted_instructions = std::min(instructions, kCountedScratchSlots);
    double wavefronts = 0.0;
    std::vector<int64_t> addresses(static_cast<size_t>(lanes_in_warp));
    for (int64_t i = 0; i < counted_instructions; ++i) {
      const int64_t slot = plan ? plan->groups[static_cast<size_t>(i)].front() : i;
      const int width = plan ? static_cast<int>(plan->groups[static_cast<size_t>(i)].size()) : 1;
      for (int64_t lane = 0; lane < lanes_in_warp; ++lane) {
        addresses[static_cast<size_t>(lane)] = alloc.layout(element(lane, slot)) * bytes;
      }
      const auto counted = layout::count_bank_conflicts(addresses, bytes * width);
      if (!counted.ok()) return std::nullopt;
      wavefronts += static_cast<double>(counted->wavefronts);
    }
    if (counted_instructions > 0) {
      wavefronts *= static_cast<double>(instructions) / static_cast<double>(counted_instructions);
    }
    return wavefronts * kernel_.warps;
  }
  static constexpr int64_t kCountedScratchSlots = 128;

  // Wavefronts of the st.shared / ld.shared per slot that move `value` to or from the scratch
  // allocation `alloc` (flat in column-major order or with the tile's shape: either way element
  // i of the tile is the allocation's element i). Without a usable scratch, one conflict-free
  // wavefront per warp instruction.
  double scratch_wavefronts(const Value& value, int alloc_index) const {
    const double fallback = kernel_.warps * static_cast<double>(value->layout.slots()) *
                            std::max(1.0, kWarpSize * dtype_bytes(value->type.dtype) / 128.0);
    if (alloc_index < 0 || alloc_index >= static_cast<int>(kernel_.shared.size())) return fallback;
    const matile::SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(alloc_index)];
    return counted_wavefronts(value, alloc, [&](int64_t lane, int64_t slot) {
             return value->layout.tv.index(lane, slot);
           }).value_or(fallback);
  }

  // The ld.shared instructions a thread issues to read a packed int4 tile: runs of up to 32
  // elements (matile::consecutive_shared_run, as codegen packed_int4_shared_load reads them).
  int64_t packed_int4_reads(const Op& op) const {
    const Value& value = op.results[0];
    const int64_t slots = value->layout.slots();
    const int alloc_index = op.shared.alloc;
    if (alloc_index < 0 || alloc_index >= static_cast<int>(kernel_.shared.size())) return slots;
    const matile::SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(alloc_index)];
    const std::optional<std::vector<int64_t>> strides = matile::flat_shared_strides(alloc);
    if (!strides) return slots;
    int64_t reads = 0;
    for (int64_t v = 0; v < slots; ++reads) {
      v += matile::consecutive_shared_run(alloc, op.shared, *strides, value->layout, value->type.shape, v, 32,
                                          [](int64_t) { return true; });
    }
    return reads;
  }

  // Wavefronts of a shared load read element-wise, one warp instruction per group of `plan`
  // (each lane reading the group's bytes from its first element's address), at the load's
  // offsets in its allocation. Without a usable allocation, one wavefront per instruction.
  double element_read_wavefronts(const Op& op, const matile::SharedReadPlan& plan) const {
    const Value& value = op.results[0];
    const double fallback = kernel_.warps * static_cast<double>(plan.groups.size());
    const int alloc_index = op.shared.alloc;
    if (alloc_index < 0 || alloc_index >= static_cast<int>(kernel_.shared.size()) || op.shared.transposed) {
      return fallback;
    }
    const matile::SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(alloc_index)];
    const std::vector<int64_t>& shape = value->type.shape;
    if (alloc.shape.size() != shape.size() || op.shared.offsets.size() != shape.size()) return fallback;
    return counted_wavefronts(
               value, alloc,
               [&](int64_t lane, int64_t slot) {
                 // The element's coordinate in the value's tile, then its index in the allocation's.
                 int64_t index = value->layout.tv.index(lane, slot), at = 0, pitch = 1;
                 for (size_t d = 0; d < shape.size(); ++d) {
                   at += (index % shape[d] + op.shared.offsets[d]) * pitch;
                   index /= shape[d];
                   pitch *= alloc.shape[d];
                 }
                 return at;
               },
               &plan)
        .value_or(fallback);
  }

  static constexpr int64_t kWarpSize = matile::kWarpSize;

  const Kernel& kernel_;
  std::unordered_map<const ValueNode*, std::vector<const Op*>> users_;
  std::unordered_map<const ValueNode*, int> grid_axis_;
  std::unordered_map<const ValueNode*, DepMask> deps_;
  std::unordered_map<const ValueNode*, const Op*> def_;
  std::vector<Segment> segments_;
  std::vector<Access> accesses_;
  std::vector<RoleInfo> roles_;
  int next_loop_ = 0;
  std::vector<double> cta_trips_;
  size_t cta_trips_depth_ = 0;  // the nesting depth of the loops summed into cta_trips_
  std::unordered_set<const ValueNode*> loop_offsets_;  // see visit_For()
  // The walk's position: the segment of the ops being visited, the loops around them
  // (outermost first) and the loop before them in their region.
  size_t segment_ = 0;
  std::vector<LoopContext> loops_;
  const Op* previous_loop_ = nullptr;
};

// Step 2: every value of the grid axes `deps` (their extents' product).
double all_keys(const Kernel& kernel, DepMask deps) {
  double keys = 1.0;
  for (size_t i = 0; i < kernel.grid.size(); ++i) {
    if (i >= kGridBits || (deps & (DepMask{1} << i))) {
      keys *= static_cast<double>(std::max<int64_t>(kernel.grid[i].extent, 1));
    }
  }
  return keys;
}

// Step 2 for a kernel with a grouped tile order (core/support/launch_order.h): the distinct
// values of the grid axes `deps` summed over the full waves of `wave_size` CTAs and the tail of
// `tail` CTAs after them. The waves of a grouped order differ (a wave can straddle two bands),
// so each counts on its own; past kSampledWaves full waves, that many evenly spaced ones stand
// for all. Each CTA's grid point is computed in place (this runs for every candidate the
// search estimates in a tile order).
double distinct_keys_in_tile_order(const Kernel& kernel, DepMask deps, int64_t wave_size,
                                   int64_t full_waves, int64_t tail) {
  constexpr int64_t kSampledWaves = 8;
  const size_t axes = kernel.grid.size();
  std::vector<int64_t> extents;
  int64_t key_space = 1;
  for (size_t i = 0; i < axes; ++i) {
    extents.push_back(std::max<int64_t>(kernel.grid[i].extent, 1));
    if (i >= kGridBits || (deps & (DepMask{1} << i))) key_space *= extents.back();
  }
  const int64_t group = kernel.tile_group, x_extent = extents[0], y_extent = extents[1];
  const int64_t plane = x_extent * y_extent, band_size = group * x_extent;
  std::vector<int64_t> seen(static_cast<size_t>(key_space), -1);  // the last range a key was in
  int64_t range_id = 0;
  const auto count_range = [&](int64_t first, int64_t count) {
    int64_t distinct = 0;
    for (int64_t cta = first; cta < first + count; ++cta) {
      const int64_t in_plane = cta % plane;
      int64_t rest = cta / plane;
      const int64_t band = in_plane / band_size;
      const int64_t rows = std::min(group, y_extent - band * group);
      const int64_t in_band = in_plane - band * band_size;
      int64_t key = 0;
      for (size_t i = 0; i < axes; ++i) {
        int64_t coordinate;
        if (i == 0) {
          coordinate = in_band / rows;
        } else if (i == 1) {
          coordinate = band * group + in_band % rows;
        } else {
          coordinate = rest % extents[i];
          rest /= extents[i];
        }
        if (i < kGridBits && !(deps & (DepMask{1} << i))) continue;
        key = key * extents[i] + coordinate;
      }
      if (seen[static_cast<size_t>(key)] != range_id) {
        seen[static_cast<size_t>(key)] = range_id;
        ++distinct;
      }
    }
    ++range_id;
    return static_cast<double>(distinct);
  };
  double keys = 0.0;
  const int64_t sampled = std::min(full_waves, kSampledWaves);
  for (int64_t s = 0; s < sampled; ++s) {
    const int64_t wave = s * full_waves / sampled;
    keys += count_range(wave * wave_size, wave_size);
  }
  if (sampled > 0) keys *= static_cast<double>(full_waves) / static_cast<double>(sampled);
  if (tail > 0) keys += count_range(full_waves * wave_size, tail);
  return keys;
}

// Step 2: distinct values of the grid axes `deps` among the CTAs [first, first + count) in
// launch order (axis 0 fastest).
double distinct_keys(const Kernel& kernel, DepMask deps, int64_t first, int64_t count) {
  const size_t axes = kernel.grid.size();
  int fastest = -1;
  double key_space = 1.0;
  for (size_t i = 0; i < axes; ++i) {
    if (i < kGridBits && !(deps & (DepMask{1} << i))) continue;
    if (fastest < 0) fastest = static_cast<int>(i);
    key_space *= static_cast<double>(std::max<int64_t>(kernel.grid[i].extent, 1));
  }
  if (fastest < 0) return 1.0;
  // Every key is a function of q = id / stride(fastest); walk the q values of the range.
  int64_t stride = 1;
  for (int i = 0; i < fastest; ++i)
    stride *= std::max<int64_t>(kernel.grid[static_cast<size_t>(i)].extent, 1);
  const int64_t q_first = first / stride, q_last = (first + count - 1) / stride;
  const int64_t q_count = q_last - q_first + 1;
  // Long ranges (huge grids): at most one key per q value.
  if (q_count > (int64_t{1} << 16)) return std::min(key_space, static_cast<double>(q_count));
  std::vector<int64_t> keys;
  keys.reserve(static_cast<size_t>(std::min<int64_t>(q_count, 1 << 16)));
  for (int64_t q = q_first; q <= q_last; ++q) {
    int64_t rest = q, key = 0, scale = 1;
    for (size_t i = static_cast<size_t>(fastest); i < axes; ++i) {
      const int64_t e = std::max<int64_t>(kernel.grid[i].extent, 1);
      const int64_t coordinate = rest % e;
      rest /= e;
      if (i >= kGridBits || (deps & (DepMask{1} << i))) {
        key += coordinate * scale;
        scale *= e;
      }
    }
    keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  return static_cast<double>(std::unique(keys.begin(), keys.end()) - keys.begin());
}

struct Rates {  // per SM, per second
  double tensor = 0.0, alu = 0.0, special = 0.0, shared = 0.0, global_per_sm = 0.0;
  double wgmma = 0.0;  // the tensor cores fed by wgmma (sm_90a); mma.sync reaches `tensor`
  double int_weight = 1.0;  // FP32 lanes per INT32 lane: what an integer op costs on `alu`
};

struct PipeTime {
  double tensor = 0.0, alu = 0.0, special = 0.0, shared = 0.0, dram = 0.0, l2 = 0.0;

  double memory() const { return std::max(dram, l2); }
  // max + (1 - overlap) * (sum - max) over the compute pipes and the part of the memory system
  // the warps wait for; the asynchronous part (cp.async, a fraction of the reads) runs beside
  // them, so the result is at least that part alone.
  double combined(double overlap, double async_fraction = 0.0) const {
    const double waited = memory() * (1.0 - async_fraction);
    const double parts[] = {tensor, alu, special, shared, waited};
    double sum = 0.0, top = 0.0;
    for (double p : parts) {
      sum += p;
      top = std::max(top, p);
    }
    return std::max(top + (1.0 - overlap) * (sum - top), memory() * async_fraction);
  }
  std::string bound() const {
    const std::pair<double, const char*> parts[] = {{tensor, "tensor"},   {alu, "cuda-core"},
                                                    {special, "special"}, {shared, "shared"},
                                                    {dram, "dram"},       {l2, "l2"}};
    const std::pair<double, const char*>* top = &parts[0];
    for (const auto& part : parts) {
      if (part.first > top->first) top = &part;
    }
    return top->second;
  }
};

// Each role's ring loops: the loops of its body (at any depth) that wait on an mbarrier, load by
// TMA or issue wgmma, those with the most executions and any others of the same nesting (the
// two halves of a loop split_masked_loops split); empty for a role without one.
std::vector<std::vector<const Segment*>> ring_loops(const std::vector<Segment>& segments, size_t roles) {
  std::vector<std::vector<const Segment*>> ring(roles);
  std::vector<const Segment*> best(roles, nullptr);
  const auto in_ring = [](const Segment& segment) {
    return segment.loop && (segment.mbarrier_waits > 0 || segment.tma_read_bytes > 0 || segment.has_wgmma);
  };
  for (const Segment& segment : segments) {
    if (segment.role < 0 || static_cast<size_t>(segment.role) >= roles || !in_ring(segment)) continue;
    const Segment*& top = best[static_cast<size_t>(segment.role)];
    if (!top || segment.executions > top->executions) top = &segment;
  }
  for (const Segment& segment : segments) {
    if (segment.role < 0 || static_cast<size_t>(segment.role) >= roles || !in_ring(segment)) continue;
    const Segment* top = best[static_cast<size_t>(segment.role)];
    if (&segment == top || segment.depth == top->depth) ring[static_cast<size_t>(segment.role)].push_back(&segment);
  }
  return ring;
}

// The ring loops of a warp-specialized kernel, one CTA (estimate_kernel explains the rule).
struct RingTime {
  double seconds = 0.0;     // iterations x period + fill
  double period = 0.0;      // one ring iteration
  double fill = 0.0;        // the first stage's copy
  double iterations = 0.0;  // the longest ring loop's executions per CTA
  int stages = 0;           // the ring's depth (the TMA destinations' allocation stages)
};

// `consumer_warps_per_scheduler`: the consumers' warps on each scheduler of an SM, over the
// CTAs resident there (1 for one consumer warpgroup and one CTA per SM).
template <class Pipes, class Sync>
RingTime ws_ring(const std::vector<std::vector<const Segment*>>& ring, const Pipes& pipes,
                 const Sync& sync, double latency, double cta_bandwidth,
                 double consumer_warps_per_scheduler) {
  RingTime r;
  for (const std::vector<const Segment*>& loops : ring) {
    double executions = 0.0;
    for (const Segment* segment : loops) executions += segment->executions;
    r.iterations = std::max(r.iterations, executions);
  }
  if (r.iterations <= 0.0) return r;
  Work mma;
  double bytes = 0.0, producer = 0.0, consumer = 0.0;
  // Global loads a consumer issues in its iteration before its MMAs (a global_load of a tile TMA
  // does not copy, feeding the A operand): each iteration waits their round trip before its
  // wgmma, however deep the ring. Loads after the wgmma issue overlap with the MMAs.
  double synchronous_bytes = 0.0;
  int lag = 0;
  bool waits_inside = false;  // a consumer waits for its own MMAs within the iteration
  double overlapped_flops = 0.0;  // of the consumers' wgmma flops, those that run beside the rest
  for (const std::vector<const Segment*>& loops : ring) for (const Segment* segment : loops) {
    // A loop with a peeled first iteration runs fewer times: its work per ring iteration.
    const double share = segment->executions / r.iterations;
    mma.add(segment->work, share);
    bytes += segment->async_read_bytes * share;
    synchronous_bytes = std::max(synchronous_bytes, segment->reads_before_wgmma * share);
    const double handoff = sync(segment->work) * share;
    if (segment->tma_read_bytes > 0) {
      producer = std::max(producer, handoff);
      r.stages = r.stages > 0 ? std::min(r.stages, segment->ring_stages) : segment->ring_stages;
    } else {
      consumer = std::max(consumer, handoff);
    }
    lag = std::max(lag, segment->release_lag);
    waits_inside = waits_inside || (segment->has_wgmma && segment->release_lag == 0);
    overlapped_flops += segment->overlapped_wgmma_flops * share;
  }
  // A consumer that reads its MMAs' results inside the iteration (attention's scores feed the
  // softmax) runs them and its element-wise work one after the other: measured on the H100
  // (2026-11-26, two consumer warpgroups, d 64..256), an iteration takes the sum of the pipes,
  // not their maximum: the tensor cores', the ALUs' and the SFUs' (the operands' shared reads
  // belong to the MMAs).
  // With overlap=1 the MMAs left in flight across the wait inside the iteration (P·V) run
  // beside the element-wise work: the iteration takes the waited MMAs, then the longer of the
  // rest. With fewer than two consumer warps per scheduler that work issues at a lone warp's
  // rate (kLoneConsumerWarpIssueRate).
  const auto t = pipes(mma, 1.0);
  double m = t.combined(1.0);
  if (waits_inside) {
    const double late = mma.wgmma_flops > 0.0 ? t.tensor * std::min(1.0, overlapped_flops / mma.wgmma_flops) : 0.0;
    const double issue_rate =
        consumer_warps_per_scheduler >= 2.0
            ? 1.0
            : kLoneConsumerWarpIssueRate +
                  (1.0 - kLoneConsumerWarpIssueRate) * std::max(0.0, consumer_warps_per_scheduler - 1.0);
    m = std::max(m, t.tensor - late + std::max(late, (t.alu + t.special) / issue_rate));
  }
  const double copy = bytes > 0.0 ? latency + bytes / cta_bandwidth : 0.0;
  const double depth = std::max(1, r.stages);
  // A consumer that keeps a wgmma group in flight waits, releases and issues while the
  // previous group runs; one that waits for each group (wait_group 0) adds its handoff.
  const double synchronous = synchronous_bytes > 0.0 ? latency + synchronous_bytes / cta_bandwidth : 0.0;
  const double consumer_step = (lag >= 1 ? std::max(m, consumer) : m + consumer) + synchronous;
  r.period = std::max({consumer_step, producer, (copy + m + producer + consumer) / depth});
  r.fill = copy;
  r.seconds = r.iterations * r.period + r.fill;
  return r;
}

std::string kilobytes(double bytes) {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << bytes / 1024.0 << " KB";
  return out.str();
}

// When each CTA starts, in launch order, on the SM slot that frees first (the block
// scheduler), the time until the last one ends.
double makespan(const std::vector<double>& durations, int64_t slots) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int64_t i = 0; i < std::max<int64_t>(slots, 1); ++i) free_at.push(0.0);
  double end = 0.0;
  for (double duration : durations) {
    const double finish = free_at.top() + duration;
    free_at.pop();
    free_at.push(finish);
    end = std::max(end, finish);
  }
  return end;
}

// How much longer CTAs of different lengths take than the same work split evenly: list-schedules
// the CTAs (duration: their trips plus the loop-free prologue and epilogue, counted as
// kFixedTrips) on sms x per_sm slots, against the same CTAs all of the average length. The
// excess is the tail, where the long CTAs run with fewer neighbours on their SM and so up to
// per_sm times faster: it is divided by per_sm. Causal attention's last query tiles run 2x the
// average; measured on the H100 (ncu), the busiest SM is active 23% longer than the average one
// for 128-row tiles, 10% for 64-row tiles. Below a wave the makespan is the longest CTA's, so
// skipping masked tiles saves only what the shorter CTAs free for the longer ones.
double imbalance(const std::vector<double>& trips, int64_t sms, int64_t per_sm) {
  if (trips.empty()) return 1.0;
  constexpr double kFixedTrips = 1.0;
  std::vector<double> durations(trips.size());
  double total = 0.0;
  for (size_t i = 0; i < trips.size(); ++i) {
    durations[i] = trips[i] + kFixedTrips;
    total += durations[i];
  }
  const int64_t slots = sms * std::max<int64_t>(per_sm, 1);
  const std::vector<double> even(trips.size(), total / static_cast<double>(trips.size()));
  const double balanced = makespan(even, slots);
  if (balanced <= 0.0) return 1.0;
  const double excess = std::max(0.0, makespan(durations, slots) - balanced);
  return 1.0 + excess / static_cast<double>(std::max<int64_t>(per_sm, 1)) / balanced;
}

// Persistent CTAs with the static scheduler (persistent(..., scheduler=static)): the CTA launched
// c-th of `launched` runs tiles c, c + launched, ... back to back, whatever their lengths (`trips`
// per tile in launch order, plus kFixedTrips each as in imbalance()). Gives the walk's balance
// factor against the same tiles spread evenly (the same form as imbalance(), whose list
// schedule is what the dynamic scheduler and one CTA per tile both do), and its drift: the
// launch indices the CTAs work on half-way through span `window` tiles instead of `launched`,
// since CTAs whose tiles were short run ahead. Causal attention with 128 query tiles per head on
// 132 CTAs drifts over many heads at once, and K and V of those heads no longer fit in L2
// (measured on the H100: long causal rows 42% slower persistent than one CTA per tile,
// bench/NOTES.md 2026-11-27).
struct StaticTileWalk {
  double imbalance = 1.0;
  double window = 0.0;
};
StaticTileWalk static_tile_walk(const std::vector<double>& trips, int64_t launched, int64_t per_sm) {
  StaticTileWalk walk;
  walk.window = static_cast<double>(launched);
  if (trips.empty() || launched < 1) return walk;
  constexpr double kFixedTrips = 1.0;
  const size_t ctas = static_cast<size_t>(std::min<int64_t>(launched, static_cast<int64_t>(trips.size())));
  std::vector<double> ends(ctas, 0.0);
  double total = 0.0;
  for (size_t t = 0; t < trips.size(); ++t) {
    ends[t % ctas] += trips[t] + kFixedTrips;
    total += trips[t] + kFixedTrips;
  }
  const double makespan = *std::max_element(ends.begin(), ends.end());
  const double balanced = total / static_cast<double>(ctas);
  if (balanced <= 0.0) return walk;
  walk.imbalance = 1.0 + std::max(0.0, makespan - balanced) / static_cast<double>(std::max<int64_t>(per_sm, 1)) / balanced;
  // Half-way: each running CTA's tile (its launch index), the spread between the first and last.
  const double half = makespan / 2.0;
  int64_t lowest = std::numeric_limits<int64_t>::max(), highest = -1;
  for (size_t c = 0; c < ctas; ++c) {
    double start = 0.0;
    for (size_t t = c; t < trips.size(); t += ctas) {
      const double end = start + trips[t] + kFixedTrips;
      if (start <= half && half < end) {
        lowest = std::min(lowest, static_cast<int64_t>(t));
        highest = std::max(highest, static_cast<int64_t>(t));
        break;
      }
      start = end;
    }
  }
  if (highest >= lowest) walk.window = std::max(walk.window, static_cast<double>(highest - lowest + 1));
  return walk;
}

class AnalyticalModel : public CostModel {
 public:
  explicit AnalyticalModel(DeviceModel device) : device_(std::move(device)) {}

  std::string name() const override { return "analytical " + device_.arch; }
  const DeviceModel& device() const override { return device_; }

  CostEstimate estimate(const matile::Module& module) const override {
    CostEstimate estimate;
    estimate.module = module.name;
    estimate.model = name();
    for (const matile::KernelPtr& kernel : module.kernels) {
      if (!kernel) continue;
      KernelCost cost;
      std::string reason;
      if (!estimate_kernel(*kernel, &cost, &reason)) {
        estimate.feasible = false;
        if (estimate.infeasible_reason.empty()) estimate.infeasible_reason = reason;
      }
      estimate.microseconds += cost.microseconds;
      estimate.kernels.push_back(std::move(cost));
    }
    if (!estimate.feasible) estimate.microseconds = std::numeric_limits<double>::infinity();
    return estimate;
  }

 private:
  Rates rates() const {
    const double sms = std::max(device_.sm_count, 1);
    const double clock = device_.clock_ghz * 1e9;
    Rates r;
    r.tensor = device_.tensor_tflops_16bit * 1e12 / sms;
    // wgmma reaches the data-sheet peak; mma.sync only about two thirds of it on an H100
    // (device_models.cpp). A device without wgmma never runs one (estimate_kernel refuses).
    r.wgmma = (device_.wgmma_tensor_tflops_16bit > 0 ? device_.wgmma_tensor_tflops_16bit
                                                     : device_.tensor_tflops_16bit) *
              1e12 / sms;
    r.alu = device_.cuda_core_tflops_f32 * 1e12 / 2.0 / sms;
    if (device_.int32_lanes_per_sm > 0 && clock > 0) {
      r.int_weight = std::max(1.0, r.alu / clock / device_.int32_lanes_per_sm);
    }
    r.special = device_.sfu_ops_per_clock_per_sm * clock;
    r.shared = device_.shared_bytes_per_clock_per_sm * clock;
    r.global_per_sm = device_.global_bytes_per_clock_per_sm > 0
                          ? device_.global_bytes_per_clock_per_sm * clock
                          : std::numeric_limits<double>::infinity();
    return r;
  }

  // Step 3: CTAs per SM, or 0 with the reason.
  // `role_registers`: a warp-specialized kernel's registers per CTA from its roles' setmaxnreg
  // budgets (0: from the estimate `registers` per thread).
  int occupancy(const Kernel& kernel, int registers, std::string* reason,
                int64_t role_registers = 0) const {
    const int64_t threads = kernel.threads();
    const std::string name = "kernel " + kernel.name;
    if (threads > device_.max_threads_per_cta) {
      *reason = name + " uses " + std::to_string(threads) + " threads per CTA (" +
                std::to_string(kernel.warps) + " warps), limit " +
                std::to_string(device_.max_threads_per_cta);
      return 0;
    }
    if (kernel.shared_bytes > device_.shared_bytes_per_cta_max) {
      *reason = name + " needs " + std::to_string(kernel.shared_bytes) + " bytes (" +
                kilobytes(static_cast<double>(kernel.shared_bytes)) +
                ") of shared memory per CTA, limit " +
                std::to_string(device_.shared_bytes_per_cta_max) + " (" +
                kilobytes(device_.shared_bytes_per_cta_max) + ") on " + device_.name;
      return 0;
    }
    const int allocated = std::min(registers, device_.max_registers_per_thread);
    const int64_t per_thread = (allocated + 7) / 8 * 8;
    const int64_t per_warp = (per_thread * matile::kWarpSize + 255) / 256 * 256;
    const int64_t per_cta = role_registers > 0 ? role_registers : per_warp * kernel.warps;
    if (per_cta > device_.registers_per_sm) {
      *reason = name + " needs about " + std::to_string(allocated) + " registers x " +
                std::to_string(threads) + " threads = " + std::to_string(per_cta) +
                " registers per CTA, the SM has " + std::to_string(device_.registers_per_sm);
      return 0;
    }
    int64_t ctas = device_.max_ctas_per_sm > 0 ? device_.max_ctas_per_sm : 32;
    ctas = std::min<int64_t>(ctas, device_.registers_per_sm / std::max<int64_t>(per_cta, 1));
    ctas = std::min<int64_t>(ctas, device_.max_threads_per_sm / std::max<int64_t>(threads, 1));
    if (kernel.shared_bytes > 0) {
      ctas = std::min<int64_t>(ctas,
                               device_.shared_bytes_per_sm /
                                   (kernel.shared_bytes + device_.shared_bytes_reserved_per_cta));
    }
    if (ctas <= 0) {
      *reason = name + " does not fit on an SM (" + std::to_string(kernel.shared_bytes) +
                " bytes of shared memory, " + std::to_string(threads) + " threads)";
      return 0;
    }
    return static_cast<int>(ctas);
  }

  bool estimate_kernel(const Kernel& kernel, KernelCost* cost, std::string* reason) const {
    cost->kernel = kernel.name;
    cost->warps = kernel.warps;
    cost->shared_bytes_per_cta = static_cast<int>(kernel.shared_bytes);
    double ctas = 1.0;
    for (const matile::GridAxis& axis : kernel.grid)
      ctas *= static_cast<double>(std::max<int64_t>(axis.extent, 1));
    cost->ctas = static_cast<long long>(ctas);

    WorkWalk walk(kernel);
    walk.run();
    std::vector<Segment> segments = walk.segments();
    const std::vector<RoleInfo>& roles = walk.roles();

    // Warp specialization: the registers a CTA holds are its roles' setmaxnreg budgets (the
    // kernel launches with their average per thread and each warpgroup then takes its own), not
    // the liveness estimate, which would add up the roles' values as if one thread held them.
    int registers = estimate_registers_per_thread(kernel);
    int64_t role_registers = 0;
    if (!roles.empty()) {
      int warpgroups = 0;
      for (const RoleInfo& role : roles) {
        warpgroups += role.warpgroups;
        role_registers += int64_t{role.warpgroups} * role.max_registers * matile::kWarpgroupThreads;
      }
      if (warpgroups > 0 && role_registers > 0) {
        registers = static_cast<int>(role_registers / (int64_t{warpgroups} * matile::kWarpgroupThreads));
      } else {
        role_registers = 0;
      }
    }
    cost->registers_per_thread = registers;
    bool hopper = false;
    if (kernel.body) {
      matile::for_each_op(*kernel.body,
                          [&](const Op& op) { hopper = hopper || matile::is_hopper(op.kind); });
    }
    int per_sm = 0;
    if (hopper && device_.wgmma_tensor_tflops_16bit <= 0) {
      *reason = "kernel " + kernel.name + " uses Hopper's asynchronous ops (wgmma, TMA, mbarriers: " +
                "sm_90a), which " + device_.name + " (" + device_.arch + ") does not have";
    } else {
      per_sm = occupancy(kernel, registers, reason, role_registers);
    }
    // The ring of a warp-specialized kernel (see ws_ring below) must hold one stage more than
    // the wgmma groups a consumer keeps in flight when it releases one; otherwise the producer
    // waits for a stage the consumer frees only after the next stage arrives: a deadlock.
    if (per_sm > 0 && !roles.empty()) {
      for (const Segment& segment : segments) {
        if (segment.role >= 0 && segment.ring_stages > 0) {
          int lag = 0;
          for (const Segment& other : segments) {
            if (other.role >= 0 && other.loop) lag = std::max(lag, other.release_lag);
          }
          if (segment.ring_stages <= lag) {
            *reason = "kernel " + kernel.name + " deadlocks: its consumers keep " +
                      std::to_string(lag) + " wgmma group" + (lag == 1 ? "" : "s") +
                      " in flight (wgmma.wait_group " + std::to_string(lag) +
                      ") before releasing a stage, so its " + std::to_string(segment.ring_stages) +
                      "-stage ring needs at least " + std::to_string(lag + 1) + " stages";
            per_sm = 0;
          }
          break;
        }
      }
    }
    cost->ctas_per_sm = per_sm;
    // Registers past 255 spill to local memory (through L1, the shared pipe): per innermost
    // loop iteration each spilled register is stored once and reloaded once, and once more for
    // each MMA k step of the iteration (in an MMA loop the values that do not fit are
    // accumulator and operand fragments, which every k step uses).
    // Past kLocalArrayFactor x 255 the tiles are local arrays: every segment, the kernel body
    // too, moves them through L2 (charged as shared bytes scaled by kLocalMemorySlowdown).
    if (roles.empty() && registers > device_.max_registers_per_thread) {
      const double spilled = registers - device_.max_registers_per_thread;
      const bool local_arrays =
          registers > kLocalArrayFactor * device_.max_registers_per_thread;
      for (Segment& segment : segments) {
        if (segment.innermost && (local_arrays || &segment != &segments.front())) {
          segment.work.shared_bytes += (2.0 + segment.work.mma_ops) * spilled * 4.0 *
                                       static_cast<double>(kernel.threads()) *
                                       (local_arrays ? kLocalMemorySlowdown : 1.0);
        }
      }
    }
    // A warp-specialized kernel's roles run under their setmaxnreg budgets: a role whose values
    // need more registers than its budget spills, charged as above on the role's own segments.
    // A GEMM whose epilogue reads another f32 tile of the accumulator's size (a GeGLU / SwiGLU
    // gate fused into the up projection) holds both per consumer thread: a 128 x 256 tile needs
    // 128 registers for each, past the consumers' 232, and ptxas spills it.
    if (!roles.empty()) {
      const std::vector<int> needed = estimate_role_registers(kernel);
      for (size_t r = 0; r < roles.size() && r < needed.size(); ++r) {
        const int budget = roles[r].max_registers;
        if (budget <= 0 || needed[r] <= budget) continue;
        const double spilled = needed[r] - budget;
        const double threads = double{1} * roles[r].warpgroups * matile::kWarpgroupThreads;
        for (Segment& segment : segments) {
          if (segment.role != static_cast<int>(r)) continue;
          segment.work.shared_bytes += (2.0 + segment.work.mma_ops) * spilled * 4.0 * threads;
        }
      }
    }
    Work total;
    for (const Segment& segment : segments) total.add(segment.work, segment.executions);
    cost->tensor_flops = total.tensor_flops * ctas;
    cost->cuda_core_flops = total.float_flops * ctas;
    cost->special_ops = total.special_ops * ctas;
    cost->shared_bytes = total.shared_bytes * ctas;
    cost->wgmma_flops = total.wgmma_flops * ctas;
    for (const Segment& segment : segments) {
      cost->tma_bytes +=
          (segment.tma_read_bytes + segment.tma_write_bytes) * segment.executions * ctas;
    }
    for (const RoleInfo& role : roles) {
      if (!cost->roles.empty()) cost->roles += ", ";
      cost->roles += role.name + " " + std::to_string(role.warpgroups) + " WG x " +
                     std::to_string(role.max_registers) + " regs";
    }
    if (per_sm == 0) return false;

    // Waves: full ones of sm_count x per_sm CTAs, then the tail.
    const double sms = std::max(device_.sm_count, 1);
    const double wave_size = sms * per_sm;
    const double full_waves = std::floor(ctas / wave_size);
    const double tail = ctas - full_waves * wave_size;
    cost->waves = full_waves + tail / wave_size;
    // Persistent CTAs walking their tiles statically drift apart on tiles of unequal length
    // (static_tile_walk): the tiles in flight at once spread over `drift_window` launch indices.
    // The dynamic scheduler starts tiles in launch order, as one CTA per tile does.
    const bool static_walk = kernel.persistent && !kernel.dynamic_tiles && !walk.cta_trips().empty();
    const StaticTileWalk walked =
        static_walk ? static_tile_walk(walk.cta_trips(), static_cast<int64_t>(std::min(ctas, wave_size)),
                                       static_cast<int64_t>(per_sm))
                    : StaticTileWalk{};
    const double drift_window = static_walk ? walked.window : wave_size;

    // Step 2: DRAM and L2 bytes. Reads are taken smallest footprint first: those that fit in
    // L2 together stay resident and come from DRAM once per kernel (the activations of a GEMM
    // whose weights stream past them); the rest stream, and each wave reads from DRAM the
    // tiles its CTAs touch.
    double read_requests = 0.0, write_bytes = 0.0, write_requests = 0.0, reread_dram = 0.0;
    std::vector<std::pair<double, const Access*>> footprints;  // (whole-kernel bytes, access)
    const std::vector<Access>& accesses = walk.accesses();
    // A CTA that reads the part of a buffer it already read (a row's statistics, then the row
    // again for the output in the same CTA) finds it in L2 as long as the parts of all CTAs
    // running at once fit there; the share that does not fit is evicted before the re-read.
    const double concurrent_ctas = std::min(ctas, sms * per_sm);
    double cta_bytes = 0.0;  // every byte one CTA reads or writes
    for (const Access& access : walk.accesses()) cta_bytes += access.bytes * access.executions;
    const auto reread_hit = [&](size_t index) -> std::optional<double> {
      const Access& access = accesses[index];
      if (!access.buffer) return std::nullopt;
      // The earlier reads of the buffer at the same grid point (a rolling loop split into its
      // unmasked and masked halves reads a row in two accesses) must cover as many bytes.
      const double part = access.bytes * access.distinct;
      double earlier_parts = 0.0;
      for (size_t j = 0; j < index; ++j) {
        const Access& earlier = accesses[j];
        if (earlier.write || earlier.buffer != access.buffer) continue;
        if ((earlier.deps & kGridMask) != (access.deps & kGridMask)) continue;
        earlier_parts += earlier.bytes * earlier.distinct;
      }
      if (part <= 0 || earlier_parts < 0.99 * part) return std::nullopt;
      // Between the two passes the other CTAs stream their own reads and writes through L2
      // too: the working set is everything the CTAs running at once move, not only the rows
      // they re-read. Measured (H100, log-softmax of 8192 x 32000 bf16 -> f32, one CTA per
      // row, 8 warps): DRAM read 1.05 GB for a 0.52 GB input, an L2 hit rate of 53%: the
      // second pass came from DRAM, where rows alone (52 MB at once) would have fitted.
      const double working_set = concurrent_ctas * cta_bytes;
      return std::min(1.0, device_.l2_bytes / working_set);
    };
    for (size_t i = 0; i < accesses.size(); ++i) {
      const Access& access = accesses[i];
      if (access.write) {
        write_bytes += access.bytes * access.executions * ctas;
        write_requests += (access.l2_bytes >= 0.0 ? access.l2_bytes : access.bytes) * access.executions * ctas;
        continue;
      }
      read_requests += (access.l2_bytes >= 0.0 ? access.l2_bytes : access.bytes) * access.executions * ctas;
      const double footprint =
          access.bytes * access.distinct * all_keys(kernel, access.deps & kGridMask);
      if (const std::optional<double> hit = reread_hit(i)) {
        reread_dram += footprint * (1.0 - *hit);
        continue;
      }
      footprints.emplace_back(footprint, &access);
    }
    std::stable_sort(footprints.begin(), footprints.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    double dram_reads = reread_dram, resident = 0.0;
    for (const auto& [footprint, access] : footprints) {
      if (resident + footprint <= kL2ResidentFraction * device_.l2_bytes) {
        resident += footprint;
        dram_reads += footprint;
        continue;
      }
      const DepMask deps = access->deps & kGridMask;
      double keys = 0.0;
      if (kernel.tile_group > 1 && kernel.grid.size() >= 2 &&
          all_keys(kernel, deps) <= kMaxListedCtas) {
        // Counts the tail's keys too.
        keys = distinct_keys_in_tile_order(kernel, deps, static_cast<int64_t>(wave_size),
                                           static_cast<int64_t>(full_waves),
                                           static_cast<int64_t>(tail));
      } else {
        if (full_waves > 0 && drift_window > wave_size) {
          // The wave's tiles spread over the drift window: as many distinct keys as the window
          // holds, up to one per CTA.
          keys += full_waves * std::min(wave_size, distinct_keys(kernel, deps, 0, static_cast<int64_t>(drift_window)));
        } else if (full_waves > 0) {
          keys += full_waves * distinct_keys(kernel, deps, 0, static_cast<int64_t>(wave_size));
        }
        if (tail > 0) {
          keys += distinct_keys(kernel, deps, static_cast<int64_t>(full_waves * wave_size),
                                static_cast<int64_t>(tail));
        }
      }
      dram_reads += access->bytes * access->distinct * keys;
    }
    dram_reads = std::min(dram_reads, read_requests);
    cost->global_bytes = dram_reads + write_bytes;
    // L2 traffic: every request, plus the fill of every read that missed (the line DRAM
    // returns is written into L2 before the request is served). The fills are the L2 reuse
    // term: a launch order whose waves share more operand tiles (a grouped tile order) misses
    // less and moves fewer bytes through L2 as well as through DRAM.
    cost->l2_bytes = read_requests + write_requests + dram_reads;
    const double dram_fraction = read_requests > 0 ? dram_reads / read_requests : 0.0;

    // Step 4: the waves.
    const Rates rate = rates();
    const double dram_rate = device_.dram_bytes_per_s * device_.dram_efficiency;
    const double latency =
        (dram_fraction * device_.dram_latency_ns + (1.0 - dram_fraction) * device_.l2_latency_ns) *
        1e-9;
    const double schedulers = std::max(device_.schedulers_per_sm, 1);
    // Independent instruction streams per scheduler: every resident warp, unless a loop body
    // has a CTA-wide barrier; then the CTA's warps pass the iteration's phases together (all
    // in the first MMA, then all in the softmax, ...) and a CTA counts as one stream on each
    // scheduler it has warps on.
    bool barrier_in_loop = false;
    for (size_t i = 1; i < segments.size(); ++i) {
      barrier_in_loop = barrier_in_loop || segments[i].work.barriers > 0;
    }
    // A warp-specialized kernel's roles are independent instruction streams, and its wgmma
    // and TMA copies run beside the warps that issued them: its pipes overlap fully.
    const bool specialized = !roles.empty();
    auto overlap_for = [&](double resident_ctas) {
      if (specialized) return 1.0;
      const double warps_per_scheduler = resident_ctas * kernel.warps / schedulers;
      const double streams =
          barrier_in_loop ? resident_ctas * std::min(1.0, warps_per_scheduler / resident_ctas)
                          : warps_per_scheduler;
      return std::min(barrier_in_loop ? kMaxOverlap : 1.0, streams / kWarpsPerSchedulerToOverlap);
    };
    // A warp issues on one scheduler, and each scheduler has its own quarter of the SM's tensor
    // cores, FP32 lanes and MUFUs: k CTAs of fewer warps than schedulers reach only that share
    // of the SM's math rates (a decode kernel of 2 warps, one CTA per SM: half). Shared memory
    // is one pipe for the whole SM.
    auto compute_pipes = [&](const Work& work, double k) {
      const double share = specialized ? 1.0 : std::min(1.0, k * kernel.warps / schedulers);
      PipeTime t;
      t.tensor = (k * (work.tensor_flops - work.wgmma_flops) / rate.tensor +
                  k * (work.wgmma_flops - work.wgmma_8bit_flops) / rate.wgmma +
                  k * work.wgmma_8bit_flops / (rate.wgmma * kEightBitWgmmaSpeedup)) / share;
      t.alu = k * (work.alu_ops + work.int_ops * rate.int_weight) / rate.alu / share;
      t.special = k * work.special_ops / rate.special / share;
      t.shared = k * work.shared_bytes / rate.shared;
      return t;
    };
    double reads = 0.0, async_reads = 0.0;
    for (const Segment& segment : segments) {
      reads += segment.read_bytes * segment.executions;
      async_reads += segment.async_read_bytes * segment.executions;
    }
    const double async_fraction = reads > 0 ? async_reads / reads : 0.0;
    const double barrier_seconds = kBarrierCycles / (device_.clock_ghz * 1e9);
    const double cycle_seconds = 1.0 / (device_.clock_ghz * 1e9);
    const double store_wait_seconds = device_.l2_latency_ns * 1e-9;
    // The fixed latencies of a region's synchronizing ops (Hopper's; zero elsewhere).
    auto sync_time = [&](const Work& work) {
      return work.sync_cycles * cycle_seconds + work.store_waits * store_wait_seconds;
    };
    struct Wave {
      double seconds = 0.0;
      PipeTime pipes;
      double chain = 0.0;
      RingTime ring;
    };
    // k CTAs on each of active_sms SMs; the hardware spreads them over spread_sms (one per SM
    // first), which sets the DRAM bandwidth the wave reaches.
    auto wave = [&](double k, double active_sms, double spread_sms) {
      Wave w;
      w.pipes = compute_pipes(total, k);
      // A wave on fewer SMs than the device has reaches less than the chip's DRAM bandwidth,
      // though more than its SMs' proportion of it: fewer streams keep fewer requests in flight.
      // Measured on the H200 (bench/microbench/dram_runs.cu, 2026-11-29): 128-row stages of
      // int8 column bands streamed at 3991 GB/s on 132 SMs, 3600 on 112 and 2236-2694 on 56,
      // which (active / SMs)^0.6 follows (0.91 and 0.60 where 0.90 and 0.56-0.68 were measured).
      const double reach = spread_sms < sms ? std::pow(spread_sms / sms, kDramReachExponent) : 1.0;
      const double dram_share = dram_rate * reach / active_sms;
      const double l2_share = std::min(device_.l2_bytes_per_s / active_sms, rate.global_per_sm);
      w.pipes.dram = k * (cost->global_bytes / ctas) / dram_share;
      w.pipes.l2 = k * (cost->l2_bytes / ctas) / l2_share;
      const double throughput = w.pipes.combined(overlap_for(k), async_fraction);
      // One CTA's chain: each region's math, and its reads' latency plus transfer at the CTA's
      // share of the SM's bandwidth (DRAM-limited when the reads miss L2).
      double cta_bandwidth = l2_share;
      if (dram_fraction > 0) cta_bandwidth = std::min(cta_bandwidth, dram_share / dram_fraction);
      cta_bandwidth /= k;
      const double single_overlap = overlap_for(1.0);
      // Per role: the time of its regions outside the ring (its prologue and epilogue).
      std::vector<double> role_time(roles.size(), 0.0);
      std::vector<std::vector<const Segment*>> ring;  // each role's ring loops (see below)
      if (specialized) ring = ring_loops(segments, roles.size());
      for (const Segment& segment : segments) {
        if (segment.role >= 0) {
          const std::vector<const Segment*>& loops = ring[static_cast<size_t>(segment.role)];
          if (std::find(loops.begin(), loops.end(), &segment) != loops.end()) continue;
        }
        const double math = compute_pipes(segment.work, 1.0).combined(single_overlap);
        double time = math + segment.work.barriers * barrier_seconds + sync_time(segment.work);
        if (segment.read_bytes > 0) {
          // A loop whose TMA loads fill a ring of allocation stages is pipelined that deep.
          const int stages = std::max(segment.stages, segment.ring_stages);
          const double copy = latency + segment.read_bytes / cta_bandwidth;
          time = stages >= 2 ? std::max(math, copy / (stages - 1)) : math + copy;
        }
        if (segment.role >= 0) {
          role_time[static_cast<size_t>(segment.role)] += segment.executions * time;
        } else {
          w.chain += segment.executions * time;
        }
      }
      if (specialized) {
        // Warp specialization. The producer's loop and the consumers' loops exchange the
        // stages of one ring (full / empty mbarriers): they advance together, one stage per
        // period, so the ring loops take one time and each role adds its own prologue and
        // epilogue around it (the slowest role's). Per ring iteration, with the work of every
        // role's ring loop (one CTA, the SM to itself):
        //   mma      the consumers' pipes (wgmma at the wgmma rate, its shared operand reads,
        //            the TMA writes), overlapped: the tensor cores run beside the issuing warps;
        //   copy     the producer's boxes in flight: latency + bytes at the CTA's bandwidth;
        //   handoff  the fixed latencies of the mbarrier waits and arrives, fences and issues
        //            of one iteration of the producer and of the slowest consumer;
        //   period   max(mma (+ the consumer's handoff when it waits for each wgmma), the
        //            producer's issue, (copy + mma + handoff) / stages): a stage is busy from
        //            its load's issue until the wgmma reading it retires, and the ring holds
        //            `stages` of them at once. So a deep ring hides the copy and the handoffs
        //            behind the MMAs (time = max(copy, MMA)) and a shallow one adds them up.
        // Plus, once per CTA, the pipeline fill: the first stage's copy, which nothing hides.
        // The consumers: the roles whose ring loops issue no TMA copy.
        int consumer_warpgroups = 0;
        for (size_t role = 0; role < roles.size(); ++role) {
          const bool copies = std::any_of(ring[role].begin(), ring[role].end(),
                                          [](const Segment* loop) { return loop->tma_read_bytes > 0; });
          if (!copies) consumer_warpgroups += roles[role].warpgroups;
        }
        const double consumer_warps_per_scheduler =
            k * consumer_warpgroups * (matile::kWarpgroupThreads / 32) / schedulers;
        const RingTime r = ws_ring(ring, compute_pipes, sync_time, latency, cta_bandwidth,
                                   consumer_warps_per_scheduler);
        w.ring = r;
        double roles_time = 0.0;
        for (double t : role_time) roles_time = std::max(roles_time, t);
        // Persistent CTAs: the producer fills the ring for the next tile while the consumers
        // finish this one, so only a CTA's first tile waits for the fill.
        const double fill = kernel.persistent ? r.fill / std::max(1.0, ctas / (sms * per_sm)) : r.fill;
        w.chain += r.seconds - r.fill + fill + roles_time;
      }
      w.seconds = std::max(throughput, w.chain);
      return w;
    };
    Wave full, partial;
    if (full_waves > 0) full = wave(per_sm, sms, sms);
    if (tail > 0) {
      const double k_tail = std::ceil(tail / sms);
      partial = wave(k_tail, std::ceil(tail / k_tail), std::min(tail, sms));
    }
    double seconds = full_waves * full.seconds + partial.seconds;
    seconds *= static_walk ? walked.imbalance : imbalance(walk.cta_trips(), static_cast<int64_t>(sms), per_sm);
    auto scaled = [&](double PipeTime::*member) {
      return (full_waves * (full.pipes.*member) + partial.pipes.*member) * 1e6;
    };
    cost->pipes.tensor = scaled(&PipeTime::tensor);
    cost->pipes.cuda_core = scaled(&PipeTime::alu);
    cost->pipes.special = scaled(&PipeTime::special);
    cost->pipes.shared = scaled(&PipeTime::shared);
    cost->pipes.dram = scaled(&PipeTime::dram);
    cost->pipes.l2 = scaled(&PipeTime::l2);
    cost->pipes.latency = (full_waves * full.chain + partial.chain) * 1e6;
    const Wave& main = full_waves > 0 ? full : partial;
    const double main_throughput =
        main.pipes.combined(overlap_for(per_sm), async_fraction);
    cost->bound = main.chain > main_throughput ? "latency" : main.pipes.bound();
    cost->ring_stages = main.ring.stages;
    cost->ring_period_us = main.ring.period * 1e6;
    cost->ring_fill_us = main.ring.fill * 1e6;
    cost->microseconds = seconds * 1e6 + device_.launch_overhead_us;
    return true;
  }

  DeviceModel device_;
};

}  // namespace

int estimate_registers_per_thread(const matile::Kernel& kernel) {
  if (!kernel.body) return kBaseRegisters;
  return RegisterEstimate(kernel).run();
}

std::vector<int> estimate_role_registers(const matile::Kernel& kernel) {
  std::vector<int> out;
  if (!kernel.body) return out;
  matile::for_each_op(*kernel.body, [&](const Op& op) {
    if (op.kind != OpKind::Roles) return;
    for (const matile::WarpRole& role : op.roles) {
      if (!role.body) {
        out.push_back(kBaseRegisters);
        continue;
      }
      matile::Kernel alone = kernel;
      alone.body = role.body;
      out.push_back(RegisterEstimate(alone).run());
    }
  });
  return out;
}

OpWork op_work(const matile::Kernel& kernel, const matile::Op& op) {
  return WorkWalk(kernel).work_of_op(op);
}

std::unique_ptr<CostModel> make_analytical_model(const DeviceModel& device) {
  return std::make_unique<AnalyticalModel>(device);
}

}  // namespace nautilus::cost
