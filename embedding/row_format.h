// Row formats of an embedding table: how `dim` float values become the 32-bit words of one PIR row
// and back. PIR returns rows word by word (additive shares mod 2^32), so every format is a whole
// number of words; fixed-point rows also survive being summed mod 2^32 (pooled lookups).
#ifndef VEIL_EMBEDDING_ROW_FORMAT_H_
#define VEIL_EMBEDDING_ROW_FORMAT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace veil::embedding {

// The numeric values are stored in table headers: never renumber.
enum class RowFormat : uint8_t {
  // dim IEEE binary32 words, bit-exact.
  kFp32 = 1,
  // IEEE binary16, two per word: value 2i in the low half of word i, 2i+1 in the high half (zero
  // when dim is odd).
  kFp16 = 2,
  // FBGEMM's fused 8-bit row-wise layout: ceil(dim/4) words of signed bytes (value i in byte i % 4,
  // little-endian, of word i / 4), then an fp32 scale word and an fp32 bias word;
  // value = scale * q + bias. Signed (not FBGEMM's unsigned) so that the GPU's INT8 tensor-core
  // path can read the bytes as s8 directly.
  kInt8RowWise = 3,
  // Two's-complement int32 fixed point, value = q / 2^frac_bits. Rows summed mod 2^32 stay exact
  // as long as the true sum fits in int32: this is the format of pooled (EmbeddingBag) lookups.
  kFixed32 = 4,
};

// Largest dimension accepted anywhere (header, encoder, builder): bounds every size computation
// so that none can overflow.
inline constexpr uint32_t kMaxDim = 1u << 20;

// Largest frac_bits of kFixed32 (2^31 would leave no integer bit for the sign).
inline constexpr int kMaxFracBits = 31;

// Row strides are multiples of this many words: 16 words = 64 bytes, a cache line and the leaf
// block of the additive DPF, so that every row of a mapped table starts 64-byte aligned.
inline constexpr uint32_t kRowAlignWords = 16;

// "fp32", "fp16", "int8", "fixed". Returns INVALID_ARGUMENT naming the accepted names otherwise.
absl::StatusOr<RowFormat> ParseRowFormat(absl::string_view name);

// The name ParseRowFormat accepts, or "unknown(N)" for a value outside the enum.
std::string RowFormatName(RowFormat format);

// True for the four formats above (a header byte may hold anything).
bool IsKnownRowFormat(RowFormat format);

// Words of one row of `dim` values, or 0 for an unknown format.
uint32_t RowWords(RowFormat format, uint32_t dim);

// Words between the starts of consecutive rows: row_words rounded up to kRowAlignWords.
uint64_t RowStrideWords(uint32_t row_words);

// IEEE binary32 → binary16, rounding to nearest, ties to even; overflow gives infinity, NaN stays
// NaN (quiet, sign and top payload bits kept).
uint16_t FloatToHalf(float value);

// IEEE binary16 → binary32 (exact).
float HalfToFloat(uint16_t half);

// Encodes values (dim = values.size()) into words. frac_bits matters only for kFixed32.
// Returns INVALID_ARGUMENT if the format is unknown, dim is 0 or above kMaxDim, words.size() is
// not RowWords(format, dim), frac_bits is outside [0, kMaxFracBits] (kFixed32), a value is NaN or
// infinite (kInt8RowWise, kFixed32), or a value does not fit in int32 after scaling (kFixed32).
absl::Status EncodeRow(RowFormat format, int frac_bits, absl::Span<const float> values,
                       absl::Span<uint32_t> words);

// Decodes (dequantizes) one row into values (values.size() == dim).
// Returns INVALID_ARGUMENT if the format is unknown, dim is 0 or above kMaxDim, words.size() is
// not RowWords(format, dim), values.size() is not dim, or frac_bits is outside [0, kMaxFracBits]
// (kFixed32).
absl::Status DecodeRow(RowFormat format, int frac_bits, uint32_t dim,
                       absl::Span<const uint32_t> words, absl::Span<float> values);

// Decodes the word-wise sum mod 2^32 of several kFixed32 rows (a pooled PIR answer) and divides
// by `divisor` (1 for a sum, the bag size for a mean, the sum of weights for a weighted mean).
// Each value is the float nearest to the exact pooled value, provided the true integer sum fits
// in int32. Returns INVALID_ARGUMENT if frac_bits is outside [0, kMaxFracBits], words and values
// differ in size, or divisor is zero, NaN or infinite.
absl::Status DecodePooledFixed(int frac_bits, absl::Span<const uint32_t> words, double divisor,
                               absl::Span<float> values);
// The same for exact integer sums (a bfv-bag answer): value = sum / 2^frac_bits / divisor, the
// float nearest to it for sums below 2^53 in magnitude.
absl::Status DecodePooledFixed(int frac_bits, absl::Span<const int64_t> sums, double divisor,
                               absl::Span<float> values);

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_ROW_FORMAT_H_
