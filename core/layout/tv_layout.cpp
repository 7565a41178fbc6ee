#include "core/layout/tv_layout.h"

#include <numeric>
#include <string>
#include <vector>

#include "core/layout/printer.h"

namespace nautilus::layout {

Result<TVLayout> make_tv_layout(Layout layout, IntTuple tile) {
  const std::string context = "TV layout " + to_string(layout) + " of tile " + to_string(tile);
  if (layout.rank() != 2) return layout_error(context + ": needs rank 2 (thread, value)");
  for (int64_t d : leaves(layout.stride())) {
    if (d < 0) return layout_error(context + ": negative stride");
  }
  for (int64_t extent : leaves(tile)) {
    if (extent < 1) return layout_error(context + ": tile modes must be >= 1");
  }
  if (layout.cosize() > product(tile)) {
    return layout_error(context + ": reaches index " + std::to_string(layout.cosize() - 1) +
                        " outside the tile of " + std::to_string(product(tile)) + " elements");
  }
  return TVLayout{std::move(layout), std::move(tile)};
}

// The fragments are written as (thread, value) shapes whose strides are the column-major tile
// index steps of each PTX formula term: in a 16-row tile, +1 row is +1 and +1 col is +16.

TVLayout mma_m16n8k16_a() {
  // thread (t, groupID): col + 2t, row + groupID; value (i%2, (i/2)%2, i/4): col + 1, row + 8,
  // col + 8.
  return {Layout(tuple_of(tuple_of(4, 8), tuple_of(2, 2, 2)),
                 tuple_of(tuple_of(32, 1), tuple_of(16, 8, 128))),
          tuple_of(16, 16)};
}

TVLayout mma_m16n8k16_b() {
  // thread (t, groupID): row + 2t, col + groupID; value (i%2, i/2): row + 1, row + 8.
  return {
      Layout(tuple_of(tuple_of(4, 8), tuple_of(2, 2)), tuple_of(tuple_of(2, 16), tuple_of(1, 8))),
      tuple_of(16, 8)};
}

TVLayout mma_m16n8k16_c() {
  // thread (t, groupID): col + 2t, row + groupID; value (i%2, i/2): col + 1, row + 8.
  return {
      Layout(tuple_of(tuple_of(4, 8), tuple_of(2, 2)), tuple_of(tuple_of(32, 1), tuple_of(16, 8))),
      tuple_of(16, 8)};
}

TVLayout ldmatrix_x4_addresses() {
  // thread (row in matrix, j%2, j/2): row + 1, row + 8, col + 8; value: col + 1.
  return {Layout(tuple_of(tuple_of(8, 2, 2), 8), tuple_of(tuple_of(1, 8, 128), 16)),
          tuple_of(16, 16)};
}

TVLayout ldmatrix_x4_fragment() { return mma_m16n8k16_a(); }

Result<TVLayout> tile_tv_layout(const TVLayout& atom, const IntTuple& tile) {
  const std::string context = "tiling TV layout " + to_string(atom) + " to " + to_string(tile);
  const std::vector<int64_t> atom_extents = leaves(atom.tile);
  const std::vector<int64_t> extents = leaves(tile);
  if (atom_extents.size() != extents.size()) return layout_error(context + ": ranks differ");
  // embed: atom tile coordinate -> index in the target tile; blocks: block -> index of its
  // first element.
  std::vector<int64_t> embed_strides, block_extents, block_strides;
  int64_t running = 1;
  for (size_t k = 0; k < extents.size(); ++k) {
    if (extents[k] % atom_extents[k] != 0) {
      return layout_error(context + ": mode " + std::to_string(k) + " is not a multiple of " +
                          std::to_string(atom_extents[k]));
    }
    embed_strides.push_back(running);
    block_extents.push_back(extents[k] / atom_extents[k]);
    block_strides.push_back(running * atom_extents[k]);
    running *= extents[k];
  }
  const Layout embed(unflatten(atom_extents, atom.tile), unflatten(embed_strides, atom.tile));
  const Layout blocks(unflatten(block_extents, tile), unflatten(block_strides, tile));
  Result<Layout> placed = composition(embed, atom.layout);
  if (!placed) return layout_error(context + ": " + placed.error().message);
  return TVLayout{concatenate({placed->mode(0), concatenate({placed->mode(1), blocks})}), tile};
}

Result<TVLayout> copy_row_major_16b(int64_t rows, int64_t cols, int element_bytes,
                                    int64_t threads) {
  if (element_bytes < 1 || element_bytes > 16 || 16 % element_bytes != 0) {
    return layout_error("16-byte row-major copy of a " + std::to_string(rows) + "x" + std::to_string(cols) +
                        " tile of " + std::to_string(element_bytes) + "-byte elements by " +
                        std::to_string(threads) + " threads: the element size must divide 16 bytes");
  }
  return copy_row_major_vectors(rows, cols, 16 / element_bytes, threads);
}

Result<TVLayout> copy_row_major_vectors(int64_t rows, int64_t cols, int64_t vector, int64_t threads) {
  const std::string context = "16-byte row-major copy of a " + std::to_string(rows) + "x" +
                              std::to_string(cols) + " tile, " + std::to_string(vector) +
                              " elements an access, by " + std::to_string(threads) + " threads";
  if (rows < 1 || cols < 1 || threads < 1 || vector < 1) return layout_error(context + ": sizes must be >= 1");
  if (cols % vector != 0) {
    return layout_error(context + ": a row is not a whole number of 16-byte chunks");
  }
  const int64_t chunks = cols / vector;  // 16-byte chunks per row
  // Index steps in the column-major tile: next row +1, next chunk +vector*rows.
  const int64_t chunk_step = vector * rows;
  if (threads % chunks == 0) {
    const int64_t band = threads / chunks;  // rows covered by one step of all threads
    if (rows % band != 0) {
      return layout_error(context + ": the " + std::to_string(band) +
                          " rows covered per step do not divide the rows");
    }
    const Layout tv(tuple_of(tuple_of(chunks, band), tuple_of(vector, rows / band)),
                    tuple_of(tuple_of(chunk_step, 1), tuple_of(rows, band)));
    return TVLayout{coalesce(tv, tuple_of(1, 1)), tuple_of(rows, cols)};
  }
  if (chunks % threads == 0) {
    const int64_t repeats = chunks / threads;  // chunks of one row per thread
    const Layout tv(tuple_of(threads, tuple_of(vector, repeats, rows)),
                    tuple_of(chunk_step, tuple_of(rows, threads * chunk_step, 1)));
    return TVLayout{coalesce(tv, tuple_of(1, 1)), tuple_of(rows, cols)};
  }
  // Neither divides the other: c threads along a row's chunks (c divides both), the other
  // threads along the rows. Without this a 64x80 f16 tile fell back to 2 copying threads.
  const int64_t along_row = std::gcd(chunks, threads);
  const int64_t along_columns = threads / along_row;
  if (rows % along_columns == 0) {
    const Layout tv(tuple_of(tuple_of(along_row, along_columns),
                             tuple_of(vector, chunks / along_row, rows / along_columns)),
                    tuple_of(tuple_of(chunk_step, 1),
                             tuple_of(rows, along_row * chunk_step, along_columns)));
    return TVLayout{coalesce(tv, tuple_of(1, 1)), tuple_of(rows, cols)};
  }
  return layout_error(context + ": " + std::to_string(chunks) +
                      " chunks per row do not divide evenly among the threads");
}

}  // namespace nautilus::layout
