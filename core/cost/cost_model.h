// The cost model: how long a compiled program is expected to take on a GPU, without running it.
//
// The auto-scheduler (core/search) ranks candidate schedules with a `CostModel`. The interface
// takes the MA tile IR of a candidate (every tile placed, every copy and MMA an instruction, grid
// and warps known) and a `DeviceModel` (the ceilings of one GPU), and returns a `CostEstimate`:
// a predicted time per kernel with the work behind it, or the reason the program cannot run
// (shared memory over the per-CTA limit, too many threads). Models are interchangeable: the
// analytical model (analytical_model.h) is the default; a model calibrated by runner measurements
// or a learned one implements the same interface.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/matile/ir.h"

namespace nautilus::cost {

// The ceilings of one GPU that the estimates are measured against. Numbers are dense (no
// sparsity), for the boost clock the device runs kernels at.
struct DeviceModel {
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string arch;          // "sm_90"
  int sm_count = 0;
  double clock_ghz = 0.0;
  double tensor_tflops_16bit = 0.0;  // bf16/f16 inputs, f32 accumulate, mma.sync path
  double cuda_core_tflops_f32 = 0.0; // FMA counted as 2 FLOPs
  double sfu_ops_per_clock_per_sm = 0.0;  // exp2/rcp/rsqrt throughput
  double dram_bytes_per_s = 0.0;
  double l2_bytes_per_s = 0.0;
  double shared_bytes_per_clock_per_sm = 0.0;
  int l2_bytes = 0;
  int shared_bytes_per_sm = 0;
  int shared_bytes_per_cta_max = 0;  // opt-in limit
  int registers_per_sm = 0;
  int max_registers_per_thread = 255;
  int max_threads_per_sm = 0;
  int max_threads_per_cta = 1024;
  int max_ctas_per_sm = 0;
  double launch_overhead_us = 0.0;

  // Added for the analytical model (analytical_model.h); zero means "not known".
  double wgmma_tensor_tflops_16bit = 0.0;  // warpgroup MMA (sm_90a: the Wgmma op); 0: no wgmma
  double dram_efficiency = 1.0;            // achievable fraction of dram_bytes_per_s (streaming)
  double global_bytes_per_clock_per_sm = 0.0;  // what one SM can pull from L2 per clock
  double dram_latency_ns = 0.0;            // a global load that misses L2, issue to use
  double l2_latency_ns = 0.0;              // one that hits L2
  int schedulers_per_sm = 4;               // warp schedulers (issue slots) per SM
  // INT32 lanes per SM (shifts, prmt, lop3, integer adds); 0 means as many as FP32 lanes. On
  // sm_90 they are half the FP32 lanes, so an integer instruction holds the pipe twice as long.
  int int32_lanes_per_sm = 0;
  int shared_bytes_reserved_per_cta = 0;   // the runtime's per-CTA reservation (1 KB on sm_80+)
};

// The cost of one kernel of the module, with the work it does (so views can show a roofline).
struct KernelCost {
  std::string kernel;               // the kernel's name in the module
  double microseconds = 0.0;
  double tensor_flops = 0.0;        // MMA multiply-adds x 2
  double cuda_core_flops = 0.0;     // element-wise and FMA-path work
  double special_ops = 0.0;         // exp2, reciprocal, ...
  double global_bytes = 0.0;        // DRAM traffic the model assumes (after L2 reuse)
  double shared_bytes = 0.0;
  long long ctas = 0;
  int ctas_per_sm = 0;              // resident CTAs per SM (occupancy)
  int registers_per_thread = 0;     // the model's estimate
  int shared_bytes_per_cta = 0;
  std::string bound;                // "tensor", "cuda-core", "special", "dram", "shared", "latency"
                                    // (the analytical model also says "l2")

  // Added for views and the search tree (analytical_model.h explains each number).
  double l2_bytes = 0.0;             // global traffic requested by the CTAs (before L2 reuse), plus the L2 fills of the reads that miss
  double waves = 0.0;                // full waves plus the tail wave's fraction
  int warps = 0;                     // warps per CTA
  // The time each pipe alone would need for the whole kernel at its ceiling (microseconds), and
  // the exposed memory latency of one CTA's dependency chain summed over the waves.
  struct Pipes {
    double tensor = 0.0, cuda_core = 0.0, special = 0.0, dram = 0.0, l2 = 0.0, shared = 0.0,
           latency = 0.0;
  } pipes;

  // Hopper (sm_90a; zero / empty for other kernels). Of tensor_flops, those issued by wgmma
  // (at the wgmma rate; the rest is mma.sync's); the bytes TMA boxes move (loads and stores,
  // requested from L2); the warp specialization: its roles ("producer 1 WG x 40 regs, ...") and
  // the depth of the ring of shared stages they pass around, with the chain's time per ring
  // iteration and its fill (one CTA, microseconds).
  double wgmma_flops = 0.0;
  double tma_bytes = 0.0;
  std::string roles;
  int ring_stages = 0;
  double ring_period_us = 0.0;
  double ring_fill_us = 0.0;
};

struct CostEstimate {
  bool feasible = true;
  std::string infeasible_reason;  // "kernel attention_0 needs 260 KB of shared memory, limit 227 KB"
  double microseconds = 0.0;      // the whole module, launches included
  std::vector<KernelCost> kernels;
  // Added for describe(): the module's and the model's names.
  std::string module;
  std::string model;
};

// One line for the module, then one line per kernel: time, bound, TFLOP/s, GB/s, occupancy.
//   attention: 1183.1 us (1 kernel, analytical estimate)
//     O: 1180.9 us shared-bound, 232.7 TFLOP/s tensor, 1783 GB/s DRAM, 1 CTA/SM x 8 warps, ...
// An infeasible estimate prints its reason instead.
std::string describe(const CostEstimate& estimate);

class CostModel {
 public:
  virtual ~CostModel() = default;
  // A short name for logs and the search tree ("analytical sm_90").
  virtual std::string name() const = 0;
  virtual const DeviceModel& device() const = 0;
  virtual CostEstimate estimate(const matile::Module& module) const = 0;
};

}  // namespace nautilus::cost
