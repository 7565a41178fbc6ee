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
};

struct CostEstimate {
  bool feasible = true;
  std::string infeasible_reason;  // "kernel attention_0 needs 260 KB of shared memory, limit 227 KB"
  double microseconds = 0.0;      // the whole module, launches included
  std::vector<KernelCost> kernels;
};

class CostModel {
 public:
  virtual ~CostModel() = default;
  // A short name for logs and the search tree ("analytical sm_90").
  virtual std::string name() const = 0;
  virtual const DeviceModel& device() const = 0;
  virtual CostEstimate estimate(const matile::Module& module) const = 0;
};

}  // namespace nautilus::cost
