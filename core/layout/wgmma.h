// Layouts of Hopper's warpgroup MMA (wgmma.mma_async): register fragments as thread-value
// layouts, the canonical shared-memory layouts it reads, and its 64-bit matrix descriptors
// derived from those layouts.
//
// Orientation. A wgmma m64nNk16 multiplies A (64 x 16, M x K) by B (16 x N, K x N) into D
// (64 x N). Register fragments keep the PTX orientation of tv_layout.h: (row, col) tiles with
// column-major indices. Shared-memory operands are described as *operand tiles* indexed
// (mn, k): for A, mn is the row m; for B, mn is the column n. Both operands are then the same
// kind of object, and only their *major-ness* differs:
//   K-major   k is contiguous (a row-major A, a column-major B: "not transposed")
//   MN-major  mn is contiguous (a column-major A, a row-major B: "transposed", 16-bit only)
//
// Register layouts (groupID = lane / 4, t = lane % 4, warp = thread / 32):
//   accumulator m64nNk16 (f32, N/2 values): d_i at row 16*warp + groupID + 8*((i/2)%2),
//                                            col 8*(i/4) + 2t + i%2
//     wgmma_accumulator(N) == ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512)) on (64,N)
//   A from registers (RS form, 16-bit, 8 values): a_i at row 16*warp + groupID + 8*((i/2)%2),
//                                                  col 2t + i%2 + 8*(i/4)
//     wgmma_a_registers() == ((4,8,4),(2,2,2)):((128,1,16),(64,8,512)) on (64,16)
// Both are four warps of the mma.sync m16n8k16 fragments stacked along M, and are built that way
// with tile_over_thread_groups(), which also spreads several warpgroups over a larger tile.
//
// Shared-memory layouts. wgmma reads an operand as 8 x 16-byte "core matrices" arranged in one of
// four layout types, the PTX ISA's canonical layouts (T = 16 / element bytes, W = the swizzle
// span: 16 bytes without swizzle ("interleave"), 32, 64 or 128 bytes), in element units:
//   K-major,  no swizzle   ((8,m),(T,2k)):((T,SBO),(1,LBO))
//   K-major,  W swizzle    ((8,m),(T,2k)):((W/e,SBO),(1,T))          o Sw<log2(W/16),4,3>
//   MN-major, no swizzle   ((T,1,m),(8,k)):((1,T,SBO),(T,LBO))
//   MN-major, W swizzle    ((T,W/16,m),(8,k)):((1,T,LBO),(W/e,SBO))  o Sw<log2(W/16),4,3>
// with e the element bytes and the swizzle acting on byte addresses. wgmma_shared_layout()
// builds a whole tile by repeating the atom of its layout type (8 rows of W bytes for K-major,
// 8 k-rows of W bytes of mn for MN-major). K-major atoms repeat along mn first and MN-major atoms
// along k first, so that in both each W-byte-wide column of the tile is dense: one TMA box
// (tma.h) fills it.
//   wgmma_shared_layout(K, SW128, 2 bytes, 64, 64)   == Sw<3,3,3> o (64,64):(64,1)
//   wgmma_shared_layout(K, SW128, 2 bytes, 128, 128) == Sw<3,3,3> o (128,(64,2)):(64,(1,8192))
//
// Descriptors. wgmma_descriptor() reads LBO, SBO and the swizzle mode off the strides of a tile
// layout (any layout, not only the ones above): it splits the operand block one wgmma reads
// into the canonical modes with the layout algebra, checks that the fixed strides are the
// canonical ones and takes LBO/SBO from the free ones, and fails with the reason when the block
// is not a layout wgmma can read. The hardware then reads element (mn, k) of the block at
//   swizzle(start + canonical(mn, k; LBO, SBO))
// where the swizzle XORs bits of the absolute shared-memory address; that is why a swizzled tile
// must start at a multiple of the swizzle's repeat, 8*W bytes (1024 B for SW128), and the
// descriptor's base offset is then 0. wgmma_descriptor_address() is that hardware formula.
#pragma once

#include <cstdint>
#include <string>

#include "core/layout/int_tuple.h"
#include "core/layout/layout.h"
#include "core/layout/result.h"
#include "core/layout/swizzle.h"
#include "core/layout/tv_layout.h"

namespace nautilus::layout {

enum class OperandMajor { K, MN };
const char* operand_major_name(OperandMajor major);  // "K-major", "MN-major"

// ---- Register fragments ---------------------------------------------------------------------

// The f32 accumulator of wgmma m64nNk16 for one warpgroup (128 threads) on a (64, n) tile.
// Fails unless 8 <= n <= 256 and n is a multiple of 8.
Result<TVLayout> wgmma_accumulator(int64_t n);
// The 16-bit A operand of the register (RS) form of m64nNk16 on a (64, 16) tile: 8 values a
// thread, in the order of its four .b32 registers' halves.
TVLayout wgmma_a_registers();

// Spreads a TV layout over groups of threads: the threads of group g = gi + groups_m*gj hold
// the atom's elements placed at block (gi, gj) of a groups_m x groups_n grid of atom tiles, and
// that grid repeats over `tile` (the repeats become a value mode, as in tile_tv_layout).
// The thread mode gains the group mode, so the result has threads(atom)*groups_m*groups_n
// threads; modes are coalesced by profile.
// @post result.element(t + threads(atom)*g, v + values(atom)*b)
//         == atom.element(t, v) + (r*(gi + groups_m*bi), c*(gj + groups_n*bj))
//       for the repeat b = bi + (rows / (r*groups_m)) * bj
// tile_over_thread_groups(mma_m16n8k16_c(), 4, 1, (64,8)) == wgmma_accumulator(8)
// Two consumer warpgroups over M = 128 (the second warpgroup's warps simply continue the
// first's: 8 warps of 16 rows):
//   tile_over_thread_groups(wgmma_accumulator(64), 2, 1, (128,64))
//     == ((4,8,8),(2,2,8)):((256,1,16),(128,8,1024)) on (128,64)
Result<TVLayout> tile_over_thread_groups(const TVLayout& atom, int64_t groups_m, int64_t groups_n,
                                         const IntTuple& tile);

// ---- Canonical shared-memory layouts -----------------------------------------------------------

// The (mn, k) extent of one atom of a layout type: (8, W/e) for K-major, (W/e, 8) for MN-major
// (W = 16 bytes for SwizzleMode::None). Fails for element sizes wgmma cannot read that way
// (element_bytes must be 1, 2 or 4 for K-major, 2 for MN-major).
Result<IntTuple> wgmma_shared_atom_shape(OperandMajor major, SwizzleMode swizzle,
                                         int element_bytes);

// The canonical layout of an (mn, k) operand tile in element units, its swizzle rebased to
// elements: the atom above repeated mn-direction first, then k. Fails unless mn and k are
// multiples of the atom's extents.
// K-major:  ((8, mn/8), (W/e, k/(W/e))) : ((W/e, 8W/e), (1, mn*W/e))
// MN-major: ((W/e, mn/(W/e)), (8, k/8)) : ((1, k*W/e), (W/e, 8W/e))
// each mode coalesced (coalesce by profile (1,1)), so a 64-wide SW128 K-major tile is simply a
// swizzled row-major one.
Result<ComposedLayout> wgmma_shared_layout(OperandMajor major, SwizzleMode swizzle,
                                           int element_bytes, int64_t mn, int64_t k);

// ---- Descriptors -------------------------------------------------------------------------------

// The fields of a wgmma shared-memory matrix descriptor, in bytes (the encoding drops the low 4
// bits). Bits: [0,14) start>>4, [16,30) LBO>>4, [32,46) SBO>>4, [49,52) base offset, [62,64)
// layout type (0 interleave, 1 SW128, 2 SW64, 3 SW32).
struct WgmmaDescriptor {
  int64_t start_address = 0;        // shared-memory byte address of the block's element (0, 0)
  int64_t leading_byte_offset = 0;  // LBO
  int64_t stride_byte_offset = 0;   // SBO
  int base_offset = 0;              // 0: the swizzle pattern starts at an aligned address
  SwizzleMode swizzle = SwizzleMode::None;

  uint64_t encode() const;
  static WgmmaDescriptor decode(uint64_t bits);
  bool operator==(const WgmmaDescriptor&) const = default;
};

// "start 0x400 LBO 16 SBO 1024 base 0 SW128"
std::string to_string(const WgmmaDescriptor& descriptor);

// The k extent one wgmma reads: 32 bytes of k (16 for bf16/f16, 32 for 8-bit, 8 for tf32).
int64_t wgmma_k_extent(int element_bytes);

// The descriptor of the block of `tile` that one wgmma reads: mn in [mn_block*mn_extent, +
// mn_extent) (mn_extent = 64 for A, N for B) and k in [k_block*k, +k) with k = wgmma_k_extent.
// `tile` maps (mn, k) to element offsets from `tile_start_address` (a shared-memory byte
// address). Errors name the reason: an element size or major-ness wgmma lacks, a swizzle that is
// not one of the four modes, a misaligned start (8*W bytes for a swizzled tile, 16 otherwise),
// a block outside the tile, a block that is not canonical (which stride is wrong and what it
// should be), or an offset too large for its 14-bit field.
// @post for every (mn, k) of the block: wgmma_descriptor_address(result, major, e, mn, k)
//         == tile_start_address + e * tile(mn_block*mn_extent + mn, k_block*k_extent + k)
Result<WgmmaDescriptor> wgmma_descriptor(const ComposedLayout& tile, int element_bytes,
                                         OperandMajor major, int64_t tile_start_address,
                                         int64_t mn_extent, int64_t mn_block = 0,
                                         int64_t k_block = 0);

// Where the blocks of a tile start, relative to block (0, 0): a layout from (mn_block, k_block)
// to the byte offset that moves the descriptor of block (0, 0) to that block. This is the step
// for each k16 slice (mode 1) and each 64-row (A) or N-column (B) block (mode 0) of a larger
// tile; it is not constant where the k blocks cross from one swizzle atom to the next.
// @post wgmma_descriptor(..., mn_block, k_block).start_address
//         == wgmma_descriptor(..., 0, 0).start_address + result((mn_block, k_block))
// bf16 K-major SW128 (128,128) tile, mn_extent 64:  (2,(4,2)):(8192,(32,16384))
Result<Layout> wgmma_block_offsets(const ComposedLayout& tile, int element_bytes,
                                   OperandMajor major, int64_t mn_extent);

// The byte address at which the hardware reads element (mn, k) of the block a descriptor
// describes: the PTX ISA's canonical layout of its layout type evaluated with its LBO and SBO,
// added to the start address, then swizzled on the absolute address. (The simulator's and the
// tests' model of what wgmma reads.)
int64_t wgmma_descriptor_address(const WgmmaDescriptor& descriptor, OperandMajor major,
                                 int element_bytes, int64_t mn, int64_t k);

}  // namespace nautilus::layout
