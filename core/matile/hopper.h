// Layouts and sizes of Hopper's asynchronous ops in MA tile IR (ir.h notes, "Hopper"): the
// wgmma register fragments, the shared layout in which a TMA box lands, and the checks of a
// warp-role split that the verifier and the interpreter share.
//
//   wgmma_accumulator_layout(128, 64, 2)   the f32[128, 64] accumulator of two warpgroups:
//       warpgroup g owns rows 64g..64g+63, warp w of it rows 16w.., and lane l of that warp
//       holds rows +l/4 and +l/4+8, columns 8j + 2(l%4) + {0,1} -- mma.sync's C fragment over
//       4 warps per warpgroup stacked along M (printed `mma_c warps(8,1)`).
//   tma_box_layout(BF16, {64, 64}, 128)    Sw<3,3,3> o (64,64):(64,1): the box row-major,
//       swizzled in 16-byte chunks as the tensor map's 128-byte swizzle places it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/layout/result.h"
#include "core/layout/swizzle.h"
#include "core/matile/ir.h"

namespace nautilus::matile {

using layout::Result;

constexpr int kWarpgroupThreads = 128;
constexpr int64_t kSharedBytesPerCta = 227 * 1024;  // the H100's opt-in maximum per block

// The accumulator (and wgmma result) layout of an f32[m, n] tile over `warpgroups`
// warpgroups: m == 64 * warpgroups, n a multiple of 8 in 8..256.
Result<RegisterLayout> wgmma_accumulator_layout(int64_t m, int64_t n, int warpgroups);
// The register A operand (RS form) of an [m, k] tile: mma.sync's A fragment per warp, k atoms
// of 16 in slot order.
Result<RegisterLayout> wgmma_a_layout(int64_t m, int64_t k, int warpgroups);

// The shared layout of one box landed by a tensor map with `swizzle_bytes` (0, 32, 64, 128).
Result<layout::ComposedLayout> tma_box_layout(DType dtype, const std::vector<int64_t>& box,
                                              int swizzle_bytes);
// The two buffer axes a map's tile spans (its tile_axes, or the buffer's last two) and the box
// over them: the shape of the shared tile the box lands in.
std::vector<int> tma_tile_axes(const TmaMap& map);
std::vector<int64_t> tma_tile_box(const TmaMap& map);
// The layout in which a map's tile lands in shared memory: its explicit shared_layout, or the
// tile box row-major with the map's swizzle.
Result<layout::ComposedLayout> tma_tile_layout(const TmaMap& map);
// The bytes a box counts on its mbarrier (the whole box, out-of-bounds zeros included).
int64_t tma_box_bytes(const TmaMap& map);

// The registers a thread of a CTA of `threads` holds at launch (__launch_bounds__(threads, 1)):
// 64K / threads, at most 255, rounded down to 8 (168 for 384 threads, 128 for 512).
int launch_registers_per_thread(int64_t threads);
// What the roles' setmaxnreg budgets may add up to, per warpgroup thread: the CTA's registers at
// launch, launch_registers_per_thread x its warpgroups (504 for three warpgroups, 512 for four).
// setmaxnreg.inc waits for registers the other roles' setmaxnreg.dec released in the CTA; a
// split above this pool never gets them and the consumers wait forever (40 + 232 + 232 = 504
// runs; 32 + 240 + 240 = 512 hung on the H200, 2026-11-28).
int role_register_pool(int kernel_warps);
// What the first role (the producer) of a kernel of `kernel_warps` may keep when the other roles
// take `taken` registers per warpgroup thread: the rest of the pool, rounded down to 8, at most
// the registers of the launch (setmaxnreg lowers the first role's budget from there).
int first_role_registers_left(int kernel_warps, int64_t taken);

// Why a Roles op's split is illegal (register budgets, warp count), or nothing.
std::optional<std::string> roles_error(const Op& roles, int kernel_warps);

// Ops that only order threads and asynchronous work (barriers, waits, fences, commits).
bool is_synchronization(OpKind kind);
// A loop whose body only synchronizes: the conditional arrive the MA lowering writes as a loop
// of at most one trip (a persistent kernel's release of its query tile in the last iteration).
// Cost models and the pipeline solver see no loop in it.
bool only_synchronizes(const Op& loop);

}  // namespace nautilus::matile
