// Writes NumPy `.npy` files (format version 1.0, C order, little endian).
//
// Values are passed as doubles and stored as '<f8', '<f4' or '<f2'. bf16 has no NumPy dtype: its
// values are stored as '<f4', which represents every bf16 value exactly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/support/dtype.h"

namespace nautilus {

// Returns an empty string on success, otherwise the reason the file could not be written.
std::string write_npy(const std::string& path, const std::vector<int64_t>& shape,
                      const std::vector<double>& values, DType dtype);

// The NumPy dtype string used for `dtype` ('<f8', '<f4' or '<f2').
const char* npy_descr(DType dtype);

}  // namespace nautilus
