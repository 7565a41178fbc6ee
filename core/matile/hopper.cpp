#include "core/matile/hopper.h"

#include <algorithm>

#include "core/matile/layouts.h"

namespace nautilus::matile {

Result<RegisterLayout> wgmma_accumulator_layout(int64_t m, int64_t n, int warpgroups) {
  if (warpgroups < 1 || m != 64 * int64_t{warpgroups} || n < 8 || n > 256 || n % 8 != 0) {
    return layout::layout_error("wgmma accumulator of [" + std::to_string(m) + ", " +
                                std::to_string(n) + "] over " + std::to_string(warpgroups) +
                                " warpgroups: needs M = 64 per warpgroup and N in 8..256, step 8");
  }
  return mma_c_layout(m, n, 4 * warpgroups, 1);
}

Result<RegisterLayout> wgmma_a_layout(int64_t m, int64_t k, int warpgroups) {
  if (warpgroups < 1 || m != 64 * int64_t{warpgroups} || k < 16 || k % 16 != 0) {
    return layout::layout_error("wgmma register A of [" + std::to_string(m) + ", " +
                                std::to_string(k) + "] over " + std::to_string(warpgroups) +
                                " warpgroups: needs M = 64 per warpgroup and K a multiple of 16");
  }
  return mma_a_layout(m, k, 4 * warpgroups, 1);
}

Result<layout::ComposedLayout> tma_box_layout(DType dtype, const std::vector<int64_t>& box,
                                              int swizzle_bytes) {
  layout::Swizzle bytes_swizzle;
  switch (swizzle_bytes) {
    case 0: return row_major_shared(box, layout::Swizzle{});
    case 32: bytes_swizzle = layout::kSwizzle32B; break;
    case 64: bytes_swizzle = layout::kSwizzle64B; break;
    case 128: bytes_swizzle = layout::kSwizzle128B; break;
    default:
      return layout::layout_error("TMA swizzle of " + std::to_string(swizzle_bytes) +
                                  " bytes: needs 0, 32, 64 or 128");
  }
  Result<layout::Swizzle> element_swizzle = layout::to_element_units(bytes_swizzle, dtype_bytes(dtype));
  if (!element_swizzle) return element_swizzle.error();
  return row_major_shared(box, *element_swizzle);
}

std::vector<int> tma_tile_axes(const TmaMap& map) {
  if (!map.tile_axes.empty()) return map.tile_axes;
  const int rank = static_cast<int>(map.box.size());
  if (rank < 2) return {};
  return {rank - 2, rank - 1};
}

std::vector<int64_t> tma_tile_box(const TmaMap& map) {
  std::vector<int64_t> box;
  for (int axis : tma_tile_axes(map)) {
    if (axis >= 0 && axis < static_cast<int>(map.box.size())) box.push_back(map.box[static_cast<size_t>(axis)]);
  }
  return box;
}

Result<layout::ComposedLayout> tma_tile_layout(const TmaMap& map) {
  if (map.shared_layout) return *map.shared_layout;
  if (!map.buffer) return layout::layout_error("tensor map " + map.name + " has no buffer");
  return tma_box_layout(map.buffer->dtype, tma_tile_box(map), map.swizzle_bytes);
}

int64_t tma_box_bytes(const TmaMap& map) {
  int64_t elements = 1;
  for (int64_t extent : map.box) elements *= extent;
  return elements * (map.buffer ? dtype_bytes(map.buffer->dtype) : 0);
}

bool is_synchronization(OpKind kind) {
  switch (kind) {
    case OpKind::CommitGroup: case OpKind::WaitGroup: case OpKind::Barrier:
    case OpKind::MBarrierInit: case OpKind::MBarrierArrive: case OpKind::MBarrierWait:
    case OpKind::NamedBarrier: case OpKind::FenceProxyAsync: case OpKind::BulkCommitGroup:
    case OpKind::BulkWaitGroup: case OpKind::WgmmaFence: case OpKind::WgmmaCommitGroup:
    case OpKind::WgmmaWaitGroup:
      return true;
    default:
      return false;
  }
}

bool only_synchronizes(const Op& loop) {
  if (loop.kind != OpKind::For || !loop.body || loop.tile_loop) return false;
  return std::all_of(loop.body->ops.begin(), loop.body->ops.end(), [](const OpPtr& op) {
    return op && (is_synchronization(op->kind) || op->kind == OpKind::Yield);
  });
}

int launch_registers_per_thread(int64_t threads) {
  if (threads <= 0) return 0;
  return static_cast<int>(std::min<int64_t>(255, 65536 / threads) / 8 * 8);
}

int role_register_pool(int kernel_warps) {
  const int warpgroups = kernel_warps / 4;
  return warpgroups * launch_registers_per_thread(int64_t{kernel_warps} * kWarpSize);
}

int first_role_registers_left(int kernel_warps, int64_t taken) {
  const int64_t rest = (role_register_pool(kernel_warps) - taken) / 8 * 8;
  return static_cast<int>(std::min<int64_t>(rest, launch_registers_per_thread(int64_t{kernel_warps} * kWarpSize)));
}

std::optional<std::string> roles_error(const Op& roles, int kernel_warps) {
  int warpgroups = 0;
  int64_t registers = 0;
  for (const WarpRole& role : roles.roles) {
    const std::string where = "role " + role.name + ": ";
    if (role.warpgroups < 1) return where + "needs at least one warpgroup";
    if (role.max_registers % 8 != 0 || role.max_registers < 24 || role.max_registers > 256) {
      return where + "setmaxnreg " + std::to_string(role.max_registers) +
             " must be a multiple of 8 in 24..256";
    }
    warpgroups += role.warpgroups;
    registers += int64_t{role.warpgroups} * role.max_registers;
  }
  if (roles.roles.empty()) return "roles need at least one role";
  if (4 * warpgroups != kernel_warps) {
    return "the roles' " + std::to_string(warpgroups) + " warpgroups are not the kernel's " +
           std::to_string(kernel_warps) + " warps";
  }
  const int pool = role_register_pool(kernel_warps);
  if (registers > pool) {
    return "register budgets sum to " + std::to_string(registers) +
           " per warpgroup thread, above the " + std::to_string(pool) + " the CTA holds from its launch (" +
           std::to_string(warpgroups) + " warpgroups x " +
           std::to_string(launch_registers_per_thread(int64_t{kernel_warps} * kWarpSize)) +
           "): setmaxnreg.inc would wait forever for the rest";
  }
  return std::nullopt;
}

}  // namespace nautilus::matile
