// The NTT kernel for primes of up to 50 bits on CPUs with AVX2 and FMA (compiled with -mavx2
// -mfma; called only after the CPU check in ntt.cc), for those above 30 bits, which avx2-u32
// cannot take (BFV's): Harvey's lazy butterflies on four lanes of doubles, whose Shoup products
// come from FMAs, since AVX2 has no 64 x 64-bit multiply. For a < 2^52 (lazy values below 4q,
// q < 2^50) and w < q:
//   t = a fl(w/q) in doubles: |t - a w / q| < 1 (t < 2^52: each of the two roundings moves it
//     by at most half a unit), so e = floor(t) is floor(a w / q) - 1, itself or + 1;
//   h = fl(e q), l = e q - h and u = a w - h, both exact by FMA (each an integer below 2^51);
//   r = u - l = a w - e q, exact, in [-q, 2q); plus q where negative: a w mod q in [0, 2q).
// The transform runs on doubles (integers below 2^52, exact; sums and differences too): the first
// stage converts the words as it loads them (OR 2^52's exponent in, subtract 2^52), the last pass
// converts back as it stores, the stages between in a scratch of doubles. The small stages
// (distances 2 and 1) gather their pairs with vpermps.
#include <immintrin.h>

#include "pir/he/f64_avx2.h"
#include "pir/he/ntt.h"
#include "pir/he/ntt_lanes.h"
#include "pir/he/scratch.h"

namespace veil::he::internal {
namespace {

struct F64Lanes4 {
  using V = __m256d;
  using Elem = double;
  static constexpr size_t kLanes = 4;

  explicit F64Lanes4(uint64_t qv) : q(_mm256_set1_pd(static_cast<double>(qv))) {}

  static V Load(const void* p) { return _mm256_loadu_pd(static_cast<const double*>(p)); }
  static void Store(void* p, V v) { _mm256_storeu_pd(static_cast<double*>(p), v); }
  // Words below 2^52 to doubles and back, exactly.
  static V LoadNarrow(const uint64_t* p) {
    return WordsToDoubles(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static void StoreWide(uint64_t* p, V v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), DoublesToWords(v));
  }
  static V Set1(Elem x) { return _mm256_set1_pd(x); }
  static V Add(V a, V b) { return _mm256_add_pd(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_pd(a, b); }
  static V ReduceOnce(V a, V m) { return SubIfAtLeast(a, m); }
  // Two 32-bit indices per 64-bit lane (2 s, 2 s + 1 of source lane s mod 4), bit 3 set where
  // the lane comes from the second vector (vpermps reads the low three bits only).
  static V Index(const int* idx) {
    int words[8];
    for (int k = 0; k < 4; ++k) {
      const int from_b = idx[k] >= 4 ? 8 : 0;
      words[2 * k] = 2 * (idx[k] % 4) + from_b;
      words[2 * k + 1] = 2 * (idx[k] % 4) + 1 + from_b;
    }
    return _mm256_castsi256_pd(_mm256_setr_epi32(words[0], words[1], words[2], words[3], words[4],
                                                 words[5], words[6], words[7]));
  }
  static V Permute(V idx, V a) {
    return _mm256_castps_pd(
        _mm256_permutevar8x32_ps(_mm256_castpd_ps(a), _mm256_castpd_si256(idx)));
  }
  static V Permute2(V a, V idx, V b) {
    const __m256 from_b = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_castpd_si256(idx), 28));
    return _mm256_castps_pd(_mm256_blendv_ps(_mm256_castpd_ps(Permute(idx, a)),
                                             _mm256_castpd_ps(Permute(idx, b)), from_b));
  }
  static const Elem* Roots(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots_f64() : t.roots_f64()).data();
  }
  static const Elem* RootsShoup(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots_over_q() : t.roots_over_q()).data();
  }
  static Elem ShoupScalar(Elem w_over_q) { return w_over_q; }
  static V ShoupVector(V w_over_q) { return w_over_q; }
  static Elem ShoupOfScalar(uint64_t w, uint64_t q) {
    return static_cast<double>(w) / static_cast<double>(q);
  }

  // a * w mod q in [0, 2q) for integers a < 2^52, w < q < 2^50, w_over_q = fl(w / q).
  V MulShoupLazy(V a, V w, V w_over_q) const {
    return AddIfNegative(ProductF64(a, w, w_over_q, q), q);
  }

  V q;
};

// The stages between the first load and the last store in a scratch of doubles.
template <bool kInverse>
void RunF64(const NttTables& t, uint64_t* a) {
  double* work = reinterpret_cast<double*>(GetScratch(Scratch::kNarrowNtt, t.n()));
  if (kInverse) {
    Inverse<F64Lanes4>(t, a, work);
  } else {
    Forward<F64Lanes4>(t, a, work);
  }
}

}  // namespace

void ForwardAvx2F64(const NttTables& t, uint64_t* a) { RunF64<false>(t, a); }
void InverseAvx2F64(const NttTables& t, uint64_t* a) { RunF64<true>(t, a); }

}  // namespace veil::he::internal
