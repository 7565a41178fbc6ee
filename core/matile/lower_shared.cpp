// Shared operands (lower.h rule 2): the allocation of a tile read through shared memory, whose
// swizzle is the candidate with the fewest ldmatrix wavefronts (layout/bank_conflicts.h); its
// global -> shared copy as 16-byte cp.async vectors with zero-fill past the window's bounds;
// the register copy of a staged tile read back by ldmatrix when its layout is an mma fragment;
// and an A operand copied once outside the loops (attention's Q) read into fragments once, when
// they are small enough to stay live beside the accumulators. Scratch allocations for layout
// conversions, cross-warp reduces and FMA operands are plain row-major:
//
//   before (VR):                          after (MA):
//     %A = load A[%rows, %cols]        shared A_smem : bf16[128, 64] Sw<3,3,3> o (128,64):(64,1)
//       : bf16[128, 64]                  stages 1  // tile of A (%A), Sw<3,3,3>: 128 ldmatrix
//                                        // wavefronts, unswizzled 1024
//                                      bar.sync
//                                      cp.async A_smem[0, 0] <- A[%3 + i0, i1] bounds [4096, 4096]
//                                        copy ((8,16),(8,8)):((1024,1),(128,16)) on (128,64) vec 8
//                                      cp.async.commit_group
//                                      cp.async.wait_group 0
//                                      bar.sync
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/layout/bank_conflicts.h"
#include "core/layout/printer.h"
#include "core/matile/kernel_lowering.h"

namespace nautilus::matile::lowering {

using layout::layout_error;

namespace {

// The shared-memory swizzle of a row-major [rows, columns] tile read by ldmatrix.x4: the one
// with the fewest wavefronts (ties: the earlier candidate). XORing the 16-byte chunk index with
// the row index needs the row bits, which start at bit log2(row bytes): a 128-byte row wants
// Swizzle<3,4,3> (byte units), a 256-byte row (bf16, 128 columns) Swizzle<3,4,4> -- with <3,4,3>
// rows r and r+4 of an ldmatrix phase share banks (measured: 8 instead of 4 wavefronts per
// ldmatrix.x4 on an H100). So the candidates are every field width at every distance up to rows
// of 1 KB. Counting wavefronts for 13 candidates was 40% of a search's compile time, and the
// answer depends only on the shape and element size, so it is computed once per process.
struct SwizzleChoice {
  layout::Swizzle swizzle{};
  int64_t wavefronts = -1;
  int64_t unswizzled_wavefronts = -1;
  std::string name = "unswizzled";
};

// The window of a [rows, columns] tile whose ldmatrix wavefronts are counted: at most 64 rows
// by 512 columns at the origin, read through the whole tile's layout (its row pitch), and the
// count scaled to the tile. An ldmatrix phase reads 8 rows of one 16-byte chunk, so its
// conflicts depend on the pitch and the swizzle, which the window keeps; the search compiles
// tiles of 128 x 6144 elements, whose full count took seconds per candidate swizzle.
std::pair<int64_t, int64_t> counted_window(int64_t rows, int64_t columns) {
  const auto prefix = [](int64_t extent, int64_t limit) {
    if (extent <= limit) return extent;
    for (int64_t size = limit; size >= 16; size -= 16) {
      if (extent % size == 0) return size;
    }
    return extent;
  };
  return {prefix(rows, 64), prefix(columns, 512)};
}

SwizzleChoice compute_swizzle(const std::vector<int64_t>& shape, int bytes, const TileReader& reader) {
  const auto [counted_rows, counted_columns] =
      reader.fragment ? std::pair<int64_t, int64_t>{reader.window[0], reader.window[1]}
                      : counted_window(shape[0], shape[1]);
  const int64_t scale = (shape[0] / counted_rows) * (shape[1] / counted_columns);
  std::vector<layout::Swizzle> candidates = {layout::kSwizzleNone};
  for (int shift = 3; shift <= 6; ++shift) {
    for (int bits = 1; bits <= 3; ++bits) candidates.push_back(layout::Swizzle{bits, 4, shift});
  }
  // Reads of several bytes per lane of a k row (a widened B with interleaved atoms: 4 lanes' rows
  // of 32 bytes each) collide under any XOR of 16-byte chunks, which moves a row's two chunks
  // onto each other's banks; XORing 32-byte units separates them.
  if (reader.fragment && reader.vector * bytes >= 4) {
    for (int shift = 2; shift <= 6; ++shift) {
      for (int bits = 1; bits <= 2; ++bits) candidates.push_back(layout::Swizzle{bits, 5, shift});
    }
  }
  SwizzleChoice best;
  for (const layout::Swizzle& candidate : candidates) {
    Result<layout::Swizzle> sw = candidate.is_identity()
                                     ? Result<layout::Swizzle>(layout::Swizzle{})
                                     : layout::to_element_units(candidate, bytes);
    if (!sw) continue;
    // The window's coordinates at the whole tile's offsets: its row pitch is the tile's.
    const layout::ComposedLayout smem{
        *sw, layout::Layout(layout::tuple_of(counted_rows, counted_columns), layout::tuple_of(shape[1], 1))};
    int64_t wavefronts = 0;
    if (reader.fragment) {
      Result<layout::BankConflicts> conflicts =
          layout::count_bank_conflicts(smem, bytes, *reader.fragment, reader.vector);
      if (!conflicts) continue;
      wavefronts = conflicts->wavefronts * scale;
    } else if (shape[0] % 16 == 0 && shape[1] % 16 == 0) {
      Result<layout::TVLayout> access = layout::tile_tv_layout(
          layout::ldmatrix_x4_addresses(), layout::tuple_of(counted_rows, counted_columns));
      if (!access) continue;
      Result<layout::BankConflicts> conflicts = layout::count_bank_conflicts(smem, bytes, *access, 8);
      if (!conflicts) continue;
      wavefronts = conflicts->wavefronts * scale;
    }
    if (candidate.is_identity()) best.unswizzled_wavefronts = wavefronts;
    if (best.wavefronts < 0 || wavefronts < best.wavefronts) {
      best.wavefronts = wavefronts;
      best.swizzle = *sw;
      best.name = layout::to_string(*sw);
    }
  }
  return best;
}

SwizzleChoice choose_swizzle(const std::vector<int64_t>& shape, int bytes, const TileReader& reader = {}) {
  if (reader.fragment) return compute_swizzle(shape, bytes, reader);  // one tile per kernel: cheap
  static std::mutex mutex;
  static std::map<std::pair<std::vector<int64_t>, int>, SwizzleChoice> chosen;
  const std::pair<std::vector<int64_t>, int> key{shape, bytes};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = chosen.find(key); it != chosen.end()) return it->second;
  }
  SwizzleChoice choice = compute_swizzle(shape, bytes, reader);
  std::lock_guard<std::mutex> lock(mutex);
  return chosen.emplace(key, std::move(choice)).first->second;
}

}  // namespace

layout::ComposedLayout fragment_tile_layout(const std::vector<int64_t>& shape, int bytes,
                                            std::string* description) {
  const SwizzleChoice chosen = choose_swizzle(shape, bytes);
  if (description) {
    *description = chosen.name + ": " + std::to_string(chosen.wavefronts) + " wavefronts, unswizzled " +
                   std::to_string(chosen.unswizzled_wavefronts);
  }
  return row_major_shared(shape, chosen.swizzle);
}

// A scratch allocation for conversions and reduces: row-major, unswizzled. Written and read
// element by element, an int4 tile's scratch holds a signed byte an element (int8): an int4
// allocation is packed, and only cp.async writes one.
int KernelLowering::scratch(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            const std::string& purpose) {
  const DType held = dtype == DType::I4 ? DType::I8 : dtype;
  return b_.shared(name, held, shape, row_major_shared(shape, layout::Swizzle{}), 1, purpose);
}

// The reader of `load`'s tile when a dot reads it as a widened 8-bit operand: the reads the
// emitter issues for one k step's fragment over the step's window (16 rows of B, 16 columns of
// A; matile::shared_read_plan). A K-major A reads each k pair (a_0, a_1) as 2 bytes; a B stored
// [K, N] with interleaved atoms reads a k row's p bytes at once, which is the fragment with its
// p interleaved atoms first among its slots; otherwise a byte per read.
TileReader KernelLowering::widened_reader(const VOp& load) const {
  for (const auto& [dot, plan] : dot_plans_) {
    if (!plan.mma) continue;
    const std::vector<int64_t>& shape = load.results[0]->type.shape;
    if (plan.b.widened && plan.b.load == &load) {
      const int p = plan.column_interleave;
      if (p > 1) {
        Result<layout::TVLayout> reads = mma_b_row_reads(16, shape[1], plan.warps_m, plan.warps_n, p);
        if (reads) return TileReader{*reads, {16, shape[1]}, p};
      }
      Result<RegisterLayout> step = mma_b_layout(16, shape[1], plan.warps_m, plan.warps_n);
      if (step) return TileReader{step->tv, {16, shape[1]}, 1};
    }
    if (plan.a.widened && plan.a.load == &load) {
      Result<RegisterLayout> step = mma_a_layout(shape[0], 16, plan.warps_m, plan.warps_n);
      const bool pairs = grouped_shared_reads() && !plan.a.transposed;
      if (step) return TileReader{step->tv, {shape[0], 16}, pairs ? 2 : 1};
    }
  }
  return {};
}

int KernelLowering::smem_alloc_for(const VOp& load, int stages) {
  auto found = smem_alloc_.find(&load);
  if (found != smem_alloc_.end()) return found->second;
  const VValue& v = load.results[0];
  const std::vector<int64_t>& shape = v->type.shape;
  const int bytes = dtype_bytes(v->type.dtype);
  if (shape.size() == 1) {
    // A vector in a loop's ring (plan_ring_vectors): read by whole rows, no swizzle to choose.
    const int id = b_.shared(v->name + "_smem", v->type.dtype, shape, row_major_shared(shape, layout::Swizzle{}),
                             stages, "vector " + load.buffer->name + " (%" + v->name + ") in the ring");
    smem_alloc_[&load] = id;
    return id;
  }
  if (v->type.dtype == DType::I4) {
    // Packed two elements a byte and read a row's run at a time (16 bytes of a lane, whole
    // rows of a warp): no swizzle.
    const int id = b_.shared(v->name + "_smem", v->type.dtype, shape, row_major_shared(shape, layout::Swizzle{}),
                             stages, "tile of " + load.buffer->name + " (%" + v->name + "), packed int4");
    smem_alloc_[&load] = id;
    return id;
  }
  const TileReader reader = widened_reader(load);
  const SwizzleChoice chosen = choose_swizzle(shape, bytes, reader);
  const layout::Swizzle& best = chosen.swizzle;
  const int64_t best_wavefronts = chosen.wavefronts, unswizzled = chosen.unswizzled_wavefronts;
  const std::string& choice = chosen.name;
  const std::string purpose = "tile of " + load.buffer->name + " (%" + v->name + "), " + choice +
                              ": " + std::to_string(best_wavefronts) +
                              (reader.fragment ? " byte-read wavefronts" : " ldmatrix wavefronts") +
                              ", unswizzled " + std::to_string(unswizzled);
  const int id = b_.shared(v->name + "_smem", v->type.dtype, shape, row_major_shared(shape, best),
                           stages, purpose);
  smem_alloc_[&load] = id;
  return id;
}

void KernelLowering::emit_copy(const VOp& load, int alloc, const Value& stage,
                               const VNode* loop_var, const Value& replacement,
                               const Value& predicate, std::optional<int64_t> iteration) {
  const VValue& v = load.results[0];
  const std::vector<int64_t>& shape = v->type.shape;
  const int64_t per_copy = v->type.dtype == DType::I4 ? 32 : 16 / dtype_bytes(v->type.dtype);
  const bool vector = shape.size() == 1;
  Result<layout::TVLayout> copy = layout_error("no copy layout");
  for (int64_t t = threads(); t >= 1 && !copy; t /= 2) {
    copy = layout::copy_row_major_vectors(vector ? 1 : shape[0], shape.back(), per_copy, t);
  }
  if (!copy) fail("no 16-byte copy layout for %" + v->name + ": " + copy.error().message);
  // A vector is a one-row copy: the column-major index of (0, c) is c.
  if (vector) copy = layout::TVLayout{copy->layout, tile_tuple({shape[0]})};
  SharedRef ref;
  ref.alloc = alloc;
  ref.stage = stage;
  ref.offsets.assign(shape.size(), 0);
  b_.async_copy(ref, load.buffer,
                window_access(smem_windows_.at(&load), loop_var, replacement, iteration),
                shape, *copy, per_copy, predicate);
}

// The register copy of a staged tile, read from its shared buffer (the current stage): with
// ldmatrix when its layout is an mma fragment, element by element otherwise.
Value KernelLowering::read_staged(const VOp& load, const SmemLoad& smem) {
  const VValue& v = load.results[0];
  const RegisterLayout l = layout_for(v);
  const int64_t R = v->type.shape[0], C = v->type.shape.back();
  SharedRead read = SharedRead::Scalar;
  if (v->type.rank() != 2) {
    // A vector from a loop's ring: element by element (runs of them as wide reads).
  } else if (dtype_bytes(v->type.dtype) != 2) {
    // ldmatrix moves 16-bit elements: wider or narrower ones are read element by element.
  } else if (l.kind == LayoutKind::MmaA && R % 16 == 0) {  // ldmatrix reads 16-row atoms
    Result<RegisterLayout> fragment = mma_a_layout(R, C, l.warps_m, l.warps_n);
    if (fragment && *fragment == l) read = SharedRead::LdMatrixX4;
  } else if (l.kind == LayoutKind::MmaB && (C / (8 * l.warps_n)) % 2 == 0) {
    Result<RegisterLayout> fragment = mma_b_layout(R, C, l.warps_m, l.warps_n);
    if (fragment && *fragment == l) read = SharedRead::LdMatrixX4Trans;
  }
  SharedRef ref{smem.alloc, smem.stage, std::vector<int64_t>(v->type.shape.size(), 0), false};
  return b_.shared_load(ref, read, v->type, l, v->name);
}

// A tile copied once (outside the loops that use it, like attention's Q) that is an mma A
// operand is read into registers once, right after its copy; each k step slices it -- when
// the fragments are small. Held fragments stay live through the whole loop beside its
// accumulators: attention's Q at D = 128 on 4 warps (32 rows per warp) is 64 registers per
// thread next to 128 of output accumulator, which spills; re-reading it with ldmatrix at each
// k step costs shared bandwidth instead (FlashAttention-2 does the same).
constexpr int64_t kMaxHeldFragmentRegisters = 32;
void KernelLowering::hoist_a_fragments(const VOp& load, int alloc) {
  for (const auto& [dot, plan] : dot_plans_) {
    if (!plan.mma || plan.a.load != &load || hoisted_.count(&load)) continue;
    const VValue& source = plan.a.source;
    const int64_t M = source->type.shape[0], K = source->type.shape[1];
    const int64_t registers_per_thread =
        M / plan.warps_m * K * dtype_bytes(source->type.dtype) / 4 / 32;
    if (registers_per_thread > kMaxHeldFragmentRegisters) continue;
    Result<RegisterLayout> l = mma_a_layout(M, K, plan.warps_m, plan.warps_n);
    if (!l) fail(l.error().message);
    SharedRef ref{alloc, nullptr, {0, 0}, plan.a.transposed};
    hoisted_[&load] = b_.shared_load(ref, plan.a.transposed ? SharedRead::LdMatrixX4Trans
                                                             : SharedRead::LdMatrixX4,
                                     TileType{source->type.dtype, {M, K}}, *l, source->name + "_frag");
  }
}

}  // namespace nautilus::matile::lowering
