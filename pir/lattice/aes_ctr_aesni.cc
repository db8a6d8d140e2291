// AES-NI counter mode (compiled with -maes): 8 blocks in flight to cover the AES latency, for
// x86 CPUs without VAES.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "pir/lattice/aes_ctr.h"

namespace veil::lattice::internal {

void AesCtrAesNi(const AesCtrKey& key, uint64_t first_block, uint64_t blocks, uint8_t* out) {
  constexpr int kInFlight = 8;
  __m128i rk[11];
  for (int r = 0; r < 11; ++r) {
    rk[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key.round_keys.bytes + 16 * r));
  }
  for (uint64_t i = 0; i < blocks; i += kInFlight) {
    __m128i s[kInFlight];
    for (int u = 0; u < kInFlight; ++u) {
      s[u] = _mm_xor_si128(_mm_set_epi64x(0, static_cast<int64_t>(first_block + i + u)), rk[0]);
    }
    for (int r = 1; r < 10; ++r) {
      for (int u = 0; u < kInFlight; ++u) s[u] = _mm_aesenc_si128(s[u], rk[r]);
    }
    alignas(16) uint8_t block[16 * kInFlight];
    for (int u = 0; u < kInFlight; ++u) {
      _mm_store_si128(reinterpret_cast<__m128i*>(block + 16 * u),
                      _mm_aesenclast_si128(s[u], rk[10]));
    }
    std::memcpy(out + 16 * i, block, 16 * std::min<uint64_t>(kInFlight, blocks - i));
  }
}

}  // namespace veil::lattice::internal
