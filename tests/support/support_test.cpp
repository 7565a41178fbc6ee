// Support library: dtype rounding, tensors and error metrics, .npy output, diagnostics rendering.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include <gtest/gtest.h>

#include "core/support/diagnostics.h"
#include "core/support/dtype.h"
#include "core/support/npy.h"
#include "core/support/rng.h"
#include "core/support/tensor.h"
#include "tests/common/golden.h"

namespace nautilus {
namespace {

// Reference bf16 rounding on the f32 bit pattern (round to nearest, ties to even).
float bf16_by_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
  bits = (bits + rounding) & 0xffff0000u;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

TEST(DType, Bf16RoundingMatchesBitPatternRoundingOnManyValues) {
  SplitMix64 rng(1);
  for (int i = 0; i < 200000; ++i) {
    float value = static_cast<float>(rng.uniform(-1, 1) * std::exp2(rng.uniform(-30, 30)));
    ASSERT_EQ(round_to(DType::BF16, value), static_cast<double>(bf16_by_bits(value))) << value;
  }
}

TEST(Tensor, LargeRandomTensorsFilledInParallelEqualTheSerialStream) {
  // Above a million elements random_tensor fills chunks on several threads, each starting its
  // generator at the chunk's position; the values must be the serial stream's, element for element.
  const int64_t count = (int64_t{1} << 20) + 12345;
  TensorData filled = random_tensor({count}, DType::BF16, 77);
  SplitMix64 rng(77);
  for (int64_t i = 0; i < count; ++i) {
    ASSERT_EQ(filled.values[static_cast<size_t>(i)], round_to(DType::BF16, rng.uniform(-1.0, 1.0)))
        << "element " << i;
  }
  SplitMix64 skipped = SplitMix64::at(5, 1000);
  SplitMix64 walked(5);
  for (int i = 0; i < 1000; ++i) walked.next();
  EXPECT_EQ(skipped.next(), walked.next());
}

TEST(DType, Bf16AndF16TiesGoToEven) {
  // 1 + 2^-8 lies halfway between bf16 neighbours 1 and 1 + 2^-7: even mantissa (1) wins.
  EXPECT_EQ(round_to(DType::BF16, 1.0 + std::ldexp(1.0, -8)), 1.0);
  EXPECT_EQ(round_to(DType::BF16, 1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6));
  EXPECT_EQ(round_to(DType::F16, 1.0 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(round_to(DType::F16, 2049.0), 2048.0);
  EXPECT_EQ(round_to(DType::F16, 2051.0), 2052.0);
}

TEST(DType, OverflowSubnormalsAndSpecials) {
  EXPECT_EQ(round_to(DType::F16, 65504.0), 65504.0);
  EXPECT_EQ(round_to(DType::F16, 65519.0), 65504.0);
  EXPECT_TRUE(std::isinf(round_to(DType::F16, 65520.0)));
  EXPECT_EQ(round_to(DType::F16, std::ldexp(1.0, -24)), std::ldexp(1.0, -24));  // smallest subnormal
  EXPECT_EQ(round_to(DType::F16, std::ldexp(1.0, -26)), 0.0);
  EXPECT_TRUE(std::isinf(round_to(DType::BF16, 3.5e38)));
  EXPECT_TRUE(std::isnan(round_to(DType::BF16, std::nan(""))));
  EXPECT_EQ(round_to(DType::F32, -std::numeric_limits<double>::infinity()),
            -std::numeric_limits<double>::infinity());
  EXPECT_EQ(round_to(DType::F32, 0.1), static_cast<double>(0.1f));
}

TEST(DType, PromotionAndNames) {
  EXPECT_EQ(promote(DType::BF16, DType::BF16), DType::BF16);
  EXPECT_EQ(promote(DType::BF16, DType::F16), DType::F32);
  EXPECT_EQ(promote(DType::BF16, DType::F32), DType::F32);
  EXPECT_EQ(parse_tensor_dtype("bf16"), DType::BF16);
  EXPECT_FALSE(parse_tensor_dtype("f64").has_value());
  EXPECT_STREQ(dtype_name(DType::F16), "f16");
}

// OCP FP8 e4m3: 4 exponent bits (bias 7), 3 mantissa bits, no infinity, largest finite 448.
// Conversions round to nearest even and saturate (CUDA's __NV_SATFINITE).
TEST(DType, Fp8E4M3RoundingAtEveryBoundary) {
  const DType t = DType::F8E4M3;
  EXPECT_EQ(round_to(t, 448.0), 448.0);                   // largest finite
  EXPECT_EQ(round_to(t, 449.0), 448.0);
  EXPECT_EQ(round_to(t, 464.0), 448.0);                   // halfway to 480: saturates
  EXPECT_EQ(round_to(t, 465.0), 448.0);
  EXPECT_EQ(round_to(t, 1e30), 448.0);
  EXPECT_EQ(round_to(t, INFINITY), 448.0);                // satfinite: no infinity
  EXPECT_EQ(round_to(t, -INFINITY), -448.0);
  EXPECT_EQ(round_to(t, -1000.0), -448.0);
  EXPECT_EQ(round_to(t, 416.0), 416.0);                   // 1.625 * 2^8
  EXPECT_EQ(round_to(t, 432.0), 448.0);                   // halfway 416..448: even mantissa 110
  EXPECT_EQ(round_to(t, std::ldexp(1.0, -6)), std::ldexp(1.0, -6));    // smallest normal
  EXPECT_EQ(round_to(t, std::ldexp(7.0, -9)), std::ldexp(7.0, -9));    // largest subnormal
  EXPECT_EQ(round_to(t, std::ldexp(1.0, -9)), std::ldexp(1.0, -9));    // smallest subnormal
  EXPECT_EQ(round_to(t, std::ldexp(1.0, -10)), 0.0);                   // tie: to even (zero)
  EXPECT_TRUE(std::signbit(round_to(t, -std::ldexp(1.0, -10))));       // keeps its sign
  EXPECT_EQ(round_to(t, std::ldexp(1.1, -10)), std::ldexp(1.0, -9));
  EXPECT_EQ(round_to(t, std::ldexp(3.0, -10)), std::ldexp(2.0, -9));   // tie 1.5 units: to 2
  EXPECT_EQ(round_to(t, std::ldexp(5.0, -10)), std::ldexp(2.0, -9));   // tie 2.5 units: to 2
  EXPECT_EQ(round_to(t, 1.0 + 0.0625), 1.0);              // tie: to even mantissa 000
  EXPECT_EQ(round_to(t, 1.0 + 3 * 0.0625), 1.25);         // tie: to even mantissa 010
  EXPECT_EQ(round_to(t, 1.0 + 0.07), 1.125);
  EXPECT_TRUE(std::isnan(round_to(t, std::nan(""))));
  EXPECT_EQ(max_finite(t), 448.0);
}

// e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like with infinity, largest finite
// 57344. Stores saturate as for e4m3, so infinity itself becomes 57344.
TEST(DType, Fp8E5M2RoundingAtEveryBoundary) {
  const DType t = DType::F8E5M2;
  EXPECT_EQ(round_to(t, 57344.0), 57344.0);
  EXPECT_EQ(round_to(t, 61439.0), 57344.0);
  EXPECT_EQ(round_to(t, 61440.0), 57344.0);  // halfway to 65536 (which would be infinity)
  EXPECT_EQ(round_to(t, 1e9), 57344.0);
  EXPECT_EQ(round_to(t, INFINITY), 57344.0);
  EXPECT_EQ(round_to(t, -INFINITY), -57344.0);
  EXPECT_EQ(round_to(t, std::ldexp(1.0, -14)), std::ldexp(1.0, -14));  // smallest normal
  EXPECT_EQ(round_to(t, std::ldexp(3.0, -16)), std::ldexp(3.0, -16));  // largest subnormal
  EXPECT_EQ(round_to(t, std::ldexp(1.0, -16)), std::ldexp(1.0, -16));  // smallest subnormal
  EXPECT_EQ(round_to(t, std::ldexp(1.0, -17)), 0.0);                   // tie: to zero
  EXPECT_EQ(round_to(t, std::ldexp(3.0, -17)), std::ldexp(2.0, -16));  // tie 1.5 units: to 2
  EXPECT_EQ(round_to(t, 1.0 + 0.125), 1.0);       // tie: even mantissa 00
  EXPECT_EQ(round_to(t, 1.0 + 3 * 0.125), 1.5);   // tie: even mantissa 10
  EXPECT_EQ(round_to(t, 1.3), 1.25);
  EXPECT_TRUE(std::isnan(round_to(t, -std::nan(""))));
  EXPECT_EQ(max_finite(t), 57344.0);
}

// int8 as cvt.rni.sat.s8.f32: nearest, ties to even, clamped; NaN is 0.
TEST(DType, Int8RoundsToEvenAndSaturates) {
  const DType t = DType::I8;
  EXPECT_EQ(round_to(t, 2.5), 2.0);
  EXPECT_EQ(round_to(t, 3.5), 4.0);
  EXPECT_EQ(round_to(t, -2.5), -2.0);
  EXPECT_EQ(round_to(t, 2.49), 2.0);
  EXPECT_EQ(round_to(t, 127.0), 127.0);
  EXPECT_EQ(round_to(t, 127.5), 127.0);
  EXPECT_EQ(round_to(t, 1000.0), 127.0);
  EXPECT_EQ(round_to(t, -128.0), -128.0);
  EXPECT_EQ(round_to(t, -128.5), -128.0);
  EXPECT_EQ(round_to(t, -INFINITY), -128.0);
  EXPECT_EQ(round_to(t, INFINITY), 127.0);
  EXPECT_EQ(round_to(t, std::nan("")), 0.0);
  EXPECT_FALSE(std::signbit(round_to(t, -0.3)));  // an integer has no negative zero
}

// int4: nearest, ties to even, clamped to [-8, 7]; NaN is 0. Packed two to a byte in global
// memory (global_bytes), a byte each in registers (dtype_bytes).
TEST(DType, Int4RoundsToEvenClampsAndPacksTwoToAByte) {
  const DType t = DType::I4;
  EXPECT_EQ(round_to(t, 2.5), 2.0);
  EXPECT_EQ(round_to(t, 3.5), 4.0);
  EXPECT_EQ(round_to(t, 7.0), 7.0);
  EXPECT_EQ(round_to(t, 7.5), 7.0);
  EXPECT_EQ(round_to(t, 100.0), 7.0);
  EXPECT_EQ(round_to(t, -8.0), -8.0);
  EXPECT_EQ(round_to(t, -9.0), -8.0);
  EXPECT_EQ(round_to(t, -INFINITY), -8.0);
  EXPECT_EQ(round_to(t, std::nan("")), 0.0);
  EXPECT_FALSE(std::signbit(round_to(t, -0.3)));
  EXPECT_EQ(max_finite(t), 7.0);
  EXPECT_STREQ(dtype_name(t), "int4");
  EXPECT_EQ(parse_tensor_dtype("int4"), t);
  EXPECT_TRUE(is_narrow_storage(t));
  EXPECT_TRUE(is_float(t));
  EXPECT_EQ(promote(t, DType::BF16), DType::F32);
  EXPECT_EQ(dtype_bytes(t), 1);
  EXPECT_EQ(global_bytes(t, 4096), 2048);
  EXPECT_EQ(global_bytes(t, 7), 4);
  EXPECT_EQ(global_bytes(DType::BF16, 7), 14);
  const TensorData w = random_tensor({20000}, t, 5);
  double lowest = 0, highest = 0;
  for (double v : w.values) {
    EXPECT_EQ(v, std::nearbyint(v));
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  EXPECT_EQ(lowest, -8.0);  // random inputs span the whole range
  EXPECT_EQ(highest, 7.0);
}

TEST(DType, Fp8BitPatternsRoundTripForEveryByte) {
  for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
    for (int bits = 0; bits < 256; ++bits) {
      const float value = fp8_bits_to_float(t, static_cast<uint8_t>(bits));
      if (std::isnan(value)) continue;
      if (std::isinf(value)) {
        // Only e5m2 has infinity; a saturating conversion gives the largest finite value.
        ASSERT_EQ(t, DType::F8E5M2);
        EXPECT_EQ(float_to_fp8_bits(t, value), value > 0 ? 0x7b : 0xfb);
        continue;
      }
      EXPECT_EQ(round_to(t, value), static_cast<double>(value)) << dtype_name(t) << " " << bits;
      EXPECT_EQ(float_to_fp8_bits(t, value), bits) << dtype_name(t) << " " << value;
    }
  }
  EXPECT_EQ(float_to_fp8_bits(DType::F8E4M3, 1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E4M3, 448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E4M3, -1e6f), 0xfe);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E4M3, std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E4M3, std::nanf("")), 0x7f);
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(DType::F8E4M3, 0x7f)));
  EXPECT_EQ(fp8_bits_to_float(DType::F8E4M3, 0x7e), 448.0f);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E5M2, 1.0f), 0x3c);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E5M2, 57344.0f), 0x7b);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E5M2, INFINITY), 0x7b);
  EXPECT_EQ(float_to_fp8_bits(DType::F8E5M2, std::nanf("")), 0x7e);
  EXPECT_TRUE(std::isinf(fp8_bits_to_float(DType::F8E5M2, 0x7c)));
  EXPECT_TRUE(std::isnan(fp8_bits_to_float(DType::F8E5M2, 0x7d)));
}

TEST(DType, EightBitTypesNamesSizesAndPromotion) {
  for (DType t : {DType::F8E4M3, DType::F8E5M2, DType::I8}) {
    EXPECT_EQ(dtype_bytes(t), 1);
    EXPECT_TRUE(is_narrow_storage(t));
    EXPECT_TRUE(is_float(t));  // a real value, computed in f32
    EXPECT_EQ(parse_tensor_dtype(dtype_name(t)), t);
    EXPECT_EQ(promote(t, t), DType::F32);  // 8-bit operands compute in f32
    EXPECT_EQ(promote(t, DType::BF16), DType::F32);
  }
  EXPECT_STREQ(dtype_name(DType::F8E4M3), "fp8e4m3");
  EXPECT_STREQ(dtype_name(DType::F8E5M2), "fp8e5m2");
  EXPECT_STREQ(dtype_name(DType::I8), "int8");
  EXPECT_FALSE(is_narrow_storage(DType::BF16));
  EXPECT_FALSE(parse_tensor_dtype("fp8").has_value());
  EXPECT_FALSE(parse_tensor_dtype("i32").has_value());
}

TEST(Tensor, RandomInputsStayInsideEachTypesRange) {
  for (DType t : {DType::F8E4M3, DType::F8E5M2}) {
    const TensorData x = random_tensor({4096}, t, 3);
    for (double v : x.values) {
      EXPECT_LE(std::fabs(v), 1.0);
      EXPECT_EQ(round_to(t, v), v);
    }
  }
  const TensorData w = random_tensor({20000}, DType::I8, 4);
  double lowest = 0, highest = 0;
  for (double v : w.values) {
    EXPECT_EQ(v, std::nearbyint(v));
    lowest = std::min(lowest, v);
    highest = std::max(highest, v);
  }
  EXPECT_EQ(lowest, -127.0);  // the whole range but -128
  EXPECT_EQ(highest, 127.0);
}

TEST(Tensor, CompareReportsNormwiseErrorAndWorstIndex) {
  TensorData expected{{2, 2}, DType::F64, {1.0, -4.0, 2.0, 0.5}};
  TensorData actual{{2, 2}, DType::F32, {1.0, -4.0, 2.2, 0.5}};
  ErrorReport report = compare_tensors(actual, expected);
  EXPECT_NEAR(report.max_abs_error, 0.2, 1e-12);
  EXPECT_NEAR(report.max_relative_error, 0.05, 1e-12);
  EXPECT_EQ(report.worst_index, 2);
}

TEST(Tensor, NonFiniteValuesMismatchUnlessEqual) {
  double inf = std::numeric_limits<double>::infinity();
  TensorData expected{{3}, DType::F64, {-inf, 1.0, 2.0}};
  TensorData same{{3}, DType::F32, {-inf, 1.0, 2.0}};
  EXPECT_EQ(compare_tensors(same, expected).mismatched_nonfinite, 0);
  TensorData nan{{3}, DType::F32, {-inf, std::nan(""), 2.0}};
  ErrorReport report = compare_tensors(nan, expected);
  EXPECT_EQ(report.mismatched_nonfinite, 1);
  EXPECT_TRUE(std::isinf(report.max_relative_error));
}

TEST(Npy, HeaderIsAlignedAndDataFollows) {
  std::string path = ::testing::TempDir() + "/t.npy";
  ASSERT_EQ(write_npy(path, {3}, {1.0, 2.5, -0.5}, DType::F16), "");
  std::string bytes = testing::read_text(path);
  ASSERT_EQ(bytes.size() % 2, 0u);
  uint16_t header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0);
  EXPECT_NE(bytes.find("'descr': '<f2'"), std::string::npos);
  EXPECT_NE(bytes.find("'shape': (3,)"), std::string::npos);
  const unsigned char* data = reinterpret_cast<const unsigned char*>(bytes.data()) + 10 + header_len;
  EXPECT_EQ(data[0] | (data[1] << 8), 0x3c00);  // 1.0 in binary16
  EXPECT_EQ(data[2] | (data[3] << 8), 0x4100);  // 2.5
  EXPECT_EQ(data[4] | (data[5] << 8), 0xb800);  // -0.5
}

TEST(Diagnostics, RenderShowsLineCaretAndRange) {
  auto file = std::make_shared<SourceFile>("x.nt", "let M = 4\nY[m] = foo(X[m])\n");
  DiagnosticEngine diagnostics(file);
  diagnostics.error(SourceRange::at(17, 20), "unknown function 'foo'");
  EXPECT_EQ(diagnostics.render_all(),
            "x.nt:2:8: error: unknown function 'foo'\n"
            " 2 | Y[m] = foo(X[m])\n"
            "   |        ^~~\n"
            "1 error generated.\n");
}

TEST(Diagnostics, LongLinesAreWindowedAndGarbageIsSanitized) {
  std::string line(1'000'000, 'a');
  line[600'000] = '\x01';
  auto file = std::make_shared<SourceFile>("big.nt", line);
  DiagnosticEngine diagnostics(file);
  diagnostics.error(SourceRange::at(600'000, 600'001), "unexpected character");
  std::string rendered = diagnostics.render_all();
  EXPECT_LT(rendered.size(), 400u);
  EXPECT_NE(rendered.find("big.nt:1:600001"), std::string::npos);
  EXPECT_NE(rendered.find("...aaa"), std::string::npos);
  EXPECT_EQ(rendered.find('\x01'), std::string::npos);
}

TEST(Diagnostics, ErrorLimitStopsStoringButKeepsCounting) {
  auto file = std::make_shared<SourceFile>("x.nt", "x");
  DiagnosticEngine diagnostics(file, 3);
  for (int i = 0; i < 10; ++i) diagnostics.error(SourceRange::at(0, 1), "bad");
  EXPECT_EQ(diagnostics.diagnostics().size(), 3u);
  EXPECT_EQ(diagnostics.error_count(), 10);
  EXPECT_NE(diagnostics.render_all().find("7 more errors not shown"), std::string::npos);
}

TEST(Source, LineColumnAndLineText) {
  SourceFile file("f", "ab\r\ncd\n\nlast");
  EXPECT_EQ(file.line_column(0).line, 1u);
  EXPECT_EQ(file.line_column(4).line, 2u);
  EXPECT_EQ(file.line_column(5).column, 2u);
  EXPECT_EQ(file.line_text(1), "ab");
  EXPECT_EQ(file.line_text(3), "");
  EXPECT_EQ(file.line_text(4), "last");
  EXPECT_EQ(file.line_text(9), "");
}

}  // namespace
}  // namespace nautilus
