// The roofline bound of the math: how fast any schedule of a spec could possibly run on a GPU,
// from the work the spec states and the bytes it must move, before anything is scheduled.
//
//   compute  = spec::estimate_flops / the device's highest 16-bit tensor rate (wgmma where the
//              device has it): every FLOP counted as if it ran on tensor cores; when every
//              input of rank 2 or more is an 8-bit float (an fp8 GEMM), at wgmma's 8-bit rate,
//              kEightBitWgmmaSpeedup times that (analytical_model.h)
//   memory   = spec::estimate_compulsory_bytes / the DRAM peak: every input read once, every
//              output written once
//   bound    = max(compute, memory) + one kernel launch
//
// Both terms are generous, so no schedule should beat the bound by much. Two things can put an
// estimate below it: a select that masks work (causal attention) still counts the masked
// products, and an input smaller than L2 that several kernels reread is still counted once.
// The auto-scheduler compares its choice with this bound (search.h): an estimate many times the
// bound means a fused schedule was missed, and `nautilus schedule` prints both.
#pragma once

#include <string>

#include "core/cost/cost_model.h"
#include "core/spec/ast.h"

namespace nautilus::cost {

struct RooflineBound {
  double flops = 0.0;
  double bytes = 0.0;
  double compute_us = 0.0;
  double memory_us = 0.0;
  double launch_us = 0.0;
  double microseconds = 0.0;  // max(compute_us, memory_us) + launch_us
  std::string bound;          // "compute" or "memory"
};

RooflineBound math_roofline(const spec::Spec& spec, const DeviceModel& device);

// "12.4 µs (memory: 37.7 MB at 3.35 TB/s)" — the bound and what sets it.
std::string describe(const RooflineBound& roofline);

}  // namespace nautilus::cost
