// MA (memory-access) tile IR: one CTA's work with every tile placed in a memory space with an
// explicit layout, and every copy and MMA naming its instruction (DESIGN.md §3 item 4).
//
// General notes on the semantics of MA tile IR
// --------------------------------------------
// A `Module` is a list of `Kernel`s launched in order (exchanging data only through global
// buffers), exactly as in VR tile IR (core/vrtile/ir.h). A kernel runs once per grid point
// (CUDA's blockIdx; grid variables are uniform index scalars) on a CTA of `warps` * 32 threads.
// Its body is a `Region` of ops in program order; every thread of the CTA executes every op (no
// divergent control flow: For trip counts are static), so an op is one *CTA-wide* step.
//
// Memory spaces. Every tile lives in exactly one of three places:
//   global    a kernel parameter `Buffer`, addressed by a `GlobalAccess` (a window: per buffer
//             axis an offset scalar plus, optionally, one tile coordinate; or a gather through
//             index tiles). Only GlobalLoad, GlobalStore and AsyncCopy touch it.
//   shared    a `SharedAlloc` of the kernel: a dtype, a logical shape, a swizzled layout
//             (layout::ComposedLayout: logical coordinate -> element offset inside one stage),
//             `stages` copies of that (stage s starts at element s * stage_elements), and a
//             byte range in the CTA's dynamic shared memory. Addressed by a `SharedRef`
//             (allocation, stage, static window offsets, optional transposition). Shared memory
//             is not SSA: AsyncCopy and SharedStore write it, SharedLoad and FmaDot read it.
//   register  every SSA `Value` is a register tile: a TileType (dtype, static shape; rank 0 is
//             a scalar) and a `RegisterLayout` saying which thread holds which element. Thread
//             t's value slot v holds the tile element of column-major index layout.index(t, v)
//             (core/layout/tv_layout.h; element (r, c) of an (R, C) tile has index r + R*c).
//             Several threads (or slots) may hold the same element: they then hold equal
//             values. Uniform scalars (grid and loop variables, stage numbers, window offsets)
//             are rank-0 tiles that every thread holds.
//
// Two kinds of op semantics. Element-wise ops (Iota, Full, Unary, Binary, Compare, Logical,
// Select, Cast) work slot by slot: every operand and the result have the SAME layout, so thread t
// slot v combines its own operand slots v. Data-movement ops (global and shared accesses,
// Broadcast, Permute, ExtractSlice, ConvertLayout, Reduce) are defined through the layouts'
// element mapping. Instruction ops (Mma, SharedLoad with ldmatrix) are defined by the PTX
// instruction's own fragment layout on each warp's registers *by slot position*: their operand
// and result layouts must be the ones the instruction defines (layouts.h builds them), otherwise
// the numbers are wrong -- which is what makes a wrong layout observable.
//
// Ops (operands in `operands` unless stated; every op keeps the VR op's provenance):
//   Iota(n), Full(c)            as in VR tile IR, materialized in the result's layout.
//   Unary/Binary/Compare/Logical/Select/Cast   element-wise, VR semantics (f32 rounding per op).
//   Broadcast(x, dims), Permute(x, order)   VR semantics; register-only: every thread must hold
//                               the source elements its result slots need.
//   ExtractSlice(x, offsets)    result element c = x element c + offsets (static), register-only;
//                               with slice_interleave p > 1, one k step of an mma operand whose
//                               k steps interleave (layouts.h, interleaved_k): along the k axis
//                               (the one the slice shortens to 16), result column c is source k
//                               interleaved_k(offset / 16, c, p)
//                               (e.g. the k-th 16-column block of an mma A fragment tile).
//   ConvertLayout(x)            the same tile in the result's layout. `via_shared` false: a
//                               register permutation (each thread already holds what it needs,
//                               e.g. two mma C fragments of S forming the A fragment of P);
//                               true: written to the scratch allocation `scratch`, barrier, read
//                               back, barrier (the op includes both barriers).
//   Reduce(op, x, axis)         the result (x's layout with the axis removed: slice_layout)
//                               is computed in three fixed steps: (1) each thread combines its
//                               own slots of each result element in slot order, starting from
//                               the op's identity, each distinct element once (a layout may
//                               repeat an element in two slots: short mma fragments); (2) for each mask m of `xor_masks` in order,
//                               x = op(x, shfl.xor(x, m)); (3) when `scratch` is set, every warp
//                               writes its partials to it, barrier, each thread combines the
//                               warps' partials in warp order, barrier.
//   Mma(a, b, c)                mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} over tiles:
//                               a:[M,K] (mma_a_layout), b:[K,N] (mma_b_layout), c:[M,N] f32
//                               (mma_c_layout), warps arranged `warps_m` x `warps_n`; each warp
//                               issues, for each k atom in increasing order, one instruction per
//                               (m, n) atom of its warp tile. An instruction computes
//                               d = c + sum_k a*b as f32 fused multiply-adds in increasing k
//                               (the same order VR's dot fixes; tensor cores may differ in the
//                               last bit, which the tolerance absorbs on hardware).
//                               `swapped` (a of 1, 2, 4 or 8 rows on one warp along M): c is in
//                               mma_swapped_c_layout and each instruction computes 16 columns
//                               of b (n8 atoms 2j, 2j + 1 as its rows) against a's rows as its
//                               8 columns (row r of a in columns r, r + M, ...).
//   FmaDot(shared a, shared b, acc)   the CUDA-core path for what mma.sync cannot do (f32
//                               operands, extents not multiples of the atom): every thread
//                               computes its acc slots as fmaf over k in increasing order,
//                               reading a:[M,K] from `shared` and b:[K,N] from `shared_b`.
//   GlobalLoad(access) -> tile  per slot, reads the element where it is valid (window bounds or
//                               gather mask) and yields `constant` (`other`) elsewhere.
//   GlobalStore(access, value)  per slot, writes valid elements; replicated slots write the same
//                               value (the emitter lets one holder write).
//   AsyncCopy(shared, access)   cp.async.cg.shared.global, 16 bytes per vector: `copy_layout`
//                               (a TV layout over the window, values taken `vector_elements` at a
//                               time) says which thread copies which vector. A vector's valid
//                               elements (window bounds) must be a prefix of it; the rest is
//                               zero-filled (src-size < 16). Nothing is copied when the uniform
//                               Bool `predicate` is false. Data lands in shared memory only at
//                               the WaitGroup that retires its group, never earlier.
//   CommitGroup                 cp.async.commit_group: closes each thread's current group.
//   WaitGroup(n)                cp.async.wait_group n: all but the n most recent groups of the
//                               thread have landed.
//   Barrier                     bar.sync 0 (__syncthreads): makes writes visible CTA-wide.
//   SharedLoad(shared) -> tile  `shared_read`: LdMatrixX4 / LdMatrixX4Trans (ldmatrix .x4 [.trans]
//                               .b16; the result is an mma A or B fragment tile and each lane's
//                               row address starts 8 contiguous, 16-byte aligned elements), or
//                               Scalar (ld.shared per slot, any layout).
//   SharedStore(shared, value)  st.shared per slot.
//   For(var, extent, iter_args, body), Yield   as in VR tile IR; block arguments and results have
//                               the iter_args' layouts. `pipeline_stages` > 0 marks a software-
//                               pipelined loop (the prologue before it issued stages-1 copies).
//                               An optional uniform `trip_count` stops it early: var runs over
//                               0..min(extent, max(trip_count, 0))-1 (every thread alike).
//   For over tiles (`tile_loop`; persistent kernels only, Kernel::persistent): the CTA walks its
//                               tiles. A persistent kernel runs on `launched` CTAs (the launcher
//                               takes min(tiles, the CTAs the GPU holds at once); the tiles are the
//                               points of `grid`, `extent` of them); CTA c's tile loop runs var =
//                               0, 1, ... while c + var * launched < extent, and each iteration
//                               binds the grid variables to the point that launch index
//                               c + var * launched has in the tile order (tile_group). Grid
//                               variables are read only inside a tile loop; iter_args carry
//                               state from tile to tile (a ring's position).
//                               In a kernel with a dynamic tile scheduler (Kernel::dynamic_tiles)
//                               the walk is not known ahead: the loop's FIRST iter_arg is the
//                               launch index of the tile being computed (an index scalar, its
//                               init CtaIndex for the CTA's first tile); the loop runs while it
//                               is below `extent`, binds the grid variables to that launch
//                               index's point in the tile order, and the body's yield gives the
//                               next tile's launch index (read from the tile ring: TileRead).
//                               var still counts the CTA's tiles 0, 1, ...
//
// Hopper's asynchronous machine (sm_90a only; hopper.h builds its layouts):
//   Kernel objects. `mbarriers`: named arrays of mbarrier objects (a ring of `count` slots, each
//   expecting `arrivals` arrivals per phase), referenced by a `BarrierRef` (array, uniform slot
//   index; null = 0). A slot counts completed phases; a phase completes when its pending
//   arrivals reach 0 AND its transaction count (bytes announced by expect_tx minus bytes landed
//   by TMA copies) is 0; then the pending count resets to `arrivals`. `tensor_maps`: a TMA
//   tensor map over a global buffer: the box (extents per buffer axis, the last contiguous) and
//   the swizzle (0, 32, 64 or 128 bytes) with which the box lands in shared memory.
//   Roles { role NAME warpgroups G registers R { region } ... }   warp specialization: the CTA's
//                               warpgroups are split among the roles in order (role i owns the
//                               warpgroups after those of roles 0..i-1; the kernel has exactly
//                               4 * sum(G) warps). Each role runs its own region on its own
//                               threads (setmaxnreg R: a multiple of 8 in 24..256; sum over
//                               warpgroups of R <= 512). Inside a role, "every thread" means
//                               the role's threads: register layouts there have the role's
//                               thread count (thread t of the role is CTA thread base + t), and
//                               the roles run concurrently, synchronizing only through
//                               mbarriers and named barriers. The op ends when every role ends.
//   MBarrierInit(bar)           one elected thread initializes every slot of the array (phase 0,
//                               `arrivals` pending, tx 0; then fence.mbarrier_init). Other
//                               threads may use it after the next bar.sync.
//   MBarrierArrive(bar)         `arrivals_per_op` arrivals (elected threads; default 1); with
//                               `tx_bytes` > 0 it is mbarrier.arrive.expect_tx: the phase also
//                               waits for that many bytes. Arriving at a slot whose phase has
//                               no arrival left pending is an error (over-arrival). With
//                               `arrive_per_warp` every warp arrives once for its own lanes,
//                               after they converge (__syncwarp): `arrivals_per_op` is the
//                               executing threads / 32. It releases what each lane did before
//                               it, as an arrive by every thread would, with 32x fewer atomics.
//   MBarrierWait(bar, parity)   mbarrier.try_wait.parity spun by every thread: returns once the
//                               phase of parity `parity` (a uniform index scalar, 0 or 1) has
//                               completed, i.e. the slot's current phase has the other parity.
//                               It acquires what the arrivals of that phase released.
//   NamedBarrier(id, threads)   bar.sync id, threads (bar.arrive when `arrive_only`): the
//                               arriving roles' threads count towards `threads`; a bar.sync
//                               returns when all have arrived. Ids 1..15 (0 is bar.sync).
//                               With `warpgroup_ids` (one per warpgroup of the executing role)
//                               warpgroup g uses id warpgroup_ids[g] instead, or skips the op
//                               where that is 0: the consumers' ping-pong, where each warpgroup
//                               waits on its own barrier and arrives on the other's. Such a
//                               role's warpgroups run apart (no longer in lockstep).
//   FenceProxyAsync             fence.proxy.async.shared::cta: the executing threads' earlier
//                               generic shared writes (st.shared, stmatrix) become visible to
//                               the async proxy (TMA store, wgmma operands).
//   TmaLoad(coords...) map -> shared, bar   cp.async.bulk.tensor (one elected thread): the box
//                               at the coordinates (one uniform index scalar per buffer axis)
//                               lands in the allocation (its whole stage, in the map's swizzled
//                               box layout); elements past the buffer's extent are zeros. The
//                               copy completes the box's bytes on `bar` (complete_tx) and its
//                               data is readable only by threads that waited on the phase it
//                               completed. `multicast_mask` != 0: .multicast::cluster to the
//                               CTAs of the mask (a single-CTA interpreter lands it locally).
//   TmaStore(coords...) shared -> map       the bulk store of the box (elements past the extent
//                               are not written); it reads shared memory until a
//                               BulkWaitGroup retires its group.
//   BulkCommitGroup, BulkWaitGroup(n)   cp.async.bulk.commit_group / wait_group[.read] n (.read
//                               when `wait_read`: the sources may be reused; both retire groups).
//   WgmmaFence                  wgmma.fence: required before a Wgmma whose accumulator or
//                               register A was written by ordinary code since the last fence.
//   Wgmma([a,] c) shared A, B -> d    wgmma.mma_async m64nNk16 (16-bit A and B of one dtype) or
//                               m64nNk32 (8-bit floats: A and B fp8e4m3 or fp8e5m2, in any
//                               pairing, both from shared memory and both K-major, the form
//                               having no transpose) f32 accumulate over the executing
//                               warpgroups: d,c: f32[M, N], M = 64 * warpgroups (warpgroup g
//                               owns rows 64g..64g+63), N in 8..256 step 8, in the accumulator
//                               layout (hopper.h); A: [M, K] from the shared window `shared`
//                               (SS) or from registers (RS, operand a, wgmma A fragment
//                               layout); B: [K, N] from `shared_b` (transposed windows read
//                               K-major allocations); K = `extent`, a multiple of 16 (32 for
//                               8-bit operands). d = c +
//                               sum_k a*b as f32 fused multiply-adds in increasing k (as Mma).
//                               The emitter derives the descriptors from the allocations'
//                               layouts. d is available only after a WgmmaWaitGroup retires its
//                               group: any other use before is an error (ptxas would serialize
//                               it), except as the c of another Wgmma and carried through a
//                               For; the shared operands must not be overwritten until then.
//   WgmmaCommitGroup, WgmmaWaitGroup(n)   wgmma.commit_group / wgmma.wait_group n (n groups left).
//   StMatrix(value) -> shared   stmatrix.sync.aligned.m8n8.x4.b16: a 16-bit tile in the wgmma
//                               accumulator layout stored by 8x8 matrices (each lane gives one
//                               row address: 8 contiguous, 16-byte aligned elements).
//
// The dynamic tile scheduler (Kernel::dynamic_tiles; persistent kernels, sm_90a):
//   CtaIndex -> index scalar    the CTA's launch index (blockIdx.x): its first tile.
//   TileFetch counter -> shared, bar   one elected thread atomically adds 1 to the 32-bit tile
//                               counter (element 0 of `buffer`, a workspace buffer the launcher
//                               zeroes before every launch) and writes old + launched (the CTAs
//                               launched, gridDim.x) into the one-element Index allocation
//                               `shared` (its stage: a slot of the tile ring). Like a TMA load
//                               the value lands on `bar`: it is readable only by threads that
//                               waited on the phase of `bar` the elected thread's next arrive
//                               completes. The counter's values are taken in the order the
//                               CTAs fetch, so tiles launched + 0, + 1, ... go to whichever CTA
//                               asks first.
//   TileRead shared -> index scalar    every thread of the region reads the tile ring's slot
//                               (ld.shared.u32): the launch index the producer fetched.
//
// Shared-memory rules the interpreter enforces (a violation is an error, never silent):
// reading an element whose async copy has not landed (missing WaitGroup), reading an element
// another thread wrote without a Barrier in between, and writing an element another thread
// read since the last Barrier (overwriting a stage still in use).
//
//   Example (GEMM, one 16-column k step of the pipelined loop; printer.h gives the full form):
//     shared As : bf16[64, 32] Sw<2,3,3> o (64,32):(32,1) stages 2 bytes [0, 8192)
//     for k_o in 0..4 iter_args(%acc_i = %acc0) pipeline 2 {
//       cp.async.wait_group 0
//       bar.sync
//       cp.async As[%next_stage] <- A[%m0 + i0, %k_next + i1] bounds [100, 128] copy #L3 if %more
//       cp.async.commit_group
//       %a0 = ldmatrix.x4 As[%stage][0, 0] : bf16[64, 16] #L0
//       %b0 = ldmatrix.x4.trans Bs[%stage][0, 0] : bf16[16, 64] #L1
//       %acc1 = mma.m16n8k16 %a0, %b0, %acc_i warps(4, 1) : f32[64, 64] #L2
//       ...
//
// Nodes are immutable and shared (shared_ptr<const>), as in the other levels. verifier.h checks
// the rules above that can be checked statically; interpreter.h executes them.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/layout/swizzle.h"
#include "core/layout/tv_layout.h"
#include "core/scalar/ir.h"
#include "core/support/dtype.h"
#include "core/vrtile/ir.h"

namespace nautilus::matile {

using scalar::BinaryOp;
using scalar::Buffer;
using scalar::CompareOp;
using scalar::LogicalOp;
using scalar::Provenance;
using scalar::UnaryOp;
using vrtile::ReduceOp;
using vrtile::TileType;
using vrtile::type_text;

constexpr int kWarpSize = 32;

// What a register layout is, for printing, the emitter and the GUI; the TV layout alone defines
// the semantics.
enum class LayoutKind {
  Uniform,  // every thread holds every element (scalars, small index tiles)
  Blocked,  // the generic layout: threads spread over the axes, last axis fastest
  MmaA,     // mma.m16n8k16 A fragments, tiled over an [M, K] tile and the warp grid
  MmaB,     // B fragments over [K, N]
  MmaC,     // C/D (accumulator) fragments over [M, N]
  MmaCSwapped,  // C/D fragments of the swapped product of a short A (mma_swapped_c_layout)
  Derived,  // anything else (a slice of a reduce, a permutation, an extracted block)
};
const char* layout_kind_name(LayoutKind kind);  // "uniform", "blocked", "mma_a", ...

struct RegisterLayout {
  LayoutKind kind = LayoutKind::Uniform;
  // (thread, slot) -> column-major element index; its tile is the value's shape as an IntTuple
  // (a leaf for rank 1, (R, C) for rank 2, 1 for a scalar). threads() is the CTA's thread count.
  layout::TVLayout tv;
  int warps_m = 0, warps_n = 0;  // Mma kinds: the warp grid (warp w = wm + warps_m * wn)
  int column_interleave = 1;     // MmaB / MmaC: atoms' columns interleaved (layouts.h, mma_b_layout)
  int k_interleave = 1;          // MmaA / MmaB: the k steps interleaved (layouts.h, interleaved_k)

  int64_t threads() const { return tv.threads(); }
  int64_t slots() const { return tv.values(); }
  bool operator==(const RegisterLayout&) const = default;
};

// A register tile. Identity is the node's address; names are unique within a kernel.
struct ValueNode {
  std::string name;
  TileType type;
  RegisterLayout layout;
};
using Value = std::shared_ptr<const ValueNode>;
Value make_value(std::string name, TileType type, RegisterLayout layout);

// A shared-memory allocation of a kernel.
struct SharedAlloc {
  std::string name;
  DType dtype = DType::BF16;
  std::vector<int64_t> shape;     // logical shape of one stage
  layout::ComposedLayout layout;  // logical coordinate (colexicographic over `shape` in CuTe's
                                  // convention: a (R, C) coordinate) -> element offset in a stage
  int stages = 1;
  int64_t stage_elements = 0;     // >= layout.cosize(); stage s starts at s * stage_elements
  int64_t byte_offset = 0;        // in dynamic shared memory, 128-byte aligned
  int64_t byte_size = 0;          // stages * stage_elements * dtype bytes
  std::string purpose;            // "operand A of dot %qk", "scratch of reduce %rowmax", ...
  // The allocation whose bytes this one reuses (-1: bytes of its own). The lowering aliases a
  // tile only onto one whose last read is ordered before this one's first write (e.g. the
  // staged epilogue onto the query tile the main loop is done with); the MA interpreter gives
  // both one storage, so its race checks see the reuse.
  int alias_of = -1;
  // A warp-specialized ring whose slot the consumers release in the iteration that reads it
  // (lower.h rule 6's early operands: attention's K), not in the next one. The pipeline
  // completion sizes such a ring by its own operand's life.
  bool released_in_iteration = false;
};

// The end of the last byte any of `allocs` takes (aliases end inside their base).
int64_t shared_end(const std::vector<SharedAlloc>& allocs);

// A window of a shared allocation: tile element c (of the op's tile, rank 2 when transposed)
// is allocation element (offsets + c), or (offsets + (c1, c0)) when `transposed`, in stage
// `stage` (a uniform index scalar; null means stage 0).
struct SharedRef {
  int alloc = -1;  // index into Kernel::shared
  Value stage;
  std::vector<int64_t> offsets;
  bool transposed = false;
};

// How a global access addresses its buffer.
struct GlobalAccess {
  enum class Form { Window, Gather };
  Form form = Form::Window;
  // Window: buffer index along axis j = offsets[j] (a uniform index scalar; null = 0) plus tile
  // coordinate tile_axes[j] when tile_axes[j] >= 0. An element is valid when every buffer
  // index j is below bounds[j] (<= the buffer's extent); invalid elements are never touched.
  std::vector<Value> offsets;
  std::vector<int> tile_axes;
  std::vector<int64_t> bounds;
  // Gather: the op's first operands are one Index tile per buffer axis (in the tile's layout)
  // and, when has_mask, a Bool tile after them (after the stored value for GlobalStore).
  bool has_mask = false;
  // Window stores of 16-bit elements only (the staged epilogue, lower.h rule 7): the value holds
  // each tile row as runs of 8 elements on consecutive lanes of one warp, and the row's start in
  // memory need not be 16-byte aligned (an odd row pitch). The emitter shifts each run by its
  // row's misalignment through the next lane (a warp shuffle) and stores 16-byte vectors at
  // aligned addresses, with the misaligned head and tail of the row element by element. The
  // elements written are the same; only the instructions differ (the interpreters ignore it).
  bool realign_rows = false;
};

enum class SharedRead { Scalar, LdMatrixX4, LdMatrixX4Trans };
const char* shared_read_name(SharedRead read);  // "ld.shared", "ldmatrix.x4", "ldmatrix.x4.trans"

// An array (ring) of mbarrier objects of a kernel (ir.h notes, "Hopper").
struct MBarrierAlloc {
  std::string name;
  int count = 1;         // slots
  int64_t arrivals = 1;  // arrivals that complete a phase
  std::string purpose;   // "A/B stage full", "stage empty", ...
  // The empty barrier of rings released in the iteration that reads them (lower.h rule 6's
  // early release): the MMAs still in flight at its arrive read other rings, so they hold none
  // of its stages (the cost model's release lag leaves it out).
  bool early_release = false;
};

// A slot of a kernel's mbarrier array: `index` is a uniform index scalar (null = slot 0).
struct BarrierRef {
  int barrier = -1;  // index into Kernel::mbarriers
  Value index;
};

// A TMA tensor map: a box of `buffer` (a kernel param) landing in shared memory with `swizzle`.
struct TmaMap {
  std::string name;
  Buffer buffer;
  std::vector<int64_t> box;  // per buffer axis, each in 1..256; the last axis is contiguous
  int swizzle_bytes = 0;     // 0, 32, 64 or 128
  // The tile's layout in shared memory when the box lands in several hardware boxes laid out
  // otherwise than row-major (wgmma's MN-major panels of 64 elements: a bf16 [64, 128] tile is
  // two 64x64 boxes, one after the other); empty: the box row-major with the swizzle
  // (tma_box_layout). hopper.h's tma_tile_layout() gives either.
  std::optional<layout::ComposedLayout> shared_layout;
  // The two buffer axes the shared tile spans, in increasing order, the second the contiguous
  // one; every other axis has a box extent of 1 (a [64, 128] tile of K[b, h, n, d] is the box
  // [1, 1, 64, 128] over axes {2, 3}). Empty: the last two axes (hopper.h's tma_tile_axes).
  std::vector<int> tile_axes;
};

struct Region;
using RegionPtr = std::shared_ptr<const Region>;

// The named barrier a role synchronizes its own threads on is kFirstRoleBarrierId + the role's
// index in its Roles op: clear of the low ids hand-built kernels pick and of the high ones the
// emitter takes for a role's elected arrives.
inline constexpr int kFirstRoleBarrierId = 8;

// One role of a Roles op: `warpgroups` warpgroups (after the previous roles') with a register
// budget of `max_registers` per thread (setmaxnreg) running `body`.
struct WarpRole {
  std::string name;
  int warpgroups = 1;
  int max_registers = 0;
  RegionPtr body;
};

#define NAUTILUS_MATILE_OPS(X) \
  X(Iota)                      \
  X(Full)                      \
  X(Unary)                     \
  X(Binary)                    \
  X(Compare)                   \
  X(Logical)                   \
  X(Select)                    \
  X(Cast)                      \
  X(Broadcast)                 \
  X(Permute)                   \
  X(ExtractSlice)              \
  X(ConvertLayout)             \
  X(Reduce)                    \
  X(Mma)                       \
  X(FmaDot)                    \
  X(GlobalLoad)                \
  X(GlobalStore)               \
  X(AsyncCopy)                 \
  X(CommitGroup)               \
  X(WaitGroup)                 \
  X(Barrier)                   \
  X(SharedLoad)                \
  X(SharedStore)               \
  X(For)                       \
  X(Yield)                     \
  X(Roles)                     \
  X(MBarrierInit)              \
  X(MBarrierArrive)            \
  X(MBarrierWait)              \
  X(NamedBarrier)              \
  X(FenceProxyAsync)           \
  X(TmaLoad)                   \
  X(TmaStore)                  \
  X(BulkCommitGroup)           \
  X(BulkWaitGroup)             \
  X(WgmmaFence)                \
  X(Wgmma)                     \
  X(WgmmaCommitGroup)          \
  X(WgmmaWaitGroup)            \
  X(StMatrix)                  \
  X(CtaIndex)                  \
  X(TileFetch)                 \
  X(TileRead)

enum class OpKind {
#define NAUTILUS_ENUM_ENTRY(name) name,
  NAUTILUS_MATILE_OPS(NAUTILUS_ENUM_ENTRY)
#undef NAUTILUS_ENUM_ENTRY
};
const char* op_kind_name(OpKind kind);  // "iota", ..., "convert_layout", "mma", "async_copy", ...
bool is_elementwise(OpKind kind);       // Iota, Full, Unary ... Cast
bool is_hopper(OpKind kind);            // Roles ... TileRead: sm_90a only

struct Op {
  OpKind kind = OpKind::Full;
  std::vector<Value> results;
  std::vector<Value> operands;  // element-wise: operands; Broadcast/Permute/ExtractSlice/
                                // ConvertLayout/Reduce: x; Mma: a, b, c; FmaDot: acc;
                                // GlobalLoad: gather indices..., [mask]; GlobalStore: [gather
                                // indices...], value, [mask]; SharedStore: value; For: inits;
                                // Yield: values
  Buffer buffer;                // GlobalLoad / GlobalStore / AsyncCopy; TileFetch: the counter
  GlobalAccess access;          // GlobalLoad / GlobalStore / AsyncCopy
  SharedRef shared;             // AsyncCopy (dst) / SharedLoad / SharedStore / FmaDot (a) /
                                // TileFetch (dst) / TileRead
  SharedRef shared_b;           // FmaDot (b)
  SharedRead shared_read = SharedRead::Scalar;  // SharedLoad
  layout::TVLayout copy_layout;  // AsyncCopy: thread -> vectors of the window
  int64_t vector_elements = 0;  // AsyncCopy: elements per 16-byte vector
  Value predicate;              // AsyncCopy: optional uniform Bool scalar
  std::vector<int64_t> tile_shape;  // AsyncCopy: the window's shape
  double constant = 0.0;        // Full: the value; GlobalLoad: `other` where invalid
  int64_t extent = 0;           // Iota: n; For: trip count; WaitGroup: groups left pending
  int axis = 0;                 // Reduce
  std::vector<int> dims;        // Broadcast: source axis -> result axis; Permute: order
  std::vector<int64_t> offsets;  // ExtractSlice
  int slice_interleave = 1;      // ExtractSlice: the k steps' interleave (1: a plain window)
  ReduceOp reduce_op = ReduceOp::Sum;
  std::vector<int> xor_masks;   // Reduce: the lane masks of the shuffle butterfly, in order
  int scratch = -1;             // Reduce / ConvertLayout: shared scratch allocation, or -1
  bool via_shared = false;      // ConvertLayout
  int warps_m = 0, warps_n = 0;  // Mma
  // Mma: the product computed as (B^T A^T)^T (layouts.h, mma_swapped_c_layout): B's n8 atoms
  // 2j and 2j + 1 are the instruction's A rows, A's a_0, a_1, a_4, a_5 its B columns.
  bool swapped = false;
  UnaryOp unary_op = UnaryOp::Neg;
  BinaryOp binary_op = BinaryOp::Add;
  CompareOp compare_op = CompareOp::LT;
  LogicalOp logical_op = LogicalOp::And;
  Value loop_var;               // For: a uniform index scalar
  std::vector<Value> block_args;  // For
  RegionPtr body;               // For
  int pipeline_stages = 0;      // For: software-pipeline depth (0: not pipelined)
  Value trip_count;             // For: optional early stop (a uniform index scalar)
  bool tile_loop = false;       // For: walks a persistent kernel's tiles (ir.h notes)
  // Hopper (ir.h notes). Operands: TmaLoad/TmaStore: one coordinate per buffer axis;
  // MBarrierWait: parity; Wgmma: [a (RS form)], c; StMatrix: value.
  std::vector<WarpRole> roles;  // Roles
  BarrierRef mbarrier;          // MBarrierInit / MBarrierArrive / MBarrierWait / TmaLoad
  int tma_map = -1;             // TmaLoad / TmaStore: index into Kernel::tma_maps
  int64_t tx_bytes = 0;         // MBarrierArrive: expect_tx bytes (0: a plain arrive)
  int64_t arrivals_per_op = 1;  // MBarrierArrive
  bool arrive_per_warp = false; // MBarrierArrive: lane 0 of each warp arrives once its warp converged
  int64_t multicast_mask = 0;   // TmaLoad: CTA mask of .multicast::cluster (0: none)
  int barrier_id = 0;           // NamedBarrier
  int64_t barrier_threads = 0;  // NamedBarrier
  bool arrive_only = false;     // NamedBarrier: bar.arrive instead of bar.sync
  std::vector<int> warpgroup_ids;  // NamedBarrier: per warpgroup of the role (0: skips); empty: barrier_id
  bool wait_read = false;       // BulkWaitGroup: .read (only the shared sources are released)
  Provenance provenance;
};
using OpPtr = std::shared_ptr<const Op>;
OpPtr make_op(Op op);

// Every value an op reads, in a fixed order: operands, then window offsets, the shared stages,
// the predicate, a For's trip count and an mbarrier slot index. (For the verifier's dominance check and the printers.)
std::vector<Value> used_values(const Op& op);
// The parts of a gather access's operand list (empty / null for windows and malformed ops).
std::vector<Value> gather_indices(const Op& op);
Value gather_mask(const Op& op);
Value stored_value(const Op& op);  // GlobalStore / SharedStore

// The PTX / CUDA instruction an op stands for, for printing and the emitter's comments:
// "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "cp.async.cg.shared.global [16]",
// "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16", "fma.rn.f32", "shfl.sync.bfly" ...; empty
// for ops that are plain arithmetic. With the kernel, a Wgmma whose operands are in shared
// memory names their dtypes (and its k32 form for 8-bit floats) from the allocations; without it,
// bf16 is assumed there.
struct Kernel;
std::string instruction_name(const Op& op, const Kernel* kernel = nullptr);
// The PTX type of a wgmma operand: "bf16", "f16", "e4m3" or "e5m2" (other dtypes: their name).
std::string wgmma_operand_type(DType dtype);

struct Region {
  std::vector<OpPtr> ops;
};
RegionPtr make_region(std::vector<OpPtr> ops);

struct GridAxis {
  Value var;  // a uniform index scalar
  int64_t extent = 1;
};

struct Kernel {
  std::string name;
  std::vector<Buffer> params;
  std::vector<GridAxis> grid;
  // The tile order: CTAs launched in groups of `tile_group` rows of grid axis 1, each group
  // walked along axis 0 column by column (core/support/launch_order.h; the schedule's
  // tile_order). 1: the plain order, axis 0 fastest. > 1 only with two or more grid axes.
  int tile_group = 1;
  // Grid axes walked from their last coordinate down (bit i: axis i; the schedule's
  // tile_order reverse=LOOP): the order above gives coordinate c, the CTA runs extent - 1 - c.
  uint32_t reversed_axes = 0;
  // Persistent CTAs (the schedule's `persistent`): launched with at most one CTA per grid point,
  // as many as the GPU holds at once; the grid is the kernel's tile space, walked by the tile
  // loops of its body (For `tile_loop`, ir.h notes) in the tile order above.
  bool persistent = false;
  // Persistent kernels only: the CTAs take their tiles from a global counter (CtaIndex,
  // TileFetch, TileRead; the tile loops carry the tile's launch index) instead of walking
  // c, c + launched, ... statically.
  bool dynamic_tiles = false;
  int warps = 4;
  // Element-wise shared reads (SharedRead::Scalar) one ld.shared per group of a lane's
  // neighbouring elements (layouts.h, shared_read_plan) at hoisted addresses; false: one per
  // element at its own swizzled offset (LowerOptions::grouped_shared_reads).
  bool grouped_shared_reads = false;
  // Warp-specialized kernels: the tiles the consumers read in registers that stayed global loads
  // because the ring had no room for them (the lowering's notes say which); a deeper ring that
  // raises this count displaced them (core/pipeline/complete.cpp).
  int register_tiles_without_room = 0;
  std::vector<SharedAlloc> shared;
  std::vector<MBarrierAlloc> mbarriers;  // placed by the emitter (8 bytes each)
  std::vector<TmaMap> tma_maps;
  int64_t shared_bytes = 0;  // dynamic shared memory of one CTA: the end of the last allocation
  // Decisions of the lowering that leave no op of their own, or the reason a rule did not
  // apply (a store not staged through shared memory); printed as comments after the objects.
  std::vector<std::string> notes;
  // The cost model's price of the kernel's register layouts (conversions, reduces, global
  // accesses; thread instructions weighted by trip counts) as the first-wins rules give them,
  // and as the layout synthesis kept them (never more).
  double layout_cost_rules = 0, layout_cost = 0;
  // With LowerOptions::record_layout_reasons (the studio's Layouts panel): per register tile
  // (by value name) the rule or synthesis pin that fixed its layout and the users that wanted
  // another; and one line on what the layout synthesis did (empty when it changed nothing).
  std::map<std::string, std::string> layout_reasons;
  std::string layout_synthesis;
  RegionPtr body;
  Provenance provenance;

  int64_t threads() const { return int64_t{warps} * kWarpSize; }
};
using KernelPtr = std::shared_ptr<const Kernel>;

struct Module {
  std::string name;
  std::string arch = "sm_80";  // "sm_80" or "sm_90a"
  std::vector<Buffer> params;       // inputs, then outputs
  std::vector<Buffer> allocations;  // global intermediates shared between kernels
  std::vector<KernelPtr> kernels;

  const Buffer* find_buffer(const std::string& buffer_name) const;
};
using ModulePtr = std::shared_ptr<const Module>;

// ---------------------------------------------------------------------------------------------
// Building kernels op by op (the lowering and hand-built test kernels use it). Names are made
// unique as in vrtile::Builder: the requested name, or it with `.1`, `.2`, ...; empty requests
// get numbers. Types follow the semantics above; layouts are given by the caller (layouts.h).
// Nothing is checked here: verify() does that.
class Builder {
 public:
  using LoopBody =
      std::function<std::vector<Value>(const Value& var, const std::vector<Value>& carried)>;

  explicit Builder(int warps);

  int warps() const { return warps_; }
  // The threads of the region being built: the CTA's, or a role's inside Builder::roles.
  int64_t threads() const {
    return role_threads_.empty() ? int64_t{warps_} * kWarpSize : role_threads_.back();
  }
  void set_provenance(const Provenance& provenance) { provenance_ = provenance; }
  const Provenance& provenance() const { return provenance_; }

  Value grid(const std::string& name, int64_t extent);
  // Adds a shared allocation (byte offsets assigned in order, aligned to `alignment`, a multiple
  // of 128: a TMA box swizzled by S bytes needs 8 * S); returns its index for SharedRef::alloc.
  int shared(std::string name, DType dtype, std::vector<int64_t> shape,
             layout::ComposedLayout layout, int stages, std::string purpose, int64_t alignment = 128);
  // Adds an allocation on the bytes of allocation `base` (SharedAlloc::alias_of), of the same
  // element size and at most its byte size; returns its index.
  int shared_alias(int base, std::string name, DType dtype, std::vector<int64_t> shape,
                   layout::ComposedLayout layout, std::string purpose);
  const std::vector<SharedAlloc>& shared_allocs() const { return shared_; }
  void set_early_release(int mbarrier) { mbarriers_.at(static_cast<size_t>(mbarrier)).early_release = true; }
  void set_released_in_iteration(int alloc) { shared_.at(static_cast<size_t>(alloc)).released_in_iteration = true; }
  // The end of the shared allocations: the bytes the kernel takes so far.
  int64_t shared_bytes() const { return shared_end(shared_); }
  // A note of the kernel being built (Kernel::notes).
  void note(std::string text) { notes_.push_back(std::move(text)); }

  Value iota(int64_t n, RegisterLayout layout, const std::string& name = "");
  Value full(double value, TileType type, RegisterLayout layout, const std::string& name = "");
  Value unary(UnaryOp op, const Value& a, const std::string& name = "");
  Value binary(BinaryOp op, const Value& a, const Value& b, const std::string& name = "");
  Value compare(CompareOp op, const Value& a, const Value& b, const std::string& name = "");
  Value logical(LogicalOp op, const Value& a, const Value& b, const std::string& name = "");
  Value select(const Value& c, const Value& a, const Value& b, const std::string& name = "");
  Value cast(const Value& value, DType dtype, const std::string& name = "");
  Value broadcast(const Value& value, std::vector<int64_t> shape, std::vector<int> dims,
                  RegisterLayout layout, const std::string& name = "");
  Value permute(const Value& value, std::vector<int> order, RegisterLayout layout,
                const std::string& name = "");
  Value extract_slice(const Value& value, std::vector<int64_t> offsets,
                      std::vector<int64_t> shape, RegisterLayout layout,
                      const std::string& name = "", int slice_interleave = 1);
  Value convert_layout(const Value& value, RegisterLayout layout, bool via_shared, int scratch,
                       const std::string& name = "");
  Value reduce(ReduceOp op, const Value& value, int axis, RegisterLayout layout,
               std::vector<int> xor_masks, int scratch, const std::string& name = "");
  Value mma(const Value& a, const Value& b, const Value& c, int warps_m, int warps_n,
            const std::string& name = "", bool swapped = false);
  Value fma_dot(SharedRef a, SharedRef b, const Value& acc, const std::string& name = "");
  Value global_load(const Buffer& buffer, GlobalAccess access, std::vector<Value> gather,
                    double other, TileType type, RegisterLayout layout,
                    const std::string& name = "");
  // `gather`: the index tiles and, when access.has_mask, the mask last.
  void global_store(const Buffer& buffer, GlobalAccess access, std::vector<Value> gather,
                    const Value& value);
  void async_copy(SharedRef dst, const Buffer& buffer, GlobalAccess access,
                  std::vector<int64_t> tile_shape, layout::TVLayout copy_layout,
                  int64_t vector_elements, const Value& predicate);
  void commit_group();
  void wait_group(int64_t pending);
  // bar.sync of the CTA; inside a role, a named barrier of the role's threads.
  void barrier();
  Value shared_load(SharedRef src, SharedRead read, TileType type, RegisterLayout layout,
                    const std::string& name = "");
  void shared_store(SharedRef dst, const Value& value);
  std::vector<Value> for_loop(const std::string& var_name, int64_t extent,
                              std::vector<Value> inits, const LoopBody& body,
                              const std::vector<std::string>& result_names = {},
                              const std::vector<std::string>& arg_names = {},
                              int pipeline_stages = 0, const Value& trip_count = nullptr);
  // The tile loop of a persistent kernel (ir.h notes): `body` runs once per tile of the CTA,
  // with the grid variables bound to the tile; its var counts the CTA's tiles.
  std::vector<Value> for_tiles(const std::string& var_name, std::vector<Value> inits,
                               const LoopBody& body, const std::vector<std::string>& result_names = {},
                               const std::vector<std::string>& arg_names = {});
  // Marks the kernel being built persistent (Kernel::persistent), with the dynamic tile
  // scheduler when `dynamic_tiles` (Kernel::dynamic_tiles).
  void set_persistent(bool dynamic_tiles = false) {
    persistent_ = true;
    dynamic_tiles_ = dynamic_tiles;
  }

  // Hopper (ir.h notes; hopper.h gives the layouts). Return the array / map index.
  int mbarrier(std::string name, int count, int64_t arrivals, std::string purpose);
  int tma_map(std::string name, const Buffer& buffer, std::vector<int64_t> box, int swizzle_bytes,
              std::optional<layout::ComposedLayout> shared_layout = std::nullopt,
              std::vector<int> tile_axes = {});
  struct RoleSpec {
    std::string name;
    int warpgroups = 1;
    int max_registers = 0;
    std::function<void()> body;  // builds the role's ops (threads() is the role's meanwhile)
  };
  void roles(const std::vector<RoleSpec>& specs);
  void mbarrier_init(int barrier);
  void mbarrier_arrive(BarrierRef bar, int64_t tx_bytes = 0, int64_t arrivals = 1);
  // Every warp of the `threads` executing threads arrives once (arrive_per_warp).
  void mbarrier_arrive_per_warp(BarrierRef bar, int64_t threads);
  void mbarrier_wait(BarrierRef bar, const Value& parity);
  void named_barrier(int id, int64_t threads, bool arrive_only = false);
  // A named barrier whose id depends on the executing warpgroup of the role (ir.h notes).
  void warpgroup_barrier(std::vector<int> warpgroup_ids, int64_t threads, bool arrive_only);
  void fence_proxy_async();
  void tma_load(SharedRef dst, int map, std::vector<Value> coordinates, BarrierRef bar,
                int64_t multicast_mask = 0);
  void tma_store(int map, std::vector<Value> coordinates, SharedRef src);
  void bulk_commit_group();
  void bulk_wait_group(int64_t pending, bool read);
  void wgmma_fence();
  // SS form when `a` is null (A from `a_shared`), RS form otherwise; the result takes c's layout.
  Value wgmma(SharedRef a_shared, const Value& a, SharedRef b_shared, int64_t k, const Value& c,
              const std::string& name = "");
  void wgmma_commit_group();
  void wgmma_wait_group(int64_t pending);
  void stmatrix(SharedRef dst, const Value& value);
  // The dynamic tile scheduler (ir.h notes).
  Value cta_index(const std::string& name = "");
  void tile_fetch(SharedRef dst, const Buffer& counter, BarrierRef bar);
  Value tile_read(SharedRef src, const std::string& name = "");

  // Appends an already built op (its names are reserved); returns its first result or null.
  Value append(OpPtr op);
  KernelPtr finish_kernel(std::string name, std::vector<Buffer> params);

 private:
  std::string fresh_name(const std::string& requested);
  Value emit(Op op);

  int warps_;
  Provenance provenance_;
  std::vector<GridAxis> grid_;
  bool persistent_ = false;
  bool dynamic_tiles_ = false;
  std::vector<SharedAlloc> shared_;
  std::vector<MBarrierAlloc> mbarriers_;
  std::vector<TmaMap> tma_maps_;
  std::vector<std::string> notes_;
  std::vector<int64_t> role_threads_;
  std::vector<size_t> role_index_;  // of the roles being built, for their barrier() ids
  std::vector<std::vector<OpPtr>> regions_;
  std::set<std::string> used_names_;
  int next_number_ = 0;
};

}  // namespace nautilus::matile
