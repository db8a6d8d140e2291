// VAES counter mode (compiled with -maes -mvaes -mavx512f): 8 vectors of 4 counter blocks each in
// flight to cover the AES latency.
#include <immintrin.h>

#include <cstring>

#include "pir/lattice/aes_ctr.h"

namespace veil::lattice::internal {
namespace {

constexpr int kVectors = 8;

template <int U>
void EncryptCounters(const __m512i (&rk)[11], uint64_t block, uint8_t* out) {
  __m512i s[U];
  for (int u = 0; u < U; ++u) {
    const uint64_t b = block + 4 * u;
    s[u] = _mm512_xor_si512(_mm512_set_epi64(0, b + 3, 0, b + 2, 0, b + 1, 0, b), rk[0]);
  }
  for (int r = 1; r < 10; ++r) {
    for (int u = 0; u < U; ++u) s[u] = _mm512_aesenc_epi128(s[u], rk[r]);
  }
  for (int u = 0; u < U; ++u) {
    _mm512_storeu_si512(out + 64 * u, _mm512_aesenclast_epi128(s[u], rk[10]));
  }
}

}  // namespace

void AesCtrVaes(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out) {
  __m512i rk[11];
  for (int r = 0; r < 11; ++r) {
    rk[r] = _mm512_broadcast_i32x4(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(key.round_keys.bytes + 16 * r)));
  }
  uint64_t i = 0;
  for (; i + 4 * kVectors <= blocks; i += 4 * kVectors) {
    EncryptCounters<kVectors>(rk, first_block + i, out + 16 * i);
  }
  if (i < blocks) {
    alignas(64) uint8_t tail[64 * kVectors];
    EncryptCounters<kVectors>(rk, first_block + i, tail);
    std::memcpy(out + 16 * i, tail, 16 * (blocks - i));
  }
}

}  // namespace veil::lattice::internal
