// IFMA52 kernel of PlainDotProduct (dot_product.h); compiled with -mavx512f -mavx512ifma.
#include <immintrin.h>

#include "pir/he/dot_product.h"
#include "pir/he/modarith_hd.h"

namespace veil::he::internal {

namespace {

__m512i LoadPlain(const uint64_t* p) { return _mm512_loadu_si512(p); }
__m512i LoadPlain(const uint32_t* p) {
  return _mm512_cvtepu32_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// x mod q for 64-bit lanes x whose quotient by q is below 2^50: a double's estimate of the
// quotient (x and 1 / q rounded, relative error below 2^-51) is off by at most one.
__m512i ReduceByDoubleQuotient(__m512i x, __m512i qv, __m512d inverse_q) {
  const __m512i quotient = _mm512_cvttpd_epu64(_mm512_mul_pd(_mm512_cvtepu64_pd(x), inverse_q));
  __m512i r = _mm512_sub_epi64(x, _mm512_mullo_epi64(quotient, qv));  // in [-q, 2q)
  r = _mm512_min_epu64(r, _mm512_add_epi64(r, qv));                   // [0, 2q)
  return _mm512_min_epu64(r, _mm512_sub_epi64(r, qv));                // [0, q)
}

template <typename Plain>
void IfmaKernel(const DotProductArgsOf<Plain>& a) {
  // Each product p < q^2 < 2^100 is lo + hi 2^52 with lo < 2^52 and hi < 2^48: 2^11 terms of
  // either sum fit a 64-bit lane. Longer sums are cut into chunks and their results added mod q.
  constexpr size_t kChunk = 2048;
  const Modulus& q = *a.q;
  const __m512i zero = _mm512_setzero_si512();
  // When a chunk's whole sum, below terms q^2, fits 64 bits (small primes, few terms: a key
  // switch's k digits, packing's blocks of 16 keys), hi 2^52 + lo is reduced in 64 bits.
  const uint128_t largest = static_cast<uint128_t>(q.value() - 1) * (q.value() - 1) *
                            (a.terms < kChunk ? a.terms : kChunk);
  const bool fits64 = (largest >> 64) == 0;
  // Then, when the quotient by q is below 2^50, a double's estimate of it (relative error below
  // 2^-51) is off by at most one, and the remainder is reduced in vectors: a key switch's sums
  // are reduced 8 at a time instead of one by one (the scalar reduction was half this kernel's
  // time in the ExpPack expansion under perf).
  const bool vector_reduce = fits64 && (largest >> 50) < q.value();
  const __m512i qv = _mm512_set1_epi64(static_cast<int64_t>(q.value()));
  const __m512d inverse_q = _mm512_set1_pd(1.0 / static_cast<double>(q.value()));
  const auto reduce = [&](__m512i lo, __m512i hi) {
    return ReduceByDoubleQuotient(_mm512_add_epi64(_mm512_slli_epi64(hi, 52), lo), qv, inverse_q);
  };
  size_t c = 0;
  for (; c + 8 <= a.n; c += 8) {
    // The sums so far, reduced in vectors, or one by one.
    __m512i v0 = a.accumulate ? _mm512_loadu_si512(a.out0 + c) : zero;
    __m512i v1 = a.accumulate ? _mm512_loadu_si512(a.out1 + c) : zero;
    uint64_t r0[8] = {}, r1[8] = {};
    if (a.accumulate) {
      for (int k = 0; k < 8; ++k) {
        r0[k] = a.out0[c + k];
        r1[k] = a.out1[c + k];
      }
    }
    for (size_t first = 0; first < a.terms; first += kChunk) {
      __m512i lo0 = zero, hi0 = zero, lo1 = zero, hi1 = zero;
      const size_t end = first + kChunk < a.terms ? first + kChunk : a.terms;
      for (size_t i = first; i < end; ++i) {
        const __m512i p = LoadPlain(a.plain[i] + c);
        const __m512i x0 = _mm512_loadu_si512(a.c0[i] + c);
        const __m512i x1 = _mm512_loadu_si512(a.c1[i] + c);
        lo0 = _mm512_madd52lo_epu64(lo0, p, x0);
        hi0 = _mm512_madd52hi_epu64(hi0, p, x0);
        lo1 = _mm512_madd52lo_epu64(lo1, p, x1);
        hi1 = _mm512_madd52hi_epu64(hi1, p, x1);
      }
      if (vector_reduce) {
        v0 = _mm512_add_epi64(v0, reduce(lo0, hi0));
        v1 = _mm512_add_epi64(v1, reduce(lo1, hi1));
        v0 = _mm512_min_epu64(v0, _mm512_sub_epi64(v0, qv));
        v1 = _mm512_min_epu64(v1, _mm512_sub_epi64(v1, qv));
        continue;
      }
      alignas(64) uint64_t l0[8], h0[8], l1[8], h1[8];
      _mm512_store_si512(l0, lo0);
      _mm512_store_si512(h0, hi0);
      _mm512_store_si512(l1, lo1);
      _mm512_store_si512(h1, hi1);
      if (fits64) {
        for (int k = 0; k < 8; ++k) {
          r0[k] = q.Add(r0[k], q.Reduce((h0[k] << 52) + l0[k]));
          r1[k] = q.Add(r1[k], q.Reduce((h1[k] << 52) + l1[k]));
        }
      } else {
        for (int k = 0; k < 8; ++k) {
          r0[k] = q.Add(r0[k], q.Reduce((static_cast<uint128_t>(h0[k]) << 52) + l0[k]));
          r1[k] = q.Add(r1[k], q.Reduce((static_cast<uint128_t>(h1[k]) << 52) + l1[k]));
        }
      }
    }
    if (vector_reduce) {
      _mm512_storeu_si512(a.out0 + c, v0);
      _mm512_storeu_si512(a.out1 + c, v1);
      continue;
    }
    for (int k = 0; k < 8; ++k) {
      a.out0[c + k] = r0[k];
      a.out1[c + k] = r1[k];
    }
  }
  if (c < a.n) PlainDotProductReference(a, c);
}

constexpr size_t kPrefetchWords = 128;  // 512 bytes of plaintext residues

// T tiles from `first` on: 4 T accumulators, each term's keys loaded once for all T.
template <int T>
void TileBlock(const TileDotProductArgs& a, size_t first) {
  const Modulus& q = *a.q;
  const __m512i zero = _mm512_setzero_si512();
  __m512i lo0[T], hi0[T], lo1[T], hi1[T];
  const uint32_t* plain[T];
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    lo0[t] = hi0[t] = lo1[t] = hi1[t] = zero;
    plain[t] = a.plain + (first + t) * a.terms * 8;
  }
  for (size_t r = 0; r < a.terms; ++r) {
    const __m512i x0 = _mm512_loadu_si512(a.keys + r * 16);
    const __m512i x1 = _mm512_loadu_si512(a.keys + r * 16 + 8);
#pragma GCC unroll 4
    for (int t = 0; t < T; ++t) {
      // The T tiles are T streams a tile apart, which the hardware prefetcher keeps too few
      // lines ahead of: 512 bytes ahead in each, once per line (on the 2-vCPU EPYC, 13.9 ->
      // 18.3 GB/s on one core, 27.8 -> 31.7 on two, of 21 and 36 read).
      if ((r & 1) == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(plain[t] + r * 8 + kPrefetchWords), _MM_HINT_T0);
      }
      const __m512i p = LoadPlain(plain[t] + r * 8);
      lo0[t] = _mm512_madd52lo_epu64(lo0[t], p, x0);
      hi0[t] = _mm512_madd52hi_epu64(hi0[t], p, x0);
      lo1[t] = _mm512_madd52lo_epu64(lo1[t], p, x1);
      hi1[t] = _mm512_madd52hi_epu64(hi1[t], p, x1);
    }
  }
  // With q < 2^31 and terms <= 2^11: lo < 2^63, hi < 2^21 and hi (2^52 mod q) < 2^52, so
  // x = lo + hi (2^52 mod q) fits 64 bits, and with q >= 2^20 its quotient by q is below 2^44,
  // which a double estimates to within one.
  const __m512i qv = _mm512_set1_epi64(static_cast<int64_t>(q.value()));
  const __m512i shift = _mm512_set1_epi64(static_cast<int64_t>(q.Reduce(uint64_t{1} << 52)));
  const __m512d inverse_q = _mm512_set1_pd(1.0 / static_cast<double>(q.value()));
  const auto reduce = [&](__m512i lo, __m512i hi) {
    return ReduceByDoubleQuotient(_mm512_add_epi64(lo, _mm512_mullo_epi64(hi, shift)), qv,
                                  inverse_q);
  };
#pragma GCC unroll 4
  for (int t = 0; t < T; ++t) {
    uint64_t* out = a.out + (first + t) * a.out_stride;
    _mm512_storeu_si512(out, reduce(lo0[t], hi0[t]));
    _mm512_storeu_si512(out + a.half_stride, reduce(lo1[t], hi1[t]));
  }
}

}  // namespace

void TileDotProductIfma(const TileDotProductArgs& a) {
  size_t t = 0;
  for (; t + 4 <= a.tiles; t += 4) TileBlock<4>(a, t);
  for (; t < a.tiles; ++t) TileBlock<1>(a, t);
}

void PlainDotProductIfma(const DotProductArgs& a) { IfmaKernel(a); }
void PlainDotProductIfma(const DotProductArgs32& a) { IfmaKernel(a); }

void SubMulShoupIfma(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                     const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out) {
  // d = x - y in [0, q) < 2^50; the quotient floor(d w'' / 2^52) is at most one below the true
  // one, so d w - quotient q lies in [0, 2q) and its low 52 bits are exact.
  const __m512i zero = _mm512_setzero_si512();
  const __m512i qv = _mm512_set1_epi64(static_cast<int64_t>(q.value()));
  const __m512i mask52 = _mm512_set1_epi64((int64_t{1} << 52) - 1);
  const __m512i w1 = _mm512_set1_epi64(static_cast<int64_t>(w[0]));
  const __m512i w1_52 = _mm512_set1_epi64(static_cast<int64_t>(w_shoup[0] >> 12));
  size_t c = 0;
  for (; c + 8 <= n; c += 8) {
    __m512i d = _mm512_sub_epi64(_mm512_loadu_si512(x + c), _mm512_loadu_si512(y + c));
    d = _mm512_min_epu64(d, _mm512_add_epi64(d, qv));  // wrapped below 0: + q
    const __m512i wv = w_step == 0 ? w1 : _mm512_loadu_si512(w + c);
    const __m512i w52 =
        w_step == 0 ? w1_52 : _mm512_srli_epi64(_mm512_loadu_si512(w_shoup + c), 12);
    const __m512i quotient = _mm512_madd52hi_epu64(zero, d, w52);
    __m512i r = _mm512_sub_epi64(_mm512_madd52lo_epu64(zero, d, wv),
                                 _mm512_madd52lo_epu64(zero, quotient, qv));
    r = _mm512_and_si512(r, mask52);
    _mm512_storeu_si512(out + c, _mm512_min_epu64(r, _mm512_sub_epi64(r, qv)));
  }
  for (; c < n; ++c) {
    out[c] = MulShoup(SubMod(x[c], y[c], q.value()), w[c * w_step], w_shoup[c * w_step], q.value());
  }
}

}  // namespace veil::he::internal
