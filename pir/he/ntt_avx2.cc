// The 32-bit NTT kernel for CPUs with AVX2 but no AVX-512 (compiled with -mavx2; called only
// after the CPU check in ntt.cc): ntt_avx512.cc's U32 lanes at 8 lanes a vector, q < 2^30 so
// that 4q < 2^32, on a narrowed copy of the data. AVX2 has no two-source permute, so Permute2
// permutes each source (vpermd) and blends by the index's high bit.
#include <immintrin.h>

#include "pir/he/ntt.h"
#include "pir/he/ntt_lanes.h"
#include "pir/he/scratch.h"

namespace veil::he::internal {
namespace {

struct U32Lanes8 : U32Tables {
  using V = __m256i;
  static constexpr size_t kLanes = 8;
  explicit U32Lanes8(uint64_t q) : q(_mm256_set1_epi32(static_cast<int32_t>(q))) {}

  static V Load(const void* p) { return _mm256_loadu_si256(static_cast<const V*>(p)); }
  static void Store(void* p, V v) { _mm256_storeu_si256(static_cast<V*>(p), v); }
  static V Set1(Elem x) { return _mm256_set1_epi32(static_cast<int32_t>(x)); }
  static V Add(V a, V b) { return _mm256_add_epi32(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_epi32(a, b); }
  static V ReduceOnce(V a, V m) { return _mm256_min_epu32(a, _mm256_sub_epi32(a, m)); }
  // Lane k of the pair a | b at idx[k] in [0, 16).
  static V Permute2(V a, V idx, V b) {
    const V from_b = _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(7));
    return _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(a, idx),
                              _mm256_permutevar8x32_epi32(b, idx), from_b);
  }
  static V Permute(V idx, V a) { return _mm256_permutevar8x32_epi32(a, idx); }
  static V Index(const int* idx) { return Load(idx); }
  static V ShoupVector(V w_shoup) { return w_shoup; }

  // a * w mod q in [0, 2q) for a < 2^32: quotient = floor(a * w' / 2^32) lane by lane.
  V MulShoupLazy(V a, V w, V w_shoup) const {
    const V even = _mm256_srli_epi64(_mm256_mul_epu32(a, w_shoup), 32);
    const V odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), _mm256_srli_epi64(w_shoup, 32));
    const V quotient = _mm256_blend_epi32(even, odd, 0xAA);
    return _mm256_sub_epi32(_mm256_mullo_epi32(a, w), _mm256_mullo_epi32(quotient, q));
  }

  V q;
};

// On a narrowed copy (values < q < 2^30) in a scratch buffer, as ntt_avx512.cc's Run32.
template <bool kInverse>
void Run32(const NttTables& t, uint64_t* a) {
  const size_t n = t.n();
  uint32_t* narrow = reinterpret_cast<uint32_t*>(GetScratch(Scratch::kNarrowNtt, (n + 1) / 2));
  for (size_t j = 0; j < n; ++j) narrow[j] = static_cast<uint32_t>(a[j]);
  if (kInverse) {
    Inverse<U32Lanes8>(t, narrow);
  } else {
    Forward<U32Lanes8>(t, narrow);
  }
  for (size_t j = 0; j < n; ++j) a[j] = narrow[j];
}

}  // namespace

void ForwardAvx2(const NttTables& t, uint64_t* a) { Run32<false>(t, a); }
void InverseAvx2(const NttTables& t, uint64_t* a) { Run32<true>(t, a); }

}  // namespace veil::he::internal
