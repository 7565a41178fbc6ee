#include "core/matile/layouts.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <numeric>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "core/layout/printer.h"

namespace nautilus::matile {
namespace {

using layout::IntTuple;
using layout::Layout;
using layout::layout_error;

IntTuple tuple_from(const std::vector<int64_t>& values) {
  std::vector<IntTuple> elements(values.begin(), values.end());
  return IntTuple::tuple(std::move(elements));
}

// Column-major strides of a tile's axes.
std::vector<int64_t> axis_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides;
  int64_t running = 1;
  for (int64_t extent : shape) {
    strides.push_back(running);
    running *= extent;
  }
  return strides;
}

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

// (shape, stride) leaves of a layout mode.
struct Leaf {
  int64_t shape, stride;
};
std::vector<Leaf> leaves_of(const Layout& mode) {
  const std::vector<int64_t> shapes = layout::leaves(mode.shape());
  const std::vector<int64_t> strides = layout::leaves(mode.stride());
  std::vector<Leaf> out;
  for (size_t i = 0; i < shapes.size(); ++i) out.push_back({shapes[i], strides[i]});
  return out;
}

// The axis a pure leaf moves along and its step in that axis' coordinates; axis -1 for a
// stride-0 (or size-1) leaf. Fails on an impure leaf.
struct LeafAxis {
  int axis = -1;
  int64_t step = 0;
};
Result<LeafAxis> leaf_axis(const Leaf& leaf, const std::vector<int64_t>& shape) {
  if (leaf.stride == 0 || leaf.shape == 1) return LeafAxis{};
  const std::vector<int64_t> strides = axis_strides(shape);
  for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
    const int64_t p = strides[static_cast<size_t>(k)];
    if (leaf.stride < p) continue;
    if (leaf.stride % p == 0 &&
        (leaf.stride / p) * (leaf.shape - 1) < shape[static_cast<size_t>(k)]) {
      return LeafAxis{k, leaf.stride / p};
    }
    break;
  }
  return layout_error("leaf " + std::to_string(leaf.shape) + ":" + std::to_string(leaf.stride) +
                      " moves along more than one axis of the tile");
}

RegisterLayout from_leaves(LayoutKind kind, const std::vector<Leaf>& threads,
                           const std::vector<Leaf>& slots, const std::vector<int64_t>& shape) {
  std::vector<int64_t> ts, td, vs, vd;
  for (const Leaf& l : threads) ts.push_back(l.shape), td.push_back(l.stride);
  for (const Leaf& l : slots) vs.push_back(l.shape), vd.push_back(l.stride);
  if (vs.empty()) vs.push_back(1), vd.push_back(0);
  RegisterLayout result;
  result.kind = kind;
  result.tv = layout::TVLayout{
      Layout(IntTuple::tuple({tuple_from(ts), tuple_from(vs)}),
             IntTuple::tuple({tuple_from(td), tuple_from(vd)})),
      tile_tuple(shape)};
  return result;
}

Result<RegisterLayout> checked(RegisterLayout layout, const std::string& context) {
  Result<layout::TVLayout> tv = layout::make_tv_layout(layout.tv.layout, layout.tv.tile);
  if (!tv) return layout_error(context + ": " + tv.error().message);
  return layout;
}

}  // namespace

IntTuple tile_tuple(const std::vector<int64_t>& shape) {
  if (shape.empty()) return IntTuple(1);
  if (shape.size() == 1) return IntTuple(shape[0]);
  return tuple_from(shape);
}

std::vector<int64_t> coordinates_of(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> coordinates(shape.size());
  coordinates_into(index, shape, coordinates);
  return coordinates;
}

void coordinates_into(int64_t index, const std::vector<int64_t>& shape,
                      std::vector<int64_t>& coordinates) {
  coordinates.resize(shape.size());
  for (size_t k = 0; k < shape.size(); ++k) {
    coordinates[k] = index % shape[k];
    index /= shape[k];
  }
}

int64_t index_of(const std::vector<int64_t>& coordinates, const std::vector<int64_t>& shape) {
  int64_t index = 0, running = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    index += coordinates[k] * running;
    running *= shape[k];
  }
  return index;
}

RegisterLayout uniform_layout(const std::vector<int64_t>& shape, int64_t threads) {
  RegisterLayout result;
  result.kind = LayoutKind::Uniform;
  const int64_t elements = element_count(shape);
  result.tv = layout::TVLayout{Layout(layout::tuple_of(threads, elements), layout::tuple_of(0, 1)),
                               tile_tuple(shape)};
  return result;
}

RegisterLayout blocked_layout(const std::vector<int64_t>& shape, int64_t threads, int64_t vector,
                              int run_axis) {
  const std::vector<int64_t> strides = axis_strides(shape);
  const int rank = static_cast<int>(shape.size());
  if (run_axis < 0 || run_axis >= rank) run_axis = rank - 1;
  std::vector<Leaf> thread_leaves, slot_leaves;
  int64_t left = threads;
  // Threads go to the run axis first (the one contiguous in memory), then to the others from
  // the last to the first.
  std::vector<int> order;
  if (rank > 0) order.push_back(run_axis);
  for (int k = rank - 1; k >= 0; --k) {
    if (k != run_axis) order.push_back(k);
  }
  for (int k : order) {
    const int64_t extent = shape[static_cast<size_t>(k)];
    const int64_t p = strides[static_cast<size_t>(k)];
    // The run axis is cut into runs of `vector` neighbours, each run in one thread's
    // consecutive slots; the runs are then dealt out like single elements.
    const int64_t run = k == run_axis && vector > 1 && extent % vector == 0 ? vector : 1;
    const int64_t runs = extent / run;
    const int64_t t = std::gcd(runs, left);
    left /= t;
    thread_leaves.push_back({t, t == 1 ? 0 : run * p});
    if (run > 1) slot_leaves.push_back({run, p});
    slot_leaves.push_back({runs / t, runs / t == 1 ? 0 : t * run * p});
  }
  thread_leaves.push_back({left, 0});
  RegisterLayout result = from_leaves(LayoutKind::Blocked, thread_leaves, slot_leaves, shape);
  return result;
}

int64_t blocked_vector(const std::vector<int64_t>& shape, int64_t threads, int64_t element_bytes,
                       int run_axis) {
  if (shape.empty() || element_bytes <= 0 || element_bytes > 16) return 1;
  if (run_axis < 0 || run_axis >= static_cast<int>(shape.size())) run_axis = static_cast<int>(shape.size()) - 1;
  const int64_t extent = shape[static_cast<size_t>(run_axis)];
  int64_t vector = 16 / element_bytes;
  // Runs that would leave threads without elements (replicated) are shortened: a thread's run
  // must not cost the CTA its width.
  while (vector > 1 && (extent % vector != 0 || element_count(shape) / vector < threads)) vector /= 2;
  return vector;
}

namespace {

// Fragments of a tile shorter than the atom's 16 rows (m in {1, 2, 4, 8}, one warp along M):
// the instruction still computes 16 rows, and row r + 8 (and, below 8 rows, every row past m)
// repeats row r % m. The repeats are stride-0 leaves: the thread of groupID g holds row g % m,
// the slots of the "+8 rows" half hold the same elements as the first half. The MMA then
// computes each real row twice or more with equal values, which is what a replicated layout
// means (ir.h), and nothing is padded or masked.
bool short_fragment_rows(int64_t m, int warps_m) {
  return warps_m == 1 && (m == 1 || m == 2 || m == 4 || m == 8);
}

// The groupID (lane / 4) thread leaves: rows 0..7, or rows 0..m-1 repeated 8/m times.
IntTuple group_rows_shape(int64_t m) {
  return m >= 8 ? IntTuple(8) : layout::tuple_of(m, 8 / m);
}
IntTuple group_rows_stride(int64_t m) {
  return m >= 8 ? IntTuple(1) : layout::tuple_of(1, 0);
}

}  // namespace

bool repeats_in_a_thread(const RegisterLayout& layout) {
  for (const Leaf& leaf : leaves_of(layout.tv.layout.mode(1))) {
    if (leaf.stride == 0 && leaf.shape > 1) return true;
  }
  return false;
}

bool mma_rows_fit(int64_t m, int warps_m) {
  return warps_m >= 1 && m >= 1 && (m % (16 * warps_m) == 0 || short_fragment_rows(m, warps_m));
}

int64_t mma_m_atoms(int64_t m, int warps_m) {
  return short_fragment_rows(m, warps_m) ? 1 : m / (16 * warps_m);
}

// The fragment layouts of one (rows, cols, warps_m, warps_n) are built and checked once per
// process: the lowering, the verifier and the interpreter ask for them for every mma of every
// candidate the search compiles, and checking a layout enumerates its (thread, slot) pairs.
template <typename Build>
Result<RegisterLayout> remembered_fragment(char which, int64_t rows, int64_t cols, int warps_m,
                                           int warps_n, Build build, int interleave = 1,
                                           int k_interleave = 1) {
  static std::mutex mutex;
  static std::map<std::tuple<char, int64_t, int64_t, int, int, int, int>, Result<RegisterLayout>> known;
  const auto key = std::make_tuple(which, rows, cols, warps_m, warps_n, interleave, k_interleave);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  Result<RegisterLayout> layout = build();
  std::lock_guard<std::mutex> lock(mutex);
  return known.emplace(key, std::move(layout)).first->second;
}

Result<RegisterLayout> mma_a_layout(int64_t m, int64_t k, int warps_m, int warps_n, int k_interleave) {
  return remembered_fragment('A', m, k, warps_m, warps_n, [&]() -> Result<RegisterLayout> {
    const std::string context = "mma A layout of [" + std::to_string(m) + ", " + std::to_string(k) +
                                "] over warps (" + std::to_string(warps_m) + ", " +
                                std::to_string(warps_n) + ")" +
                                (k_interleave > 1 ? ", k interleaved by " + std::to_string(k_interleave) : "");
    if (warps_n < 1 || !mma_rows_fit(m, warps_m) || k % 16 != 0 || k < 1) {
      return layout_error(context + ": needs M a multiple of 16 * warps_m (or 1, 2, 4, 8 rows on "
                                    "one warp) and K of 16");
    }
    const int64_t mt = mma_m_atoms(m, warps_m), kt = k / 16;
    if (k_interleave < 1 || kt % k_interleave != 0) {
      return layout_error(context + ": the k interleave must divide the " + std::to_string(kt) + " k steps");
    }
    const int64_t half = short_fragment_rows(m, warps_m) ? 0 : 8;  // the a_i "+8 rows" step
    RegisterLayout result;
    result.kind = LayoutKind::MmaA;
    result.warps_m = warps_m;
    result.warps_n = warps_n;
    result.k_interleave = k_interleave;
    using layout::tuple_of;
    if (k_interleave == 1) {
      result.tv = layout::TVLayout{
          Layout(tuple_of(tuple_of(tuple_of(4, group_rows_shape(m)), tuple_of(warps_m, warps_n)),
                          tuple_of(tuple_of(2, 2, 2), tuple_of(mt, kt))),
                 tuple_of(tuple_of(tuple_of(2 * m, group_rows_stride(m)), tuple_of(16 * mt, 0)),
                          tuple_of(tuple_of(m, half, 8 * m), tuple_of(16, 16 * m)))),
          tuple_of(m, k)};
    } else {
      // interleaved_k: column 2t + i0 + 8 i2 of step r + p q is k = 16pq + 4pt + 4r + 2 i2 + i0.
      const int64_t p = k_interleave;
      result.tv = layout::TVLayout{
          Layout(tuple_of(tuple_of(tuple_of(4, group_rows_shape(m)), tuple_of(warps_m, warps_n)),
                          tuple_of(tuple_of(2, 2, 2), tuple_of(mt, tuple_of(p, kt / p)))),
                 tuple_of(tuple_of(tuple_of(4 * p * m, group_rows_stride(m)), tuple_of(16 * mt, 0)),
                          tuple_of(tuple_of(m, half, 2 * m), tuple_of(16, tuple_of(4 * m, 16 * p * m))))),
          tuple_of(m, k)};
    }
    return checked(std::move(result), context);
  }, 1, k_interleave);
}

Result<RegisterLayout> mma_b_layout(int64_t k, int64_t n, int warps_m, int warps_n, int interleave,
                                    int k_interleave) {
  return remembered_fragment('B', k, n, warps_m, warps_n, [&]() -> Result<RegisterLayout> {
    const std::string context = "mma B layout of [" + std::to_string(k) + ", " + std::to_string(n) +
                                "] over warps (" + std::to_string(warps_m) + ", " +
                                std::to_string(warps_n) + ")" +
                                (interleave > 1 ? ", columns interleaved by " + std::to_string(interleave) : "") +
                                (k_interleave > 1 ? ", k interleaved by " + std::to_string(k_interleave) : "");
    if (warps_m < 1 || warps_n < 1 || n % (8 * warps_n) != 0 || k % 16 != 0 || n < 1 || k < 1) {
      return layout_error(context + ": needs N a multiple of 8 * warps_n and K of 16");
    }
    const int64_t nt = n / (8 * warps_n), kt = k / 16;
    if (interleave < 1 || nt % interleave != 0) {
      return layout_error(context + ": the interleave must divide the " + std::to_string(nt) + " atoms of a warp");
    }
    if (k_interleave < 1 || kt % k_interleave != 0) {
      return layout_error(context + ": the k interleave must divide the " + std::to_string(kt) + " k steps");
    }
    RegisterLayout result;
    result.kind = LayoutKind::MmaB;
    result.warps_m = warps_m;
    result.warps_n = warps_n;
    result.column_interleave = interleave;
    result.k_interleave = k_interleave;
    using layout::tuple_of;
    // The k modes: b_i's (i % 2, i / 2), the lane's t, the k step. interleaved_k with p > 1.
    const int64_t p_k = k_interleave;
    const IntTuple k_values_shape = p_k == 1 ? IntTuple(kt) : tuple_of(p_k, kt / p_k);
    const IntTuple k_values_stride = p_k == 1 ? IntTuple(16) : tuple_of(4, 16 * p_k);
    const int64_t pair_stride = p_k == 1 ? 8 : 2, lane_stride = p_k == 1 ? 2 : 4 * p_k;
    if (interleave == 1) {
      result.tv = layout::TVLayout{
          Layout(tuple_of(tuple_of(tuple_of(4, 8), tuple_of(warps_m, warps_n)),
                          tuple_of(tuple_of(2, 2), tuple_of(k_values_shape, nt))),
                 tuple_of(tuple_of(tuple_of(lane_stride, k), tuple_of(0, 8 * nt * k)),
                          tuple_of(tuple_of(1, pair_stride), tuple_of(k_values_stride, 8 * k)))),
          tuple_of(k, n)};
    } else {
      // Atom r + p*q (p = interleave) takes column p*g + r of the 8p columns from 8p*q on: group
      // g's columns of p neighbouring atoms are neighbours.
      const int64_t p = interleave;
      result.tv = layout::TVLayout{
          Layout(tuple_of(tuple_of(tuple_of(4, 8), tuple_of(warps_m, warps_n)),
                          tuple_of(tuple_of(2, 2), tuple_of(k_values_shape, tuple_of(p, nt / p)))),
                 tuple_of(tuple_of(tuple_of(lane_stride, p * k), tuple_of(0, 8 * nt * k)),
                          tuple_of(tuple_of(1, pair_stride), tuple_of(k_values_stride, tuple_of(k, 8 * p * k))))),
          tuple_of(k, n)};
    }
    return checked(std::move(result), context);
  }, interleave, k_interleave);
}

int64_t interleaved_k(int64_t step, int64_t column, int64_t k_interleave) {
  const int64_t p = k_interleave;
  const int64_t lane = (column % 8) / 2, value = column % 2 + 2 * (column / 8);
  return 16 * p * (step / p) + 4 * p * lane + 4 * (step % p) + value;
}

Result<layout::TVLayout> mma_b_row_reads(int64_t k, int64_t n, int warps_m, int warps_n, int interleave) {
  Result<RegisterLayout> fragment = mma_b_layout(k, n, warps_m, warps_n, interleave);
  if (!fragment) return fragment.error();
  const int64_t nt = n / (8 * warps_n), kt = k / 16, p = interleave;
  using layout::tuple_of;
  // mma_b_layout's modes, the slot mode reordered to (atom r, (b_0..b_3), k step, atom q).
  return layout::TVLayout{
      Layout(tuple_of(tuple_of(tuple_of(4, 8), tuple_of(warps_m, warps_n)),
                      tuple_of(p, tuple_of(2, 2), kt, nt / p)),
             tuple_of(tuple_of(tuple_of(2, p * k), tuple_of(0, 8 * nt * k)),
                      tuple_of(k, tuple_of(1, 8), 16, 8 * p * k))),
      tuple_of(k, n)};
}

Result<RegisterLayout> mma_c_layout(int64_t m, int64_t n, int warps_m, int warps_n, int interleave) {
  return remembered_fragment('C', m, n, warps_m, warps_n, [&]() -> Result<RegisterLayout> {
    const std::string context = "mma C layout of [" + std::to_string(m) + ", " + std::to_string(n) +
                                "] over warps (" + std::to_string(warps_m) + ", " +
                                std::to_string(warps_n) + ")" +
                                (interleave > 1 ? ", columns interleaved by " + std::to_string(interleave) : "");
    if (warps_n < 1 || !mma_rows_fit(m, warps_m) || n % (8 * warps_n) != 0 || n < 1) {
      return layout_error(context + ": needs M a multiple of 16 * warps_m (or 1, 2, 4, 8 rows on "
                                    "one warp) and N of 8 * warps_n");
    }
    const int64_t mt = mma_m_atoms(m, warps_m), nt = n / (8 * warps_n);
    if (interleave < 1 || nt % interleave != 0) {
      return layout_error(context + ": the interleave must divide the " + std::to_string(nt) + " atoms of a warp");
    }
    const int64_t half = short_fragment_rows(m, warps_m) ? 0 : 8;  // the c_i "+8 rows" step
    RegisterLayout result;
    result.kind = LayoutKind::MmaC;
    result.warps_m = warps_m;
    result.warps_n = warps_n;
    result.column_interleave = interleave;
    using layout::tuple_of;
    if (interleave == 1) {
      result.tv = layout::TVLayout{
          Layout(tuple_of(tuple_of(tuple_of(4, group_rows_shape(m)), tuple_of(warps_m, warps_n)),
                          tuple_of(tuple_of(2, 2), tuple_of(mt, nt))),
                 tuple_of(tuple_of(tuple_of(2 * m, group_rows_stride(m)), tuple_of(16 * mt, 8 * nt * m)),
                          tuple_of(tuple_of(m, half), tuple_of(16, 8 * m)))),
          tuple_of(m, n)};
    } else {
      // The B fragment's interleave (mma_b_layout): atom column c of atom r + p*q is tile column
      // 8p*q + p*c + r, so a thread's c_0, c_1 of p neighbouring atoms are 2p neighbours.
      const int64_t p = interleave;
      result.tv = layout::TVLayout{
          Layout(tuple_of(tuple_of(tuple_of(4, group_rows_shape(m)), tuple_of(warps_m, warps_n)),
                          tuple_of(tuple_of(2, 2), tuple_of(mt, tuple_of(p, nt / p)))),
                 tuple_of(tuple_of(tuple_of(2 * p * m, group_rows_stride(m)), tuple_of(16 * mt, 8 * nt * m)),
                          tuple_of(tuple_of(p * m, half), tuple_of(16, tuple_of(m, 8 * p * m))))),
          tuple_of(m, n)};
    }
    return checked(std::move(result), context);
  }, interleave);
}

bool mma_swap_fits(int64_t m, int64_t n, int warps_m, int warps_n) {
  return short_fragment_rows(m, warps_m) && warps_n >= 1 && n % (16 * warps_n) == 0;
}

Result<RegisterLayout> mma_swapped_c_layout(int64_t m, int64_t n, int warps_n) {
  return remembered_fragment('S', m, n, 1, warps_n, [&]() -> Result<RegisterLayout> {
    const std::string context = "swapped mma C layout of [" + std::to_string(m) + ", " + std::to_string(n) +
                                "] over warps (1, " + std::to_string(warps_n) + ")";
    if (!mma_swap_fits(m, n, 1, warps_n)) {
      return layout_error(context + ": needs 1, 2, 4 or 8 rows and N a multiple of 16 * warps_n");
    }
    const int64_t nt = n / (8 * warps_n);  // B's n8 atoms per warp; instruction j takes 2j, 2j + 1
    using layout::tuple_of;
    // The instruction's column 2t + v (lane t = lane % 4) is row (2t + v) % m.
    const IntTuple lane_shape = m == 4 ? tuple_of(2, 2) : IntTuple(4);
    const IntTuple lane_stride = m == 8 ? IntTuple(2) : m == 4 ? tuple_of(2, 0) : IntTuple(0);
    const int64_t value_stride = m >= 2 ? 1 : 0;
    RegisterLayout result;
    result.kind = LayoutKind::MmaCSwapped;
    result.warps_m = 1;
    result.warps_n = warps_n;
    result.tv = layout::TVLayout{
        Layout(tuple_of(tuple_of(tuple_of(lane_shape, 8), tuple_of(1, warps_n)),
                        tuple_of(tuple_of(2, 2), nt / 2)),
               tuple_of(tuple_of(tuple_of(lane_stride, m), tuple_of(0, 8 * nt * m)),
                        tuple_of(tuple_of(value_stride, 8 * m), 16 * m))),
        tuple_of(m, n)};
    return checked(std::move(result), context);
  });
}

Result<RegisterLayout> slice_layout(const RegisterLayout& source,
                                    const std::vector<int64_t>& shape, int axis) {
  if (axis < 0 || axis >= static_cast<int>(shape.size())) {
    return layout_error("slice of a layout: axis " + std::to_string(axis) + " out of range");
  }
  std::vector<int64_t> result_shape;
  for (int k = 0; k < static_cast<int>(shape.size()); ++k) {
    if (k != axis) result_shape.push_back(shape[static_cast<size_t>(k)]);
  }
  const std::vector<int64_t> result_strides = axis_strides(result_shape);
  auto restride = [&](const Leaf& leaf, bool is_slot) -> Result<std::vector<Leaf>> {
    Result<LeafAxis> where = leaf_axis(leaf, shape);
    if (!where) return where.error();
    if (where->axis < 0) {
      // A repeating slot leaf holds nothing new: the result keeps each element once (Reduce
      // combines each distinct element of a thread once, ir.h).
      if (is_slot && leaf.shape > 1) return std::vector<Leaf>{};
      return std::vector<Leaf>{{leaf.shape, 0}};
    }
    if (where->axis == axis) {
      if (is_slot) return std::vector<Leaf>{};
      return std::vector<Leaf>{{leaf.shape, 0}};
    }
    const int k = where->axis > axis ? where->axis - 1 : where->axis;
    return std::vector<Leaf>{{leaf.shape, where->step * result_strides[static_cast<size_t>(k)]}};
  };
  std::vector<Leaf> threads, slots;
  for (const Leaf& leaf : leaves_of(source.tv.layout.mode(0))) {
    Result<std::vector<Leaf>> out = restride(leaf, false);
    if (!out) return layout_error("slice of " + layout_text(source) + ": " + out.error().message);
    threads.insert(threads.end(), out->begin(), out->end());
  }
  for (const Leaf& leaf : leaves_of(source.tv.layout.mode(1))) {
    Result<std::vector<Leaf>> out = restride(leaf, true);
    if (!out) return layout_error("slice of " + layout_text(source) + ": " + out.error().message);
    slots.insert(slots.end(), out->begin(), out->end());
  }
  return checked(from_leaves(LayoutKind::Derived, threads, slots, result_shape),
                 "slice of " + layout_text(source));
}

Result<ReducePlan> reduce_plan(const RegisterLayout& source, const std::vector<int64_t>& shape,
                               int axis) {
  ReducePlan plan;
  int64_t position = 1;  // thread stride of the leaf: the product of the leaves before it
  for (const Leaf& leaf : leaves_of(source.tv.layout.mode(0))) {
    Result<LeafAxis> where = leaf_axis(leaf, shape);
    if (!where) return layout_error("reduce over " + layout_text(source) + ": " + where.error().message);
    if (where->axis == axis && leaf.shape > 1) {
      if ((leaf.shape & (leaf.shape - 1)) != 0 || (position & (position - 1)) != 0) {
        return layout_error("reduce over " + layout_text(source) +
                            ": threads along the axis are not a power of two");
      }
      // The part of the leaf inside a warp shuffles; the part beyond combines across warps
      // (a leaf may straddle the boundary: 64 threads along a row are 32 lanes x 2 warps).
      const int64_t in_warp = position >= kWarpSize ? 1 : std::min(leaf.shape, kWarpSize / position);
      for (int64_t m = position; m < position * in_warp; m *= 2) {
        plan.xor_masks.push_back(static_cast<int>(m));
      }
      if (in_warp < leaf.shape) {
        plan.cross_warp = true;
        plan.warp_leaves.emplace_back(position * in_warp, leaf.shape / in_warp);
      }
    }
    position *= leaf.shape;
  }
  return plan;
}

Result<RegisterLayout> permute_layout(const RegisterLayout& source,
                                      const std::vector<int64_t>& shape,
                                      const std::vector<int>& order) {
  std::vector<int64_t> result_shape;
  std::vector<int> position(shape.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] < 0 || order[i] >= static_cast<int>(shape.size())) {
      return layout_error("permute of a layout: order out of range");
    }
    result_shape.push_back(shape[static_cast<size_t>(order[i])]);
    position[static_cast<size_t>(order[i])] = static_cast<int>(i);
  }
  const std::vector<int64_t> result_strides = axis_strides(result_shape);
  auto restride = [&](const std::vector<Leaf>& leaves) -> Result<std::vector<Leaf>> {
    std::vector<Leaf> out;
    for (const Leaf& leaf : leaves) {
      Result<LeafAxis> where = leaf_axis(leaf, shape);
      if (!where) return where.error();
      if (where->axis < 0) {
        out.push_back({leaf.shape, 0});
      } else {
        const int k = position[static_cast<size_t>(where->axis)];
        out.push_back({leaf.shape, where->step * result_strides[static_cast<size_t>(k)]});
      }
    }
    return out;
  };
  Result<std::vector<Leaf>> threads = restride(leaves_of(source.tv.layout.mode(0)));
  if (!threads) return layout_error("permute of " + layout_text(source) + ": " + threads.error().message);
  Result<std::vector<Leaf>> slots = restride(leaves_of(source.tv.layout.mode(1)));
  if (!slots) return layout_error("permute of " + layout_text(source) + ": " + slots.error().message);
  return checked(from_leaves(LayoutKind::Derived, *threads, *slots, result_shape),
                 "permute of " + layout_text(source));
}

std::vector<int64_t> slot_elements(const RegisterLayout& layout) {
  const int64_t threads = layout.threads(), slots = layout.slots();
  const layout::TVIndexTable indices(layout.tv);
  std::vector<int64_t> out(static_cast<size_t>(threads * slots));
  for (int64_t t = 0; t < threads; ++t) {
    for (int64_t v = 0; v < slots; ++v) out[static_cast<size_t>(t * slots + v)] = indices.index(t, v);
  }
  return out;
}

Result<std::vector<int32_t>> register_gather(const RegisterLayout& source,
                                             int64_t source_elements,
                                             const std::vector<int64_t>& needed,
                                             int64_t result_slots) {
  const int64_t threads = source.threads(), slots = source.slots();
  const layout::TVIndexTable indices(source.tv);
  // A thread holds (thread offset) + (slot offset) for every slot: the slot offsets, sorted
  // once, answer "which slot holds element e" for every thread by one binary search of
  // e - (thread offset). Tiles reach a million elements (the broadcasts of an FMA dot); a
  // lookup table over the whole tile per call missed the cache on every probe.
  std::vector<std::pair<int64_t, int32_t>> by_offset(static_cast<size_t>(slots));
  for (int64_t v = 0; v < slots; ++v) {
    by_offset[static_cast<size_t>(v)] = {indices.value[static_cast<size_t>(v)], static_cast<int32_t>(v)};
  }
  // Equal offsets (replicated slots): the lowest slot, as a first-wins table would give.
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int32_t> out(needed.size(), -1);
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t base = indices.thread[static_cast<size_t>(t)];
    for (int64_t v = 0; v < result_slots; ++v) {
      const size_t at = static_cast<size_t>(t * result_slots + v);
      if (at >= needed.size()) break;
      const int64_t e = needed[at];
      int32_t slot = -1;
      if (e >= 0 && e < source_elements) {
        const auto it = std::lower_bound(
            by_offset.begin(), by_offset.end(), e - base,
            [](const std::pair<int64_t, int32_t>& entry, int64_t key) { return entry.first < key; });
        if (it != by_offset.end() && it->first == e - base) slot = it->second;
      }
      if (slot < 0) {
        return layout_error("thread " + std::to_string(t) + " does not hold element " +
                            std::to_string(e) + " of the source (layout " +
                            layout_text(source) + ")");
      }
      out[at] = slot;
    }
  }
  return out;
}

RegisterMove register_move_of(const Op& op, std::vector<int64_t>* argument) {
  argument->clear();
  switch (op.kind) {
    case OpKind::Broadcast:
      argument->assign(op.dims.begin(), op.dims.end());
      return RegisterMove::Broadcast;
    case OpKind::Permute:
      argument->assign(op.dims.begin(), op.dims.end());
      return RegisterMove::Permute;
    case OpKind::ExtractSlice:
      *argument = op.offsets;
      if (op.slice_interleave > 1) {
        argument->push_back(op.slice_interleave);
        return RegisterMove::InterleavedSlice;
      }
      return RegisterMove::ExtractSlice;
    default: return RegisterMove::Copy;
  }
}

std::vector<int64_t> register_move_sources(RegisterMove move, const std::vector<int64_t>& argument,
                                           const std::vector<int64_t>& source_shape,
                                           const std::vector<int64_t>& result_shape,
                                           const std::vector<int64_t>& elements) {
  std::vector<int64_t> sources(elements.size());
  std::vector<int64_t> c, s;
  // An interleaved slice's k axis: the one it shortens (to one k step of 16).
  size_t k_axis = source_shape.size();
  for (size_t k = 0; move == RegisterMove::InterleavedSlice && k < source_shape.size(); ++k) {
    if (result_shape[k] < source_shape[k]) k_axis = k;
  }
  for (size_t i = 0; i < elements.size(); ++i) {
    coordinates_into(elements[i], result_shape, c);
    s.assign(source_shape.size(), 0);
    for (size_t k = 0; k < source_shape.size(); ++k) {
      switch (move) {
        case RegisterMove::Broadcast: s[k] = c[static_cast<size_t>(argument[k])]; break;
        case RegisterMove::Permute: s[static_cast<size_t>(argument[k])] = c[k]; break;
        case RegisterMove::ExtractSlice: s[k] = c[k] + argument[k]; break;
        case RegisterMove::InterleavedSlice:
          s[k] = k == k_axis ? interleaved_k(argument[k] / 16, c[k], argument.back()) : c[k] + argument[k];
          break;
        case RegisterMove::Copy: s[k] = c[k]; break;
      }
    }
    sources[i] = index_of(s, source_shape);
  }
  return sources;
}

namespace {

std::optional<std::string> compute_register_move_error(RegisterMove move,
                                                       const RegisterLayout& source,
                                                       const std::vector<int64_t>& source_shape,
                                                       const RegisterLayout& result,
                                                       const std::vector<int64_t>& result_shape,
                                                       const std::vector<int64_t>& argument) {
  const std::vector<int64_t> needed =
      register_move_sources(move, argument, source_shape, result_shape, slot_elements(result));
  int64_t source_elements = 1;
  for (int64_t extent : source_shape) source_elements *= extent;
  Result<std::vector<int32_t>> gather =
      register_gather(source, source_elements, needed, result.slots());
  if (gather) return std::nullopt;
  return gather.error().message;
}

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (int64_t v : values) text += std::to_string(v) + ",";
  return text;
}

}  // namespace

std::optional<std::string> register_move_error(RegisterMove move, const RegisterLayout& source,
                                               const std::vector<int64_t>& source_shape,
                                               const RegisterLayout& result,
                                               const std::vector<int64_t>& result_shape,
                                               const std::vector<int64_t>& argument) {
  static std::mutex mutex;
  static std::unordered_map<std::string, std::optional<std::string>> answers;
  const std::string key = std::to_string(static_cast<int>(move)) + "|" + join(source_shape) +
                          "|" + join(result_shape) + "|" + join(argument) + "|" +
                          layout_text(source) + "|" + layout_text(result);
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = answers.find(key); it != answers.end()) return it->second;
  }
  std::optional<std::string> answer =
      compute_register_move_error(move, source, source_shape, result, result_shape, argument);
  std::lock_guard<std::mutex> lock(mutex);
  return answers.emplace(key, std::move(answer)).first->second;
}

std::vector<LdmatrixIssue> ldmatrix_issues(const RegisterLayout& layout,
                                           const std::vector<int64_t>& shape, bool trans,
                                           int warps) {
  std::vector<LdmatrixIssue> issues;
  const bool is_a = layout.kind == LayoutKind::MmaA, is_b = layout.kind == LayoutKind::MmaB;
  if (shape.size() != 2 || (!is_a && !is_b) || layout.warps_m <= 0 || layout.warps_n <= 0) {
    return issues;
  }
  const int64_t R = shape[0], C = shape[1];
  for (int w = 0; w < warps; ++w) {
    const int wm = w % layout.warps_m, wn = w / layout.warps_m;
    if (is_a) {
      const int64_t mt = R / (16 * layout.warps_m), kt = C / 16;
      for (int64_t ki = 0; ki < kt; ++ki) {
        for (int64_t mi = 0; mi < mt; ++mi) {
          LdmatrixIssue issue;
          issue.warp = w;
          const int64_t m0 = (wm * mt + mi) * 16, k0 = ki * 16;
          for (int lane = 0; lane < kWarpSize; ++lane) {
            const int j = lane / 8, r = lane % 8;
            issue.lane_start[static_cast<size_t>(lane)] =
                trans ? std::array<int64_t, 2>{m0 + 8 * (j % 2), k0 + 8 * (j / 2) + r}
                      : std::array<int64_t, 2>{m0 + 8 * (j % 2) + r, k0 + 8 * (j / 2)};
          }
          for (int j = 0; j < 4; ++j) {
            for (int e = 0; e < 2; ++e) issue.slot[j][e] = 8 * (mi + mt * ki) + 2 * j + e;
          }
          issues.push_back(issue);
        }
      }
    } else {
      const int64_t kt = R / 16, nt = C / (8 * layout.warps_n);
      for (int64_t ki = 0; ki < kt; ++ki) {
        for (int64_t q = 0; q < nt / 2; ++q) {
          LdmatrixIssue issue;
          issue.warp = w;
          const int64_t k0 = ki * 16, n_base = wn * nt * 8;
          for (int lane = 0; lane < kWarpSize; ++lane) {
            const int j = lane / 8, r = lane % 8;
            const int64_t n0 = n_base + (2 * q + j / 2) * 8;
            issue.lane_start[static_cast<size_t>(lane)] =
                trans ? std::array<int64_t, 2>{k0 + 8 * (j % 2) + r, n0}
                      : std::array<int64_t, 2>{k0 + 8 * (j % 2), n0 + r};
          }
          for (int j = 0; j < 4; ++j) {
            for (int e = 0; e < 2; ++e) {
              issue.slot[j][e] = 4 * (ki + kt * (2 * q + j / 2)) + 2 * (j % 2) + e;
            }
          }
          issues.push_back(issue);
        }
      }
    }
  }
  return issues;
}

std::string layout_text(const RegisterLayout& layout) {
  std::string text = layout_kind_name(layout.kind);
  if (layout.kind == LayoutKind::MmaA || layout.kind == LayoutKind::MmaB || layout.kind == LayoutKind::MmaC ||
      layout.kind == LayoutKind::MmaCSwapped) {
    text += " warps(" + std::to_string(layout.warps_m) + "," + std::to_string(layout.warps_n) + ")";
    if (layout.column_interleave > 1) text += " interleave(" + std::to_string(layout.column_interleave) + ")";
    if (layout.k_interleave > 1) text += " k_interleave(" + std::to_string(layout.k_interleave) + ")";
  }
  return text + " " + layout::to_string(layout.tv);
}

layout::ComposedLayout row_major_shared(const std::vector<int64_t>& shape,
                                        const layout::Swizzle& swizzle) {
  std::vector<int64_t> strides(shape.size());
  int64_t running = 1;
  for (size_t k = shape.size(); k-- > 0;) {
    strides[k] = running;
    running *= shape[k];
  }
  return layout::ComposedLayout{swizzle, Layout(tile_tuple(shape), shape.size() <= 1
                                                                       ? IntTuple(1)
                                                                       : tuple_from(strides))};
}

layout::ComposedLayout padded_row_major_shared(const std::vector<int64_t>& shape, int64_t row_pad) {
  if (shape.size() != 2 || row_pad <= 0) return row_major_shared(shape, layout::Swizzle{});
  return layout::ComposedLayout{layout::Swizzle{},
                                Layout(tile_tuple(shape), tuple_from({shape[1] + row_pad, 1}))};
}

}  // namespace nautilus::matile

namespace nautilus::matile {

std::optional<std::vector<int64_t>> flat_shared_strides(const SharedAlloc& alloc) {
  const size_t rank = alloc.shape.size();
  const layout::Layout& inner = alloc.layout.layout;
  std::vector<int64_t> strides;
  if (rank == 1 && inner.shape().is_leaf()) {
    strides.push_back(inner.stride().value());
    return strides;
  }
  if (inner.rank() != static_cast<int>(rank)) return std::nullopt;
  for (size_t k = 0; k < rank; ++k) {
    const layout::IntTuple& mode = inner.shape().mode(static_cast<int>(k));
    if (!mode.is_leaf() || mode.value() != alloc.shape[k]) return std::nullopt;
    strides.push_back(inner.stride().mode(static_cast<int>(k)).value());
  }
  return strides;
}

int64_t consecutive_shared_run(const SharedAlloc& alloc, const SharedRef& ref, const std::vector<int64_t>& strides,
                               const RegisterLayout& layout, const std::vector<int64_t>& shape, int64_t v,
                               int64_t longest, const std::function<bool(int64_t)>& allowed) {
  const size_t rank = strides.size();
  if (rank != shape.size() || ref.offsets.size() != rank) return 1;
  const int64_t slots = layout.slots();
  const auto linear = [&](int64_t t, int64_t slot) {
    int64_t index = layout.tv.index(t, slot), offset = 0;
    for (size_t k = 0; k < rank; ++k) {
      offset += (index % shape[k] + ref.offsets[k]) * strides[k];
      index /= shape[k];
    }
    return offset;
  };
  for (int64_t n = longest; n > 1; n /= 2) {
    if (v + n > slots || !allowed(n)) continue;
    if (ref.stage && alloc.stage_elements % n != 0) continue;
    bool ok = true;
    for (int64_t t = 0; t < layout.threads() && ok; ++t) {
      const int64_t first = linear(t, v);
      ok = first % n == 0;
      for (int64_t k = 1; k < n && ok; ++k) ok = linear(t, v + k) == first + k;
    }
    if (ok) return n;
  }
  return 1;
}

SharedReadPlan shared_read_plan(const SharedAlloc& alloc, const SharedRef& ref, const RegisterLayout& layout,
                                const std::vector<int64_t>& shape, DType dtype) {
  SharedReadPlan plan;
  const int64_t slots = layout.slots();
  const size_t rank = alloc.shape.size();
  const int bytes = dtype_bytes(dtype);
  auto singles = [&]() {
    plan.groups.clear();
    plan.copies.clear();
    for (int64_t v = 0; v < slots; ++v) plan.groups.push_back({v});
    return plan;
  };
  if (ref.transposed || rank != shape.size() || ref.offsets.size() != rank || alloc.dtype != dtype ||
      dtype == DType::Bool || (bytes != 1 && bytes != 2 && bytes != 4)) {
    return singles();
  }
  // A hierarchical mode reads one slot at a time.
  const std::optional<std::vector<int64_t>> flat = flat_shared_strides(alloc);
  if (!flat) return singles();
  const std::vector<int64_t>& strides = *flat;
  const int64_t threads = layout.threads();
  const layout::TVIndexTable indices(layout.tv);
  const auto linear = [&](int64_t t, int64_t slot) {
    int64_t index = indices.index(t, slot), offset = 0;
    for (size_t k = 0; k < rank; ++k) {
      offset += (index % shape[k] + ref.offsets[k]) * strides[k];
      index /= shape[k];
    }
    return offset;
  };
  int64_t widest = 16 / bytes;
  const layout::Swizzle& swizzle = alloc.layout.swizzle;
  while (widest > 1 && ((!swizzle.is_identity() && (int64_t{1} << swizzle.base) % widest != 0) ||
                        (ref.stage && alloc.stage_elements % widest != 0))) {
    widest /= 2;
  }
  std::vector<int64_t> offset_of(static_cast<size_t>(slots));
  std::map<int64_t, int64_t> slot_at;
  std::vector<int64_t> order;
  for (int64_t v = 0; v < slots; ++v) {
    offset_of[static_cast<size_t>(v)] = linear(0, v);
    auto [found, fresh] = slot_at.emplace(offset_of[static_cast<size_t>(v)], v);
    if (fresh) {
      order.push_back(v);
    } else {
      plan.copies.emplace_back(v, found->second);
    }
  }
  // A copy must hold the same element in every thread, not only in thread 0.
  for (const auto& [slot, source] : plan.copies) {
    for (int64_t t = 1; t < threads; ++t) {
      if (linear(t, slot) != linear(t, source)) return singles();
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return offset_of[static_cast<size_t>(x)] < offset_of[static_cast<size_t>(y)];
  });
  std::vector<bool> taken(static_cast<size_t>(slots), false);
  for (int64_t first : order) {
    if (taken[static_cast<size_t>(first)]) continue;
    const int64_t origin = offset_of[static_cast<size_t>(first)];
    std::vector<int64_t> group{first};
    for (int64_t n = widest; n > 1; n /= 2) {
      if (origin % n != 0) continue;
      std::vector<int64_t> members{first};
      for (int64_t i = 1; i < n; ++i) {
        auto found = slot_at.find(origin + i);
        if (found == slot_at.end() || taken[static_cast<size_t>(found->second)]) break;
        members.push_back(found->second);
      }
      if (static_cast<int64_t>(members.size()) != n) continue;
      bool every_thread = true;
      for (int64_t t = 1; t < threads && every_thread; ++t) {
        const int64_t base = linear(t, first);
        every_thread = base % n == 0;
        for (int64_t i = 1; i < n && every_thread; ++i) {
          every_thread = linear(t, members[static_cast<size_t>(i)]) == base + i;
        }
      }
      if (every_thread) {
        group = std::move(members);
        break;
      }
    }
    for (int64_t v : group) taken[static_cast<size_t>(v)] = true;
    plan.groups.push_back(std::move(group));
  }
  return plan;
}

}  // namespace nautilus::matile
