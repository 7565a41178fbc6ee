// describe(): the text explanation of a cost estimate, one line per kernel (cost_model.h).
#include <cmath>
#include <iomanip>
#include <sstream>

#include "core/cost/cost_model.h"
#include "core/support/fixed_point.h"

namespace nautilus::cost {
std::string describe(const CostEstimate& estimate) {
  std::ostringstream out;
  const std::string module = estimate.module.empty() ? "module" : estimate.module;
  const size_t count = estimate.kernels.size();
  out << module << ": ";
  if (!estimate.feasible) {
    out << "infeasible: " << estimate.infeasible_reason;
  } else {
    out << fixed_point(estimate.microseconds, 1) << " us";
  }
  out << ", " << count << (count == 1 ? " kernel" : " kernels");
  if (!estimate.model.empty()) out << " (" << estimate.model << " estimate)";
  out << "\n";
  for (const KernelCost& kernel : estimate.kernels) {
    out << "  " << kernel.kernel << ": ";
    if (kernel.ctas_per_sm == 0) {
      out << "does not fit";
    } else {
      const double seconds = kernel.microseconds * 1e-6;
      out << fixed_point(kernel.microseconds, 1) << " us " << kernel.bound << "-bound";
      if (seconds > 0) {
        // wgmma and mma.sync run at different rates: name the path (both when a kernel mixes).
        const double mma_sync_flops = kernel.tensor_flops - kernel.wgmma_flops;
        if (kernel.wgmma_flops > 0) {
          out << ", " << fixed_point(kernel.wgmma_flops / seconds / 1e12, 1)
              << " TFLOP/s tensor cores (wgmma)";
        }
        if (mma_sync_flops > 0) {
          out << ", " << fixed_point(mma_sync_flops / seconds / 1e12, 1) << " TFLOP/s tensor"
              << (kernel.wgmma_flops > 0 ? " (mma.sync)" : "");
        }
        if (kernel.cuda_core_flops > 0) {
          out << ", " << fixed_point(kernel.cuda_core_flops / seconds / 1e12, 2) << " TFLOP/s cuda-core";
        }
        out << ", " << fixed_point(kernel.global_bytes / seconds / 1e9, 0) << " GB/s DRAM";
        if (kernel.tma_bytes > 0) {
          out << ", " << fixed_point(kernel.tma_bytes / seconds / 1e9, 0) << " GB/s by TMA";
        }
      }
    }
    out << "; " << kernel.ctas << " CTAs, " << kernel.ctas_per_sm << " CTA/SM x " << kernel.warps
        << " warps, ~" << kernel.registers_per_thread << " regs, "
        << fixed_point(kernel.shared_bytes_per_cta / 1024.0, 1) << " KB smem";
    if (kernel.ctas_per_sm > 0) out << ", " << fixed_point(kernel.waves, 2) << " waves";
    if (!kernel.roles.empty()) {
      // Warp specialization: the roles' split and register budgets, and the ring they share.
      out << "; warp-specialized: " << kernel.roles;
      if (kernel.ring_stages > 0) {
        out << "; " << kernel.ring_stages << "-stage ring, " << fixed_point(kernel.ring_period_us, 3)
            << " us per stage + " << fixed_point(kernel.ring_fill_us, 2) << " us fill";
      }
    }
    out << "\n";
    if (kernel.ctas_per_sm > 0) {
      // What each pipe alone would take: the bound above is the largest, and the gap to the
      // next tells how far a schedule is from changing bound.
      const KernelCost::Pipes& p = kernel.pipes;
      out << "    pipes alone (us): tensor " << fixed_point(p.tensor, 1) << ", cuda-core "
          << fixed_point(p.cuda_core, 1) << ", special " << fixed_point(p.special, 1)
          << ", shared " << fixed_point(p.shared, 1) << ", dram " << fixed_point(p.dram, 1)
          << ", l2 " << fixed_point(p.l2, 1) << ", exposed latency " << fixed_point(p.latency, 1)
          << "\n";
    }
  }
  return out.str();
}

}  // namespace nautilus::cost
