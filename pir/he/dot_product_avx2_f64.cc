// The plain dot product (dot_product.h) for primes of up to 50 bits whose sums would not fit 64
// bits, on CPUs with AVX2 and FMA but no IFMA (compiled with -mavx2 -mfma; called only after the
// CPU check): each product p x mod q from double-precision FMAs, as ntt_avx2_f64.cc's
// butterflies: for p, x < q < 2^50, e = floor(fl(fl(p fl(1/q)) x)) is within one of
// floor(p x / q) (the estimate is off by less than 3/8), h = fl(e q), l = e q - h and
// u = p x - h are exact, and r = u - l = p x - e q is exact, in [-q, 2q). Each r is summed as
// the bits of the double r + 1.5 2^52, which are those of 1.5 2^52 plus r (the binade of
// [2^52, 2^53) is an integer's bits): 64-bit sums of kRun terms, whose offset is taken off once.
// A run's sum s (below 3 kRun q < 2^63 once shifted up by kRun q) is reduced as
// hi (2^32 mod q) + lo, each half a product of the same kind (hi < 2^31, lo < 2^32: the estimate
// is as close). Slots are taken kTile at a time, each term's rows read in runs of kTile, the sums
// in L1 (reading 4 slots of every term at a time, 3 x terms streams, was slower than the
// reference at 512 terms). The same products serve MultiplyRows (RowProductAvx2F64) and the
// serialization's mixed-radix conversions (SubReducedMulAvx2F64, MulAddReducedAvx2F64), whose
// digits are first reduced as y - floor(y fl(1 / q)) q, exact by FMA and within one q.
#include <immintrin.h>

#include "pir/he/dot_product.h"
#include "pir/he/f64_avx2.h"

namespace veil::he::internal {
namespace {

// Terms a run sums: 3 kRun q < 2^63 for q < 2^50.
constexpr size_t kRun = 2048;
// Slots a pass over the terms covers (the reference's tile).
constexpr size_t kTile = 64;
constexpr uint64_t kMagicBits = 0x4338000000000000;  // the bits of 1.5 2^52

struct F64Mod {
  explicit F64Mod(uint64_t qv)
      : q(_mm256_set1_pd(static_cast<double>(qv))),
        inverse(_mm256_set1_pd(1.0 / static_cast<double>(qv))),
        magic(_mm256_set1_pd(6755399441055744.0)) {}

  // p x - e q in [-q, 2q) for p, x < q (p_over_q = fl(p fl(1/q))).
  __m256d Product(__m256d p, __m256d p_over_q, __m256d x) const {
    return ProductF64(x, p, p_over_q, q);
  }

  __m256d q, inverse, magic;
};

// Residues below 2^52 to and from doubles.
__m256d Load(const uint64_t* p) {
  return WordsToDoubles(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

void Store(uint64_t* p, __m256d x) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), DoublesToWords(x));
}

// y mod q in [0, q) for y < 2^52: the estimate floor(y fl(1 / q)) is within one of floor(y / q),
// so y - e q, exact by FMA, is in [-q, 2q).
__m256d ReduceF64(const F64Mod& m, __m256d y) {
  const __m256d e = _mm256_floor_pd(_mm256_mul_pd(y, m.inverse));
  return SubIfAtLeast(AddIfNegative(_mm256_fnmadd_pd(e, m.q, y), m.q), m.q);
}

// A run's sums (the bits of `terms` products plus the magic each) to [0, q): s = sum - terms
// magic + terms q is in [0, 3 terms q), below 2^63; s = hi 2^32 + lo, hi (2^32 mod q) + lo.
__m256d FoldRun(const F64Mod& m, __m256i bits, size_t terms, uint64_t q, __m256d c) {
  // terms (q - magic) modulo 2^64 (unsigned: the product wraps, as the sums did).
  const uint64_t offset = static_cast<uint64_t>(terms) * (q - kMagicBits);
  const __m256i s = _mm256_add_epi64(bits, _mm256_set1_epi64x(static_cast<int64_t>(offset)));
  const __m256d hi = WordsToDoubles(_mm256_srli_epi64(s, 32));
  const __m256d lo = WordsToDoubles(_mm256_and_si256(s, _mm256_set1_epi64x(0xffffffff)));
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d r = _mm256_add_pd(
      AddIfNegative(m.Product(hi, _mm256_mul_pd(hi, m.inverse), c), m.q),
      AddIfNegative(m.Product(lo, _mm256_mul_pd(lo, m.inverse), one), m.q));  // [0, 4q)
  return SubIfAtLeast(SubIfAtLeast(r, _mm256_add_pd(m.q, m.q)), m.q);
}

}  // namespace

void PlainDotProductAvx2F64(const DotProductArgs& a) {
  const uint64_t qv = a.q->value();
  const F64Mod m(qv);
  const __m256d c = _mm256_set1_pd(static_cast<double>((uint64_t{1} << 32) % qv));
  const auto load = [](const uint64_t* p) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  };
  __m256i s0[kTile / 4], s1[kTile / 4];
  __m256d out0[kTile / 4], out1[kTile / 4];
  size_t tile = 0;
  for (; tile + kTile <= a.n; tile += kTile) {
    for (size_t v = 0; v < kTile / 4; ++v) {
      out0[v] = a.accumulate ? WordsToDoubles(load(a.out0 + tile + 4 * v)) : _mm256_setzero_pd();
      out1[v] = a.accumulate ? WordsToDoubles(load(a.out1 + tile + 4 * v)) : _mm256_setzero_pd();
    }
    for (size_t first = 0; first < a.terms; first += kRun) {
      const size_t last = first + kRun < a.terms ? first + kRun : a.terms;
      for (size_t v = 0; v < kTile / 4; ++v) s0[v] = s1[v] = _mm256_setzero_si256();
      for (size_t i = first; i < last; ++i) {
        const uint64_t* plain = a.plain[i] + tile;
        const uint64_t* x0 = a.c0[i] + tile;
        const uint64_t* x1 = a.c1[i] + tile;
        for (size_t v = 0; v < kTile / 4; ++v) {
          const __m256d p = WordsToDoubles(load(plain + 4 * v));
          const __m256d p_over_q = _mm256_mul_pd(p, m.inverse);
          const __m256d r0 = m.Product(p, p_over_q, WordsToDoubles(load(x0 + 4 * v)));
          const __m256d r1 = m.Product(p, p_over_q, WordsToDoubles(load(x1 + 4 * v)));
          s0[v] = _mm256_add_epi64(s0[v], _mm256_castpd_si256(_mm256_add_pd(r0, m.magic)));
          s1[v] = _mm256_add_epi64(s1[v], _mm256_castpd_si256(_mm256_add_pd(r1, m.magic)));
        }
      }
      for (size_t v = 0; v < kTile / 4; ++v) {
        out0[v] = SubIfAtLeast(_mm256_add_pd(out0[v], FoldRun(m, s0[v], last - first, qv, c)), m.q);
        out1[v] = SubIfAtLeast(_mm256_add_pd(out1[v], FoldRun(m, s1[v], last - first, qv, c)), m.q);
      }
    }
    for (size_t v = 0; v < kTile / 4; ++v) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.out0 + tile + 4 * v),
                          DoublesToWords(out0[v]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(a.out1 + tile + 4 * v),
                          DoublesToWords(out1[v]));
    }
  }
  if (tile < a.n) PlainDotProductReference(a, tile);
}

namespace {

// out = a b (+ out where kAccumulate) mod q, four residues at a time; returns how many.
template <bool kAccumulate>
size_t RowProduct(const Modulus& q, size_t n, const uint64_t* a, const uint64_t* b,
                  uint64_t* out) {
  const F64Mod m(q.value());
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    const __m256d x = Load(a + c), y = Load(b + c);
    __m256d r = SubIfAtLeast(AddIfNegative(m.Product(y, _mm256_mul_pd(y, m.inverse), x), m.q), m.q);
    if constexpr (kAccumulate) r = SubIfAtLeast(_mm256_add_pd(r, Load(out + c)), m.q);
    Store(out + c, r);
  }
  return c;  // the caller takes the rest (no Modulus arithmetic compiled for AVX2 here)
}

}  // namespace

size_t RowProductAvx2F64(const Modulus& q, size_t n, const uint64_t* a, const uint64_t* b,
                         uint64_t* out) {
  return RowProduct<false>(q, n, a, b, out);
}

size_t RowMultiplyAddAvx2F64(const Modulus& q, size_t n, const uint64_t* a, const uint64_t* b,
                             uint64_t* acc) {
  return RowProduct<true>(q, n, a, b, acc);
}

namespace {

// out = f(x, y mod q, v -> v w mod q) four residues at a time; returns how many.
template <class F>
size_t WithConstant(const Modulus& q, uint64_t w, size_t n, const uint64_t* x, const uint64_t* y,
                    uint64_t* out, const F& f) {
  const F64Mod m(q.value());
  const __m256d wd = _mm256_set1_pd(static_cast<double>(w));
  const __m256d w_over_q = _mm256_mul_pd(wd, m.inverse);
  const auto times_w = [&](__m256d v) {
    return SubIfAtLeast(AddIfNegative(m.Product(wd, w_over_q, v), m.q), m.q);
  };
  size_t c = 0;
  for (; c + 4 <= n; c += 4) {
    Store(out + c, f(m, Load(x + c), ReduceF64(m, Load(y + c)), times_w));
  }
  return c;
}

}  // namespace

size_t SubReducedMulAvx2F64(const Modulus& q, uint64_t w, size_t n, const uint64_t* x,
                            const uint64_t* y, uint64_t* out) {
  return WithConstant(q, w, n, x, y, out, [](const F64Mod& m, __m256d a, __m256d b, auto times_w) {
    return times_w(AddIfNegative(_mm256_sub_pd(a, b), m.q));
  });
}

size_t MulAddReducedAvx2F64(const Modulus& q, uint64_t w, size_t n, const uint64_t* acc,
                            const uint64_t* y, uint64_t* out) {
  return WithConstant(q, w, n, acc, y, out, [](const F64Mod& m, __m256d a, __m256d b, auto times_w) {
    return SubIfAtLeast(_mm256_add_pd(times_w(a), b), m.q);
  });
}

}  // namespace veil::he::internal
