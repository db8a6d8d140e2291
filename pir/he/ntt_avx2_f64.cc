// The NTT kernel for primes of 31 to 50 bits on CPUs with AVX2 and FMA but no AVX-512
// (compiled with -mavx2 -mfma; called only after the CPU check in ntt.cc): Harvey's lazy
// butterflies on four 64-bit lanes, whose Shoup products come from double-precision FMAs, since
// AVX2 has no 64 x 64-bit multiply. For a < 2^52 (lazy values below 4q, q < 2^50) and w < q:
//   t = a (w/q) in doubles (w/q from the table, correctly rounded): |t - a w / q| < 1, so
//     e = floor(t) is floor(a w / q) - 1, itself or + 1;
//   h = fl(e q), l = e q - h and u = a w - h, both exact by FMA (each an integer below 2^51);
//   r = u - l = a w - e q, exact, in [-q, 2q); plus q where negative: a w mod q in [0, 2q).
// Integers below 2^52 convert to doubles and back exactly by the 2^52 trick (OR its exponent in,
// subtract 2^52). The data stay 64-bit integers between stages; the small stages (distances 2
// and 1) gather their pairs with vpermd.
#include <immintrin.h>

#include "pir/he/ntt.h"
#include "pir/he/ntt_lanes.h"

namespace veil::he::internal {
namespace {

struct F64Lanes4 {
  using V = __m256i;
  using Elem = uint64_t;
  static constexpr size_t kLanes = 4;

  explicit F64Lanes4(uint64_t qv)
      : q(_mm256_set1_pd(static_cast<double>(qv))),
        two52(_mm256_set1_pd(4503599627370496.0)),
        two52_bits(_mm256_set1_epi64x(0x4330000000000000)) {}

  static V Load(const void* p) { return _mm256_loadu_si256(static_cast<const V*>(p)); }
  static void Store(void* p, V v) { _mm256_storeu_si256(static_cast<V*>(p), v); }
  static V Set1(Elem x) { return _mm256_set1_epi64x(static_cast<int64_t>(x)); }
  static V Add(V a, V b) { return _mm256_add_epi64(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_epi64(a, b); }
  // a - m where a >= m (values below 2^63: the signed compare holds).
  static V ReduceOnce(V a, V m) {
    return _mm256_sub_epi64(a, _mm256_andnot_si256(_mm256_cmpgt_epi64(m, a), m));
  }
  // Two 32-bit indices per 64-bit lane (2 s, 2 s + 1 of source lane s mod 4), bit 3 set where
  // the lane comes from the second vector (vpermd reads the low three bits only).
  static V Index(const int* idx) {
    int words[8];
    for (int k = 0; k < 4; ++k) {
      const int from_b = idx[k] >= 4 ? 8 : 0;
      words[2 * k] = 2 * (idx[k] % 4) + from_b;
      words[2 * k + 1] = 2 * (idx[k] % 4) + 1 + from_b;
    }
    return _mm256_setr_epi32(words[0], words[1], words[2], words[3], words[4], words[5], words[6],
                             words[7]);
  }
  static V Permute(V idx, V a) { return _mm256_permutevar8x32_epi32(a, idx); }
  static V Permute2(V a, V idx, V b) {
    const __m256 from_b = _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28));
    return _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_permutevar8x32_epi32(a, idx)),
                         _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(b, idx)), from_b));
  }
  static const Elem* Roots(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots() : t.roots()).data();
  }
  // The bits of the doubles w / q (NttTables::roots_over_q).
  static const Elem* RootsShoup(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots_over_q() : t.roots_over_q()).data();
  }
  static Elem ShoupScalar(Elem w_over_q) { return w_over_q; }
  static V ShoupVector(V w_over_q) { return w_over_q; }
  static Elem ShoupOfScalar(uint64_t w, uint64_t q) { return RootOverQBits(w, q); }

  // Integers below 2^52 to doubles and back.
  __m256d ToDouble(V a) const {
    return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(a, two52_bits)), two52);
  }
  V ToInt(__m256d x) const {
    return _mm256_xor_si256(_mm256_castpd_si256(_mm256_add_pd(x, two52)), two52_bits);
  }

  // a * w mod q in [0, 2q) for a < 2^52, w < q < 2^50, w_over_q the bits of fl(w / q).
  V MulShoupLazy(V a, V w, V w_over_q) const {
    const __m256d ad = ToDouble(a), wd = ToDouble(w);
    const __m256d e = _mm256_floor_pd(_mm256_mul_pd(ad, _mm256_castsi256_pd(w_over_q)));
    const __m256d h = _mm256_mul_pd(e, q);
    const __m256d l = _mm256_fmsub_pd(e, q, h);
    const __m256d u = _mm256_fmsub_pd(ad, wd, h);
    const __m256d r = _mm256_sub_pd(u, l);
    const __m256d negative = _mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_LT_OQ);
    return ToInt(_mm256_add_pd(r, _mm256_and_pd(negative, q)));
  }

  __m256d q, two52;
  V two52_bits;
};

}  // namespace

void ForwardAvx2F64(const NttTables& t, uint64_t* a) { Forward<F64Lanes4>(t, a); }
void InverseAvx2F64(const NttTables& t, uint64_t* a) { Inverse<F64Lanes4>(t, a); }

}  // namespace veil::he::internal
