#include "pir/lattice/lwe.h"

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "pir/lattice/kernels.h"

namespace veil::lattice {
namespace {

// round(2^64 * P(|x| <= k)) for the discrete Gaussian rho(x) = exp(-x^2 / (2 * 6.4^2)), k = 0..57,
// computed with 80-digit decimal arithmetic (Python's decimal module); P(|x| <= 58) rounds to 1.
// tests/pir/lattice/lwe_test.cc recomputes it in long double.
constexpr uint64_t kErrorCdt[] = {
    0x0ff52b4064a1f258ull, 0x2f7c60a73fd7d188ull, 0x4de15b3adda5de9eull, 0x6a799fecc5149eefull,
    0x84ba5c80f0e2593cull, 0x9c3fd98e6afdaf5full, 0xb0d0b93423b946aaull, 0xc25d070e855a7576ull,
    0xd0f9ae4b2490f23full, 0xdcd9536a8bf79cc4ull, 0xe643c2b8ef9964cfull, 0xed8d2178b2b4bc36ull,
    0xf30ddfa949d92128ull, 0xf71c1bc6a8d9fb0cull, 0xfa06d38c8efbeab1ull, 0xfc12ed48cfb3cf25ull,
    0xfd79e80f7da63de0ull, 0xfe69db7106258600ull, 0xff0660b4e9f72366ull, 0xff6a039e19247fe6ull,
    0xffa7e8f42ad7bcedull, 0xffcd6ef1c645c418ull, 0xffe3a1f98533f959ull, 0xfff0730a41da5dd4ull,
    0xfff7aba82bcfb232ull, 0xfffba41563f3b337ull, 0xfffdc577a82fd265ull, 0xfffee30bc5a8f0a9ull,
    0xffff74f9faff9336ull, 0xffffbdbf955dc9f8ull, 0xffffe129a302737cull, 0xfffff1fb3360804eull,
    0xfffff9c6a44fff1dull, 0xfffffd4d2317515full, 0xfffffedb78be786eull, 0xffffff870b5bba04ull,
    0xffffffcf29a52629ull, 0xffffffecbeda851eull, 0xfffffff896734c9aull, 0xfffffffd36bef16aull,
    0xfffffffefa3bc3e8ull, 0xffffffffa233c84aull, 0xffffffffdf2f6ca6ull, 0xfffffffff4cab458ull,
    0xfffffffffc433283ull, 0xfffffffffec882e6ull, 0xffffffffff9d0076ull, 0xffffffffffe1489aull,
    0xfffffffffff6b235ull, 0xfffffffffffd3fb9ull, 0xffffffffffff34b5ull, 0xffffffffffffc6b7ull,
    0xfffffffffffff03eull, 0xfffffffffffffbc5ull, 0xfffffffffffffee4ull, 0xffffffffffffffb7ull,
    0xffffffffffffffeeull, 0xfffffffffffffffcull,
};
constexpr size_t kCdtSize = sizeof(kErrorCdt) / sizeof(kErrorCdt[0]);

// 1 if u >= t, else 0, from the borrow of the 128-bit subtraction (no branch, no compare flag
// turned into control flow).
inline uint32_t GreaterOrEqual(uint64_t u, uint64_t t) {
  const unsigned __int128 diff = static_cast<unsigned __int128>(u) - t;
  return 1u ^ static_cast<uint32_t>(diff >> 127);
}

// All ones if x == y, else 0, without a branch: the position of the hot entry is the client's
// secret, so it selects no memory address either (every entry gets Delta & mask).
inline uint32_t EqualMask(uint64_t x, uint64_t y) {
  const uint64_t d = x ^ y;
  return static_cast<uint32_t>((d | (0 - d)) >> 63) - 1u;
}

// Rows of A expanded at once by EncryptUnitVector: 64 rows = 256 KiB.
constexpr uint64_t kRowsPerBlock = 64;

}  // namespace

PublicMatrix::PublicMatrix(const Seed& seed, MatrixDomain domain, uint64_t rows) : rows_(rows) {
  uint8_t key[16];
  const uint8_t message = static_cast<uint8_t>(domain);
  crypto_generichash(key, sizeof(key), &message, 1, seed.data(), seed.size());
  key_ = internal::MakeAesCtrKey(key);
}

PublicMatrix::~PublicMatrix() = default;

void PublicMatrix::ExpandRows(uint64_t first, uint64_t count, absl::Span<uint32_t> out) const {
  constexpr uint64_t kBlocksPerRow = uint64_t{kLweDimension} * 4 / 16;
  // Words are little-endian on every platform we build for (embedding/table.h asserts it).
  internal::AesCtr(key_, first * kBlocksPerRow, count * kBlocksPerRow,
                   reinterpret_cast<uint8_t*>(out.data()));
}

RandomSource& SystemRandom() {
  class Sodium final : public RandomSource {
   public:
    void Fill(absl::Span<uint8_t> out) override { randombytes_buf(out.data(), out.size()); }
  };
  static Sodium source;
  return source;
}

void SampleSecret(RandomSource& rng, absl::Span<uint32_t> secret) {
  rng.Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(secret.data()), secret.size() * 4));
}

void SampleErrors(RandomSource& rng, absl::Span<int32_t> errors) {
  constexpr size_t kBatch = 64;  // samples per draw: 64 words of u and one word of signs
  uint64_t random[kBatch + 1];
  for (size_t start = 0; start < errors.size(); start += kBatch) {
    const size_t n = std::min(kBatch, errors.size() - start);
    rng.Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(random), sizeof(random)));
    const uint64_t signs = random[kBatch];
    for (size_t i = 0; i < n; ++i) {
      uint32_t magnitude = 0;
      for (size_t k = 0; k < kCdtSize; ++k) magnitude += GreaterOrEqual(random[i], kErrorCdt[k]);
      const uint32_t negative = static_cast<uint32_t>(signs >> i) & 1u;
      // negative ? -magnitude : magnitude, as (m ^ -s) + s.
      errors[start + i] = static_cast<int32_t>((magnitude ^ (0u - negative)) + negative);
    }
  }
  sodium_memzero(random, sizeof(random));
}

absl::Span<const uint64_t> ErrorCdtForTesting() { return absl::MakeConstSpan(kErrorCdt); }

void EncryptUnitVectors(const PublicMatrix& a, absl::Span<const uint32_t> secrets,
                        absl::Span<const int32_t> errors, absl::Span<const uint64_t> hots,
                        absl::Span<uint32_t> out) {
  const uint64_t m = a.rows();
  std::vector<uint32_t> block(std::min(kRowsPerBlock, m) * kLweDimension);
  for (uint64_t first = 0; first < m; first += kRowsPerBlock) {
    const uint64_t count = std::min<uint64_t>(kRowsPerBlock, m - first);
    const absl::Span<uint32_t> rows = absl::MakeSpan(block).first(count * kLweDimension);
    a.ExpandRows(first, count, rows);
    MultiplyWords(rows.data(), count, kLweDimension, secrets.data(), hots.size(),
                  out.data() + first, m);
    for (size_t j = 0; j < hots.size(); ++j) {
      for (uint64_t r = 0; r < count; ++r) {
        const uint64_t at = j * m + first + r;
        out[at] += static_cast<uint32_t>(errors[at]) + (kDelta & EqualMask(first + r, hots[j]));
      }
    }
  }
}

void EncryptFreshUnitVectors(const PublicMatrix& a, absl::Span<const uint64_t> hots,
                             RandomSource& rng, absl::Span<uint32_t> secrets,
                             absl::Span<uint32_t> out) {
  std::vector<int32_t> errors(out.size());
  SampleSecret(rng, secrets);
  SampleErrors(rng, absl::MakeSpan(errors));
  EncryptUnitVectors(a, secrets, errors, hots, out);
  sodium_memzero(errors.data(), errors.size() * sizeof(int32_t));
}

uint64_t NewClientId() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

void AddUnitVector(uint64_t hot, absl::Span<uint32_t> out) {
  for (uint64_t i = 0; i < out.size(); ++i) out[i] += kDelta & EqualMask(i, hot);
}

}  // namespace veil::lattice
