// The machine description of the pipeline solver: per arch, the units a tile op occupies, their
// rates, the latencies of the instructions MA tile IR names, register and shared-memory budgets,
// and what a hand-off between warp roles costs.
//
// Every figure in cycles of the SM clock. The ones marked "measured" come from one run of
// bench/microbench/latency.cu on an NVIDIA H100 80GB HBM3 (driver 580.159.04), 2026-11-26:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a latency.cu -o latency && ./latency
// (bench/microbench/latency-h100-2026-11-26.txt holds its output). The others are documented
// figures or inferences and say so. sm_80 uses the same H100 measurements for the instructions
// it shares with sm_90a (mma.sync, ldmatrix, cp.async): the project's sm_80 kernels run on the
// H100 too; an A100 differs somewhat.
//
//   const Machine& m = machine_for("sm_90a");
//   m.wgmma_cycles(64, 16)   // one m64n64k16: 70.6 * 64 / 128 = 35.3 cycles of tensor core
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace nautilus::pipeline {

// The SM's shared execution resources. A tile op keeps some of them busy for a number of cycles
// from its issue (its reservation); two ops overlap on a unit only if the unit's capacity allows.
enum class Unit { TensorCore, Copy, SFU, ALU, LSU };
inline constexpr int kUnitCount = 5;
const char* unit_name(Unit unit);  // "tensor core", "copy engine", "SFU", "ALU", "LSU"

struct Machine {
  std::string arch;  // "sm_80" or "sm_90a"
  std::string description;
  // Every unit is modelled SM-wide with capacity 1 and per-op occupancy = work / rate, so an
  // op's reservation is one busy interval per unit.
  std::array<int, kUnitCount> capacity{1, 1, 1, 1, 1};

  // --- measured latencies (cycles) and rates.
  double ffma_latency = 4.4;            // measured: dependent fma.rn.f32 chain
  double ex2_latency = 18.5;            // measured: dependent ex2.approx.f32 chain
  double sfu_per_clock = 14.2;          // measured: ex2 per clock per SM, 4 warps x 8 chains
  double lds_latency = 34.6;            // measured: ld.shared.u32 pointer chase
  double ldmatrix_latency = 34.0;       // measured: ldmatrix.x4 chase
  double mma_latency = 24.4;            // measured: dependent mma.sync m16n8k16 bf16 chain
  double mma_interval = 7.13;           // measured: cycles per mma per warp, 4 warps x 4 chains
  double wgmma_latency = 115.8;         // measured: m64n128k16 issue + commit + wait 0
  double wgmma_interval_n128 = 70.6;    // measured: cycles per m64n128k16 in batches of 8
  double cp_async_latency = 297.7;      // measured: 16 B per lane, one warp, commit + wait 0, L2 hit
  double tma_latency_8k = 418.9;        // measured: 2-D box 64x64 bf16 (8 KiB), L2 hit
  double tma_latency_16k = 487.7;       // measured: 2-D box 128x64 bf16 (16 KiB), L2 hit
  double mbarrier_handoff = 103.8;      // measured: warp-to-warp arrive -> wait, one way
  double named_barrier = 28.0;          // measured: bar.sync 1, 256
  // --- documented figures, not measured here.
  double alu_per_clock = 128;           // FP32 lanes per SM (4 SMSPs x 32)
  double shared_bytes_per_clock = 128;  // shared memory bandwidth per SM
  double shuffle_latency = 34.6;        // not measured: taken equal to a shared load
  // --- copies under load (bench/microbench/latency-h100-2026-11-28.txt, k_tma_loaded): every
  // SM runs a 4-slot TMA ring of 32 KB stages (two 128 x 64 bf16 boxes), each slot held 3000
  // cycles by its consumer; the latency is issue to landing.
  double tma_latency_loaded_l2 = 755.5;     // measured: every SM reads the same 8 MB (L2 hits), 2.5 TB/s
  double tma_latency_loaded_dram = 1871.0;  // measured: each SM streams its own rows, 2.5 TB/s from DRAM
  double loaded_stage_bytes = 32768;
  // The rate at which the boxes of one ring stage land on an SM while every SM streams its
  // operands through L2 (bytes per cycle): a stage of several boxes takes at least its bytes at
  // this rate. Measured on an NVIDIA H200 (2026-11-29, bench/NOTES.md "ring depth under load";
  // clocks 1.98 GHz), two consumer warpgroups on 64-deep k tiles: the fused gate-and-up kernel's
  // 48 KB stages (three 16 KB boxes) every 0.79 µs at 3 stages against 0.71 at 4 (15.7 bytes
  // per cycle of landing latency), a 128 x 128 GEMM's 32 KB stages 0.59 against 0.38 µs (13),
  // a 128 x 256 one's 48 KB stages hidden at 3 (17 or more); and 24 KB stages (8 + 16 KB
  // boxes) ran 1-11% slower at 5 stages than at 4 on eight kernels, which 16 keeps at 4.
  double loaded_stage_bytes_per_clock = 16.0;
  // Asynchronous copies are scheduled at this multiple of their unloaded latency: the measured
  // loaded DRAM latency of a stage over the unloaded one (tma_latency), 2.7. A ring's first
  // touch of a tile comes from DRAM, and the CTAs that share it (the query tiles of one head,
  // the GEMM tiles of one row panel) run side by side and wait for it together, so the ring is
  // sized for DRAM; L2 hits under load take only 1.1 times the unloaded latency. Closer to
  // DRAM's bandwidth the latency grows further (4 to 10 times, the same file), which no ring
  // that fits in shared memory covers.
  double copy_latency_margin() const { return tma_latency_loaded_dram / tma_latency(static_cast<int64_t>(loaded_stage_bytes)); }

  // --- budgets.
  int64_t shared_capacity = 0;   // dynamic shared memory one CTA may use
  int max_ring_depth = 8;        // buffers per ring: the range of the `pipeline` decision's stages
  int max_registers = 255;       // per thread
  int base_registers = 24;       // addresses, indices, loop state: an estimate per role
  // sm_90a warp specialization (0 on sm_80: one role, no setmaxnreg).
  int max_consumer_roles = 0;    // warpgroups that compute
  int producer_registers = 40;   // setmaxnreg of the TMA producer warpgroup (CUTLASS, FA3)
  int warpgroup_register_sum = 512;  // sum of setmaxnreg over warpgroups (64K / 128 threads)

  bool warp_specialized() const { return max_consumer_roles > 0; }

  // Copy-engine bytes per cycle, from the slope of the two TMA measurements (8 and 16 KiB).
  double copy_bytes_per_clock() const { return 8192.0 / (tma_latency_16k - tma_latency_8k); }
  // Issue-to-landing latency of a TMA box of `bytes`, linear through the two measurements.
  double tma_latency(int64_t bytes) const;
  // cp.async of `bytes` by the whole CTA: the measured round trip plus the transfer.
  double cp_async_tile_latency(int64_t bytes) const;
  // Tensor-core cycles of `count` mma.sync m16n8k16 over the CTA (4 SMSPs share them).
  double mma_cycles(int64_t count) const { return static_cast<double>(count) * mma_interval / 4.0; }
  // Tensor-core cycles of `count` wgmma m64nNk16 with this N (or m64nNk32 on fp8 operands, which
  // take the same time).
  double wgmma_cycles(int64_t n, int64_t count) const {
    return static_cast<double>(count) * wgmma_interval_n128 * static_cast<double>(n) / 128.0;
  }
  // Register budget of a consumer role when `consumers` compute warpgroups share the file with
  // the producer: the rest of the file, split evenly, a multiple of 8, at most 240 (CUTLASS and
  // FA3 use 232 / 240 with 2 consumers / 1).
  int consumer_registers(int consumers) const;
  // The producer's setmaxnreg beside `consumers` consumers: 32 beside three, so that each keeps
  // 160 (FlashAttention-3's split, the one the MA lowering emits), else producer_registers.
  int producer_registers_for(int consumers) const { return consumers >= 3 ? 32 : producer_registers; }
  // Registers a role holds besides its tiles. ptxas fits FlashAttention-3's d 64 consumer (a
  // 64 x 128 score tile, P and a 64 x 64 accumulator: 128 registers of tiles, 32 more carried
  // when overlapped) in the 160 of three consumers without spilling (CUDA 13, 2026-11-27), so
  // three consumers leave only a few registers of loop state beyond the tiles.
  int base_registers_for(int consumers) const { return consumers >= 3 ? 8 : base_registers; }
};

// "sm_80" and "sm_90a" (also "h100", "a100", "sm_90"); nullopt for anything else.
std::optional<Machine> machine_for(const std::string& arch);

}  // namespace nautilus::pipeline
