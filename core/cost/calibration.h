// Calibration of the analytical model: a few of the device model's constants, fitted to measured
// times so that the estimates agree with the machine (docs/cost-model.md, "Calibration").
//
// The analytical model divides counted work by ceilings (device_models.h). The ceilings are data
// sheet numbers with assumed efficiencies; a real GPU, driver and compiler reach other fractions
// of them. Calibration scales eight of them, each by one factor, chosen because each multiplies
// one term of the model's time:
//
//   dram_bandwidth    dram_efficiency                      the DRAM pipe and the chain's copies
//   l2_bandwidth      l2_bytes_per_s, global_bytes_per_    the L2 pipe (and a CTA's bandwidth)
//                     clock_per_sm
//   mma_rate          tensor_tflops_16bit                  mma.sync's tensor pipe
//   wgmma_rate        wgmma_tensor_tflops_16bit            wgmma's tensor pipe (sm_90a)
//   cuda_core_rate    cuda_core_tflops_f32,                element-wise and special-function work
//                     sfu_ops_per_clock_per_sm
//   shared_bandwidth  shared_bytes_per_clock_per_sm        shared / L1 traffic, spills
//   memory_latency    dram_latency_ns, l2_latency_ns       each region's exposed read latency
//   launch_overhead   launch_overhead_us                   the fixed cost of every kernel
//
// A factor of 1 is the preset. The calibrated device is the preset with every named constant
// multiplied by its factor (`calibrated_device`); factors are stored rather than values so that a
// calibration stays meaningful when a preset's numbers are corrected.
//
// The fit (`fit_calibration`) minimizes, over the log of the factors, the mean squared log error
// between the model's estimate and the measured median of the samples not held out, plus a small
// ridge term (sum of squared log factors) that keeps a constant the samples say nothing about at
// its preset instead of letting it drift. The estimate is a maximum of pipe times, so the
// objective has kinks: the fit is derivative-free and deterministic — Nelder-Mead from the
// presets, restarted from its own result until it stops improving, then a compass search (one
// factor at a time, halving the step) to settle on the kinks. Every factor is bounded
// (FitOptions::lower / upper). The samples' programs are compiled once by the caller; the fit
// only re-estimates them.
//
// Agreement is reported as Spearman's rank correlation (ties get their mean rank) and the mean
// absolute log error, before and after, for all samples, the fitted ones, the held-out ones, and
// per group (the caller's problems: a spec at one set of sizes), so that one sees whether the
// calibration also helps programs it was not fitted on.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/cost/cost_model.h"
#include "core/matile/ir.h"

namespace nautilus::cost {

struct CalibrationParameter {
  std::string name;         // "dram_bandwidth"
  std::string description;  // "DRAM bandwidth"
  // The DeviceModel fields the factor multiplies, by name, for printing ("dram_efficiency").
  std::vector<std::string> fields;
};
// The eight parameters above, in that order.
const std::vector<CalibrationParameter>& calibration_parameters();
bool is_calibration_parameter(const std::string& name);

// Factor by parameter name; a parameter not present is 1.
using CalibrationFactors = std::map<std::string, double>;

// `base` with every parameter's fields multiplied by its factor. Fields that are 0 ("not known",
// e.g. the A100's wgmma rate) stay 0.
DeviceModel calibrated_device(const DeviceModel& base, const CalibrationFactors& factors);
// The value of a parameter's first field in `device` (what the report prints as the constant).
double parameter_value(const DeviceModel& device, const CalibrationParameter& parameter);

struct CalibrationSample {
  matile::ModulePtr module;  // compiled once by the caller
  double measured_us = 0.0;  // the measured median of the whole launch sequence
  std::string group;         // the problem (spec and sizes), for the per-group report
  bool held_out = false;     // not fitted on; reported apart
};

struct FitOptions {
  double lower = 0.125;  // bounds of every factor
  double upper = 8.0;
  double ridge = 1e-3;   // weight of the sum of squared log factors
  // Each evaluation estimates every fitted sample (about 0.1-0.5 ms each for large attention
  // grids): the budget bounds the fit's time on a large database.
  int max_evaluations = 2000;
  double tolerance = 1e-3;  // the compass search stops when its step (log space) is below this
  // Threads that estimate the samples of one evaluation (used from 64 samples per thread up).
  int threads = 1;
};

// How estimates and measurements agree on a set of samples.
struct Agreement {
  int samples = 0;
  // Spearman's rho; nullopt with fewer than 3 samples or when either side is constant.
  std::optional<double> spearman;
  double mean_abs_log_error = 0.0;  // mean |ln(estimate / measured)|; 0 without samples
};

struct GroupAgreement {
  std::string group;
  bool held_out = false;
  Agreement before, after;
};

struct FitResult {
  bool ok = false;
  std::string error;
  CalibrationFactors factors;  // every parameter, 1 for those that did not move
  double objective_before = 0.0, objective_after = 0.0;
  int evaluations = 0;
  int fitted_samples = 0;
  int held_out_samples = 0;
  int infeasible_samples = 0;  // the model calls their program infeasible: not used
  Agreement fitted_before, fitted_after, held_out_before, held_out_after;
  Agreement all_before, all_after;  // fitted and held out together
  std::vector<GroupAgreement> groups;  // in order of first appearance
};

// Fits the factors to the samples not held out. Fails (ok false, `error`) when no sample is
// left to fit on. Deterministic: the same samples give the same factors.
FitResult fit_calibration(const DeviceModel& base, const std::vector<CalibrationSample>& samples,
                          const FitOptions& options = {});

// How the model with `device` agrees with the samples (all of them, held out or not).
Agreement agreement(const DeviceModel& device, const std::vector<CalibrationSample>& samples);

// Spearman's rank correlation of two equally long series (ties: mean ranks); nullopt with fewer
// than 3 values or a constant series.
std::optional<double> spearman_rank_correlation(const std::vector<double>& a,
                                                const std::vector<double>& b);

}  // namespace nautilus::cost
