// Dense host tensors exchanged between interpreters, the evaluation driver and `.npy` files.
//
// Values are doubles in row-major order; `dtype` says which type they represent (every value is
// exactly representable in it once rounded with round_to).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/support/dtype.h"

namespace nautilus {

struct TensorData {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  std::vector<double> values;  // row-major

  int64_t element_count() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};
using TensorMap = std::map<std::string, TensorData>;

// Fills a tensor of `shape` with values uniform in [lo, hi), rounded to `dtype`, from `seed`.
TensorData random_tensor(const std::vector<int64_t>& shape, DType dtype, uint64_t seed, double lo,
                         double hi);
// The same over the dtype's random input range (random_input_range).
TensorData random_tensor(const std::vector<int64_t>& shape, DType dtype, uint64_t seed);

// The range random inputs of a dtype are drawn from: [-1, 1) for the floats (inside every
// type's finite range, fp8 included, so no input saturates), and [-127.5, 127.5) for int8, which
// rounds to every int8 value but -128 about equally often (int8 weights use the whole range and
// are scaled down by the spec's own scales).
struct ValueRange {
  double lo;
  double hi;
};
ValueRange random_input_range(DType dtype);

// The normwise relative error max_i |actual_i - expected_i| / max_i |expected_i| (or the absolute
// error when the reference is all zero). NaN or infinity where the reference is finite counts as
// infinite error; matching infinities count as equal.
struct ErrorReport {
  double max_relative_error = 0.0;
  double max_abs_error = 0.0;
  double max_abs_reference = 0.0;
  int64_t worst_index = -1;  // flat index of the largest absolute difference
  int64_t mismatched_nonfinite = 0;
};
ErrorReport compare_tensors(const TensorData& actual, const TensorData& expected);

}  // namespace nautilus
