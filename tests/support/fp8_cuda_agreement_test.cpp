// The fp8 conversions of core/support (round_to, float_to_fp8_bits, fp8_bits_to_float) against
// CUDA's own host implementation in cuda_fp8.h (__nv_cvt_float_to_fp8 with __NV_SATFINITE, and
// __nv_cvt_fp8_to_halfraw), which the generated kernels call on the device: every 97th f32 bit
// pattern, both formats. Compiled with the toolkit's headers where CMake finds them (tests/
// CMakeLists.txt defines NAUTILUS_HAVE_CUDA_FP8_HEADER); skipped elsewhere.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/support/dtype.h"

#ifdef NAUTILUS_HAVE_CUDA_FP8_HEADER
#include <cuda_fp8.h>
#endif

namespace nautilus {
namespace {

TEST(Fp8AgainstCuda, SaturatingConversionAgreesBitForBit) {
#ifndef NAUTILUS_HAVE_CUDA_FP8_HEADER
  GTEST_SKIP() << "cuda_fp8.h was not found at configure time";
#else
  int64_t mismatches = 0;
  for (uint64_t pattern = 0; pattern < (uint64_t{1} << 32); pattern += 97) {
    const auto bits = static_cast<uint32_t>(pattern);
    float value;
    std::memcpy(&value, &bits, 4);
    for (DType dtype : {DType::F8E4M3, DType::F8E5M2}) {
      const __nv_fp8_interpretation_t format = dtype == DType::F8E4M3 ? __NV_E4M3 : __NV_E5M2;
      const uint8_t cuda = __nv_cvt_float_to_fp8(value, __NV_SATFINITE, format);
      const uint8_t ours = float_to_fp8_bits(dtype, value);
      const float cuda_back = __half2float(__half(__nv_cvt_fp8_to_halfraw(cuda, format)));
      const float ours_back = fp8_bits_to_float(dtype, ours);
      if (std::isnan(value)) {  // NaN payloads differ; NaN-ness must not
        mismatches += !std::isnan(cuda_back) || !std::isnan(ours_back);
        continue;
      }
      if (cuda != ours || cuda_back != ours_back ||
          static_cast<double>(ours_back) != round_to(dtype, value)) {
        if (++mismatches <= 5) {
          ADD_FAILURE() << dtype_name(dtype) << " " << value << ": cuda " << int{cuda} << ", ours "
                        << int{ours};
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
#endif
}

}  // namespace
}  // namespace nautilus
