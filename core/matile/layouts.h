// Register and shared-memory layouts of MA tile IR, built on core/layout.
//
// A register layout (ir.h: RegisterLayout) is a TV layout over a value's tile whose thread mode
// covers the whole CTA. Its element index is column-major over the tile (layout/tv_layout.h), so
// in an (R, C) tile a step of one row is +1 and a step of one column is +R. The builders here
// produce the layouts the lowering uses and the instructions require:
//
//   uniform_layout([4], 128)        every thread holds all 4 elements:  (128,4):(0,1)
//   blocked_layout([8, 16], 128)    16 threads along the columns, 8 along the rows, 1 slot each:
//                                   ((16,8,1),(1,1)):((8,1,0),(0,0))
//   mma_c_layout(64, 64, 4, 1)      mma.m16n8k16 C fragments, warp w owns rows 16w..16w+15:
//                                   ((4,8),(4,1)):((128,1),(16,4096)) threads,
//                                   ((2,2),(1,8)):((64,8),(16,512)) slots -- slot
//                                   4*(mi + mt*ni) + i is the atom's c_i (mt, nt atoms per warp)
//   mma_a_layout(M, K, wm, wn)      A fragments: slot 8*(mi + mt*ki) + i is a_i; warps along N
//                                   replicate (thread stride 0)
//   mma_b_layout(K, N, wm, wn)      B fragments: slot 4*(ki + kt*ni) + i is b_i; warps along M
//                                   replicate
//   mma_a_layout(8, K, 1, wn)       a tile of 1, 2, 4 or 8 rows on one warp along M: the atom's
//   mma_c_layout(8, N, 1, wn)       16 rows repeat rows r % M (stride-0 leaves), so a decode
//                                   step's 8-head group runs on the tensor cores unpadded
//
// A *pure* leaf of a layout (shape s, stride d) moves along exactly one tile axis k: d is a
// multiple of that axis' column-major stride P_k and (d / P_k) * (s - 1) < extent_k, or d == 0.
// Slicing (the layout of a reduce's result), permuting and the shuffle plan of a reduce need
// every leaf to be pure; blocked and mma layouts are.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/layout/result.h"
#include "core/layout/swizzle.h"
#include "core/matile/ir.h"

namespace nautilus::matile {

using layout::Result;

// The IntTuple of a tile shape: 1 for a scalar, a leaf for rank 1, a tuple otherwise.
layout::IntTuple tile_tuple(const std::vector<int64_t>& shape);
// Column-major element index <-> coordinates (axis 0 fastest), as TV layouts count.
std::vector<int64_t> coordinates_of(int64_t index, const std::vector<int64_t>& shape);
// The same into a caller's buffer (loops over every element of a tile reuse one).
void coordinates_into(int64_t index, const std::vector<int64_t>& shape,
                      std::vector<int64_t>& coordinates);
int64_t index_of(const std::vector<int64_t>& coordinates, const std::vector<int64_t>& shape);

RegisterLayout uniform_layout(const std::vector<int64_t>& shape, int64_t threads);
// Threads are given to the axes from the last to the first (gcd of the axis extent and the
// threads left); threads left over replicate. Works for every shape and thread count.
// With `vector` > 1 (dividing that axis' extent), each thread first takes a run of `vector`
// neighbours along `run_axis` (default: the last) in consecutive slots -- the unit of one wide
// global access -- and threads go to that axis first:
//   blocked_layout([4, 1024], 128, 8)      ((128,1,1),(8,1,4)):((32,0,0),(4,0,1))
//   blocked_layout([4096, 8], 128, 8, 0)   a tile read transposed (its first axis contiguous
//                                          in memory): runs of 8 rows, 128 threads along them
RegisterLayout blocked_layout(const std::vector<int64_t>& shape, int64_t threads, int64_t vector = 1,
                              int run_axis = -1);
// The run length for blocked_layout that makes a thread's run 16 bytes of elements of
// `element_bytes` bytes, shortened while it does not divide the run axis' extent or would leave
// threads of the CTA without elements (1 when nothing fits).
int64_t blocked_vector(const std::vector<int64_t>& shape, int64_t threads, int64_t element_bytes,
                       int run_axis = -1);
// Whether a thread holds some element in two slots (a stride-0 slot leaf: short mma
// fragments); Reduce then counts the repeats once.
bool repeats_in_a_thread(const RegisterLayout& layout);
// Whether an mma tile of M rows fits `warps_m` warps along M: a multiple of 16 per warp, or
// 1, 2, 4 or 8 rows on one warp (the atom's rows repeat, see mma_a_layout).
bool mma_rows_fit(int64_t m, int warps_m);
// The m16 atoms along M of one warp's tile: M / (16 * warps_m), and 1 for a tile of 1, 2, 4
// or 8 rows.
int64_t mma_m_atoms(int64_t m, int warps_m);
// k_interleave p > 1 (dividing the k steps, kt): the reduction axis of A and B is read in another
// order, which the two share. Step r + p*q's column c (lane t = (c % 8) / 2 and value
// v = c % 2 + 2 * (c / 8) of the atom's k positions 2t, 2t + 1, 2t + 8, 2t + 9) is
// k = interleaved_k(r + p*q, c, p) = 16pq + 4pt + 4r + v, so a lane's k positions of p
// neighbouring steps are the 4p consecutive k from 16pq + 4pt: an operand stored with k
// contiguous (a weight W[N, K] loaded straight into its fragment) is read 4p elements at a time
// (an int4 row: 16 bytes for p = 8) instead of 2. An mma sums over k only, so any order the
// operands share computes the same product; the k steps are then taken by interleaved slices
// (ir.h, ExtractSlice).
//   mma_b_layout(32, 8, 1, 1, 1, 2): lane t holds rows 8t..8t+7 (standard: 2t, 2t+1, 2t+8,
//   2t+9, 2t+16, 2t+17, 2t+24, 2t+25) of column lane / 4
Result<RegisterLayout> mma_a_layout(int64_t m, int64_t k, int warps_m, int warps_n, int k_interleave = 1);
int64_t interleaved_k(int64_t step, int64_t column, int64_t k_interleave);
// interleave p > 1 (dividing the atoms per warp, nt): atom r + p*q takes columns p*g + r of the
// 8p columns from 8p*q on (g the lane's group), instead of 8*(r + p*q) + g. An mma sums over k
// only, so any column order that B and C share computes the same tile; this one puts a thread's
// columns of p neighbouring atoms side by side (an 8-bit B row read p bytes at once, C stored 2p
// elements at once). The C layout must use the same p.
Result<RegisterLayout> mma_b_layout(int64_t k, int64_t n, int warps_m, int warps_n, int interleave = 1,
                                    int k_interleave = 1);
Result<RegisterLayout> mma_c_layout(int64_t m, int64_t n, int warps_m, int warps_n, int interleave = 1);
// The swapped product of a short A (1, 2, 4 or 8 rows on one warp along M, columns not
// interleaved): C = (B^T A^T)^T. Instruction j of a warp takes B's n8 atoms 2j and 2j + 1 (as
// mma_b_layout holds them) as the 16 rows of its A and A's a_0, a_1, a_4, a_5 (row g % M, as
// mma_a_layout holds them) as its B, so one m16n8k16 covers 16 columns where the direct form,
// whose 16 rows repeat the M rows, covers 8, and no repeated row is copied into a fragment. The
// accumulator is the instruction's D transposed: lane (g, t)'s c_0, c_1 are rows (2t, 2t + 1) % M
// of column 16j + g of the warp's columns, c_2, c_3 the same rows of column 16j + g + 8:
//   mma_swapped_c_layout(1, 64, 2)   (((4,8),(1,2)),((2,2),2)):(((0,1),(0,32)),((0,8),16))
//                                    c_1 repeats c_0 (one row)
bool mma_swap_fits(int64_t m, int64_t n, int warps_m, int warps_n);
Result<RegisterLayout> mma_swapped_c_layout(int64_t m, int64_t n, int warps_n);
// The reads of mma_b_layout(k, n, warps_m, warps_n, interleave) that shared_read_plan groups: the
// same (thread, element) pairs with each k row's `interleave` neighbouring atoms first among a
// thread's slots, so that `interleave` neighbouring slots are one read (for counting its bank
// conflicts as vectors).
Result<layout::TVLayout> mma_b_row_reads(int64_t k, int64_t n, int warps_m, int warps_n, int interleave);

// The layout of a reduce's result: `source` with `axis` removed (its thread leaves get stride
// 0, its slot leaves disappear, and so do stride-0 slot leaves: the result holds each element
// once). Fails on impure leaves.
Result<RegisterLayout> slice_layout(const RegisterLayout& source,
                                    const std::vector<int64_t>& shape, int axis);
// How a reduce over `axis` combines across threads: the lane masks of the xor butterfly and
// whether warps must combine through shared memory. Fails on impure leaves and on thread leaves
// that are not powers of two or straddle the warp boundary.
struct ReducePlan {
  std::vector<int> xor_masks;
  bool cross_warp = false;
  // The thread leaves along the axis beyond one warp: (thread stride, extent) pairs; threads
  // that differ only in these coordinates combine their partials through shared memory.
  std::vector<std::pair<int64_t, int64_t>> warp_leaves;
};
Result<ReducePlan> reduce_plan(const RegisterLayout& source, const std::vector<int64_t>& shape,
                               int axis);
// The layout of Permute(x, order) that keeps every slot where it is (no data movement).
Result<RegisterLayout> permute_layout(const RegisterLayout& source,
                                      const std::vector<int64_t>& shape,
                                      const std::vector<int>& order);

// slot_elements(L)[t * slots + v] = L.tv.index(t, v).
std::vector<int64_t> slot_elements(const RegisterLayout& layout);

// Register-only data movement: for every thread t and result slot v, the source slot of thread
// t holding the element `needed[t * result_slots + v]` (a column-major index into the source
// tile). Fails naming the first thread and element it does not hold.
Result<std::vector<int32_t>> register_gather(const RegisterLayout& source,
                                             int64_t source_elements,
                                             const std::vector<int64_t>& needed,
                                             int64_t result_slots);

// A move between register tiles: result element c reads source element
//   Copy          c                      (same shape, another layout)
//   Broadcast     (c[dims[0]], c[dims[1]], ...)
//   Permute       s with s[dims[k]] = c[k]
//   ExtractSlice  c + offsets
// `argument` is the dims or the offsets.
enum class RegisterMove { Copy, Broadcast, Permute, ExtractSlice, InterleavedSlice };

// The move a Broadcast, Permute, ExtractSlice or (register) ConvertLayout op performs, with its
// argument written to `argument` (an interleaved slice: its offsets, then the interleave).
RegisterMove register_move_of(const Op& op, std::vector<int64_t>* argument);

// For each result element of `elements` (column-major indices into `result_shape`), the
// column-major index of the source element the move reads. The interpreter, the verifier and the
// emitter all read register moves through this one definition.
std::vector<int64_t> register_move_sources(RegisterMove move, const std::vector<int64_t>& argument,
                                           const std::vector<int64_t>& source_shape,
                                           const std::vector<int64_t>& result_shape,
                                           const std::vector<int64_t>& elements);

// Whether the move needs no data exchange between threads: nullopt when every thread already
// holds the source elements its result slots read, otherwise register_gather's reason. The
// answer depends only on the layouts, shapes and argument, and the search compiles the same
// moves hundreds of times over tiles of up to a few hundred thousand elements, so it is
// remembered for the life of the process (thread-safe).
std::optional<std::string> register_move_error(RegisterMove move, const RegisterLayout& source,
                                               const std::vector<int64_t>& source_shape,
                                               const RegisterLayout& result,
                                               const std::vector<int64_t>& result_shape,
                                               const std::vector<int64_t>& argument);

// The ldmatrix.x4 [.trans] issues that load an mma A or B fragment tile of `shape` in `layout`
// from shared memory, as the MA interpreter executes them and the studio draws them: per warp,
// one issue per 16x16 A block (k outer, m inner) or per pair of 16x8 B blocks (k outer, n inner).
// Lane 8j + r gives the tile coordinate where row r of matrix j begins (8 elements along the
// tile's columns without .trans, along its rows with .trans); register j's element e of lane l
// is, without .trans, element 2*(l%4)+e of lane 8j + l/4's row, with .trans element l/4 of lane
// 8j + 2*(l%4)+e's row, and lands in result slot `slot[j][e]`. Empty for any other layout.
struct LdmatrixIssue {
  int warp = 0;
  std::array<std::array<int64_t, 2>, kWarpSize> lane_start{};
  std::array<std::array<int64_t, 2>, 4> slot{};
};
std::vector<LdmatrixIssue> ldmatrix_issues(const RegisterLayout& layout,
                                           const std::vector<int64_t>& shape, bool trans,
                                           int warps);

// One line: "mma_c warps(4,1) ((4,8),(4,1)):(...) ..." -- the kind and the TV layout text.
std::string layout_text(const RegisterLayout& layout);

// How a thread reads a register tile from shared memory element-wise (SharedRead::Scalar): one
// ld.shared per group of n slots (n a power of two, n elements at most 16 bytes) whose elements
// lie at offsets first .. first + n - 1 of the allocation in every thread, first a multiple of n,
// inside one group of elements the swizzle keeps together (its base) and one stage; each group in
// address order. The slots need not be neighbours: an mma fragment whose atoms take interleaved
// columns (mma_b_layout) holds one row's bytes of several atoms side by side. A slot holding the
// same element as an earlier one (a replicated layout: the 16 rows of an atom over a 1-row tile)
// is copied from it instead. Every other slot is a group of its own. Deterministic: groups form
// in the order of thread 0's offsets.
//   int8[16, 64] B fragment over 4 warps, two atoms per warp interleaved (column = 2g + atom):
//   slots 0 and 4 (row 2t, columns 2g, 2g + 1) are one 2-byte read; 8 reads instead of 16.
struct SharedReadPlan {
  std::vector<std::vector<int64_t>> groups;
  std::vector<std::pair<int64_t, int64_t>> copies;  // (slot, the slot whose element it copies)
  // Whether the plan reads anything together: a group of several slots, or a slot copied from
  // another. A plan of single slots only is read in the element-wise form instead: one byte per
  // read at a hoisted address was slower than at its own computed offset (the int8 decode's 16-
  // and 32-column tiles, whose lanes' bytes are all in different rows: 19.4 µs against 13.7 on
  // the H200; the fp8 GEMM's 64 x 256 x 32 tile, 1110 µs against 684.5).
  bool reads_together() const {
    if (!copies.empty()) return true;
    for (const std::vector<int64_t>& group : groups) {
      if (group.size() > 1) return true;
    }
    return false;
  }
};
SharedReadPlan shared_read_plan(const SharedAlloc& alloc, const SharedRef& ref, const RegisterLayout& layout,
                                const std::vector<int64_t>& shape, DType dtype);

// Per-axis element strides of a flat shared allocation (one mode per axis, each of the axis'
// extent); nullopt for a hierarchical one (the 64-column panels of a TMA-written tile).
std::optional<std::vector<int64_t>> flat_shared_strides(const SharedAlloc& alloc);
// The longest run from slot v of a register tile read from `ref` -- n a power of two from
// `longest` down to 2 that `allowed` takes -- whose slots lie at consecutive element offsets
// (before any swizzle; `strides` the allocation's flat ones) in every thread, the first a
// multiple of n and the run inside one stage; 1 when there is none. One ld.shared reads such a
// run: the emitter's wide element-wise reads and a packed int4 tile's reads (up to 32 elements,
// 16 bytes), which the cost model counts the same way.
int64_t consecutive_shared_run(const SharedAlloc& alloc, const SharedRef& ref, const std::vector<int64_t>& strides,
                               const RegisterLayout& layout, const std::vector<int64_t>& shape, int64_t v,
                               int64_t longest, const std::function<bool(int64_t)>& allowed);

// A row-major shared tile (last axis contiguous) with `swizzle` in element units.
layout::ComposedLayout row_major_shared(const std::vector<int64_t>& shape,
                                        const layout::Swizzle& swizzle);
// A row-major, unswizzled shared tile whose rows are `row_pad` elements longer than the tile's
// (rank 2; the pad elements are never read): with a 16-byte pad, rows whose unpadded pitch is a
// multiple of 128 bytes start in different banks instead of the same ones.
//   shape (64, 256), row_pad 8: (64,256):(264,1), cosize 63 * 264 + 256
layout::ComposedLayout padded_row_major_shared(const std::vector<int64_t>& shape, int64_t row_pad);

}  // namespace nautilus::matile
