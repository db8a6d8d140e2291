// AVX-512 NTT kernels (compiled with -mavx512f/dq/bw/vl/ifma; called only after the CPU check
// in ntt.cc). One stage loop serves three lane types:
//   U64   8 x 64-bit lanes: Shoup's quotient = high word of a * w', built from four 32 x 32-bit
//         products (AVX-512 has no 64 x 64 -> 128-bit multiply); q < 2^62;
//   Ifma  8 x 52-bit lanes: vpmadd52huq gives the quotient floor(a * w'' / 2^52) with
//         w'' = floor(w * 2^52 / q) = w' >> 12, and the remainder is exact mod 2^52 (HEXL's
//         AVX512IFMA butterflies); q < 2^50 so that lazy values below 4q fit in 52 bits;
//   U32   16 x 32-bit lanes: the quotient from two vpmuludq (even and odd lanes), products mod
//         2^32 with vpmulld; q < 2^30 so that 4q < 2^32. The data are narrowed to 32 bits for
//         the transform and widened back.
// The stage loops are ntt_lanes.h's.
#include <immintrin.h>

#include "pir/he/ntt.h"
#include "pir/he/ntt_lanes.h"
#include "pir/he/scratch.h"

namespace veil::he::internal {
namespace {

using V = __m512i;

// The vector of every lane type here, and its unaligned load and store.
struct Zmm {
  using V = __m512i;
  static V Load(const void* p) { return _mm512_loadu_si512(p); }
  static void Store(void* p, V v) { _mm512_storeu_si512(p, v); }
};

struct U64Lanes : Zmm {
  using Elem = uint64_t;
  static constexpr size_t kLanes = 8;
  explicit U64Lanes(uint64_t q) : q(_mm512_set1_epi64(q)) {}

  static V Set1(Elem x) { return _mm512_set1_epi64(static_cast<int64_t>(x)); }
  static V Add(V a, V b) { return _mm512_add_epi64(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_epi64(a, b); }
  static V ReduceOnce(V a, V m) { return _mm512_min_epu64(a, _mm512_sub_epi64(a, m)); }
  static V Permute2(V a, V idx, V b) { return _mm512_permutex2var_epi64(a, idx, b); }
  static V Permute(V idx, V a) { return _mm512_permutexvar_epi64(idx, a); }
  static V Index(const int* idx) {
    return _mm512_setr_epi64(idx[0], idx[1], idx[2], idx[3], idx[4], idx[5], idx[6], idx[7]);
  }
  static const Elem* Roots(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots() : t.roots()).data();
  }
  static const Elem* RootsShoup(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots_shoup() : t.roots_shoup()).data();
  }
  static Elem ShoupScalar(uint64_t w_shoup) { return w_shoup; }
  static V ShoupVector(V w_shoup) { return w_shoup; }
  static Elem ShoupOfScalar(uint64_t w, uint64_t q) { return ShoupPrecompute(w, q); }

  static V MulHi(V a, V b) {
    const V low32 = _mm512_set1_epi64(0xffffffff);
    const V a_hi = _mm512_srli_epi64(a, 32), b_hi = _mm512_srli_epi64(b, 32);
    const V ll = _mm512_mul_epu32(a, b), lh = _mm512_mul_epu32(a, b_hi);
    const V hl = _mm512_mul_epu32(a_hi, b), hh = _mm512_mul_epu32(a_hi, b_hi);
    const V mid = _mm512_add_epi64(
        _mm512_srli_epi64(ll, 32),
        _mm512_add_epi64(_mm512_and_si512(lh, low32), _mm512_and_si512(hl, low32)));
    return _mm512_add_epi64(
        _mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32)),
        _mm512_add_epi64(_mm512_srli_epi64(hl, 32), _mm512_srli_epi64(mid, 32)));
  }
  // a * w mod q in [0, 2q) for a < 2^64.
  V MulShoupLazy(V a, V w, V w_shoup) const {
    const V quotient = MulHi(a, w_shoup);
    return _mm512_sub_epi64(_mm512_mullo_epi64(a, w), _mm512_mullo_epi64(quotient, q));
  }

  V q;
};

struct IfmaLanes : U64Lanes {
  explicit IfmaLanes(uint64_t q)
      : U64Lanes(q),
        neg_q(_mm512_set1_epi64(-static_cast<int64_t>(q))),
        mask52(_mm512_set1_epi64((int64_t{1} << 52) - 1)) {}

  static Elem ShoupScalar(uint64_t w_shoup) { return w_shoup >> 12; }
  static V ShoupVector(V w_shoup) { return _mm512_srli_epi64(w_shoup, 12); }
  static Elem ShoupOfScalar(uint64_t w, uint64_t q) { return ShoupPrecompute(w, q) >> 12; }
  // a * w mod q in [0, 2q) for a < 2^52.
  V MulShoupLazy(V a, V w, V w_shoup52) const {
    const V zero = _mm512_setzero_si512();
    const V quotient = _mm512_madd52hi_epu64(zero, a, w_shoup52);
    const V r = _mm512_madd52lo_epu64(_mm512_madd52lo_epu64(zero, a, w), quotient, neg_q);
    return _mm512_and_si512(r, mask52);
  }

  V neg_q, mask52;
};

struct U32Lanes : Zmm, U32Tables {
  static constexpr size_t kLanes = 16;
  explicit U32Lanes(uint64_t q) : q(_mm512_set1_epi32(static_cast<int32_t>(q))) {}

  static V Set1(Elem x) { return _mm512_set1_epi32(static_cast<int32_t>(x)); }
  static V Add(V a, V b) { return _mm512_add_epi32(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_epi32(a, b); }
  static V ReduceOnce(V a, V m) { return _mm512_min_epu32(a, _mm512_sub_epi32(a, m)); }
  static V Permute2(V a, V idx, V b) { return _mm512_permutex2var_epi32(a, idx, b); }
  static V Permute(V idx, V a) { return _mm512_permutexvar_epi32(idx, a); }
  static V Index(const int* idx) { return _mm512_loadu_si512(idx); }
  static V ShoupVector(V w_shoup) { return w_shoup; }

  // a * w mod q in [0, 2q) for a < 2^32: quotient = floor(a * w' / 2^32) lane by lane.
  V MulShoupLazy(V a, V w, V w_shoup) const {
    const V even = _mm512_srli_epi64(_mm512_mul_epu32(a, w_shoup), 32);
    const V odd = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), _mm512_srli_epi64(w_shoup, 32));
    const V quotient = _mm512_mask_blend_epi32(0xAAAA, even, odd);
    return _mm512_sub_epi32(_mm512_mullo_epi32(a, w), _mm512_mullo_epi32(quotient, q));
  }

  V q;
};

// The 32-bit kernels work on a narrowed copy (values < q < 2^30), in a scratch buffer: no
// std::vector here, whose members compiled for AVX-512 could be the copy every caller links to.
template <bool kInverse>
void Run32(const NttTables& t, uint64_t* a) {
  const size_t n = t.n();
  uint32_t* narrow = reinterpret_cast<uint32_t*>(GetScratch(Scratch::kNarrowNtt, (n + 1) / 2));
  for (size_t j = 0; j < n; j += 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(narrow + j),
                        _mm512_cvtepi64_epi32(Zmm::Load(a + j)));
  }
  if (kInverse) {
    Inverse<U32Lanes>(t, narrow);
  } else {
    Forward<U32Lanes>(t, narrow);
  }
  for (size_t j = 0; j < n; j += 8) {
    Zmm::Store(a + j, _mm512_cvtepu32_epi64(
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(narrow + j))));
  }
}

template <class L>
void MultiplyAdd(uint64_t qv, uint64_t w, const typename L::Elem* b, typename L::Elem* acc,
                 size_t count) {
  const L ops(qv);
  const V q = L::Set1(static_cast<typename L::Elem>(qv));
  const V wv = L::Set1(static_cast<typename L::Elem>(w));
  const V ws = L::Set1(L::ShoupOfScalar(w, qv));
  for (size_t i = 0; i + L::kLanes <= count; i += L::kLanes) {
    const V product = L::ReduceOnce(ops.MulShoupLazy(L::Load(b + i), wv, ws), q);
    L::Store(acc + i, L::ReduceOnce(L::Add(L::Load(acc + i), product), q));
  }
}

}  // namespace

void MultiplyAddAvx512(const NttTables& t, NttKernel kernel, uint64_t w, const uint64_t* b,
                       uint64_t* acc, size_t count) {
  const uint64_t q = t.modulus().value();
  const size_t vectors = count / 8 * 8;
  switch (kernel) {
    case NttKernel::kAvx512Ifma:
      MultiplyAdd<IfmaLanes>(q, w, b, acc, vectors);
      break;
    default:
      MultiplyAdd<U64Lanes>(q, w, b, acc, vectors);
  }
  MultiplyAddScalar(t, w, b + vectors, acc + vectors, count - vectors);
}

void ForwardAvx512(const NttTables& t, NttKernel kernel, uint64_t* a) {
  switch (kernel) {
    case NttKernel::kAvx512Ifma:
      return Forward<IfmaLanes>(t, a);
    case NttKernel::kAvx512U32:
      return Run32<false>(t, a);
    default:
      return Forward<U64Lanes>(t, a);
  }
}

void InverseAvx512(const NttTables& t, NttKernel kernel, uint64_t* a) {
  switch (kernel) {
    case NttKernel::kAvx512Ifma:
      return Inverse<IfmaLanes>(t, a);
    case NttKernel::kAvx512U32:
      return Run32<true>(t, a);
    default:
      return Inverse<U64Lanes>(t, a);
  }
}

}  // namespace veil::he::internal
