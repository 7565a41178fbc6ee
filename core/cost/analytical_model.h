// The analytical cost model: counts what each kernel of an MA tile module does and divides it by
// the device's ceilings (device_models.h). docs/cost-model.md works the attention example through.
//
// Per kernel, in four steps:
//  1. Work per CTA. The ops are walked with their loops' trip counts: a For's `extent`, or, when
//     it has a `trip_count`, that count evaluated for every grid point it depends on (grid
//     variables, constants and +, -, *, floordiv, mod, min, max: causal attention's skipped
//     tiles) and averaged; a trip count the model cannot evaluate counts as the full extent.
//     Per op (T = threads, s = the value's slots per thread):
//       tensor     Mma: 2*M*N*K (= 4096 per m16n8k16 atom).
//       cuda-core  element-wise float and index ops: T*s lane operations (f32 -> 16-bit casts
//                  T*s/2, they go in pairs; a float division 6); Reduce: the in-thread combines,
//                  one combine per shuffle step, the cross-warp combines; FmaDot 2*T*s*K FLOPs.
//                  Full, Broadcast, Permute, ExtractSlice and register-only ConvertLayout are
//                  free (constants and register renaming).
//       special    exp2, log2, rsqrt, reciprocal-like: one MUFU op per lane and slot (exp also
//                  a multiply; sigmoid two; a float division one reciprocal).
//       shared     bytes through the SM's shared/L1 data path: cp.async writes, ldmatrix and
//                  ld.shared reads (T*s*bytes: every warp reads its own fragments, so warps
//                  side by side along M each read the whole K/V tile), st.shared, shuffle steps
//                  (a shuffle uses the same 128 B/clock crossbar), FmaDot operand reads, and
//                  global loads/stores, which pass through L1. Scratch accesses count in
//                  wavefronts (x 128 bytes): a convert_layout through shared memory stores and
//                  loads one element per slot, and the bank conflicts of warp 0's st/ld.shared
//                  on the scratch layout are counted exactly (layout/bank_conflicts.h) and
//                  multiplied by the warps; a cross-warp reduce costs at least one wavefront per
//                  warp instruction (the partials' stores and every thread's loads of them).
//       barriers   bar.sync, and two for each convert_layout through shared memory and each
//                  reduce across warps.
//       global     every GlobalLoad, AsyncCopy (its window) and GlobalStore, with the set of
//                  grid axes and loops its offsets depend on. A pipelined copy predicated off
//                  past the end (`if %more`) runs min(trips, extent - stages + 1) times.
//  2. DRAM bytes (the L2 reuse rule). CTAs are launched in blockIdx order (grid axis 0 fastest,
//     or the kernel's grouped tile order: bands of tile_group rows of axis 1 walked column by
//     column, core/support/launch_order.h, every wave counted on its own) in waves of
//     sm_count * ctas_per_sm. A read whose offsets do not depend on some grid axes is
//     shared by the CTAs that differ only in those axes: within one wave it is read from DRAM
//     once per distinct value of the axes it does depend on (attention's K/V: once per (b, h)
//     present in the wave); data a CTA re-reads in a loop whose variable its offsets do not use
//     counts once. When everything the kernel reads fits in half the L2, each byte is read from
//     DRAM once in total. Writes always go to DRAM. L2 traffic is every request. A read of a
//     buffer at the same grid point as earlier reads of the kernel that cover at least as many
//     bytes (a row kernel's second pass over its row) is a re-read: from DRAM only in the share
//     1 - min(1, L2 / (CTAs at once x bytes one CTA reads and writes)).
//  3. Occupancy. CTAs per SM = min(shared memory / (shared_bytes + 1 KB reserved), threads,
//     registers, 32). Registers per thread are estimated from the register tiles live at the
//     worst program point: each value holds ceil(s * bytes / 4) registers from its definition
//     to its last use (to the end of a loop when it is used inside a loop it was defined
//     outside of); views (broadcast, extract_slice, permute, register convert_layout) keep their
//     source alive instead; constants, index and mask tiles fold into instructions (uniform index
//     scalars take one register); an element-wise float result used only by element-wise ops and
//     stores of its own region is computed slot by slot into them and holds none; an ldmatrix
//     result used by one mma is streamed (8); plus 2 per buffer pointer and 16 for thread
//     indices, hoisted addresses and loop counters. Rounded up to 8; allocated per warp in units
//     of 256.
//  4. Time. Waves = ceil(ctas / (sm_count * ctas_per_sm)), the tail wave with its own CTAs per SM.
//     A wave of k CTAs per SM takes max(throughput, chain):
//       throughput  each pipe's time for k CTAs' work on one SM (tensor, cuda-core, special,
//                   shared at their per-SM ceilings, the first three at k x warps / schedulers
//                   of theirs when fewer warps than schedulers are resident: a warp issues on
//                   one scheduler, which has a quarter of the SM's math units; dram and l2 at
//                   the SM's share of the chip's bandwidth, l2 also capped by what one SM can pull per clock), combined as
//                   max + (1 - overlap) * (sum - max) over the compute pipes and the memory
//                   the warps wait for; cp.async reads run beside the warps, so that fraction of
//                   the memory time only bounds the result from below (max with it).
//                   overlap = min(1, streams per scheduler / 4): independent instruction
//                   streams are the resident warps, but when a loop body has a CTA-wide barrier
//                   the warps of a CTA go through each iteration's phases together (all in the
//                   first MMA, then all in the softmax), so each CTA is one stream per scheduler
//                   it occupies, and the overlap stops at 0.75: each such stream is a chain of
//                   phases (MMA -> element-wise -> MMA). More resident warps of one CTA
//                   therefore do not help once the busiest pipe is saturated.
//       chain       one CTA's dependency chain: every region (the kernel body, each loop body)
//                   takes its own math time m per execution, and a region with global reads
//                   also waits for them: c = memory latency (DRAM/L2 mix of the kernel's reads)
//                   + bytes / the CTA's share of the SM's bandwidth. Not pipelined (stages <= 1,
//                   or the kernel body): m + c, the copies are not overlapped with math;
//                   pipelined over S stages: max(m, c / (S - 1)). Each barrier of the region
//                   adds 100 cycles (bar.sync and the st.shared / ld.shared round trip around
//                   it), during which the CTA issues nothing.
//     Registers over 255 spill to local memory through L1 (counted as shared traffic): per
//     innermost loop iteration each excess register is stored once, reloaded once and reloaded
//     again at every Mma of the iteration (the values that do not fit in an MMA loop are
//     accumulator and operand fragments, which every k step uses). Kernel time = the waves' sum
//     + launch overhead.
//  Hopper (sm_90a, ir.h notes "Hopper"): warp-specialized kernels of TMA and wgmma.
//     Work. Wgmma: 2*M*N*K tensor FLOPs at the wgmma rate (`wgmma_tensor_tflops_16bit`, 989 on
//       the H100, against mma.sync's 660; the 8-bit form on fp8 operands at
//       kEightBitWgmmaSpeedup = 2 times that, the data sheet's 1979 dense FP8 on the H100 SXM
//       against 989 dense bf16), plus its shared operand reads per warpgroup
//       instruction (SS: the warpgroup's 64 rows of A; both forms: the whole of B, so warpgroups
//       side by side read B once each). TmaLoad: the box's bytes as a global read (the reuse
//       rule of step 2, coordinates for offsets) and a shared write, asynchronous; no CUDA-core
//       issue and no registers (one elected thread). TmaStore: a global write and a shared read.
//       StMatrix: its bytes of shared traffic. mbarrier wait / arrive / init, named barriers,
//       fence.proxy.async, TMA issue, wgmma and bulk commits: fixed latencies in cycles (60, 10,
//       20, 30, 20, 20, 4: analytical_model.cpp says why), on the chain only; a bulk wait_group
//       one L2 latency (the store's flight).
//     Occupancy. Registers per CTA = sum over roles of warpgroups x setmaxnreg x 128 (the
//       budgets, not the liveness estimate); registers_per_thread reports their average.
//     Time. The roles' pipes overlap fully (overlap 1: independent streams, asynchronous
//       tensor cores and copies). The chain: the kernel's prologue, then the ring loops (each
//       role's loop with the most executions among those that wait on mbarriers, load by TMA or
//       issue wgmma) advancing together, one stage per period:
//         period = max(mma (+ the consumer's handoff when it keeps no wgmma group in flight),
//                      the producer's issue, (copy + mma + handoffs) / stages)
//       mma: the ring loops' work per iteration on one SM (tensor at the wgmma rate, shared,
//       ...) overlapped; copy: the iteration's boxes' latency + bytes at the CTA's bandwidth;
//       handoffs: the producer's and the slowest consumer's fixed latencies; stages: the ring's
//       depth (the fewest allocation stages among the TMA loads' destinations). Plus the fill
//       (one copy) and the slowest role's own prologue and epilogue. So a deep ring makes the
//       loop max(copy, MMA) and a shallow one their sum; the waves' throughput (step 4) bounds
//       it from below as for every kernel.
//     Deadlock. A consumer that releases a stage after wgmma.wait_group n holds n + 1 stages:
//       a ring of n stages or fewer never frees one for the producer; infeasible, with the
//       reason ("kernel gemm_ws deadlocks: ... its 1-stage ring needs at least 2 stages").
//     A device without wgmma (`wgmma_tensor_tflops_16bit` 0: the A100) cannot run the kernel.
//  Infeasible (feasible = false, one line naming the kernel and the numbers): more threads per CTA
//  than the device allows, more shared memory than the per-CTA opt-in limit, or
//  min(estimate, 255) registers x threads over the SM's register file (a warp-specialized
//  kernel: its budgets), a ring that deadlocks, Hopper ops on a device without them.
//
// estimate() is a few linear walks over the ops (tens of microseconds for attention).
#pragma once

#include <memory>

#include "core/cost/cost_model.h"
#include "core/cost/device_models.h"

namespace nautilus::cost {

std::unique_ptr<CostModel> make_analytical_model(const DeviceModel& device);

// The register estimate of step 3 for one kernel (for views and for comparing with ptxas).
int estimate_registers_per_thread(const matile::Kernel& kernel);
// Per role of a warp-specialized kernel (Roles op, in order): the liveness estimate of its body
// alone, per thread of the role; empty without roles.
std::vector<int> estimate_role_registers(const matile::Kernel& kernel);

// Step 1 for one op: what one execution of `op` adds to the work of one CTA of `kernel`, counted
// exactly as the estimate counts it (a copy outside a pipelined loop, so never predicated off).
// The per-warp timeline (timeline.h) sizes its bars from these numbers, so the Pipeline panel
// and the estimate read the same work. A For counts nothing itself (its body's ops do).
struct OpWork {
  double tensor_flops = 0.0;
  double alu_ops = 0.0;       // lane operations on the CUDA cores (an FMA is one)
  double special_ops = 0.0;   // MUFU lane operations
  double shared_bytes = 0.0;  // through the shared/L1 data path (wavefronts x 128)
  double barriers = 0.0;      // CTA-wide barriers
  double global_bytes = 0.0;  // global reads and writes (a TMA box's bytes)
  double wgmma_flops = 0.0;   // of tensor_flops, issued by wgmma (the wgmma rate)
  double wgmma_8bit_flops = 0.0;  // of wgmma_flops, on fp8 operands (kEightBitWgmmaSpeedup x the rate)
  double sync_cycles = 0.0;   // fixed latency of an mbarrier / fence / named barrier / issue op
};
OpWork op_work(const matile::Kernel& kernel, const matile::Op& op);

// How much faster wgmma's 8-bit form (m64nNk32 on e4m3/e5m2) runs than its 16-bit form, FLOP for
// FLOP: the H100 SXM data sheet gives 1979 dense FP8 TFLOP/s against 989 dense bf16, and the
// instruction does twice the k per issue at the same latency.
inline constexpr double kEightBitWgmmaSpeedup = 2.0;

}  // namespace nautilus::cost
