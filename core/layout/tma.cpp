#include "core/layout/tma.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/layout/printer.h"

namespace nautilus::layout {

namespace {

constexpr int64_t kMaxBoxExtent = 256;
constexpr int64_t kBoxAlignmentBytes = 128;   // where a box may land in shared memory
constexpr int64_t kGlobalStrideUnit = 16;     // global strides are multiples of 16 bytes
constexpr int64_t kMaxGlobalDim = int64_t{1} << 32;
constexpr int64_t kMaxGlobalStride = int64_t{1} << 40;

// The first mode of a coalesced layout as (size, stride).
std::pair<int64_t, int64_t> first_run(const Layout& layout) {
  const Layout simple = coalesce(layout);
  if (simple.shape().is_leaf()) return {simple.shape().value(), simple.stride().value()};
  return {simple.shape().mode(0).value(), simple.stride().mode(0).value()};
}

// The largest divisor of n that is at most limit.
int64_t largest_divisor_at_most(int64_t n, int64_t limit) {
  for (int64_t d = std::min(n, limit); d > 1; --d) {
    if (n % d == 0) return d;
  }
  return 1;
}

int tensor_map_swizzle_value(SwizzleMode mode) {
  switch (mode) {
    case SwizzleMode::None: return 0;
    case SwizzleMode::B32: return 1;
    case SwizzleMode::B64: return 2;
    case SwizzleMode::B128: return 3;
  }
  return 0;
}

}  // namespace

namespace {

Result<TmaTilePlan> compute_tma_tile_plan(const ComposedLayout& tile, int element_bytes,
                                          const GlobalTensor& global) {
  const std::string context = "TMA boxes for tile " + to_string(tile) + " of " +
                              std::to_string(element_bytes) + "-byte elements";
  const int64_t e = element_bytes;
  if (e != 1 && e != 2 && e != 4 && e != 8) {
    return layout_error(context + ": TMA copies elements of 1, 2, 4 or 8 bytes");
  }
  Result<SwizzleMode> mode = swizzle_mode_of(tile.swizzle, element_bytes);
  if (!mode) return layout_error(context + ": " + mode.error().message);
  if (tile.layout.rank() != 2) return layout_error(context + ": the tile must have rank 2");
  for (int i = 0; i < 2; ++i) {
    if (global.shape[i] < 1 || global.shape[i] >= kMaxGlobalDim) {
      return layout_error(context + ": global dimension " + std::to_string(global.shape[i]) +
                          " is outside [1, 2^32)");
    }
  }

  // 1. The tensor map's dimension 0 is the global tensor's contiguous one.
  const int inner = global.strides[1] == 1 ? 1 : global.strides[0] == 1 ? 0 : -1;
  if (inner < 0) {
    return layout_error(context + ": neither global stride is 1; TMA needs a contiguous "
                        "innermost dimension");
  }
  const int outer = 1 - inner;
  const int64_t stride_bytes = global.strides[outer] * e;
  if (stride_bytes <= 0 || stride_bytes % kGlobalStrideUnit != 0 ||
      stride_bytes >= kMaxGlobalStride) {
    return layout_error(context + ": the global stride of " + std::to_string(stride_bytes) +
                        " bytes is not a positive multiple of 16 below 2^40");
  }

  // 2. The box's inner extent: the tile's contiguous run along that dimension, cut to the
  //    swizzle span (the engine's row pitch when swizzling) or to 256 elements.
  const Layout inner_layout = tile.layout.mode(inner);
  const Layout outer_layout = tile.layout.mode(outer);
  const int64_t inner_extent = inner_layout.size(), outer_extent = outer_layout.size();
  const auto [run, run_stride] = first_run(inner_layout);
  if (run_stride != 1 && inner_extent > 1) {
    return layout_error(context + ": mode " + std::to_string(inner) +
                        " (the tensor's contiguous dimension) is not contiguous in shared "
                        "memory: it steps by " + std::to_string(run_stride) + " elements");
  }
  int64_t box_inner = 0;
  if (*mode != SwizzleMode::None) {
    const int64_t span = swizzle_span_bytes(*mode) / e;
    if (run % span != 0) {
      return layout_error(context + ": with " + swizzle_mode_name(*mode) +
                          " a box row is exactly " + std::to_string(swizzle_span_bytes(*mode)) +
                          " bytes, but the tile's contiguous run is " + std::to_string(run * e) +
                          " bytes");
    }
    box_inner = span;
  } else {
    box_inner = largest_divisor_at_most(run, kMaxBoxExtent);
  }
  if ((box_inner * e) % 16 != 0) {
    return layout_error(context + ": the box's inner extent of " + std::to_string(box_inner * e) +
                        " bytes is not a multiple of 16");
  }
  // 3. The outer extent: as many rows as the tile stacks at the box's pitch, at most 256.
  const auto [rows, row_stride] = first_run(outer_layout);
  const int64_t box_outer =
      row_stride == box_inner ? largest_divisor_at_most(rows, kMaxBoxExtent) : 1;

  TmaTilePlan plan;
  plan.element_bytes = element_bytes;
  plan.inner_mode = inner;
  plan.global_dims = {global.shape[inner], global.shape[outer]};
  plan.global_stride_bytes = stride_bytes;
  plan.box_dims = {box_inner, box_outer};
  plan.swizzle = *mode;
  plan.tensor_map_swizzle = tensor_map_swizzle_value(*mode);
  plan.box_bytes = box_inner * box_outer * e;
  plan.tile_bytes = inner_extent * outer_extent * e;
  plan.shared_alignment_bytes = std::max(kBoxAlignmentBytes, swizzle_repeat_bytes(*mode));

  // 4. Every box, checked element by element against the layout: dense at the box pitch, at a
  //    128-byte boundary, and no two elements at one address.
  std::vector<bool> written(static_cast<size_t>(tile.layout.cosize()), false);
  for (int64_t ob = 0; ob < outer_extent / box_outer; ++ob) {
    for (int64_t ib = 0; ib < inner_extent / box_inner; ++ib) {
      std::array<int64_t, 2> origin{};
      origin[inner] = ib * box_inner;
      origin[outer] = ob * box_outer;
      const int64_t base = tile.layout.evaluate(tuple_of(origin[0], origin[1])).value();
      if ((base * e) % kBoxAlignmentBytes != 0) {
        return layout_error(context + ": the box at (" + std::to_string(origin[0]) + "," +
                            std::to_string(origin[1]) + ") would land at byte " +
                            std::to_string(base * e) + ", not a multiple of 128");
      }
      for (int64_t i1 = 0; i1 < box_outer; ++i1) {
        for (int64_t i0 = 0; i0 < box_inner; ++i0) {
          std::array<int64_t, 2> c = origin;
          c[inner] += i0;
          c[outer] += i1;
          const int64_t offset = tile.layout.evaluate(tuple_of(c[0], c[1])).value();
          if (offset != base + i0 + box_inner * i1) {
            return layout_error(context + ": the " + std::to_string(box_inner) + "x" +
                                std::to_string(box_outer) + " box at (" +
                                std::to_string(origin[0]) + "," + std::to_string(origin[1]) +
                                ") is not dense in shared memory: element (" +
                                std::to_string(c[0]) + "," + std::to_string(c[1]) +
                                ") is at " + std::to_string(offset) + ", the box puts it at " +
                                std::to_string(base + i0 + box_inner * i1));
          }
          if (written[static_cast<size_t>(offset)]) {
            return layout_error(context + ": two elements share the shared-memory offset " +
                                std::to_string(offset));
          }
          written[static_cast<size_t>(offset)] = true;
        }
      }
      plan.boxes.push_back(TmaBox{origin, {origin[inner], origin[outer]}, base * e});
    }
  }
  return plan;
}

}  // namespace

// Plans are remembered per (tile, element size, global tensor): the lowering and the emitter
// plan every TMA copy of every candidate the search compiles, and step 4 evaluates the layout
// at every element of the tile.
Result<TmaTilePlan> plan_tma_tile(const ComposedLayout& tile, int element_bytes,
                                  const GlobalTensor& global) {
  using Key = std::tuple<std::string, int, std::array<int64_t, 2>, std::array<int64_t, 2>>;
  static std::mutex mutex;
  static std::map<Key, Result<TmaTilePlan>> known;
  Key key{to_string(tile), element_bytes, global.shape, global.strides};
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(key); it != known.end()) return it->second;
  }
  Result<TmaTilePlan> plan = compute_tma_tile_plan(tile, element_bytes, global);
  std::lock_guard<std::mutex> lock(mutex);
  return known.emplace(std::move(key), std::move(plan)).first->second;
}

std::string to_string(const TmaTilePlan& plan) {
  std::ostringstream text;
  text << "inner mode " << plan.inner_mode << "; global dims {" << plan.global_dims[0] << ", "
       << plan.global_dims[1] << "}; global strides {" << plan.global_stride_bytes
       << " B}; box {" << plan.box_dims[0] << ", " << plan.box_dims[1] << "}; swizzle "
       << swizzle_mode_name(plan.swizzle) << " (CUtensorMapSwizzle " << plan.tensor_map_swizzle
       << "); " << plan.boxes.size() << " boxes of " << plan.box_bytes << " B\n";
  for (size_t b = 0; b < plan.boxes.size(); ++b) {
    const TmaBox& box = plan.boxes[b];
    text << "  box " << b << " at (" << box.tile_coordinate[0] << "," << box.tile_coordinate[1]
         << ") -> shared byte " << box.shared_offset_bytes << "\n";
  }
  return text.str();
}

}  // namespace nautilus::layout
