// AES-NI kernels on 128-bit lanes (compiled with -maes -mavx2). Eight blocks are kept in flight so
// the AES unit's latency is hidden. ChaCha and SipHash use the generic code, vectorised by the
// compiler; both are add-rotate-xor and constant time as written.
#include <immintrin.h>

#include "dpf/kernels.h"
#include "dpf/kernels_generic.h"

namespace veil::dpf {
namespace {

constexpr int kLanes = 8;

struct AesKeys128 {
  __m128i rk[11];
};

AesKeys128 LoadKeys(const AesRoundKeys& keys) {
  AesKeys128 out;
  for (int i = 0; i < 11; ++i) {
    out.rk[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(keys.bytes + 16 * i));
  }
  return out;
}

__m128i Sigma128(__m128i x) {
  // (lo, hi) -> (hi, hi ^ lo)
  __m128i swapped = _mm_shuffle_epi32(x, 0x4e);
  __m128i hi_only = _mm_and_si128(x, _mm_set_epi64x(-1, 0));
  return _mm_xor_si128(swapped, hi_only);
}

// x[i] = AES_k(x[i]) ^ x[i] for U blocks in flight.
template <int U>
void MmoBlocks(const AesKeys128& k, __m128i* x) {
  __m128i s[U];
  for (int u = 0; u < U; ++u) s[u] = _mm_xor_si128(x[u], k.rk[0]);
  for (int r = 1; r < 10; ++r) {
    for (int u = 0; u < U; ++u) s[u] = _mm_aesenc_si128(s[u], k.rk[r]);
  }
  for (int u = 0; u < U; ++u) x[u] = _mm_xor_si128(_mm_aesenclast_si128(s[u], k.rk[10]), x[u]);
}

__m128i ControlMask(__m128i node) {
  __m128i bit = _mm_and_si128(node, _mm_set_epi64x(0, 1));
  return _mm_shuffle_epi32(_mm_sub_epi64(_mm_setzero_si128(), bit), 0x44);
}

template <int U>
void ExpandAes(const AesKeys128& kl, const AesKeys128& kr, const Block* parents, __m128i cwl,
               __m128i cwr, Block* children) {
  const __m128i clear = _mm_set_epi64x(-1, -2);
  __m128i p[U], left[U], right[U];
  for (int u = 0; u < U; ++u) {
    p[u] = _mm_load_si128(reinterpret_cast<const __m128i*>(parents + u));
    left[u] = Sigma128(_mm_and_si128(p[u], clear));
    right[u] = left[u];
  }
  MmoBlocks<U>(kl, left);
  MmoBlocks<U>(kr, right);
  for (int u = 0; u < U; ++u) {
    __m128i m = ControlMask(p[u]);
    _mm_store_si128(reinterpret_cast<__m128i*>(children + 2 * u),
                    _mm_xor_si128(left[u], _mm_and_si128(m, cwl)));
    _mm_store_si128(reinterpret_cast<__m128i*>(children + 2 * u + 1),
                    _mm_xor_si128(right[u], _mm_and_si128(m, cwr)));
  }
}

void ExpandLevelAesNi(Prg prg, const Block* parents, size_t n, Block cw_left, bool cw_right,
                      Block* children) {
  if (prg != Prg::kAes128) {
    GenericExpandLevel(prg, parents, n, cw_left, cw_right, children);
    return;
  }
  static const AesKeys128 kl = LoadKeys(kAesRoundKeysLeft);
  static const AesKeys128 kr = LoadKeys(kAesRoundKeysRight);
  const __m128i cwl = _mm_set_epi64x(cw_left.hi, cw_left.lo);
  const __m128i cwr =
      _mm_set_epi64x(cw_left.hi, (cw_left.lo & ~uint64_t{1}) | uint64_t(cw_right));
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) ExpandAes<kLanes>(kl, kr, parents + i, cwl, cwr, children + 2 * i);
  for (; i < n; ++i) ExpandAes<1>(kl, kr, parents + i, cwl, cwr, children + 2 * i);
}

// Additive leaves: V_i = H_kV(s ^ i); sigma(s ^ i) = sigma(s) ^ (i in the high half).
void ConvertAddAesNi(const Block* leaves, size_t n, int words, bool party1,
                     const uint32_t* final_cw, uint32_t* values) {
  static const AesKeys128 kv = LoadKeys(kAesRoundKeysValue);
  const int blocks = (words + 3) / 4;
  const __m128i clear = _mm_set_epi64x(-1, -2);
  const __m128i neg = _mm_set1_epi32(party1 ? -1 : 0);
  alignas(16) uint32_t cw[16] = {};
  for (int i = 0; i < words; ++i) cw[i] = final_cw[i];
  for (size_t leaf = 0; leaf < n; leaf += 2) {
    const int count = leaf + 1 < n ? 2 : 1;
    __m128i x[8], m[2];
    for (int c = 0; c < count; ++c) {
      __m128i node = _mm_load_si128(reinterpret_cast<const __m128i*>(leaves + leaf + c));
      m[c] = _mm_set1_epi32(-static_cast<int>(leaves[leaf + c].lo & 1));
      __m128i s = Sigma128(_mm_and_si128(node, clear));
      for (int b = 0; b < 4; ++b) x[4 * c + b] = _mm_xor_si128(s, _mm_set_epi64x(b, 0));
    }
    if (count == 2) {
      MmoBlocks<8>(kv, x);
    } else {
      MmoBlocks<4>(kv, x);
    }
    for (int c = 0; c < count; ++c) {
      alignas(16) uint32_t out[16];
      for (int b = 0; b < blocks; ++b) {
        __m128i cwb = _mm_load_si128(reinterpret_cast<const __m128i*>(cw + 4 * b));
        __m128i v = _mm_add_epi32(x[4 * c + b], _mm_and_si128(m[c], cwb));
        v = _mm_sub_epi32(_mm_xor_si128(v, neg), neg);
        _mm_store_si128(reinterpret_cast<__m128i*>(out + 4 * b), v);
      }
      uint32_t* dst = values + (leaf + c) * words;
      for (int i = 0; i < words; ++i) dst[i] = out[i];
    }
  }
}

template <int U>
void ConvertXorAes(const AesKeys128& kv, const Block* leaves, __m128i cw, uint32_t* values) {
  const __m128i clear = _mm_set_epi64x(-1, -2);
  __m128i x[U], m[U];
  for (int u = 0; u < U; ++u) {
    __m128i node = _mm_load_si128(reinterpret_cast<const __m128i*>(leaves + u));
    m[u] = ControlMask(node);
    x[u] = Sigma128(_mm_and_si128(node, clear));
  }
  MmoBlocks<U>(kv, x);
  for (int u = 0; u < U; ++u) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(values + 4 * u),
                     _mm_xor_si128(x[u], _mm_and_si128(m[u], cw)));
  }
}

void ConvertLeavesAesNi(Prg prg, const Block* leaves, size_t n, int words, OutputType output,
                        bool party1, const uint32_t* final_cw, uint32_t* values) {
  if (prg != Prg::kAes128) {
    GenericConvertLeaves(prg, leaves, n, words, output, party1, final_cw, values);
    return;
  }
  if (output == OutputType::kAdditive) {
    ConvertAddAesNi(leaves, n, words, party1, final_cw, values);
    return;
  }
  static const AesKeys128 kv = LoadKeys(kAesRoundKeysValue);
  const __m128i cw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(final_cw));
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) ConvertXorAes<kLanes>(kv, leaves + i, cw, values + 4 * i);
  for (; i < n; ++i) ConvertXorAes<1>(kv, leaves + i, cw, values + 4 * i);
}

}  // namespace

const Kernels& AesNiAvx2Kernels() {
  static const Kernels kernels = {ExpandLevelAesNi, ConvertLeavesAesNi, GenericMacAdd,
                                  GenericMacXor};
  return kernels;
}

}  // namespace veil::dpf
