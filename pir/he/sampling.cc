#include "pir/he/sampling.h"

#include <sodium.h>

#include <vector>

namespace veil::he {
namespace {

// Bit-sliced popcount (no table, no data-dependent branch).
uint64_t PopCount(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return (x * 0x0101010101010101ULL) >> 56;
}

// Writes the small signed values v[c] (|v| < every modulus) as residues: v + (q if v < 0).
void WriteSigned(absl::Span<const Modulus> moduli, size_t n, const int64_t* v, uint64_t* out) {
  for (size_t j = 0; j < moduli.size(); ++j) {
    const uint64_t q = moduli[j].value();
    for (size_t c = 0; c < n; ++c) {
      const uint64_t x = static_cast<uint64_t>(v[c]);
      out[j * n + c] = x + (q & (0 - (x >> 63)));
    }
  }
}

// Fills v with n secret signed values, each made by f from 8 random bytes; wipes what it drew.
// The bytes are ChaCha20's stream under a fresh 32-byte seed from the system (libsodium's
// randombytes_buf_deterministic): one system call instead of one per 256 bytes.
template <class F>
void SampleSigned(absl::Span<const Modulus> moduli, size_t n, uint64_t* out, F f) {
  std::vector<uint64_t> random(n);
  std::vector<int64_t> v(n);
  unsigned char seed[randombytes_SEEDBYTES];
  randombytes_buf(seed, sizeof(seed));
  randombytes_buf_deterministic(random.data(), n * sizeof(uint64_t), seed);
  sodium_memzero(seed, sizeof(seed));
  for (size_t c = 0; c < n; ++c) v[c] = f(random[c]);
  WriteSigned(moduli, n, v.data(), out);
  sodium_memzero(random.data(), n * sizeof(uint64_t));
  sodium_memzero(v.data(), n * sizeof(int64_t));
}

}  // namespace

Seed RandomSeed() {
  Seed s;
  randombytes_buf(s.data(), s.size());
  return s;
}

void ExpandUniform(const Seed& seed, uint32_t domain, absl::Span<const Modulus> moduli, size_t n,
                   uint64_t* out) {
  constexpr size_t kChunkWords = 512;  // 4 KiB = 64 ChaCha20 blocks
  std::vector<uint64_t> chunk(kChunkWords);
  for (size_t j = 0; j < moduli.size(); ++j) {
    const Modulus& m = moduli[j];
    const uint64_t limit = (~uint64_t{0} / m.value()) * m.value();  // x < limit: x mod q uniform
    uint8_t nonce[crypto_stream_chacha20_ietf_NONCEBYTES] = {};
    for (int b = 0; b < 4; ++b) {
      nonce[b] = static_cast<uint8_t>(domain >> (8 * b));
      nonce[4 + b] = static_cast<uint8_t>(j >> (8 * b));
    }
    uint32_t block = 0;
    size_t c = 0;
    while (c < n) {
      std::fill(chunk.begin(), chunk.end(), 0);
      crypto_stream_chacha20_ietf_xor_ic(reinterpret_cast<uint8_t*>(chunk.data()),
                                         reinterpret_cast<const uint8_t*>(chunk.data()),
                                         kChunkWords * 8, nonce, block, seed.data());
      block += kChunkWords * 8 / 64;
      for (size_t w = 0; w < kChunkWords && c < n; ++w) {
        if (chunk[w] < limit) out[j * n + c++] = m.Reduce(chunk[w]);
      }
    }
  }
}

void SampleTernary(absl::Span<const Modulus> moduli, size_t n, uint64_t* out) {
  // floor(r * 3 / 2^64) is uniform on {0, 1, 2} up to a bias below 2^-62.
  SampleSigned(moduli, n, out, [](uint64_t r) { return static_cast<int64_t>(MulHi64(r, 3)) - 1; });
}

void SampleError(absl::Span<const Modulus> moduli, size_t n, uint64_t* out) {
  constexpr uint64_t kMask = (uint64_t{1} << kErrorBound) - 1;
  SampleSigned(moduli, n, out, [](uint64_t r) {
    return static_cast<int64_t>(PopCount(r & kMask)) -
           static_cast<int64_t>(PopCount((r >> kErrorBound) & kMask));
  });
}

}  // namespace veil::he
