#include "core/cost/calibration.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/cost/analytical_model.h"
#include "core/support/parallel.h"

namespace nautilus::cost {
namespace {

using Field = double DeviceModel::*;

// The DeviceModel member behind each field name of calibration_parameters().
Field field_member(const std::string& name) {
  if (name == "dram_efficiency") return &DeviceModel::dram_efficiency;
  if (name == "l2_bytes_per_s") return &DeviceModel::l2_bytes_per_s;
  if (name == "global_bytes_per_clock_per_sm") return &DeviceModel::global_bytes_per_clock_per_sm;
  if (name == "tensor_tflops_16bit") return &DeviceModel::tensor_tflops_16bit;
  if (name == "wgmma_tensor_tflops_16bit") return &DeviceModel::wgmma_tensor_tflops_16bit;
  if (name == "cuda_core_tflops_f32") return &DeviceModel::cuda_core_tflops_f32;
  if (name == "sfu_ops_per_clock_per_sm") return &DeviceModel::sfu_ops_per_clock_per_sm;
  if (name == "shared_bytes_per_clock_per_sm") return &DeviceModel::shared_bytes_per_clock_per_sm;
  if (name == "dram_latency_ns") return &DeviceModel::dram_latency_ns;
  if (name == "l2_latency_ns") return &DeviceModel::l2_latency_ns;
  if (name == "launch_overhead_us") return &DeviceModel::launch_overhead_us;
  return nullptr;
}

// Below this many samples an evaluation is quicker than starting threads for it.
constexpr size_t kSamplesPerThread = 64;

// The estimate of every sample under `device` (infinity when infeasible), on up to `threads`
// threads (estimate() only reads the model and the module).
std::vector<double> estimates(const DeviceModel& device,
                              const std::vector<const CalibrationSample*>& samples,
                              int threads = 1) {
  const std::unique_ptr<CostModel> model = make_analytical_model(device);
  std::vector<double> out(samples.size());
  const int workers = static_cast<int>(std::min<size_t>(static_cast<size_t>(std::max(threads, 1)),
                                                        samples.size() / kSamplesPerThread));
  parallel_for_each(static_cast<int64_t>(samples.size()), workers, [&](int64_t i) {
    const CostEstimate estimate = model->estimate(*samples[static_cast<size_t>(i)]->module);
    out[static_cast<size_t>(i)] =
        estimate.feasible ? estimate.microseconds : std::numeric_limits<double>::infinity();
  });
  return out;
}

Agreement agreement_of(const std::vector<double>& estimated,
                       const std::vector<const CalibrationSample*>& samples) {
  Agreement result;
  result.samples = static_cast<int>(samples.size());
  if (samples.empty()) return result;
  std::vector<double> measured;
  double error = 0.0;
  for (size_t i = 0; i < samples.size(); ++i) {
    measured.push_back(samples[i]->measured_us);
    error += std::fabs(std::log(estimated[i] / samples[i]->measured_us));
  }
  result.mean_abs_log_error = error / static_cast<double>(samples.size());
  result.spearman = spearman_rank_correlation(estimated, measured);
  return result;
}

// Ranks 1..n, ties sharing their mean rank.
std::vector<double> ranks(const std::vector<double>& values) {
  std::vector<size_t> order(values.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return values[a] < values[b]; });
  std::vector<double> out(values.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double mean_rank = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;
    for (size_t k = i; k <= j; ++k) out[order[k]] = mean_rank;
    i = j + 1;
  }
  return out;
}

// The objective over log factors, counting its evaluations.
class Objective {
 public:
  Objective(const DeviceModel& base, const std::vector<const CalibrationSample*>& fitted,
            const FitOptions& options)
      : base_(base), fitted_(fitted), options_(options) {}

  double operator()(const std::vector<double>& log_factors) {
    ++evaluations_;
    const std::vector<double> estimated = estimates(device(log_factors), fitted_, options_.threads);
    double sum = 0.0;
    for (size_t i = 0; i < fitted_.size(); ++i) {
      const double e = std::log(estimated[i] / fitted_[i]->measured_us);
      sum += e * e;
    }
    double ridge = 0.0;
    for (double x : log_factors) ridge += x * x;
    return sum / static_cast<double>(fitted_.size()) + options_.ridge * ridge;
  }

  DeviceModel device(const std::vector<double>& log_factors) const {
    return calibrated_device(base_, factors(log_factors));
  }

  static CalibrationFactors factors(const std::vector<double>& log_factors) {
    CalibrationFactors out;
    const auto& parameters = calibration_parameters();
    for (size_t i = 0; i < parameters.size(); ++i) {
      out[parameters[i].name] = std::exp(log_factors[i]);
    }
    return out;
  }

  int evaluations() const { return evaluations_; }
  bool exhausted() const { return evaluations_ >= limit_; }
  // Caps the evaluations of the current phase (never above FitOptions::max_evaluations).
  void set_limit(int limit) { limit_ = std::min(limit, options_.max_evaluations); }

 private:
  const DeviceModel& base_;
  const std::vector<const CalibrationSample*>& fitted_;
  const FitOptions& options_;
  int evaluations_ = 0;
  int limit_ = options_.max_evaluations;
};

std::vector<double> clamp_to(std::vector<double> x, double lo, double hi) {
  for (double& v : x) v = std::clamp(v, lo, hi);
  return x;
}

// Nelder-Mead over the box [lo, hi]^n (points outside are clamped onto it). Starts from `x`
// with a simplex of steps `scale` along each axis; returns the best vertex.
std::vector<double> nelder_mead(Objective& f, std::vector<double> x, double* fx, double scale,
                                double lo, double hi) {
  const size_t n = x.size();
  if (f.exhausted()) return x;
  std::vector<std::vector<double>> simplex = {x};
  std::vector<double> values = {*fx};
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> vertex = x;
    vertex[i] += (vertex[i] + scale <= hi) ? scale : -scale;
    vertex = clamp_to(vertex, lo, hi);
    simplex.push_back(vertex);
    values.push_back(f(vertex));
  }
  std::vector<size_t> order(n + 1);
  for (int iteration = 0; iteration < 400 * static_cast<int>(n) && !f.exhausted(); ++iteration) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return values[a] < values[b]; });
    const size_t best = order.front(), worst = order.back(), second = order[n - 1];
    // Converged: the vertices agree on the objective, or lie within 0.1% of each other in
    // every factor (more precision than any measurement has).
    if (values[worst] - values[best] < 1e-7 * (1.0 + std::fabs(values[best]))) break;
    double diameter = 0.0;
    for (size_t k = 0; k <= n; ++k) {
      for (size_t i = 0; i < n; ++i) {
        diameter = std::max(diameter, std::fabs(simplex[k][i] - simplex[best][i]));
      }
    }
    if (diameter < 1e-3) break;
    std::vector<double> centroid(n, 0.0);
    for (size_t k = 0; k < n; ++k) {
      for (size_t i = 0; i < n; ++i) centroid[i] += simplex[order[k]][i] / static_cast<double>(n);
    }
    auto along = [&](double t) {
      std::vector<double> point(n);
      for (size_t i = 0; i < n; ++i) point[i] = centroid[i] + t * (simplex[worst][i] - centroid[i]);
      return clamp_to(point, lo, hi);
    };
    const std::vector<double> reflected = along(-1.0);
    const double fr = f(reflected);
    if (fr < values[best]) {
      const std::vector<double> expanded = along(-2.0);
      const double fe = f(expanded);
      if (fe < fr) {
        simplex[worst] = expanded;
        values[worst] = fe;
      } else {
        simplex[worst] = reflected;
        values[worst] = fr;
      }
      continue;
    }
    if (fr < values[second]) {
      simplex[worst] = reflected;
      values[worst] = fr;
      continue;
    }
    const std::vector<double> contracted = fr < values[worst] ? along(-0.5) : along(0.5);
    const double fc = f(contracted);
    if (fc < std::min(fr, values[worst])) {
      simplex[worst] = contracted;
      values[worst] = fc;
      continue;
    }
    // Shrink toward the best vertex.
    for (size_t k = 0; k <= n; ++k) {
      if (k == best) continue;
      for (size_t i = 0; i < n; ++i) {
        simplex[k][i] = simplex[best][i] + 0.5 * (simplex[k][i] - simplex[best][i]);
      }
      values[k] = f(simplex[k]);
    }
  }
  const size_t best = static_cast<size_t>(
      std::min_element(values.begin(), values.end()) - values.begin());
  *fx = values[best];
  return simplex[best];
}

// One factor at a time: try +-step on each, keep improvements (going on in the same direction
// while they last), halve the step when a sweep improves nothing.
std::vector<double> compass_search(Objective& f, std::vector<double> x, double* fx, double step,
                                   double lo, double hi, double tolerance) {
  while (step >= tolerance && !f.exhausted()) {
    bool improved = false;
    for (size_t i = 0; i < x.size() && !f.exhausted(); ++i) {
      for (double direction : {1.0, -1.0}) {
        bool moved = false;
        for (;;) {
          std::vector<double> y = x;
          y[i] = std::clamp(x[i] + direction * step, lo, hi);
          if (y[i] == x[i] || f.exhausted()) break;
          const double fy = f(y);
          if (!(fy < *fx - 1e-12)) break;
          x = y;
          *fx = fy;
          moved = true;
        }
        if (moved) {
          improved = true;
          break;
        }
      }
    }
    if (!improved) step /= 2.0;
  }
  return x;
}

}  // namespace

const std::vector<CalibrationParameter>& calibration_parameters() {
  static const std::vector<CalibrationParameter> parameters = {
      {"dram_bandwidth", "DRAM bandwidth", {"dram_efficiency"}},
      {"l2_bandwidth", "L2 bandwidth", {"l2_bytes_per_s", "global_bytes_per_clock_per_sm"}},
      {"mma_rate", "mma.sync tensor rate", {"tensor_tflops_16bit"}},
      {"wgmma_rate", "wgmma tensor rate", {"wgmma_tensor_tflops_16bit"}},
      {"cuda_core_rate", "CUDA-core and MUFU rate",
       {"cuda_core_tflops_f32", "sfu_ops_per_clock_per_sm"}},
      {"shared_bandwidth", "shared-memory bandwidth", {"shared_bytes_per_clock_per_sm"}},
      {"memory_latency", "memory latency", {"dram_latency_ns", "l2_latency_ns"}},
      {"launch_overhead", "launch overhead per kernel", {"launch_overhead_us"}},
  };
  return parameters;
}

bool is_calibration_parameter(const std::string& name) {
  for (const CalibrationParameter& parameter : calibration_parameters()) {
    if (parameter.name == name) return true;
  }
  return false;
}

DeviceModel calibrated_device(const DeviceModel& base, const CalibrationFactors& factors) {
  DeviceModel device = base;
  for (const CalibrationParameter& parameter : calibration_parameters()) {
    auto it = factors.find(parameter.name);
    if (it == factors.end() || !(it->second > 0.0) || !std::isfinite(it->second)) continue;
    for (const std::string& field : parameter.fields) device.*field_member(field) *= it->second;
  }
  return device;
}

double parameter_value(const DeviceModel& device, const CalibrationParameter& parameter) {
  return parameter.fields.empty() ? 0.0 : device.*field_member(parameter.fields.front());
}

std::optional<double> spearman_rank_correlation(const std::vector<double>& a,
                                                const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 3) return std::nullopt;
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double mean = (n + 1.0) / 2.0;
  double covariance = 0.0, va = 0.0, vb = 0.0;
  for (size_t i = 0; i < ra.size(); ++i) {
    covariance += (ra[i] - mean) * (rb[i] - mean);
    va += (ra[i] - mean) * (ra[i] - mean);
    vb += (rb[i] - mean) * (rb[i] - mean);
  }
  if (va <= 0.0 || vb <= 0.0) return std::nullopt;
  return covariance / std::sqrt(va * vb);
}

Agreement agreement(const DeviceModel& device, const std::vector<CalibrationSample>& samples) {
  std::vector<const CalibrationSample*> pointers;
  for (const CalibrationSample& sample : samples) pointers.push_back(&sample);
  std::vector<double> estimated = estimates(device, pointers);
  std::vector<const CalibrationSample*> feasible;
  std::vector<double> feasible_estimates;
  for (size_t i = 0; i < pointers.size(); ++i) {
    if (!std::isfinite(estimated[i])) continue;
    feasible.push_back(pointers[i]);
    feasible_estimates.push_back(estimated[i]);
  }
  return agreement_of(feasible_estimates, feasible);
}

FitResult fit_calibration(const DeviceModel& base, const std::vector<CalibrationSample>& samples,
                          const FitOptions& options) {
  FitResult result;
  // 1. The usable samples: a program the preset model calls infeasible has no time to compare
  //    (the factors change no feasibility condition, so it stays infeasible).
  std::vector<const CalibrationSample*> usable;
  {
    std::vector<const CalibrationSample*> all;
    for (const CalibrationSample& sample : samples) {
      if (sample.module && sample.measured_us > 0.0 && std::isfinite(sample.measured_us)) {
        all.push_back(&sample);
      }
    }
    const std::vector<double> estimated = estimates(base, all, options.threads);
    for (size_t i = 0; i < all.size(); ++i) {
      if (std::isfinite(estimated[i]) && estimated[i] > 0.0) usable.push_back(all[i]);
      else ++result.infeasible_samples;
    }
  }
  std::vector<const CalibrationSample*> fitted, held_out;
  for (const CalibrationSample* sample : usable) {
    (sample->held_out ? held_out : fitted).push_back(sample);
  }
  result.fitted_samples = static_cast<int>(fitted.size());
  result.held_out_samples = static_cast<int>(held_out.size());
  if (fitted.empty()) {
    result.error = "no sample to fit on (" + std::to_string(held_out.size()) + " held out, " +
                   std::to_string(result.infeasible_samples) + " infeasible)";
    return result;
  }

  // 2. The fit, in log space from the presets.
  Objective objective(base, fitted, options);
  const double lo = std::log(options.lower), hi = std::log(options.upper);
  std::vector<double> x(calibration_parameters().size(), 0.0);
  double fx = objective(x);
  result.objective_before = fx;
  // Nelder-Mead gets two thirds of the evaluations, the compass search the rest.
  objective.set_limit(options.max_evaluations * 2 / 3);
  for (int restart = 0; restart < 4 && !objective.exhausted(); ++restart) {
    const double previous = fx;
    x = nelder_mead(objective, x, &fx, restart == 0 ? std::log(2.0) : std::log(1.25), lo, hi);
    if (previous - fx < 1e-7) break;
  }
  objective.set_limit(options.max_evaluations);
  x = compass_search(objective, x, &fx, std::log(1.25), lo, hi, options.tolerance);
  result.objective_after = fx;
  result.evaluations = objective.evaluations();
  result.factors = Objective::factors(x);

  // 3. Agreement before and after: fitted, held out, per group.
  const DeviceModel calibrated = calibrated_device(base, result.factors);
  const std::vector<double> before = estimates(base, usable, options.threads);
  const std::vector<double> after = estimates(calibrated, usable, options.threads);
  auto subset = [&](auto keep, const std::vector<double>& values,
                    std::vector<const CalibrationSample*>* chosen) {
    std::vector<double> out;
    for (size_t i = 0; i < usable.size(); ++i) {
      if (!keep(*usable[i])) continue;
      out.push_back(values[i]);
      if (chosen) chosen->push_back(usable[i]);
    }
    return out;
  };
  auto agreement_pair = [&](auto keep, Agreement* b, Agreement* a) {
    std::vector<const CalibrationSample*> chosen;
    const std::vector<double> eb = subset(keep, before, &chosen);
    const std::vector<double> ea = subset(keep, after, nullptr);
    *b = agreement_of(eb, chosen);
    *a = agreement_of(ea, chosen);
  };
  agreement_pair([](const CalibrationSample& s) { return !s.held_out; }, &result.fitted_before,
                 &result.fitted_after);
  agreement_pair([](const CalibrationSample& s) { return s.held_out; }, &result.held_out_before,
                 &result.held_out_after);
  agreement_pair([](const CalibrationSample&) { return true; }, &result.all_before,
                 &result.all_after);
  for (const CalibrationSample* sample : usable) {
    const bool known =
        std::any_of(result.groups.begin(), result.groups.end(),
                    [&](const GroupAgreement& g) { return g.group == sample->group; });
    if (known) continue;
    GroupAgreement group;
    group.group = sample->group;
    group.held_out = sample->held_out;
    agreement_pair([&](const CalibrationSample& s) { return s.group == sample->group; },
                   &group.before, &group.after);
    result.groups.push_back(group);
  }
  result.ok = true;
  return result;
}

}  // namespace nautilus::cost
