// The staged epilogue (lower.h rule 7): in a warp-specialized kernel, a 16-bit tile held in the
// wgmma accumulator layout is stored to global memory through shared memory instead of from its
// fragments. In the fragment layout a warp's store instruction writes 8 rows of 4 threads x 2
// elements -- eight 32-byte sectors for 128 bytes, or for 64 bytes of 2-byte accesses when the
// row pitch is odd. Staged, the consumers write the tile with stmatrix (16-byte rows, 8 rows per matrix) into
// a swizzled tile free of bank conflicts, meet at a named barrier, read it back row-wise and
// store each row with consecutive threads on consecutive elements: runs of 16 bytes when every
// row starts 16-byte aligned, else the widest run the pitch and the column offset allow (one
// element for an odd pitch), so a warp's accesses cover whole sectors. Masking at ragged edges is
// the window's, as before. With LowerOptions::realign_rows (opt-in, `--epilogue=realigned`) a
// pitch that is not 16-byte aligned still reads 16-byte runs and marks the store `realigned
// rows`: the emitter stores aligned 16-byte vectors and the row's misaligned ends element by
// element (measured slower than the 2-byte runs on the H100, bench/NOTES.md, so off by default):
//     global_store C[%3 + i0, %14 + i1] bounds [8192, 50257] realigned rows, %27.1   // #L4: runs of 8
//
//   before (MA, consumers):                     after:
//     wgmma.wait_group 0                          wgmma.wait_group 0
//     %27 = cast %acc : bf16[128, 128] #L3        %27 = cast %acc : bf16[128, 128] #L3
//     global_store C[%3 + i0, %14 + i1]           stmatrix.x4 C_staged[0, 0], %27
//       bounds [8192, 50257], %27                 bar.sync                    // named: consumers
//                                                 %27.1 = ld.shared C_staged[0, 0] : ... #L4
//                                                 global_store C[%3 + i0, %14 + i1]
//                                                   bounds [8192, 50257], %27.1
//   shared C_staged : bf16[128, 128] Sw<3,3,4> o (128,128):(128,1)   // #L4: blocked, runs of 1
//
// The staging tile is an allocation of its own beside the TMA ring: the consumer warpgroups
// finish their last wgmma at different times, and one that stages its rows while the other still
// reads the ring would need a barrier of all consumers first. It does not apply -- and the
// kernel's notes say why -- when the tile is not 16-bit (stmatrix), not in the accumulator layout,
// not a multiple of 16 columns, stored inside a loop, stored with its columns along another axis
// than the buffer's last, or when the staging tile would not fit beside the ring.
#include <numeric>
#include <string>

#include "core/layout/tma.h"
#include "core/matile/hopper.h"
#include "core/matile/kernel_lowering.h"
#include "core/matile/printer.h"

namespace nautilus::matile::lowering {

namespace {


// Every value the affine offset takes is a multiple of this (0: the offset is always 0).
int64_t affine_alignment(const Affine& a) {
  int64_t alignment = std::abs(a.constant);
  for (const auto& [atom, coef] : a.atoms) alignment = std::gcd(alignment, std::abs(coef));
  return alignment;
}

}  // namespace

// Why the store of `value` through `window` cannot be staged ("" when it can); `vector` gets the
// run length of the row-wise stores.
std::string KernelLowering::staged_store_refusal(const VOp& op, const Window& window,
                                                 const Value& value, int64_t* vector) {
  if (!options_.stage_epilogue) return "the staged epilogue is turned off (stage_epilogue = false)";
  const TileType& type = value->type;
  const int bytes = dtype_bytes(type.dtype);
  if (bytes != 2) {
    return "stmatrix stores 16-bit elements and the tile is " + std::string(dtype_name(type.dtype));
  }
  if (type.rank() != 2) return "the tile has rank " + std::to_string(type.rank()) + ", not 2";
  const int64_t M = type.shape[0], N = type.shape[1];
  const int warpgroups = static_cast<int>(threads() / kWarpgroupThreads);
  Result<RegisterLayout> accumulator = wgmma_accumulator_layout(M, N, std::max(warpgroups, 1));
  if (!accumulator || value->layout != *accumulator) {
    return "the tile is not held in the wgmma accumulator layout (" + layout_text(value->layout) + ")";
  }
  if (N % 16 != 0) return "stmatrix.x4 stores 16 columns at a time and the tile has " + std::to_string(N);
  if (std::find_if(vk_.body->ops.begin(), vk_.body->ops.end(),
                   [&](const vrtile::OpPtr& top) { return top.get() == &op; }) == vk_.body->ops.end()) {
    return "the store is inside a loop, where the staging tile would need a barrier per iteration";
  }
  const std::vector<int64_t>& shape = op.buffer->shape;
  const size_t rank = shape.size();
  if (window.tile_axes.size() != rank || window.tile_axes[rank - 1] != 1) {
    return "the tile's columns are not along " + op.buffer->name + "'s last axis";
  }
  // The run length: a power of two up to 16 bytes that divides every row pitch the window
  // moves along, the column offset and the tile's columns.
  int64_t alignment = affine_alignment(window.offsets[rank - 1]);
  int64_t stride = 1;
  for (size_t j = rank - 1; j-- > 0;) {
    stride *= shape[j + 1];
    if (window.tile_axes[j] >= 0 || !window.offsets[j].constant_only() || window.offsets[j].constant != 0) {
      alignment = std::gcd(alignment, stride);
    }
  }
  int64_t n = 16 / bytes;
  while (n > 1 && ((alignment != 0 && alignment % n != 0) || N % n != 0)) n /= 2;
  *vector = n;
  const int64_t staging = M * N * bytes;
  const int64_t start = (b_.shared_bytes() + 127) / 128 * 128;
  staging_reuse_ = -1;
  if (start + staging > kSharedBytesPerCta) {
    std::string why;
    staging_reuse_ = reusable_once_tile(op, staging, type.dtype, &why);
    if (staging_reuse_ < 0) {
      staging_lacked_shared_memory_ = true;
      return "its " + std::to_string(staging / 1024) + " KB staging tile does not fit beside the kernel's " +
             std::to_string(b_.shared_bytes() / 1024) + " KB of shared memory (" +
             std::to_string(kSharedBytesPerCta / 1024) + " KB per CTA), and " + why;
    }
  }
  return "";
}

int KernelLowering::reusable_once_tile(const VOp& op, int64_t staging_bytes, DType dtype,
                                       std::string* why) const {
  if (ws_.persistent) {
    *why = "a persistent CTA's producer refills the tiles copied once for its next tile";
    return -1;
  }
  // The store must be the body's last op: nothing after it may still read a tile copied once.
  const auto& ops = vk_.body->ops;
  if (ops.empty() || ops.back().get() != &op) {
    *why = "ops after the store may still read the tiles copied once";
    return -1;
  }
  for (const TmaOperand& operand : ws_.operands) {
    if (!operand.once || operand.alloc < 0) continue;
    const SharedAlloc& tile = b_.shared_allocs()[static_cast<size_t>(operand.alloc)];
    if (tile.alias_of < 0 && dtype_bytes(tile.dtype) == dtype_bytes(dtype) && tile.byte_size >= staging_bytes) {
      return operand.alloc;
    }
  }
  *why = "no tile copied once has its bytes and element size";
  return -1;
}

// After the main loop the consumers are done with the tiles copied once (their last wgmma
// retired before the accumulator was read), so the staging tile may take one's bytes; the
// consumer warpgroups first meet at a named barrier, since one may still be reading the rows
// of the tile that the other's rows of the staging tile overwrite.
int KernelLowering::staging_alloc(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                                  const layout::ComposedLayout& layout, const std::string& purpose,
                                  int64_t alignment) {
  if (staging_reuse_ < 0) return b_.shared(name, dtype, shape, layout, 1, purpose, alignment);
  const int base = staging_reuse_;
  staging_reuse_ = -1;
  const std::string reused = b_.shared_allocs()[static_cast<size_t>(base)].name;
  const int alloc = b_.shared_alias(base, name, dtype, shape, layout,
                                    purpose + "; on the bytes of " + reused + ", which the main loop is done with");
  b_.barrier();  // a named barrier of the consumers: every warpgroup's reads of the tile are over
  return alloc;
}

bool KernelLowering::emit_staged_store(const VOp& op, const Window& window, const Value& value) {
  if (!ws_.loop) return false;  // rule 7 belongs to warp-specialized kernels
  int64_t vector = 1;
  const std::string what = "%" + value->name + " -> " + op.buffer->name;
  const std::string refusal = staged_store_refusal(op, window, value, &vector);
  if (!refusal.empty()) {
    b_.note("epilogue " + what + " stored from its fragments: " + refusal);
    return false;
  }
  const TileType& type = value->type;
  const int bytes = dtype_bytes(type.dtype);
  {
    layout::ComposedLayout tma_layout;
    int swizzle_bytes = 0;
    std::vector<int> tile_axes;
    const bool wanted = options_.tma_store == LowerOptions::TmaStore::Always ||
                        (options_.tma_store == LowerOptions::TmaStore::Persistent && ws_.persistent);
    if (wanted) {
      const std::string no_tma =
          tma_store_refusal(op, window, value, vector, &tma_layout, &swizzle_bytes, &tile_axes);
      if (no_tma.empty()) {
        emit_tma_store(op, window, value, tma_layout, swizzle_bytes, tile_axes);
        return true;
      }
      b_.note("epilogue " + what + " staged without a TMA store: " + no_tma);
    }
  }
  std::string swizzle;
  const layout::ComposedLayout staged_layout = fragment_tile_layout(type.shape, bytes, &swizzle);
  const int64_t pitch = op.buffer->shape.back();
  // Rows whose start is not 16-byte aligned (an odd pitch): still read as 16-byte runs of 8
  // elements, a row on consecutive lanes of one warp, and stored realigned (ir.h,
  // GlobalAccess::realign_rows) -- 16-byte vectors at aligned addresses, the row's misaligned
  // head and tail element by element -- instead of one 2-byte store per element.
  const int64_t full = 16 / bytes;
  const int64_t lanes_per_row = type.shape[1] / full;
  const bool realign = options_.realign_rows && vector < full && type.shape[1] % full == 0 &&
                       kWarpSize % lanes_per_row == 0 && (type.shape[0] * lanes_per_row) % threads() == 0;
  if (realign) vector = full;
  const std::string runs =
      realign ? "16-byte runs realigned to the row's misalignment (row pitch " + std::to_string(pitch) +
                    " elements; head and tail element by element)"
      : vector * bytes == 16 ? "16-byte runs"
                             : std::to_string(vector * bytes) + "-byte runs (row pitch " + std::to_string(pitch) +
                                   " elements, column offset alignment)";
  b_.set_provenance(op.provenance);
  const int alloc = staging_alloc(op.buffer->name + "_staged", type.dtype, type.shape, staged_layout,
                                  "staged epilogue of " + what + ": stmatrix in, coalesced rows of " + runs +
                                      " out; " + swizzle);
  const SharedRef ref{alloc, nullptr, {0, 0}, false};
  b_.set_provenance(op.provenance);
  // A persistent CTA's consumers stage every tile in the same buffer: the previous tile's rows
  // must all be read before any are overwritten.
  if (ws_.persistent) b_.barrier();
  b_.stmatrix(ref, value);
  b_.barrier();  // a named barrier of the consumers: their rows are in the tile
  const RegisterLayout rows = blocked_layout(type.shape, threads(), vector);
  const Value staged = b_.shared_load(ref, SharedRead::Scalar, type, rows, value->name);
  GlobalAccess access = window_access(window, nullptr, nullptr);
  access.realign_rows = realign;
  b_.global_store(op.buffer, std::move(access), {}, staged);
  return true;
}

// Why the staged tile of `value` cannot leave by a TMA store ("" when it can); when it can, the
// staging tile's layout (the MN-major wgmma panels TMA writes box by box), its swizzle and the
// buffer axes of the tile's two axes.
std::string KernelLowering::tma_store_refusal(const VOp& op, const Window& window, const Value& value,
                                              int64_t vector, layout::ComposedLayout* staged_layout,
                                              int* swizzle_bytes, std::vector<int>* tile_axes) {
  const TileType& type = value->type;
  const int bytes = dtype_bytes(type.dtype);
  if (vector * bytes != 16) return "rows or the column offset are not 16-byte aligned, which TMA needs";
  const Buffer& buffer = op.buffer;
  const int rank = static_cast<int>(buffer->shape.size());
  if (rank < 2 || rank > 5) return "tensor maps take ranks 2 to 5";
  if (window.bounds != buffer->shape) {
    return "the window is clipped inside " + buffer->name + ", and a TMA store clips only at its end";
  }
  std::vector<int> axes = {-1, -1};
  for (int axis = 0; axis < rank; ++axis) {
    const int t = window.tile_axes[static_cast<size_t>(axis)];
    if (t == 0 || t == 1) axes[static_cast<size_t>(t)] = axis;
  }
  if (axes[0] < 0 || axes[0] >= axes[1] || axes[1] != rank - 1) {
    return "the tile does not take two axes of " + buffer->name + " in order, the second its last";
  }
  layout::Result<RingLayout> tile = ring_layout(bytes, type.shape, /*mn_is_axis0=*/false);
  if (!tile) return "no swizzled panel layout fits the tile: " + tile.error().message;
  layout::Result<layout::TmaTilePlan> boxes = plan_buffer_tile(buffer, axes[0], tile->layout, bytes);
  if (!boxes) return "TMA cannot write the tile: " + boxes.error().message;
  *staged_layout = tile->layout;
  *swizzle_bytes = tile->swizzle_bytes;
  *tile_axes = axes;
  return "";
}

// Rule 7's TMA form: the consumers stage the tile with stmatrix into swizzled panels, make their
// writes visible to the async proxy, meet at a named barrier, and one thread stores the tile
// with TMA and commits the bulk group. The consumers do not wait for the store: a persistent
// CTA's next tile waits for the store's reads (bulk wait_group.read) before it stages again, and
// the role waits before it ends.
//
//   stmatrix.x4 C_staged[0, 0], %27
//   fence.proxy.async
//   bar.sync 9, 256
//   tma.store tm_C[%3, %14] <- C_staged[0, 0]
//   cp.async.bulk.commit_group
void KernelLowering::emit_tma_store(const VOp& op, const Window& window, const Value& value,
                                    const layout::ComposedLayout& staged_layout, int swizzle_bytes,
                                    const std::vector<int>& tile_axes) {
  const TileType& type = value->type;
  const Buffer& buffer = op.buffer;
  const std::string what = "%" + value->name + " -> " + buffer->name;
  b_.set_provenance(op.provenance);
  const int alloc = staging_alloc(buffer->name + "_staged", type.dtype, type.shape, staged_layout,
                                  "staged epilogue of " + what + ": stmatrix in, a TMA store out (" +
                                      std::to_string(swizzle_bytes) + "-byte swizzled panels)",
                                  int64_t{8} * swizzle_bytes);  // the swizzle atom: 8 rows of S bytes
  std::vector<int64_t> box(buffer->shape.size(), 1);
  box[static_cast<size_t>(tile_axes[0])] = type.shape[0];
  box[static_cast<size_t>(tile_axes[1])] = type.shape[1];
  const int rank = static_cast<int>(buffer->shape.size());
  const bool trailing = tile_axes == std::vector<int>{rank - 2, rank - 1};
  const auto row_major = tma_box_layout(type.dtype, type.shape, swizzle_bytes);
  const int map = b_.tma_map("tm_" + buffer->name, buffer, box, swizzle_bytes,
                             row_major && *row_major == staged_layout ? std::nullopt : std::optional(staged_layout),
                             trailing ? std::vector<int>{} : tile_axes);
  const SharedRef ref{alloc, nullptr, {0, 0}, false};
  b_.set_provenance(op.provenance);
  if (ws_.persistent) {
    // The previous tile's store must have read the staging tile before it is overwritten (the
    // first tile has no group to wait for).
    b_.bulk_wait_group(0, /*read=*/true);
    b_.barrier();
  }
  ws_.bulk_stores = true;
  b_.stmatrix(ref, value);
  b_.fence_proxy_async();
  b_.barrier();  // a named barrier of the consumers: their rows are in the tile
  std::vector<Value> coordinates;
  for (const Affine& offset : window.offsets) {
    const Value c = emit_offset(offset, nullptr, nullptr);
    coordinates.push_back(c ? c : index_constant(0));
  }
  b_.tma_store(map, coordinates, ref);
  b_.bulk_commit_group();
  if (!ws_.persistent) b_.bulk_wait_group(0, /*read=*/true);
}

}  // namespace nautilus::matile::lowering
