// Host tensors to kernel bytes and back: known bit patterns of every dtype, rounding, and exact
// round trips of random inputs (the runner's inputs must be the CPU interpreters' inputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/support/rng.h"
#include "profiler/tensor_bytes.h"

namespace nautilus::profiler {
namespace {

TEST(TensorBytes, HalfBitPatterns) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);                   // largest finite
  EXPECT_EQ(float_to_half_bits(65536.0f), 0x7c00);                   // overflows to infinity
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -24)), 0x0001);      // smallest subnormal
  EXPECT_EQ(float_to_half_bits(std::ldexp(1.0f, -14)), 0x0400);      // smallest normal
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even (down)
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie to even (up)
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00)));
  EXPECT_EQ(half_bits_to_float(0x3555), 0.333251953125f);
  EXPECT_EQ(half_bits_to_float(0x0001), std::ldexp(1.0f, -24));
}

TEST(TensorBytes, Bfloat16BitPatterns) {
  EXPECT_EQ(float_to_bfloat16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bfloat16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);  // tie to even (down)
  EXPECT_EQ(float_to_bfloat16_bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie (up)
  EXPECT_EQ(float_to_bfloat16_bits(std::numeric_limits<float>::max()), 0x7f80);  // to infinity
  EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(NAN))));
  EXPECT_EQ(bfloat16_bits_to_float(0x4049), 3.140625f);
}

// Every f16 and bf16 bit pattern decodes and encodes back to itself (NaNs stay NaN).
TEST(TensorBytes, EveryHalfAndBfloat16PatternRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const auto pattern = static_cast<uint16_t>(bits);
    const float half = half_bits_to_float(pattern);
    const float brain = bfloat16_bits_to_float(pattern);
    if (std::isnan(half)) {
      EXPECT_TRUE(std::isnan(half_bits_to_float(float_to_half_bits(half))));
    } else {
      ASSERT_EQ(float_to_half_bits(half), pattern) << std::hex << bits;
    }
    if (std::isnan(brain)) {
      EXPECT_TRUE(std::isnan(bfloat16_bits_to_float(float_to_bfloat16_bits(brain))));
    } else {
      ASSERT_EQ(float_to_bfloat16_bits(brain), pattern) << std::hex << bits;
    }
  }
}

TEST(TensorBytes, RandomInputsRoundTripExactlyInEveryDtype) {
  for (DType dtype : {DType::F32, DType::F16, DType::BF16, DType::F8E4M3, DType::F8E5M2, DType::I8}) {
    SCOPED_TRACE(dtype_name(dtype));
    TensorData tensor = random_tensor({37, 29}, dtype, derive_seed(7, 1));
    std::vector<uint8_t> bytes = encode_tensor(tensor);
    ASSERT_EQ(bytes.size(), 37u * 29u * static_cast<size_t>(dtype_bytes(dtype)));
    std::optional<TensorData> back = decode_tensor(bytes, tensor.shape, dtype);
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->values, tensor.values);
    EXPECT_EQ(back->shape, tensor.shape);
  }
}

TEST(TensorBytes, EncodingRoundsLikeTheGpu) {
  TensorData tensor{{3}, DType::BF16, {1.0 / 3.0, -1e-3, 1e39}};
  std::optional<TensorData> back = decode_tensor(encode_tensor(tensor), {3}, DType::BF16);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->values[0], round_to(DType::BF16, 1.0 / 3.0));
  EXPECT_EQ(back->values[1], round_to(DType::BF16, -1e-3));
  EXPECT_TRUE(std::isinf(back->values[2]));
}

// One byte per element: OCP FP8 patterns and two's complement int8, saturating like the GPU's
// satfinite conversions.
TEST(TensorBytes, EightBitTypesAreOneByteAndSaturate) {
  const TensorData e4m3{{4}, DType::F8E4M3, {1.0, -448.0, 1000.0, std::ldexp(1.0, -9)}};
  EXPECT_EQ(encode_tensor(e4m3), (std::vector<uint8_t>{0x38, 0xfe, 0x7e, 0x01}));
  const TensorData e5m2{{3}, DType::F8E5M2, {1.0, -57344.0, INFINITY}};
  EXPECT_EQ(encode_tensor(e5m2), (std::vector<uint8_t>{0x3c, 0xfb, 0x7b}));
  const TensorData int8{{4}, DType::I8, {-1.0, 127.0, 300.0, -2.5}};
  EXPECT_EQ(encode_tensor(int8), (std::vector<uint8_t>{0xff, 0x7f, 0x7f, 0xfe}));
  std::optional<TensorData> back = decode_tensor({0x80, 0x7f, 0x01}, {3}, DType::I8);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->values, (std::vector<double>{-128.0, 127.0, 1.0}));
  EXPECT_EQ(*buffer_bytes(DType::F8E4M3, 10), 10u);
}

// int4: two's complement nibbles, element 2j in the low nibble of byte j; an odd count leaves
// the last high nibble 0.
TEST(TensorBytes, Int4PacksTwoElementsAByteLowNibbleFirst) {
  const TensorData w{{5}, DType::I4, {1.0, -2.0, 7.0, -8.0, 20.0}};
  EXPECT_EQ(*buffer_bytes(DType::I4, 5), 3u);
  EXPECT_EQ(encode_tensor(w), (std::vector<uint8_t>{0xe1, 0x87, 0x07}));
  std::optional<TensorData> back = decode_tensor({0xe1, 0x87, 0x07}, {5}, DType::I4);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->values, (std::vector<double>{1.0, -2.0, 7.0, -8.0, 7.0}));
  const TensorData random = random_tensor({37, 30}, DType::I4, derive_seed(7, 2));
  const std::vector<uint8_t> bytes = encode_tensor(random);
  ASSERT_EQ(bytes.size(), 37u * 15u);
  std::optional<TensorData> again = decode_tensor(bytes, random.shape, DType::I4);
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->values, random.values);
  EXPECT_FALSE(decode_tensor(std::vector<uint8_t>(4), {5}, DType::I4).has_value());
}

TEST(TensorBytes, F32IsLittleEndianBinary32) {
  TensorData tensor{{2}, DType::F32, {1.0, -0.5}};
  std::vector<uint8_t> bytes = encode_tensor(tensor);
  ASSERT_EQ(bytes.size(), 8u);
  uint32_t first = 0;
  std::memcpy(&first, bytes.data(), 4);
  EXPECT_EQ(first, 0x3f800000u);
  EXPECT_EQ(bytes[7], 0xbf);
}

TEST(TensorBytes, SizeMismatchAndNonBufferTypesAreRejected) {
  EXPECT_FALSE(decode_tensor(std::vector<uint8_t>(7), {2}, DType::F32).has_value());
  EXPECT_FALSE(buffer_bytes(DType::F64, 4).has_value());
  EXPECT_FALSE(buffer_bytes(DType::F32, std::numeric_limits<int64_t>::max()).has_value());
  EXPECT_EQ(*buffer_bytes(DType::BF16, 10), 20u);
  EXPECT_TRUE(encode_tensor(TensorData{{1}, DType::Index, {1.0}}).empty());
}

}  // namespace
}  // namespace nautilus::profiler
