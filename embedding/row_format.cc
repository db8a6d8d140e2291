#include "embedding/row_format.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace veil::embedding {
namespace {

// Trailing fp32 words of a kInt8RowWise row: scale, then bias.
constexpr uint32_t kInt8TrailerWords = 2;

absl::Status CheckDim(uint64_t dim) {
  if (dim == 0 || dim > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat("dim ", dim, " is outside [1, ", kMaxDim, "]"));
  }
  return absl::OkStatus();
}

absl::Status CheckFracBits(int frac_bits) {
  if (frac_bits < 0 || frac_bits > kMaxFracBits) {
    return absl::InvalidArgumentError(
        absl::StrCat("frac_bits ", frac_bits, " is outside [0, ", kMaxFracBits, "]"));
  }
  return absl::OkStatus();
}

// The checks EncodeRow and DecodeRow share: a known format, a valid dim and frac_bits, and a word
// span of exactly one row.
absl::Status CheckRowShape(RowFormat format, int frac_bits, uint64_t dim, size_t words) {
  if (!IsKnownRowFormat(format)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown row format ", RowFormatName(format)));
  }
  if (absl::Status status = CheckDim(dim); !status.ok()) return status;
  if (format == RowFormat::kFixed32) {
    if (absl::Status status = CheckFracBits(frac_bits); !status.ok()) return status;
  }
  const uint32_t row_words = RowWords(format, static_cast<uint32_t>(dim));
  if (words != row_words) {
    return absl::InvalidArgumentError(absl::StrCat("a ", RowFormatName(format), " row of dim ", dim,
                                                   " has ", row_words, " words, got ", words));
  }
  return absl::OkStatus();
}

absl::Status CheckFinite(RowFormat format, absl::Span<const float> values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      return absl::InvalidArgumentError(
          absl::StrCat(RowFormatName(format), " cannot encode value ", values[i], " at index ", i));
    }
  }
  return absl::OkStatus();
}

void EncodeInt8RowWise(absl::Span<const float> values, absl::Span<uint32_t> words) {
  const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  // Doubles: max - min of two finite floats can overflow float but not double.
  const double min = *min_it;
  const float scale = static_cast<float>((static_cast<double>(*max_it) - min) / 255.0);
  // q runs over [-128, 127], so the bias sits 128 steps above the minimum. A constant row
  // (scale 0) is all bias.
  const float bias =
      scale == 0.0f ? static_cast<float>(min) : static_cast<float>(min + 128.0 * scale);
  const uint32_t data_words = static_cast<uint32_t>(words.size()) - kInt8TrailerWords;
  std::fill(words.begin(), words.begin() + data_words, 0u);
  for (size_t i = 0; i < values.size(); ++i) {
    // Rounded against the stored (rounded) bias and scale, so that the decoder's error stays
    // within scale / 2 up to float rounding.
    const double q =
        scale == 0.0f ? 0.0
                      : std::clamp(std::nearbyint((values[i] - static_cast<double>(bias)) / scale),
                                   -128.0, 127.0);
    const uint32_t byte = static_cast<uint8_t>(static_cast<int8_t>(q));
    words[i / 4] |= byte << (8 * (i % 4));
  }
  words[data_words] = std::bit_cast<uint32_t>(scale);
  words[data_words + 1] = std::bit_cast<uint32_t>(bias);
}

void DecodeInt8RowWise(absl::Span<const uint32_t> words, absl::Span<float> values) {
  const size_t data_words = words.size() - kInt8TrailerWords;
  const float scale = std::bit_cast<float>(words[data_words]);
  const float bias = std::bit_cast<float>(words[data_words + 1]);
  for (size_t i = 0; i < values.size(); ++i) {
    const int8_t q = static_cast<int8_t>(words[i / 4] >> (8 * (i % 4)));
    values[i] = scale * static_cast<float>(q) + bias;
  }
}

absl::Status EncodeFixed32(int frac_bits, absl::Span<const float> values,
                           absl::Span<uint32_t> words) {
  for (size_t i = 0; i < values.size(); ++i) {
    // Exact in double (a float times a power of two); nearbyint rounds ties to even.
    const double q = std::nearbyint(std::ldexp(static_cast<double>(values[i]), frac_bits));
    if (q < -2147483648.0 || q > 2147483647.0) {
      return absl::InvalidArgumentError(absl::StrCat("value ", values[i], " at index ", i,
                                                     " does not fit fixed-point int32 with ",
                                                     frac_bits, " fractional bits"));
    }
    words[i] = static_cast<uint32_t>(static_cast<int32_t>(q));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RowFormat> ParseRowFormat(absl::string_view name) {
  for (RowFormat format :
       {RowFormat::kFp32, RowFormat::kFp16, RowFormat::kInt8RowWise, RowFormat::kFixed32}) {
    if (name == RowFormatName(format)) return format;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown row format '", name, "' (expected fp32, fp16, int8 or fixed)"));
}

std::string RowFormatName(RowFormat format) {
  switch (format) {
    case RowFormat::kFp32:
      return "fp32";
    case RowFormat::kFp16:
      return "fp16";
    case RowFormat::kInt8RowWise:
      return "int8";
    case RowFormat::kFixed32:
      return "fixed";
  }
  return absl::StrCat("unknown(", static_cast<int>(format), ")");
}

bool IsKnownRowFormat(RowFormat format) {
  switch (format) {
    case RowFormat::kFp32:
    case RowFormat::kFp16:
    case RowFormat::kInt8RowWise:
    case RowFormat::kFixed32:
      return true;
  }
  return false;
}

uint32_t RowWords(RowFormat format, uint32_t dim) {
  // 64-bit intermediates: dim + 3 must not wrap for any dim.
  const uint64_t d = dim;
  switch (format) {
    case RowFormat::kFp32:
    case RowFormat::kFixed32:
      return dim;
    case RowFormat::kFp16:
      return static_cast<uint32_t>((d + 1) / 2);
    case RowFormat::kInt8RowWise:
      return static_cast<uint32_t>((d + 3) / 4 + kInt8TrailerWords);
  }
  return 0;
}

uint64_t RowStrideWords(uint32_t row_words) {
  return (static_cast<uint64_t>(row_words) + kRowAlignWords - 1) / kRowAlignWords * kRowAlignWords;
}

uint16_t FloatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) {
    // NaN: force the quiet bit so that dropping low payload bits cannot turn it into infinity.
    return sign | 0x7e00u | static_cast<uint16_t>((abs >> 13) & 0x3ffu);
  }
  // 65520 = 0x477ff000 is halfway between the largest half (65504, odd mantissa) and 2^16: the tie
  // goes to the even neighbour, infinity.
  if (abs >= 0x477ff000u) return sign | 0x7c00u;
  if (abs < 0x38800000u) {
    // Below 2^-14: a half subnormal, q * 2^-24. Under 2^-25 rounds to zero (exactly 2^-25 is a tie
    // with even zero), which also covers float zeros and subnormals.
    const uint32_t exponent = abs >> 23;
    if (exponent < 102) return sign;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;  // 14..24
    uint32_t q = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1);
    const uint32_t half_ulp = 1u << (shift - 1);
    if (rest > half_ulp || (rest == half_ulp && (q & 1u))) ++q;  // may carry into 2^-14: correct
    return sign | static_cast<uint16_t>(q);
  }
  // Normal: rebias the exponent (127 → 15) and drop 13 mantissa bits, rounding to nearest even.
  // A carry out of the mantissa correctly bumps the exponent.
  uint32_t half = (abs - 0x38000000u) >> 13;
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return sign | static_cast<uint16_t>(half);
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24, exact in float.
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

absl::Status EncodeRow(RowFormat format, int frac_bits, absl::Span<const float> values,
                       absl::Span<uint32_t> words) {
  if (absl::Status status = CheckRowShape(format, frac_bits, values.size(), words.size());
      !status.ok()) {
    return status;
  }
  const uint32_t dim = static_cast<uint32_t>(values.size());
  switch (format) {
    case RowFormat::kFp32:
      std::memcpy(words.data(), values.data(), dim * sizeof(float));
      return absl::OkStatus();
    case RowFormat::kFp16:
      std::fill(words.begin(), words.end(), 0u);
      for (uint32_t i = 0; i < dim; ++i) {
        words[i / 2] |= static_cast<uint32_t>(FloatToHalf(values[i])) << (16 * (i % 2));
      }
      return absl::OkStatus();
    case RowFormat::kInt8RowWise:
      if (absl::Status status = CheckFinite(format, values); !status.ok()) return status;
      EncodeInt8RowWise(values, words);
      return absl::OkStatus();
    case RowFormat::kFixed32:
      if (absl::Status status = CheckFinite(format, values); !status.ok()) return status;
      return EncodeFixed32(frac_bits, values, words);
  }
  return absl::InternalError("unreachable: format checked above");
}

absl::Status DecodeRow(RowFormat format, int frac_bits, uint32_t dim,
                       absl::Span<const uint32_t> words, absl::Span<float> values) {
  if (absl::Status status = CheckRowShape(format, frac_bits, dim, words.size()); !status.ok()) {
    return status;
  }
  if (values.size() != dim) {
    return absl::InvalidArgumentError(
        absl::StrCat("values has ", values.size(), " entries, dim is ", dim));
  }
  switch (format) {
    case RowFormat::kFp32:
      std::memcpy(values.data(), words.data(), dim * sizeof(float));
      return absl::OkStatus();
    case RowFormat::kFp16:
      for (uint32_t i = 0; i < dim; ++i) {
        values[i] = HalfToFloat(static_cast<uint16_t>(words[i / 2] >> (16 * (i % 2))));
      }
      return absl::OkStatus();
    case RowFormat::kInt8RowWise:
      DecodeInt8RowWise(words, values);
      return absl::OkStatus();
    case RowFormat::kFixed32:
      // A single row is a pool of one.
      return DecodePooledFixed(frac_bits, words, 1.0, values);
  }
  return absl::InternalError("unreachable: format checked above");
}

namespace {

// The body of both DecodePooledFixed: `as_integer` reads one entry as the integer sum it stands for.
template <typename T, typename AsInteger>
absl::Status DecodePooled(int frac_bits, absl::Span<const T> sums, double divisor,
                          absl::Span<float> values, AsInteger as_integer) {
  if (absl::Status status = CheckFracBits(frac_bits); !status.ok()) return status;
  if (sums.size() != values.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("words has ", sums.size(), " entries, values has ", values.size()));
  }
  if (divisor == 0.0 || !std::isfinite(divisor)) {
    return absl::InvalidArgumentError(absl::StrCat("divisor ", divisor, " is zero or not finite"));
  }
  for (size_t i = 0; i < sums.size(); ++i) {
    // The scaling by 2^-frac_bits is exact in double.
    const double sum = std::ldexp(static_cast<double>(as_integer(sums[i])), -frac_bits);
    values[i] = static_cast<float>(sum / divisor);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status DecodePooledFixed(int frac_bits, absl::Span<const uint32_t> words, double divisor,
                               absl::Span<float> values) {
  // The sum mod 2^32 read as two's complement is the true sum when that fits in int32.
  return DecodePooled(frac_bits, words, divisor, values,
                      [](uint32_t word) { return static_cast<int32_t>(word); });
}

absl::Status DecodePooledFixed(int frac_bits, absl::Span<const int64_t> sums, double divisor,
                               absl::Span<float> values) {
  return DecodePooled(frac_bits, sums, divisor, values, [](int64_t sum) { return sum; });
}

}  // namespace veil::embedding
