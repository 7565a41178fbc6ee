// lower_to_matile: VR tile IR -> MA tile IR by placement rules.
//
// Every VR kernel becomes one MA kernel with the same grid, of the warps and pipeline stages of
// its launch attributes (vrtile::Kernel::launch), or of the options' defaults when it has none
// (an unscheduled kernel, or one built by hand). Rules, in the
// order they are tried (each falls back to a generic correct path, so the lowering is total over
// verified VR modules; an unsupported construct returns a reason instead):
//   1. Dots. A dot whose operands are (or are exact f32 casts of) bf16/f16 tiles with M a
//      multiple of 16 * warps_m, N of 16 * warps_n and K of 16 runs on mma.sync m16n8k16 (warps
//      along M first). Otherwise it runs on FMA from shared memory (FmaDot).
//   2. Dot operands loaded through a window (index tiles affine in the grid/loop variables plus
//      one tile coordinate per buffer axis, masks of the form index < bound, `other` 0, rows of
//      16-byte multiples) go global -> shared by cp.async with zero-fill, into a row-major
//      allocation whose swizzle is the one with the fewest ldmatrix bank conflicts
//      (layout/bank_conflicts.h), then shared -> registers by ldmatrix.x4 (.trans when the
//      fragment's pairs run across the stored rows), one 16-wide k step at a time right before
//      its mma. A permuted load (Kᵀ) is read through a transposed window. An operand computed
//      element-wise from one such loaded tile and per-row / per-column vectors (a normalized
//      activation, bf16((X - Mu) * rstd * G + Bt)) stages that tile the same way and reads it
//      whole into the fragment layout by ldmatrix, where the element-wise ops run:
//        %x = load X[...]; %a = cast(%x - %mu) ...; dot %a, %w   ->
//        cp.async x_smem[%next] <- X[...]; %x = ldmatrix.x4 x_smem[%stage]; %a = ...; mma %a ...
//   3. Such loads inside a For whose offsets depend only on the loop variable and values from
//      outside it are software-pipelined over `stages` buffers: a prologue issues iterations
//      0..S-2; iteration i waits until its group landed (wait_group S-2), synchronizes, issues
//      iteration i+S-1 into the buffer iteration i-1 used (predicated off past the end), and
//      then computes on buffer i % S. Other shared operands are copied where the VR load was,
//      fenced by barriers; loads outside loops (attention's Q) are copied once. A copy-once
//      tile read only by dots is waited for late: after the next loop's prologue (wait_group
//      S-1 keeps the prologue in flight) or before the first op that could read it.
//   4. Register layouts: mma accumulators in the C fragment layout; element-wise results take
//      their first placed operand's layout; reduce results the slice of their operand's (lane
//      shuffles, shared scratch across warps); loop-carried values their initial or yielded
//      value's; everything else the blocked layout. Index and mask tiles built from iota, full,
//      broadcast and arithmetic are rematerialized in whatever layout a consumer needs; other
//      mismatches get a ConvertLayout (register-only when every thread already holds its
//      elements, as when S's accumulator becomes P's A fragment, else through shared memory).
//   5. Other loads and stores: window accesses when the indices and mask match, else gathers.
//      A top-level store that a later top-level store of the same window overwrites, in a
//      kernel that never loads the buffer, is not emitted.
//   6. Warp specialization (launch consumers > 0, sm_90a; lower_hopper.cpp): the kernel's main
//      loop -- the top-level For whose dots read loaded tiles -- gets a TMA producer warpgroup
//      that fills a ring of `stages` shared buffers, and N consumer warpgroups that run the rest
//      of the kernel with those dots on wgmma (64 rows per consumer warpgroup), handing each
//      buffer back through full/empty mbarriers. A dot of two fp8 tiles that are K-major in
//      global memory (A [M, K], B [N, K]) and whose product reaches only outputs of 16 bits or
//      fewer runs wgmma's 8-bit form (m64nNk32) on the copied bytes, without the widening to
//      bf16 (lower_dots.cpp, plan_eight_bit_wgmma). A kernel that cannot take that form is refused
//      with the reason; on sm_80 the kernel keeps rules 1-5 with 4N warps.
//   7. Staged epilogue (lower_epilogue.cpp): in a warp-specialized kernel, a 16-bit tile in the
//      wgmma accumulator layout stored through a window goes stmatrix -> a swizzled shared tile
//      -> named barrier -> row-wise ld.shared -> coalesced global stores as wide as the row
//      pitch and offsets allow (16 bytes when rows are 16-byte aligned). When it does not apply
//      the kernel notes why and the tile is stored from its fragments.
//   8. On-chip buffers (lower_row_buffers.cpp): a shared-scope buffer of the schedule
//      (cache_read(..., shared, at=LOOP, readers=all): a row copied once, read by every pass)
//      that is one-dimensional and accessed in windows of one width T at multiples of T
//      becomes a shared allocation of T elements by ceil(extent / T) stages, filled by cp.async
//      (or ld.global + st.shared when its rows are not 16-byte aligned) and read by ld.shared
//      after a wait and a barrier; refused when it does not fit the CTA's shared memory,
//      unless marked tail=global: then its leading stages that fit are allocated, every loop
//      over the stages runs in a resident part and a tail part, and the tail's reads load the
//      copy's source from global memory.
//
//   before (VR):                              after (MA, one k step shown):
//     %acc = for k_o in 0..4                    cp.async a_smem[0][0, 0] <- A[%m0 + i0, i1] ...
//         iter_args(%acc_i = %acc0) {           cp.async.commit_group
//       %a = load A[...] mask %a_mask           %acc = for k_o in 0..4 ... pipeline 2 {
//       %w = load B[...] mask %b_mask             cp.async.wait_group 0
//       %acc1 = dot %a, %w, %acc_i                bar.sync
//       yield %acc1                               cp.async a_smem[%next][0, 0] <- ... if %more
//     }                                           cp.async.commit_group
//                                                 %a.k0 = ldmatrix.x4 a_smem[%stage][0, 0]
//                                                 %w.k0 = ldmatrix.x4.trans w_smem[%stage][0, 0]
//                                                 %acc1 = mma.m16n8k16 %a.k0, %w.k0, %acc_i
//                                                 yield %acc1
//                                               }
#pragma once

#include <string>

#include "core/layout/result.h"
#include "core/matile/ir.h"
#include "core/vrtile/ir.h"

namespace nautilus::matile {

// Module-wide options. `warps` and `stages` are defaults: a kernel with launch attributes uses
// its own.
struct LowerOptions {
  int warps = 4;               // 1, 2, 4 or 8
  int stages = 2;              // software-pipeline depth of in-loop shared operands, >= 1
  std::string arch = "sm_80";  // "sm_80" or "sm_90a" (both use mma.sync for now)
  bool use_mma = true;         // false: every dot on FMA (for comparisons and tests)
  bool use_async_copy = true;  // false: dot operands are loaded into registers directly
  int consumers = 0;           // > 0: rule 6 with that many consumer warpgroups (sm_90a)
  bool overlap = false;        // rule 6: the consumers' last dot deferred by one iteration
  bool pingpong = false;       // rule 6: the consumer warpgroups take turns issuing their MMAs
  bool stage_epilogue = true;  // false: rule 7 off, accumulators stored from their fragments
  // Rule 6's early release: ring operands whose dots' results the iteration reads (attention's
  // K) released in their own iteration, on barriers of their own. Together: every operand
  // released by the next iteration, one barrier pair per slot. Auto: together, unless that ring
  // does not fit or leaves no room for the staged epilogue (rule 7); then early, whose K ring
  // may be shallower. The second barrier pair costs a wait and an arrive per iteration, so
  // early release pays only where it buys shared memory (measured: bench/RESULTS.md).
  enum class RingRelease { Auto, Early, Together };
  RingRelease ring_release = RingRelease::Auto;
  // Rule 6's releases (a ring slot, the tiles copied once, a tile index): one arrive per consumer
  // warp after __syncwarp. false: every consumer thread arrives for itself (32x the atomics).
  bool arrive_per_warp = true;
  // The depth of the early-released rings (0: `stages`), from the pipeline decision's early_stages.
  int early_stages = 0;
  // > 0: the shared memory a CTA may use for rule 8's on-chip rows instead of the target's
  // (so CPU tests reach the tail=global form with short rows).
  int64_t row_shared_budget = 0;
  // Rule 7 at a row pitch that is not 16-byte aligned: rows read back as 16-byte runs and stored
  // realigned (GlobalAccess::realign_rows) instead of one 2-byte element per thread. Off by
  // default: on the H100 it measured slower than the 2-byte stores (bench/NOTES.md, 2026-11-26,
  // "realigned rows"): its head and tail go out one element per instruction.
  bool realign_rows = false;
  // Rule 7 where the tile can be a TMA box (16-byte aligned rows, a window clipped only at the
  // buffer's end): the staged tile leaves by a TMA store issued by one thread, and the consumers
  // go on at once (a persistent CTA's next tile waits only before it stages again). Persistent:
  // in persistent kernels only, where the consumers have a next tile to go on to (with one tile
  // per CTA it measured within 1% of the row stores on the H100 and can cost ptxas registers);
  // Always: wherever it applies; Never: the consumers store the staged rows themselves.
  enum class TmaStore { Persistent, Always, Never };
  TmaStore tma_store = TmaStore::Persistent;
  // Each kernel notes, for every register tile, its layout, the rule that fixed it and the
  // users that wanted another (`nautilus lower --explain-layouts`).
  bool explain_layouts = false;
  // Each kernel keeps the same explanations as data (Kernel::layout_reasons, layout_synthesis)
  // without the notes: the studio's Layouts panel shows them beside the selected tile.
  bool record_layout_reasons = false;
  // Register layouts synthesized: the rules' assignment improved by pinning values to the
  // layouts their consumers want wherever the cost model prices the kernel lower
  // (lower_layout_synthesis.cpp). false: the first-wins rules alone, for comparisons.
  bool synthesize_layouts = true;
  // Element-wise shared reads grouped (Kernel::grouped_shared_reads): a lane's neighbouring
  // elements in one ld.shared at hoisted addresses, and a widened 8-bit B stored [K, N] read
  // through mma atoms with interleaved columns (layouts.h). Auto: as the kernel's launch says
  // (launch's reads=), whose own default groups them where a widened int8 B is read 4 or more
  // bytes at a time (measured on the H200, docs/codegen.md); Elements or Grouped: every kernel.
  scalar::SharedReads shared_reads = scalar::SharedReads::Auto;
  // How mma.sync products of 1, 2, 4 or 8 rows run (layouts.h, mma_swapped_c_layout). Auto: as
  // the kernel's launch says (launch's mma=), whose own default swaps a product that is only
  // accumulated and stored; Direct or Swapped: every kernel.
  scalar::MmaForm mma_form = scalar::MmaForm::Auto;
};

layout::Result<ModulePtr> lower_to_matile(const vrtile::ModulePtr& module,
                                          const LowerOptions& options = {});

}  // namespace nautilus::matile
