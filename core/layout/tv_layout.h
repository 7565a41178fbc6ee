// Thread-value (TV) layouts: which element of a tile each thread of an instruction holds.
//
// A TVLayout is a rank-2 layout (thread, value) -> index of an element of `tile`, where the
// index is the tile's column-major (colexicographic) order: element (row, col) of a (R, C) tile
// has index row + R*col. Mode 0 enumerates threads (lanes for warp instructions), mode 1 the
// values a thread holds, in register order. Hexcute registers every copy and MMA instruction as
// such layouts and solves for the layouts of the operands through them (DESIGN.md §5); the GUI
// draws them as thread/value grids (printer.h: render_grid).
//
// The instruction layouts below are derived from the fragment formulas of the PTX ISA; the
// tests check them against those formulas written out independently. Matrices keep the PTX
// orientation: A is M x K, B is K x N, C/D is M x N, all indexed (row, col) as in the ISA's
// "row = ..., col = ..." formulas. With groupID = lane / 4 and t = lane % 4:
//   mma.sync.m16n8k16 A (f16/bf16, 16x16): a_i at row groupID + 8*((i/2)%2),
//                                          col 2t + i%2 + 8*(i/4)
//     ((4,8),(2,2,2)):((32,1),(16,8,128))
//   mma.sync.m16n8k16 B (f16/bf16, 16x8):  b_i at row 2t + i%2 + 8*(i/2), col groupID
//     ((4,8),(2,2)):((2,16),(1,8))
//   mma.sync.m16n8k16 C/D (f32, 16x8):     c_i at row groupID + 8*(i/2), col 2t + i%2
//     ((4,8),(2,2)):((32,1),(16,8))          (f16 accumulators hold the same elements)
#pragma once

#include <cstdint>

#include <vector>

#include "core/layout/int_tuple.h"
#include "core/layout/layout.h"
#include "core/layout/result.h"

namespace nautilus::layout {

struct TVLayout {
  Layout layout;  // (thread, value) -> column-major index into `tile`
  IntTuple tile;  // the tile's shape, (rows, cols) for every instruction layout below

  int64_t threads() const { return layout.mode_size(0); }
  int64_t values() const { return layout.mode_size(1); }
  // The column-major index of the element that `thread` holds as value `value`.
  int64_t index(int64_t thread, int64_t value) const {
    return layout.mode_offset(0, thread) + layout.mode_offset(1, value);
  }
  // The natural tile coordinate of that element, e.g. (row, col).
  IntTuple element(int64_t thread, int64_t value) const {
    return coordinate_of(index(thread, value), tile);
  }

  bool operator==(const TVLayout&) const = default;
};

// TVLayout::index for every thread and value at once: the thread mode's offsets and the value
// mode's, each evaluated once, so a walk over all elements evaluates threads + values offsets
// instead of their product (the search's bank-conflict counts and shared read plans of wide
// int8 tiles spent most of a compile there).
struct TVIndexTable {
  std::vector<int64_t> thread, value;
  explicit TVIndexTable(const TVLayout& tv) : thread(static_cast<size_t>(tv.threads())),
                                              value(static_cast<size_t>(tv.values())) {
    for (size_t t = 0; t < thread.size(); ++t) thread[t] = tv.layout.mode_offset(0, static_cast<int64_t>(t));
    for (size_t v = 0; v < value.size(); ++v) value[v] = tv.layout.mode_offset(1, static_cast<int64_t>(v));
  }
  int64_t index(int64_t t, int64_t v) const {
    return thread[static_cast<size_t>(t)] + value[static_cast<size_t>(v)];
  }
};

// Checked construction: `layout` has rank 2, non-negative strides, and its image lies inside
// the tile (cosize(layout) <= size(tile)).
Result<TVLayout> make_tv_layout(Layout layout, IntTuple tile);

// mma.sync.aligned.m16n8k16 fragments of one warp (formulas above).
TVLayout mma_m16n8k16_a();
TVLayout mma_m16n8k16_b();
TVLayout mma_m16n8k16_c();

// ldmatrix.sync.aligned.m8n8.x4.b16 (not transposed) on a 16x16 tile of 16-bit elements whose
// four 8x8 matrices are placed as mma's A operand wants them: matrix j covers rows
// 8*(j%2) .. +7 and columns 8*(j/2) .. +7.
// Addresses: lane l supplies the address of row l%8 of matrix l/8; its 8 values are that
// row's 8 consecutive elements (16 bytes).   ((8,2,2),8):((1,8,128),16)
TVLayout ldmatrix_x4_addresses();
// Fragment: register j of lane l receives elements (l/4, 2*(l%4)) and (l/4, 2*(l%4)+1) of
// matrix j, so value v = e + 2*j is element e of register j -- exactly mma_m16n8k16_a().
TVLayout ldmatrix_x4_fragment();

// Repeats an instruction's TV layout over a larger tile: the atom's (r, c) tile is placed at
// every (r, c) block of `tile` (blocks in column-major order) and the values gain a block mode
// -- the loop over instruction issues. The threads stay the atom's.
// @post result.element(t, v + values(atom) * b) == atom.element(t, v) + (r*bi, c*bj) for the
//       block b = bi + (rows/r)*bj; fails unless the tiles have equal rank and r, c divide them
// tile_tv_layout(mma_m16n8k16_c(), (32,16)):  ((4,8),((2,2),(2,2))):((64,1),((32,8),(16,256)))
Result<TVLayout> tile_tv_layout(const TVLayout& atom, const IntTuple& tile);

// A vectorized copy of a (rows, cols) tile stored row-major (global ldg/stg or cp.async),
// 16 bytes per access: consecutive threads take consecutive 16-byte chunks along a row, so a
// warp's accesses coalesce. Each thread's values are its vectors' elements, vector after vector
// (16 / element_bytes values per access; element_bytes is 1, 2, 4, 8 or 16). When a row has fewer
// chunks than there are threads, the threads cover several rows per step; when it has more, each
// thread takes several chunks of a row. When neither divides the other (10 chunks of an 80-wide
// f16 row, 128 threads), gcd(chunks, threads) threads share a row's chunks and the rest of the
// threads cover rows. Fails unless the threads split that way exactly.
// 64x64 bf16, 128 threads: ((8,16),(8,4)):((512,1),(64,16))
// 64x80 f16, 128 threads:  ((2,64),(8,5)):((512,1),(64,1024))
Result<TVLayout> copy_row_major_16b(int64_t rows, int64_t cols, int element_bytes, int64_t threads);
// The same with `vector` elements an access: 32 for int4, packed two elements a byte.
Result<TVLayout> copy_row_major_vectors(int64_t rows, int64_t cols, int64_t vector, int64_t threads);

}  // namespace nautilus::layout
