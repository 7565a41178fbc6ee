#include "core/support/tensor.h"

#include <cmath>
#include <limits>

#include "core/support/parallel.h"
#include "core/support/rng.h"

namespace nautilus {

TensorData random_tensor(const std::vector<int64_t>& shape, DType dtype, uint64_t seed, double lo,
                         double hi) {
  TensorData tensor;
  tensor.shape = shape;
  tensor.dtype = dtype;
  tensor.values.resize(static_cast<size_t>(tensor.element_count()));
  double* values = tensor.values.data();
  parallel_chunks(tensor.element_count(), [&](int64_t begin, int64_t end) {
    SplitMix64 rng = SplitMix64::at(seed, static_cast<uint64_t>(begin));
    for (int64_t i = begin; i < end; ++i) values[i] = round_to(dtype, rng.uniform(lo, hi));
  });
  return tensor;
}

ValueRange random_input_range(DType dtype) {
  if (dtype == DType::I8) return {-127.5, 127.5};
  if (dtype == DType::I4) return {-8.5, 7.5};
  return {-1.0, 1.0};
}

TensorData random_tensor(const std::vector<int64_t>& shape, DType dtype, uint64_t seed) {
  const ValueRange range = random_input_range(dtype);
  return random_tensor(shape, dtype, seed, range.lo, range.hi);
}

ErrorReport compare_tensors(const TensorData& actual, const TensorData& expected) {
  ErrorReport report;
  const size_t n = std::min(actual.values.size(), expected.values.size());
  double worst = -1.0;
  for (size_t i = 0; i < n; ++i) {
    double a = actual.values[i], e = expected.values[i];
    if (std::isfinite(e)) report.max_abs_reference = std::max(report.max_abs_reference, std::fabs(e));
    double diff;
    if (!std::isfinite(e) || !std::isfinite(a)) {
      // Equal infinities (e.g. a row that is entirely masked) agree; anything else is a mismatch.
      if (a == e) continue;
      ++report.mismatched_nonfinite;
      diff = std::numeric_limits<double>::infinity();
    } else {
      diff = std::fabs(a - e);
    }
    if (diff > worst) {
      worst = diff;
      report.worst_index = static_cast<int64_t>(i);
    }
  }
  if (actual.values.size() != expected.values.size()) {
    report.max_abs_error = std::numeric_limits<double>::infinity();
    report.max_relative_error = std::numeric_limits<double>::infinity();
    return report;
  }
  report.max_abs_error = std::max(worst, 0.0);
  report.max_relative_error = report.max_abs_reference > 0
                                  ? report.max_abs_error / report.max_abs_reference
                                  : report.max_abs_error;
  return report;
}

}  // namespace nautilus
