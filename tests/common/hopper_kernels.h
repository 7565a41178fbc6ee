// A hand-built warp-specialized Hopper GEMM in MA tile IR, C = A * B^T (A: [M, K], B: [N, K],
// C: [M, N], all bf16), and deliberately broken variants of it for the interpreter's race and
// deadlock checks. One CTA computes a 128 x 64 tile of C (128 x tile_n, see HopperGemmShape):
//
//   producer (1 warpgroup, 40 registers), for k in 0..KT:
//     mbarrier.wait empty[k % S] parity ((k / S) % 2) ^ 1      -- the stage was released
//     mbarrier.arrive.expect_tx full[k % S] tx 24576
//     tma.load As[k % S] <- tmA[m0, 64k] mbarrier full[k % S]   -- [128, 64], 128-byte swizzle
//     tma.load Bs[k % S] <- tmB[n0, 64k] mbarrier full[k % S]   -- [64, 64]
//   consumer0 / consumer1 (1 warpgroup each, 232 registers; rows 64g..64g+63 of the tile):
//     wgmma.fence; k = 0 peeled: wait full[0], wgmma, commit
//     for k in 1..KT: wait full[k % S] parity (k / S) % 2; %acc = wgmma As[..][64g, 0],
//       Bs[..]^T, %acc; commit; wgmma.wait_group 1; mbarrier.arrive empty[(k - 1) % S]
//     wgmma.wait_group 0; arrive empty[(KT - 1) % S]
//     stmatrix Cs[64g, 0], cast(%acc); fence.proxy.async; bar.sync 1, 256
//     consumer0: tma.store tmC[m0, n0] <- Cs; cp.async.bulk.commit_group; wait_group.read 0
//   (cooperative: one role "consumers" of 2 warpgroups does the same on all 128 rows.)
//   (pingpong, cooperative only: the two warpgroups take turns issuing each k step's wgmma:
//     bar.arrive [-, 1] by warpgroup, 256 before the first (warpgroup 1 lets warpgroup 0 start);
//     per k step bar.sync [1, 2] by warpgroup, 256; wgmma; commit; bar.arrive [2, 1] ...;
//     after the loop bar.sync [1, -] ..., which consumes warpgroup 1's last arrival.)
#pragma once

#include <cstdint>

#include "core/matile/ir.h"
#include "core/support/tensor.h"

namespace nautilus::matile::testing {

enum class HopperBug {
  None,
  MissingExpectTx,          // a plain arrive on the full barrier
  ExpectTxTooLarge,         // 1024 bytes more than the boxes
  ExpectTxTooSmall,         // 1024 bytes fewer
  WrongProducerParity,      // the producer waits on the empty barrier's phase, not its parity ^ 1
  ConsumerNeverReleases,    // consumer1 never arrives on the empty barrier
  ProducerSkipsEmptyWait,   // the producer reloads stages without waiting for their release
  ConsumerReleasesEarly,    // consumers release a stage before the wgmma reading it retired
  AccumulatorBeforeWait,    // the epilogue converts the accumulator without wgmma.wait_group 0
  MissingProxyFence,        // stmatrix then TMA store without fence.proxy.async
  MissingWgmmaFence,        // the first wgmma without wgmma.fence
  RegisterBudgetOver,       // consumers with 240 registers: 40 + 240 + 240 > 504 (3 x 168)
  PingPongMissingSeed,      // pingpong without warpgroup 1's first arrival: both wait forever
  PingPongMissingDrain,     // pingpong leaving warpgroup 1's last arrival on barrier 1
  EpilogueBarrierPerWarpgroup,  // cooperative: the bar.sync before the C tile's TMA store counts
                                // each warpgroup alone (ids [4, 5], 128 threads), not both
};

struct HopperGemmShape {
  int64_t m = 200, n = 104, k = 328;  // no multiple of the 128 x 64 x 64 tile
  int stages = 3;
  // One consumer role of 2 warpgroups sharing one m128 wgmma (CUTLASS's cooperative form)
  // instead of two roles of one warpgroup each.
  bool cooperative = false;
  // Columns of C per CTA (the wgmma N): 64, or a multiple of 8 up to 256 for a wider tile,
  // which halves (128) or quarters (256) the B traffic per FLOP. A tile wider than 64 stores
  // C from the registers with st.global (the TMA store's box is limited to the 128-byte swizzle
  // span), so its epilogue has no stmatrix, fence or tma.store.
  int64_t tile_n = 64;
  // With `cooperative`: the consumer warpgroups take turns issuing their wgmmas (ping-pong).
  bool pingpong = false;
};

ModulePtr hopper_gemm(const HopperGemmShape& shape, HopperBug bug = HopperBug::None);

// Seeded random inputs of hopper_gemm: A [M, K] and B [N, K], bf16 values in [-1, 1).
// `nonzero` draws again for every 0, so that a product dropped anywhere changes the result.
TensorMap hopper_gemm_inputs(const HopperGemmShape& shape, uint64_t seed, bool nonzero = false);

}  // namespace nautilus::matile::testing
