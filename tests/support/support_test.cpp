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
