// VAES / AVX-512 kernels (compiled with -mvaes -mavx512f -mavx512bw -mavx512vl -maes). One
// 512-bit AES instruction encrypts four blocks, each 128-bit lane under its own round key, so a
// node's left and right children come out of one vector: lanes [s0, s0, s1, s1] under keys
// [kL, kR, kL, kR] give [L0, R0, L1, R1], already in the children's order. Eight vectors (32
// blocks) are in flight to cover the AES latency. ChaCha runs 16 seeds across the 16 lanes.
#include <immintrin.h>
#include <sodium.h>

#include "dpf/kernels.h"
#include "dpf/kernels_generic.h"

namespace veil::dpf {
namespace {

constexpr int kVectors = 8;
// Fewer ChaCha blocks than this run scalar; more run one padded 16-lane pass.
constexpr size_t kMinPaddedLanes = 3;

struct AesKeys512 {
  __m512i rk[11];
};

AesKeys512 LoadKeys(const AesRoundKeys& even, const AesRoundKeys& odd) {
  AesKeys512 out;
  for (int i = 0; i < 11; ++i) {
    __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(even.bytes + 16 * i));
    __m128i o = _mm_loadu_si128(reinterpret_cast<const __m128i*>(odd.bytes + 16 * i));
    __m256i eo = _mm256_inserti128_si256(_mm256_castsi128_si256(e), o, 1);
    out.rk[i] = _mm512_inserti64x4(_mm512_castsi256_si512(eo), eo, 1);
  }
  return out;
}

const AesKeys512& LeftRightKeys() {
  static const AesKeys512 keys = LoadKeys(kAesRoundKeysLeft, kAesRoundKeysRight);
  return keys;
}
const AesKeys512& ValueKeys() {
  static const AesKeys512 keys = LoadKeys(kAesRoundKeysValue, kAesRoundKeysValue);
  return keys;
}

__m512i Sigma512(__m512i x) {
  const __m512i hi_mask = _mm512_set_epi64(-1, 0, -1, 0, -1, 0, -1, 0);
  return _mm512_xor_si512(_mm512_shuffle_epi32(x, _MM_PERM_BADC), _mm512_and_si512(x, hi_mask));
}

__m512i ClearControl(__m512i x) {
  return _mm512_and_si512(x, _mm512_set_epi64(-1, -2, -1, -2, -1, -2, -1, -2));
}

// All ones in a 128-bit lane whose bit 0 is set.
__m512i ControlMask512(__m512i x) {
  __m512i bit = _mm512_and_si512(x, _mm512_set_epi64(0, 1, 0, 1, 0, 1, 0, 1));
  return _mm512_shuffle_epi32(_mm512_sub_epi64(_mm512_setzero_si512(), bit), _MM_PERM_BABA);
}

template <int U>
void MmoVectors(const AesKeys512& k, __m512i* x) {
  __m512i s[U];
  for (int u = 0; u < U; ++u) s[u] = _mm512_xor_si512(x[u], k.rk[0]);
  for (int r = 1; r < 10; ++r) {
    for (int u = 0; u < U; ++u) s[u] = _mm512_aesenc_epi128(s[u], k.rk[r]);
  }
  for (int u = 0; u < U; ++u) {
    x[u] = _mm512_xor_si512(_mm512_aesenclast_epi128(s[u], k.rk[10]), x[u]);
  }
}

// Expands `count` <= 2 * U parents; the last vector may hold a single parent.
template <int U>
void ExpandAesVectors(const Block* parents, int count, __m512i cw, Block* children) {
  const __m512i dup = _mm512_set_epi64(3, 2, 3, 2, 1, 0, 1, 0);
  __m512i p[U], x[U];
  for (int u = 0; u < U; ++u) {
    const __mmask8 lm = (count - 2 * u) >= 2 ? 0x0f : 0x03;
    __m512i raw = _mm512_maskz_loadu_epi64(lm, parents + 2 * u);
    p[u] = _mm512_permutexvar_epi64(dup, raw);
    x[u] = Sigma512(ClearControl(p[u]));
  }
  MmoVectors<U>(LeftRightKeys(), x);
  for (int u = 0; u < U; ++u) {
    const __mmask8 sm = (count - 2 * u) >= 2 ? 0xff : 0x0f;
    __m512i out = _mm512_xor_si512(x[u], _mm512_and_si512(ControlMask512(p[u]), cw));
    _mm512_mask_storeu_epi64(children + 4 * u, sm, out);
  }
}

// ChaCha on 16 seeds at once: lane l of vector w holds state word w of seed l.
template <int kRounds>
void ChaCha16(const Block* seeds, uint32_t counter, __m512i out[16]) {
  const __m512i idx = _mm512_set_epi32(60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
  const __m512i clear = _mm512_set1_epi32(-2);
  __m512i x[16];
  // ChaChaSeedState (prg_portable.h), one seed per lane.
  x[0] = _mm512_set1_epi32(static_cast<int>(kChaChaTau0));
  x[1] = _mm512_set1_epi32(static_cast<int>(kChaChaTau1));
  x[2] = _mm512_set1_epi32(static_cast<int>(kChaChaTau2));
  x[3] = _mm512_set1_epi32(static_cast<int>(kChaChaTau3));
  for (int w = 0; w < 4; ++w) {
    x[4 + w] = _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(seeds) + w, 4);
  }
  x[4] = _mm512_and_si512(x[4], clear);
  for (int w = 0; w < 4; ++w) x[8 + w] = x[4 + w];
  x[12] = _mm512_set1_epi32(static_cast<int>(counter));
  x[13] = x[14] = x[15] = _mm512_setzero_si512();
  __m512i in[16];
  for (int i = 0; i < 16; ++i) in[i] = x[i];
#define VEIL_QR512(a, b, c, d)                                               \
  x[a] = _mm512_add_epi32(x[a], x[b]);                                      \
  x[d] = _mm512_rol_epi32(_mm512_xor_si512(x[d], x[a]), 16);                \
  x[c] = _mm512_add_epi32(x[c], x[d]);                                      \
  x[b] = _mm512_rol_epi32(_mm512_xor_si512(x[b], x[c]), 12);                \
  x[a] = _mm512_add_epi32(x[a], x[b]);                                      \
  x[d] = _mm512_rol_epi32(_mm512_xor_si512(x[d], x[a]), 8);                 \
  x[c] = _mm512_add_epi32(x[c], x[d]);                                      \
  x[b] = _mm512_rol_epi32(_mm512_xor_si512(x[b], x[c]), 7);
  for (int r = 0; r < kRounds; r += 2) {
    VEIL_QR512(0, 4, 8, 12) VEIL_QR512(1, 5, 9, 13) VEIL_QR512(2, 6, 10, 14)
    VEIL_QR512(3, 7, 11, 15) VEIL_QR512(0, 5, 10, 15) VEIL_QR512(1, 6, 11, 12)
    VEIL_QR512(2, 7, 8, 13) VEIL_QR512(3, 4, 9, 14)
  }
#undef VEIL_QR512
  for (int i = 0; i < 16; ++i) out[i] = _mm512_add_epi32(x[i], in[i]);
}

// In-register 16x16 transpose of 32-bit words: r[w] lane l -> c[l] word w.
void Transpose16(const __m512i r[16], __m512i c[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // u[4q + m], 128-bit lane j: words 4q..4q+3 of lane 4j + m.
  for (int m = 0; m < 4; ++m) {
    __m512i v0 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88);
    __m512i v1 = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xdd);
    __m512i w0 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
    __m512i w1 = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xdd);
    c[m] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    c[8 + m] = _mm512_shuffle_i32x4(v0, w0, 0xdd);
    c[4 + m] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    c[12 + m] = _mm512_shuffle_i32x4(v1, w1, 0xdd);
  }
}

// The control bits of 16 seeds (bit 0 of word 0 in each lane) as all-ones / all-zeros lanes.
__m512i LaneControlMask(const Block* seeds) {
  const __m512i idx = _mm512_set_epi32(60, 56, 52, 48, 44, 40, 36, 32, 28, 24, 20, 16, 12, 8, 4, 0);
  __m512i w0 = _mm512_i32gather_epi32(idx, reinterpret_cast<const int*>(seeds), 4);
  return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_and_si512(w0, _mm512_set1_epi32(1)));
}

template <int kRounds>
void ExpandChaCha(const Block* parents, size_t n, Block cw_left, bool cw_right, Block* children) {
  const uint32_t cw[8] = {uint32_t(cw_left.lo), uint32_t(cw_left.lo >> 32), uint32_t(cw_left.hi),
                          uint32_t(cw_left.hi >> 32),
                          (uint32_t(cw_left.lo) & ~1u) | uint32_t(cw_right),
                          uint32_t(cw_left.lo >> 32), uint32_t(cw_left.hi),
                          uint32_t(cw_left.hi >> 32)};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512i v[16], c[16];
    ChaCha16<kRounds>(parents + i, 0, v);
    // Words 0..3 are the left child, 4..7 the right; correct them where the parent's bit is set.
    const __m512i m = LaneControlMask(parents + i);
    for (int w = 0; w < 8; ++w) {
      v[w] = _mm512_xor_si512(v[w], _mm512_and_si512(m, _mm512_set1_epi32(int(cw[w]))));
    }
    Transpose16(v, c);
    for (int l = 0; l < 16; ++l) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(children + 2 * (i + l)),
                          _mm512_castsi512_si256(c[l]));
    }
  }
  // A short tail (the top levels of every window) still goes through the 16-lane code, padded:
  // three or more scalar blocks cost more than one 16-lane pass.
  const size_t rest = n - i;
  if (rest >= kMinPaddedLanes) {
    Block pad[16] = {}, out[32];
    for (size_t l = 0; l < rest; ++l) pad[l] = parents[i + l];
    ExpandChaCha<kRounds>(pad, 16, cw_left, cw_right, out);
    for (size_t l = 0; l < 2 * rest; ++l) children[2 * i + l] = out[l];
    return;
  }
  GenericExpandLevel(kRounds == 8 ? Prg::kChaCha8 : kRounds == 12 ? Prg::kChaCha12 : Prg::kChaCha20,
                     parents + i, rest, cw_left, cw_right, children + 2 * i);
}

template <int kRounds>
void ConvertChaCha(Prg prg, const Block* leaves, size_t n, int words, OutputType output,
                   bool party1, const uint32_t* final_cw, uint32_t* values) {
  size_t i = 0;
  const __m512i neg = _mm512_set1_epi32(party1 ? -1 : 0);
  for (; i + 16 <= n; i += 16) {
    __m512i v[16], c[16];
    ChaCha16<kRounds>(leaves + i, 1, v);
    const __m512i m = LaneControlMask(leaves + i);
    for (int w = 0; w < words; ++w) {
      const __m512i cw = _mm512_and_si512(m, _mm512_set1_epi32(int(final_cw[w])));
      v[w] = output == OutputType::kXor
                 ? _mm512_xor_si512(v[w], cw)
                 : _mm512_sub_epi32(_mm512_xor_si512(_mm512_add_epi32(v[w], cw), neg), neg);
    }
    Transpose16(v, c);
    const __mmask16 sm = static_cast<__mmask16>((1u << words) - 1);
    for (int l = 0; l < 16; ++l) _mm512_mask_storeu_epi32(values + (i + l) * words, sm, c[l]);
  }
  const size_t rest = n - i;
  if (rest >= kMinPaddedLanes) {
    Block pad[16] = {};
    uint32_t out[16 * 16];
    for (size_t l = 0; l < rest; ++l) pad[l] = leaves[i + l];
    ConvertChaCha<kRounds>(prg, pad, 16, words, output, party1, final_cw, out);
    for (size_t w = 0; w < rest * words; ++w) values[i * words + w] = out[w];
    return;
  }
  GenericConvertLeaves(prg, leaves + i, rest, words, output, party1, final_cw,
                       values + i * words);
}

void ExpandLevelAvx512(Prg prg, const Block* parents, size_t n, Block cw_left, bool cw_right,
                       Block* children) {
  switch (prg) {
    case Prg::kAes128: {
      const Block cwr = {(cw_left.lo & ~uint64_t{1}) | uint64_t(cw_right), cw_left.hi};
      const __m512i cw = _mm512_set_epi64(cwr.hi, cwr.lo, cw_left.hi, cw_left.lo, cwr.hi, cwr.lo,
                                          cw_left.hi, cw_left.lo);
      size_t i = 0;
      for (; i + 2 * kVectors <= n; i += 2 * kVectors) {
        ExpandAesVectors<kVectors>(parents + i, 2 * kVectors, cw, children + 2 * i);
      }
      for (; i < n; i += 2) {
        ExpandAesVectors<1>(parents + i, n - i >= 2 ? 2 : 1, cw, children + 2 * i);
      }
      return;
    }
    case Prg::kChaCha8:
      return ExpandChaCha<8>(parents, n, cw_left, cw_right, children);
    case Prg::kChaCha12:
      return ExpandChaCha<12>(parents, n, cw_left, cw_right, children);
    case Prg::kChaCha20:
      return ExpandChaCha<20>(parents, n, cw_left, cw_right, children);
    case Prg::kSipHash:
      break;
  }
  GenericExpandLevel(prg, parents, n, cw_left, cw_right, children);
}

// Additive leaves, one leaf per vector: lanes sigma(s) ^ (i in the high half), i = 0..3.
template <int U>
void ConvertAddAes(const Block* leaves, int count, int words, __m512i cw, __m512i neg,
                   uint32_t* values) {
  const __m512i tweak = _mm512_set_epi64(3, 0, 2, 0, 1, 0, 0, 0);
  __m512i x[U], m[U];
  for (int u = 0; u < U && u < count; ++u) {
    __m512i s = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(leaves + u)));
    m[u] = _mm512_set1_epi32(-static_cast<int>(leaves[u].lo & 1));
    x[u] = _mm512_xor_si512(Sigma512(ClearControl(s)), tweak);
  }
  MmoVectors<U>(ValueKeys(), x);
  const __mmask16 sm = static_cast<__mmask16>((1u << words) - 1);
  for (int u = 0; u < U && u < count; ++u) {
    __m512i v = _mm512_add_epi32(x[u], _mm512_and_si512(m[u], cw));
    v = _mm512_sub_epi32(_mm512_xor_si512(v, neg), neg);
    _mm512_mask_storeu_epi32(values + u * words, sm, v);
  }
}

// XOR leaves, four leaves per vector.
template <int U>
void ConvertXorAes(const Block* leaves, int count, __m512i cw, uint32_t* values) {
  __m512i x[U], m[U];
  for (int u = 0; u < U; ++u) {
    const int here = count - 4 * u >= 4 ? 4 : count - 4 * u;
    const __mmask8 lm = static_cast<__mmask8>((1u << (2 * here)) - 1);
    __m512i node = _mm512_maskz_loadu_epi64(lm, leaves + 4 * u);
    m[u] = ControlMask512(node);
    x[u] = Sigma512(ClearControl(node));
  }
  MmoVectors<U>(ValueKeys(), x);
  for (int u = 0; u < U; ++u) {
    const int here = count - 4 * u >= 4 ? 4 : count - 4 * u;
    const __mmask8 sm = static_cast<__mmask8>((1u << (2 * here)) - 1);
    _mm512_mask_storeu_epi64(values + 16 * u, sm, _mm512_xor_si512(x[u], _mm512_and_si512(m[u], cw)));
  }
}

void ConvertLeavesAvx512(Prg prg, const Block* leaves, size_t n, int words, OutputType output,
                         bool party1, const uint32_t* final_cw, uint32_t* values) {
  switch (prg) {
    case Prg::kAes128:
      if (output == OutputType::kAdditive) {
        const __mmask16 lm = static_cast<__mmask16>((1u << words) - 1);
        const __m512i cw = _mm512_maskz_loadu_epi32(lm, final_cw);
        const __m512i neg = _mm512_set1_epi32(party1 ? -1 : 0);
        size_t i = 0;
        for (; i + kVectors <= n; i += kVectors) {
          ConvertAddAes<kVectors>(leaves + i, kVectors, words, cw, neg, values + i * words);
        }
        for (; i < n; ++i) ConvertAddAes<1>(leaves + i, 1, words, cw, neg, values + i * words);
      } else {
        const __m512i cw =
            _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(final_cw)));
        size_t i = 0;
        for (; i + 4 * kVectors <= n; i += 4 * kVectors) {
          ConvertXorAes<kVectors>(leaves + i, 4 * kVectors, cw, values + 4 * i);
        }
        for (; i < n; i += 4) {
          ConvertXorAes<1>(leaves + i, n - i >= 4 ? 4 : int(n - i), cw, values + 4 * i);
        }
      }
      return;
    case Prg::kChaCha8:
      return ConvertChaCha<8>(prg, leaves, n, words, output, party1, final_cw, values);
    case Prg::kChaCha12:
      return ConvertChaCha<12>(prg, leaves, n, words, output, party1, final_cw, values);
    case Prg::kChaCha20:
      return ConvertChaCha<20>(prg, leaves, n, words, output, party1, final_cw, values);
    case Prg::kSipHash:
      break;
  }
  GenericConvertLeaves(prg, leaves, n, words, output, party1, final_cw, values);
}

// Eight keys' accumulators stay in registers while the rows stream past; any row width (the
// last 16-word chunk is masked).
void MacAddAvx512(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                  size_t nrows, uint32_t row_words, uint32_t* acc) {
  for (uint32_t j0 = 0; j0 < row_words; j0 += 16) {
    const uint32_t width = row_words - j0 < 16 ? row_words - j0 : 16;
    const __mmask16 wm = static_cast<__mmask16>((1u << width) - 1);
    int k0 = 0;
    for (; k0 + 8 <= keys; k0 += 8) {
      __m512i a[8];
      for (int k = 0; k < 8; ++k) a[k] = _mm512_setzero_si512();
      const uint32_t* yk[8];
      for (int k = 0; k < 8; ++k) yk[k] = y[k0 + k];
      for (size_t r = 0; r < nrows; ++r) {
        const __m512i row = _mm512_maskz_loadu_epi32(wm, rows + r * stride + j0);
        for (int k = 0; k < 8; ++k) {
          a[k] = _mm512_add_epi32(a[k], _mm512_mullo_epi32(_mm512_set1_epi32(yk[k][r]), row));
        }
      }
      for (int k = 0; k < 8; ++k) {
        uint32_t* dst = acc + size_t(k0 + k) * row_words + j0;
        _mm512_mask_storeu_epi32(dst, wm, _mm512_add_epi32(_mm512_maskz_loadu_epi32(wm, dst), a[k]));
      }
    }
    for (; k0 < keys; ++k0) {
      __m512i a = _mm512_setzero_si512();
      const uint32_t* yk = y[k0];
      for (size_t r = 0; r < nrows; ++r) {
        const __m512i row = _mm512_maskz_loadu_epi32(wm, rows + r * stride + j0);
        a = _mm512_add_epi32(a, _mm512_mullo_epi32(_mm512_set1_epi32(yk[r]), row));
      }
      uint32_t* dst = acc + size_t(k0) * row_words + j0;
      _mm512_mask_storeu_epi32(dst, wm, _mm512_add_epi32(_mm512_maskz_loadu_epi32(wm, dst), a));
    }
  }
}

// K keys' accumulators stay in registers while the rows stream past (each row loaded once). A key's
// bits for 32 rows are first spread to 32 words of 0 or ~0 (a zero-masked move), so that each row costs a key
// one broadcast load and one ternary-logic op, acc ^= row & mask, with no mask register traffic.
template <int K>
void MacXorKeys(const uint32_t* const* y, const uint32_t* rows, uint64_t stride, size_t nrows,
                uint32_t row_words, uint32_t* acc) {
  alignas(64) uint32_t masks[K][32];
  const __m512i ones = _mm512_set1_epi32(-1);
  for (uint32_t j0 = 0; j0 < row_words; j0 += 16) {
    const uint32_t width = row_words - j0 < 16 ? row_words - j0 : 16;
    const __mmask16 wm = static_cast<__mmask16>((1u << width) - 1);
    __m512i a[K];
    for (int k = 0; k < K; ++k) a[k] = _mm512_setzero_si512();
    for (size_t r0 = 0; r0 < nrows; r0 += 32) {
      for (int k = 0; k < K; ++k) {
        const uint32_t bits = y[k][r0 / 32];
        _mm512_store_si512(masks[k], _mm512_maskz_mov_epi32(static_cast<__mmask16>(bits), ones));
        _mm512_store_si512(masks[k] + 16,
                           _mm512_maskz_mov_epi32(static_cast<__mmask16>(bits >> 16), ones));
      }
      const size_t rn = nrows - r0 < 32 ? nrows - r0 : 32;
      for (size_t i = 0; i < rn; ++i) {
        const __m512i row = _mm512_maskz_loadu_epi32(wm, rows + (r0 + i) * stride + j0);
        for (int k = 0; k < K; ++k) {
          a[k] = _mm512_ternarylogic_epi32(a[k], row, _mm512_set1_epi32(masks[k][i]), 0x78);
        }
      }
    }
    for (int k = 0; k < K; ++k) {
      uint32_t* dst = acc + size_t(k) * row_words + j0;
      _mm512_mask_storeu_epi32(dst, wm, _mm512_xor_si512(_mm512_maskz_loadu_epi32(wm, dst), a[k]));
    }
  }
  sodium_memzero(masks, sizeof(masks));
}

void MacXorAvx512(const uint32_t* const* y, int keys, const uint32_t* rows, uint64_t stride,
                  size_t nrows, uint32_t row_words, uint32_t* acc) {
  for (int k0 = 0; k0 < keys; k0 += 8) {
    const uint32_t* const* yk = y + k0;
    uint32_t* ak = acc + size_t(k0) * row_words;
    switch (keys - k0 < 8 ? keys - k0 : 8) {
      case 1: MacXorKeys<1>(yk, rows, stride, nrows, row_words, ak); break;
      case 2: MacXorKeys<2>(yk, rows, stride, nrows, row_words, ak); break;
      case 3: MacXorKeys<3>(yk, rows, stride, nrows, row_words, ak); break;
      case 4: MacXorKeys<4>(yk, rows, stride, nrows, row_words, ak); break;
      case 5: MacXorKeys<5>(yk, rows, stride, nrows, row_words, ak); break;
      case 6: MacXorKeys<6>(yk, rows, stride, nrows, row_words, ak); break;
      case 7: MacXorKeys<7>(yk, rows, stride, nrows, row_words, ak); break;
      default: MacXorKeys<8>(yk, rows, stride, nrows, row_words, ak); break;
    }
  }
}

}  // namespace

const Kernels& VaesAvx512Kernels() {
  static const Kernels kernels = {ExpandLevelAvx512, ConvertLeavesAvx512, MacAddAvx512,
                                  MacXorAvx512};
  return kernels;
}

}  // namespace veil::dpf
