#include "embedding/row_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::embedding {
namespace {

using ::testing::HasSubstr;

constexpr RowFormat kAllFormats[] = {RowFormat::kFp32, RowFormat::kFp16, RowFormat::kInt8RowWise,
                                     RowFormat::kFixed32};

uint32_t Bits(float value) { return std::bit_cast<uint32_t>(value); }

bool IsHalfNan(uint16_t half) { return (half & 0x7c00u) == 0x7c00u && (half & 0x3ffu) != 0; }

// Plain reference for FloatToHalf: the nearest of all finite halves, found by search in double
// (exact for every float and half), ties to the even bit pattern; infinity from 65520 up.
uint16_t ReferenceFloatToHalf(float value) {
  static const std::vector<double> kHalves = [] {
    std::vector<double> halves;
    for (uint32_t h = 0; h <= 0x7bffu; ++h) halves.push_back(HalfToFloat(static_cast<uint16_t>(h)));
    return halves;
  }();
  const uint16_t sign = std::signbit(value) ? 0x8000u : 0;
  const double magnitude = std::fabs(static_cast<double>(value));
  if (magnitude >= 65520.0) return sign | 0x7c00u;
  const auto upper = std::lower_bound(kHalves.begin(), kHalves.end(), magnitude);
  if (upper == kHalves.end()) return sign | 0x7bffu;  // between 65504 and 65520
  const uint16_t above = static_cast<uint16_t>(upper - kHalves.begin());
  if (*upper == magnitude || above == 0) return sign | above;
  const uint16_t below = above - 1;
  const double to_below = magnitude - kHalves[below];
  const double to_above = *upper - magnitude;
  if (to_below < to_above) return sign | below;
  if (to_above < to_below) return sign | above;
  return sign | ((below & 1u) ? above : below);
}

TEST(RowFormatTest, NamesRoundTrip) {
  for (RowFormat format : kAllFormats) {
    absl::StatusOr<RowFormat> parsed = ParseRowFormat(RowFormatName(format));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, format);
    EXPECT_TRUE(IsKnownRowFormat(format));
  }
  EXPECT_EQ(RowFormatName(RowFormat::kInt8RowWise), "int8");
  EXPECT_EQ(RowFormatName(RowFormat::kFixed32), "fixed");
  absl::StatusOr<RowFormat> bad = ParseRowFormat("bf16");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("bf16"));
  EXPECT_FALSE(IsKnownRowFormat(static_cast<RowFormat>(9)));
  EXPECT_EQ(RowFormatName(static_cast<RowFormat>(9)), "unknown(9)");
}

TEST(RowFormatTest, RowWordsAndStride) {
  EXPECT_EQ(RowWords(RowFormat::kFp32, 5), 5u);
  EXPECT_EQ(RowWords(RowFormat::kFixed32, 5), 5u);
  EXPECT_EQ(RowWords(RowFormat::kFp16, 5), 3u);
  EXPECT_EQ(RowWords(RowFormat::kFp16, 4), 2u);
  EXPECT_EQ(RowWords(RowFormat::kInt8RowWise, 5), 4u);  // 2 words of bytes + scale + bias
  EXPECT_EQ(RowWords(RowFormat::kInt8RowWise, 4), 3u);
  EXPECT_EQ(RowWords(static_cast<RowFormat>(0), 5), 0u);
  EXPECT_EQ(RowWords(RowFormat::kFp16, 0xffffffffu), 0x80000000u);
  EXPECT_EQ(RowStrideWords(1), 16u);
  EXPECT_EQ(RowStrideWords(16), 16u);
  EXPECT_EQ(RowStrideWords(17), 32u);
  EXPECT_EQ(RowStrideWords(0xffffffffu), 0x100000000u);
}

TEST(Fp16Test, KnownValues) {
  struct Case {
    float value;
    uint16_t half;
  };
  const Case cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {-2.0f, 0xc000},
      {0.5f, 0x3800},
      {0.1f, 0x2e66},
      {65504.0f, 0x7bff},  // largest finite half
      {65519.0f, 0x7bff},  // just under the tie
      {65520.0f, 0x7c00},  // tie with 2^16: rounds to the even neighbour, infinity
      {1e10f, 0x7c00},
      {-1e10f, 0xfc00},
      {std::numeric_limits<float>::infinity(), 0x7c00},
      {-std::numeric_limits<float>::infinity(), 0xfc00},
      {0x1p-14f, 0x0400},            // smallest normal
      {0x1p-24f, 0x0001},            // smallest subnormal
      {1023 * 0x1p-24f, 0x03ff},     // largest subnormal
      {1023.5f * 0x1p-24f, 0x0400},  // tie between them: the even one is the normal
      {0x1p-25f, 0x0000},            // tie between 0 and 2^-24: even zero
      {std::nextafter(0x1p-25f, 1.0f), 0x0001},
      {3 * 0x1p-25f, 0x0002},  // tie between 1 and 2 ulps: even 2
      {0x1p-26f, 0x0000},
      {-0x1p-24f, 0x8001},
      {std::numeric_limits<float>::denorm_min(), 0x0000},
      {1.0f + 0x1p-11f, 0x3c00},             // tie: even mantissa 0
      {1.0f + 3 * 0x1p-11f, 0x3c02},         // tie: even mantissa 2
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01},  // just above the tie
      {2049.0f, 0x6800},                     // tie between 2048 and 2050
      {2051.0f, 0x6802},                     // tie between 2050 and 2052
  };
  for (const Case& c : cases) {
    EXPECT_EQ(FloatToHalf(c.value), c.half) << c.value;
  }
  EXPECT_EQ(HalfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x03ff), 1023 * 0x1p-24f);
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(HalfToFloat(0x8000)), 0x80000000u);
}

TEST(Fp16Test, NanStaysNan) {
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::quiet_NaN()), 0x7e00);
  // A signalling NaN whose payload lies only in the dropped bits must not become infinity.
  EXPECT_TRUE(IsHalfNan(FloatToHalf(std::bit_cast<float>(0x7f800001u))));
  EXPECT_TRUE(IsHalfNan(FloatToHalf(std::bit_cast<float>(0xff800001u))));
  EXPECT_EQ(FloatToHalf(std::bit_cast<float>(0xff800001u)) & 0x8000, 0x8000);
  EXPECT_TRUE(std::isnan(HalfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(HalfToFloat(0xfd01)));
}

TEST(Fp16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h <= 0xffffu; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const uint16_t back = FloatToHalf(HalfToFloat(half));
    if (IsHalfNan(half)) {
      EXPECT_TRUE(IsHalfNan(back)) << std::hex << h;
    } else {
      EXPECT_EQ(back, half) << std::hex << h;
    }
  }
}

TEST(Fp16Test, MatchesReferenceOnRandomFloats) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  // Exponents near the half range (2^-26 .. 2^17) with random mantissas and signs, so that ties,
  // subnormals and overflow all occur.
  std::uniform_int_distribution<uint32_t> exponent(101, 144);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffff);
  std::uniform_int_distribution<uint32_t> low_bits(0, 1);
  for (int i = 0; i < 200000; ++i) {
    uint32_t m = mantissa(rng);
    if (i % 4 == 0) m = (m & ~0x1fffu) | 0x1000u;  // exactly halfway in the normal range
    const uint32_t bits = (low_bits(rng) << 31) | (exponent(rng) << 23) | m;
    const float value = std::bit_cast<float>(bits);
    ASSERT_EQ(FloatToHalf(value), ReferenceFloatToHalf(value)) << std::hex << bits;
  }
}

std::vector<float> RandomValues(std::mt19937& rng, size_t count, float range) {
  std::uniform_real_distribution<float> dist(-range, range);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

// Dims around word and leaf boundaries.
constexpr uint32_t kDims[] = {1, 2, 3, 4, 5, 15, 16, 17, 64, 100};

TEST(RowCodecTest, Fp32IsBitExact) {
  const std::vector<float> values = {0.0f,
                                     -0.0f,
                                     1.5f,
                                     std::numeric_limits<float>::denorm_min(),
                                     std::numeric_limits<float>::infinity(),
                                     std::bit_cast<float>(0x7fc01234u),
                                     -3.25e38f};
  std::vector<uint32_t> words(RowWords(RowFormat::kFp32, values.size()));
  ASSERT_TRUE(EncodeRow(RowFormat::kFp32, 0, values, absl::MakeSpan(words)).ok());
  std::vector<float> decoded(values.size());
  ASSERT_TRUE(DecodeRow(RowFormat::kFp32, 0, values.size(), words, absl::MakeSpan(decoded)).ok());
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(words[i], Bits(values[i]));
    EXPECT_EQ(Bits(decoded[i]), Bits(values[i]));
  }
}

TEST(RowCodecTest, Fp16IsBitExactForHalves) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> half(0, 0xffff);
  for (uint32_t dim : kDims) {
    std::vector<float> values(dim);
    for (float& v : values) {
      uint16_t h;
      do h = static_cast<uint16_t>(half(rng));
      while (IsHalfNan(h));
      v = HalfToFloat(h);
    }
    std::vector<uint32_t> words(RowWords(RowFormat::kFp16, dim), 0xdeadbeefu);
    ASSERT_TRUE(EncodeRow(RowFormat::kFp16, 0, values, absl::MakeSpan(words)).ok());
    if (dim % 2 == 1) {
      EXPECT_EQ(words.back() >> 16, 0u) << "the unused half must be zero";
    }
    std::vector<float> decoded(dim);
    ASSERT_TRUE(DecodeRow(RowFormat::kFp16, 0, dim, words, absl::MakeSpan(decoded)).ok());
    for (uint32_t i = 0; i < dim; ++i) EXPECT_EQ(Bits(decoded[i]), Bits(values[i])) << i;
  }
}

void ExpectInt8WithinHalfStep(absl::Span<const float> values) {
  const uint32_t dim = static_cast<uint32_t>(values.size());
  std::vector<uint32_t> words(RowWords(RowFormat::kInt8RowWise, dim));
  ASSERT_TRUE(EncodeRow(RowFormat::kInt8RowWise, 0, values, absl::MakeSpan(words)).ok());
  const float scale = std::bit_cast<float>(words[words.size() - 2]);
  std::vector<float> decoded(dim);
  ASSERT_TRUE(DecodeRow(RowFormat::kInt8RowWise, 0, dim, words, absl::MakeSpan(decoded)).ok());
  const float max_abs = std::fabs(*std::max_element(
      values.begin(), values.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); }));
  // scale / 2 from quantization, plus a few float roundings of the decode at the row's magnitude.
  const double tolerance = scale / 2.0 + 4.0 * max_abs * std::numeric_limits<float>::epsilon();
  for (uint32_t i = 0; i < dim; ++i) {
    EXPECT_LE(std::fabs(static_cast<double>(decoded[i]) - values[i]), tolerance)
        << "index " << i << " scale " << scale;
  }
}

TEST(RowCodecTest, Int8WithinHalfAStep) {
  std::mt19937 rng(11);
  for (uint32_t dim : kDims) {
    for (float range : {1e-3f, 1.0f, 1e4f}) {
      SCOPED_TRACE(::testing::Message() << "dim " << dim << " range " << range);
      ExpectInt8WithinHalfStep(RandomValues(rng, dim, range));
    }
  }
  // Offset rows (all positive), extreme ranges that overflow float subtraction.
  ExpectInt8WithinHalfStep(std::vector<float>{100.0f, 100.5f, 101.0f, 107.25f, 100.0f});
  ExpectInt8WithinHalfStep(std::vector<float>{-3e38f, 3e38f, 0.0f, 1.0f});
}

TEST(RowCodecTest, Int8ConstantRowIsExact) {
  const std::vector<float> values(6, -2.75f);
  std::vector<uint32_t> words(RowWords(RowFormat::kInt8RowWise, 6));
  ASSERT_TRUE(EncodeRow(RowFormat::kInt8RowWise, 0, values, absl::MakeSpan(words)).ok());
  std::vector<float> decoded(6);
  ASSERT_TRUE(DecodeRow(RowFormat::kInt8RowWise, 0, 6, words, absl::MakeSpan(decoded)).ok());
  EXPECT_EQ(decoded, values);
}

TEST(RowCodecTest, Int8LayoutIsSignedBytesThenScaleAndBias) {
  // min -128 and max 127 give scale 1 and bias 0, so the bytes are the values themselves.
  const std::vector<float> values = {-128.0f, 127.0f, 0.0f, -1.0f, 5.0f};
  std::vector<uint32_t> words(RowWords(RowFormat::kInt8RowWise, 5));
  ASSERT_TRUE(EncodeRow(RowFormat::kInt8RowWise, 0, values, absl::MakeSpan(words)).ok());
  EXPECT_EQ(words[0], 0xff007f80u);
  EXPECT_EQ(words[1], 0x00000005u);
  EXPECT_EQ(std::bit_cast<float>(words[2]), 1.0f);
  EXPECT_EQ(std::bit_cast<float>(words[3]), 0.0f);
}

TEST(RowCodecTest, FixedIsExactForRepresentableValues) {
  std::mt19937 rng(13);
  for (int frac_bits : {0, 8, 16, 24, 31}) {
    std::uniform_int_distribution<int32_t> q(std::numeric_limits<int32_t>::min(),
                                             std::numeric_limits<int32_t>::max());
    for (uint32_t dim : kDims) {
      std::vector<float> values(dim);
      std::vector<int32_t> expected(dim);
      for (uint32_t i = 0; i < dim; ++i) {
        // Keep q within float's 24-bit mantissa so that the value is a float exactly.
        expected[i] = q(rng) >> 8;
        values[i] = std::ldexp(static_cast<float>(expected[i]), -frac_bits);
      }
      std::vector<uint32_t> words(dim);
      ASSERT_TRUE(EncodeRow(RowFormat::kFixed32, frac_bits, values, absl::MakeSpan(words)).ok());
      std::vector<float> decoded(dim);
      ASSERT_TRUE(
          DecodeRow(RowFormat::kFixed32, frac_bits, dim, words, absl::MakeSpan(decoded)).ok());
      for (uint32_t i = 0; i < dim; ++i) {
        EXPECT_EQ(static_cast<int32_t>(words[i]), expected[i]);
        EXPECT_EQ(decoded[i], values[i]);
      }
    }
  }
}

TEST(RowCodecTest, FixedRoundsTiesToEvenAndRejectsOverflow) {
  const std::vector<float> values = {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 0.25f};
  std::vector<uint32_t> words(values.size());
  ASSERT_TRUE(EncodeRow(RowFormat::kFixed32, 0, values, absl::MakeSpan(words)).ok());
  EXPECT_THAT(words, ::testing::ElementsAre(0u, 2u, 2u, 0u, static_cast<uint32_t>(-2), 0u));

  std::vector<uint32_t> one(1);
  EXPECT_TRUE(
      EncodeRow(RowFormat::kFixed32, 16, std::vector<float>{-32768.0f}, absl::MakeSpan(one)).ok());
  EXPECT_EQ(one[0], 0x80000000u);
  absl::Status status =
      EncodeRow(RowFormat::kFixed32, 16, std::vector<float>{32768.0f}, absl::MakeSpan(one));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("does not fit"));
  status =
      EncodeRow(RowFormat::kFixed32, 16, std::vector<float>{std::nanf("")}, absl::MakeSpan(one));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(PooledFixedTest, SumOfRowsModTwoToThe32IsExact) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  constexpr int kFracBits = 16;
  constexpr uint32_t kDim = 17;
  constexpr int kBag = 50;
  // Row entries |q| <= 2^18 give sums below 2^24 (floats exactly); |q| <= 2^24 give sums up to
  // 2^29.7, still inside int32 but rounded to the nearest float. Negative entries wrap mod 2^32
  // when added as words, as PIR answers are.
  for (const int32_t q_max : {1 << 18, 1 << 24}) {
    SCOPED_TRACE(::testing::Message() << "q_max " << q_max);
    std::uniform_int_distribution<int32_t> q(-q_max, q_max);
    std::vector<uint32_t> pooled(kDim, 0);
    std::vector<int64_t> exact(kDim, 0);
    for (int r = 0; r < kBag; ++r) {
      std::vector<float> values(kDim);
      for (uint32_t i = 0; i < kDim; ++i) {
        const int32_t v = q(rng);
        values[i] = std::ldexp(static_cast<float>(v), -kFracBits);
        exact[i] += v;
      }
      std::vector<uint32_t> words(kDim);
      ASSERT_TRUE(EncodeRow(RowFormat::kFixed32, kFracBits, values, absl::MakeSpan(words)).ok());
      for (uint32_t i = 0; i < kDim; ++i) pooled[i] += words[i];
    }
    std::vector<float> sum(kDim), mean(kDim);
    ASSERT_TRUE(DecodePooledFixed(kFracBits, pooled, 1.0, absl::MakeSpan(sum)).ok());
    ASSERT_TRUE(DecodePooledFixed(kFracBits, pooled, kBag, absl::MakeSpan(mean)).ok());
    for (uint32_t i = 0; i < kDim; ++i) {
      const double exact_sum = std::ldexp(static_cast<double>(exact[i]), -kFracBits);
      EXPECT_EQ(sum[i], static_cast<float>(exact_sum));
      if (q_max == 1 << 18) {
        EXPECT_EQ(static_cast<double>(sum[i]), exact_sum);
      }
      EXPECT_EQ(mean[i], static_cast<float>(exact_sum / kBag));
    }
  }
}

TEST(PooledFixedTest, RejectsBadArguments) {
  std::vector<uint32_t> words(3);
  std::vector<float> values(3);
  EXPECT_EQ(DecodePooledFixed(16, words, 0.0, absl::MakeSpan(values)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePooledFixed(16, words, std::nan(""), absl::MakeSpan(values)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePooledFixed(32, words, 1.0, absl::MakeSpan(values)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePooledFixed(16, words, 1.0, absl::MakeSpan(values).subspan(1)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PooledFixedTest, ExactSumsBeyondInt32) {
  // bfv-bag returns exact int64 sums; the same values reduced mod 2^32 agree where they fit.
  const std::vector<int64_t> sums = {0, -1, (int64_t{1} << 40) + 3, -(int64_t{5} << 33), 123456789};
  std::vector<float> values(sums.size()), mean(sums.size());
  ASSERT_TRUE(DecodePooledFixed(16, sums, 1.0, absl::MakeSpan(values)).ok());
  ASSERT_TRUE(DecodePooledFixed(16, sums, 4.0, absl::MakeSpan(mean)).ok());
  for (size_t i = 0; i < sums.size(); ++i) {
    const double exact = std::ldexp(static_cast<double>(sums[i]), -16);
    EXPECT_EQ(values[i], static_cast<float>(exact)) << i;
    EXPECT_EQ(mean[i], static_cast<float>(exact / 4)) << i;
  }
  const std::vector<uint32_t> words = {0, 0xffffffffu, 3, 0, 123456789};
  std::vector<float> from_words(words.size());
  ASSERT_TRUE(DecodePooledFixed(16, words, 1.0, absl::MakeSpan(from_words)).ok());
  for (size_t i : {0, 1, 4}) EXPECT_EQ(from_words[i], values[i]) << i;
  EXPECT_EQ(DecodePooledFixed(16, sums, 0.0, absl::MakeSpan(values)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePooledFixed(-1, sums, 1.0, absl::MakeSpan(values)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RowCodecTest, RejectsBadShapes) {
  const std::vector<float> values(5, 1.0f);
  std::vector<uint32_t> words(8);
  for (RowFormat format : kAllFormats) {
    absl::Status status = EncodeRow(format, 16, values, absl::MakeSpan(words));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << RowFormatName(format);
    EXPECT_THAT(status.message(), HasSubstr("words, got 8"));
    std::vector<float> decoded(5);
    EXPECT_EQ(DecodeRow(format, 16, 5, words, absl::MakeSpan(decoded)).code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(EncodeRow(static_cast<RowFormat>(0), 0, values, absl::MakeSpan(words)).message(),
              HasSubstr("unknown row format"));
  EXPECT_THAT(EncodeRow(RowFormat::kFp32, 0, {}, {}).message(), HasSubstr("dim 0"));
  EXPECT_THAT(
      EncodeRow(RowFormat::kFixed32, 32, values, absl::MakeSpan(words).subspan(0, 5)).message(),
      HasSubstr("frac_bits 32"));
  EXPECT_THAT(
      EncodeRow(RowFormat::kFixed32, -1, values, absl::MakeSpan(words).subspan(0, 5)).message(),
      HasSubstr("frac_bits -1"));
  // frac_bits means nothing to the other formats.
  EXPECT_TRUE(EncodeRow(RowFormat::kFp32, -1, values, absl::MakeSpan(words).subspan(0, 5)).ok());
  std::vector<float> short_values(4);
  EXPECT_THAT(DecodeRow(RowFormat::kFp32, 0, 5, absl::MakeConstSpan(words).subspan(0, 5),
                        absl::MakeSpan(short_values))
                  .message(),
              HasSubstr("dim is 5"));
  std::vector<uint32_t> int8_words(RowWords(RowFormat::kInt8RowWise, 5));
  EXPECT_THAT(EncodeRow(RowFormat::kInt8RowWise, 0,
                        std::vector<float>{1, 2, std::numeric_limits<float>::infinity(), 4, 5},
                        absl::MakeSpan(int8_words))
                  .message(),
              HasSubstr("at index 2"));
}

}  // namespace
}  // namespace veil::embedding
