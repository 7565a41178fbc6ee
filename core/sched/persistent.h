// persistent(BLOCK, scheduler=dynamic|static) — the kernel that computes BLOCK runs as persistent
// CTAs: it is launched with as many CTAs as the GPU holds at once (at most one per tile), and
// each CTA walks several tiles in the kernel's tile order (tile_order's bands, or the plain
// order), instead of one CTA per tile. Which tiles:
//   scheduler=dynamic (the default): tile `cta` first, then each next one from a global counter
//     in a workspace the launcher zeroes (the producer fetches it one tile ahead and hands it to
//     the consumers through shared memory), so tiles start in launch order as CTAs free up and
//     the tail is short (FlashAttention-3's scheduler). The cost model never ranks the static
//     walk ahead of it, hence the default.
//   scheduler=static: cta, cta + launched, cta + 2 launched, ... (on tiles of unequal length the
//     CTAs drift apart and lose L2 reuse: measured 42% slower on long causal attention rows).
//
// What it buys on a warp-specialized kernel (sm_90a): the producer warpgroup goes on filling the
// ring with the next tile's operands while the consumers finish the current tile (the last MMAs,
// the epilogue's stores), so a CTA's start (barrier setup, the ring's first fill) is paid once per
// SM instead of once per tile. The decision changes no value: it writes the launch attribute
// `persistent` and `dynamic_tiles` (scalar::LaunchAttrs) on BLOCK's nest, printed
// `launch(..., persistent(dynamic))`; the MA lowering gives the kernel one grid axis of tiles
// (Kernel::persistent, Kernel::dynamic_tiles) and a tile loop in each warp role, whose ring
// positions continue from tile to tile.
//
//   warp_spec(C_sum, consumers=2, stages=4)       kernel C: grid(tile: 512) persistent
//   persistent(C_sum)                       →       role producer { for tile_step ... (tile =
//                                                     cta + tile_step * launched) { for k_o ... } }
//
// Refused when BLOCK's nest binds no loop to the grid (a kernel of one CTA has no tiles to walk),
// and for a scheduler other than dynamic or static.
// The MA lowering applies it to warp-specialized kernels only, and notes why not on the others.
#pragma once

#include "core/sched/decision.h"

namespace nautilus::sched {

DecisionKind persistent_decision();

}  // namespace nautilus::sched
