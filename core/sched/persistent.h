// persistent(BLOCK) — the kernel that computes BLOCK runs as persistent CTAs: it is launched with
// as many CTAs as the GPU holds at once (at most one per tile), and each CTA walks the tiles
// cta, cta + launched, cta + 2 launched, ... in the kernel's tile order (tile_order's bands, or the
// plain order), instead of one CTA per tile.
//
// What it buys on a warp-specialized kernel (sm_90a): the producer warpgroup goes on filling the
// ring with the next tile's operands while the consumers finish the current tile (the last MMAs,
// the epilogue's stores), so a CTA's start (barrier setup, the ring's first fill) is paid once per
// SM instead of once per tile. The decision changes no value: it writes the launch attribute
// `persistent` (scalar::LaunchAttrs) on BLOCK's nest, printed `launch(..., persistent)`; the MA
// lowering gives the kernel one grid axis of tiles (Kernel::persistent) and a tile loop in each
// warp role, whose ring positions continue from tile to tile.
//
//   warp_spec(C_sum, consumers=2, stages=4)       kernel C: grid(tile: 512) persistent
//   persistent(C_sum)                       →       role producer { for tile_step ... (tile =
//                                                     cta + tile_step * launched) { for k_o ... } }
//
// Refused when BLOCK's nest binds no loop to the grid (a kernel of one CTA has no tiles to walk).
// The MA lowering applies it to warp-specialized kernels only, and notes why not on the others.
#pragma once

#include "core/sched/decision.h"

namespace nautilus::sched {

DecisionKind persistent_decision();

}  // namespace nautilus::sched
