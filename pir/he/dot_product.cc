#include "pir/he/dot_product.h"

#include <algorithm>
#include <type_traits>

#include "pir/he/modarith_hd.h"

namespace veil::he::internal {

bool CpuHasAvx2() {
  static const bool avx2 = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2");
  }();
  return avx2;
}

namespace {

// Slots a tile of the reference kernel sums at a time: its 128-bit sums stay in L1 while each
// term's three rows stream through once. Going slot by slot over all terms instead reads 3 x terms
// rows at once, N x 8 bytes apart, which alias in the same L1 sets (measured on an AMD EPYC
// without AVX-512, 2026-12-06: a 65,536 x 15 bfv-bag product 20% slower than 65,536 x 16).
constexpr size_t kReferenceTile = 128;

// The reference's sums in `Sum` (uint64_t or uint128_t), reduced every `batch` terms.
template <typename Sum, typename Plain, typename Cipher>
void SumSlots(const DotProductArgsOf<Plain, Cipher>& a, size_t first_slot, size_t batch) {
  const Modulus& q = *a.q;
  Sum s0[kReferenceTile], s1[kReferenceTile];
  for (size_t tile = first_slot; tile < a.n; tile += kReferenceTile) {
    const size_t len = std::min(kReferenceTile, a.n - tile);
    for (size_t c = 0; c < len; ++c) {
      s0[c] = a.accumulate ? a.out0[tile + c] : 0;
      s1[c] = a.accumulate ? a.out1[tile + c] : 0;
    }
    for (size_t first = 0; first < a.terms; first += batch) {
      if (first != 0) {
        for (size_t c = 0; c < len; ++c) {
          s0[c] = q.Reduce(s0[c]);
          s1[c] = q.Reduce(s1[c]);
        }
      }
      for (size_t i = first; i < std::min(a.terms, first + batch); ++i) {
        const Plain* plain = a.plain[i] + tile;
        const Cipher* x0 = a.c0[i] + tile;
        const Cipher* x1 = a.c1[i] + tile;
        for (size_t c = 0; c < len; ++c) {
          s0[c] += static_cast<Sum>(plain[c]) * x0[c];
          s1[c] += static_cast<Sum>(plain[c]) * x1[c];
        }
      }
    }
    for (size_t c = 0; c < len; ++c) {
      a.out0[tile + c] = q.Reduce(s0[c]);
      a.out1[tile + c] = q.Reduce(s1[c]);
    }
  }
}

template <typename Plain, typename Cipher>
void ReferenceKernel(const DotProductArgsOf<Plain, Cipher>& a, size_t first_slot) {
  const Modulus& q = *a.q;
  const uint128_t square = static_cast<uint128_t>(q.value() - 1) * (q.value() - 1);  // >= 4
  // Every sum within 64 bits (terms (q - 1)^2 + q < 2^64: key switching's few terms over primes
  // below 2^30): 64-bit sums and the inline 64-bit reduction, once.
  if (a.terms <= (~uint64_t{0} - q.value()) / square) {
    SumSlots<uint64_t>(a, first_slot, std::max<size_t>(a.terms, 1));
    return;
  }
  // Terms a 128-bit sum takes before it could overflow (at least 16 below 2^62).
  const size_t batch =
      static_cast<size_t>(std::min<uint128_t>(~static_cast<uint128_t>(0) / square - 1, 1 << 20));
  SumSlots<uint128_t>(a, first_slot, batch);
}

template <typename Plain>
void Dispatch(const DotProductArgsOf<Plain>& a) {
  if constexpr (std::is_same_v<Plain, uint64_t>) {  // neither IFMA nor 64-bit sums serve
    if (PlainDotProductUsesAvx2F64(*a.q, a.terms)) return PlainDotProductAvx2F64(a);
  }
  if (PlainDotProductUsesIfma(*a.q)) {
    PlainDotProductIfma(a);
  } else if (PlainDotProductUsesAvx2(*a.q, a.terms)) {
    PlainDotProductAvx2(a);
  } else {
    PlainDotProductReference(a);
  }
}

}  // namespace

void PlainDotProductReference(const DotProductArgs& a, size_t first) { ReferenceKernel(a, first); }
void PlainDotProductReference(const DotProductArgs32& a, size_t first) {
  ReferenceKernel(a, first);
}
void PlainDotProductReference(const DotProductArgsNarrowKeys& a, size_t first) {
  ReferenceKernel(a, first);
}
void PlainDotProduct(const DotProductArgs& a) { Dispatch(a); }
void PlainDotProduct(const DotProductArgs32& a) { Dispatch(a); }
void PlainDotProduct(const DotProductArgsNarrowKeys& a) {
  if (PlainDotProductUsesAvx2(*a.q, a.terms)) {
    PlainDotProductAvx2(a);
  } else {
    PlainDotProductReference(a);
  }
}

bool PlainDotProductUsesIfma(const Modulus& q) {
  static const bool ifma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512ifma");
  }();
  return ifma && q.bits() <= 50;
}

bool PlainDotProductUsesAvx2(const Modulus& q, size_t terms) {
  const uint64_t largest = q.value() - 1;
  return CpuHasAvx2() && !PlainDotProductUsesIfma(q) && q.bits() <= 32 &&
         terms <= ~uint64_t{0} / (largest * largest);
}

bool RowProductUsesAvx2F64(const Modulus& q) {
  static const bool fma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma");
  }();
  return CpuHasAvx2() && fma && q.bits() <= 50;
}

bool PlainDotProductUsesAvx2F64(const Modulus& q, size_t terms) {
  return RowProductUsesAvx2F64(q) && !PlainDotProductUsesIfma(q) &&
         !PlainDotProductUsesAvx2(q, terms);
}

void TileDotProductReference(const TileDotProductArgs& a) {
  // Each product is below 2^32 q < 2^94, so a 128-bit sum takes 2^30 terms with room to spare:
  // one reduction per slot (per 2^30 terms).
  constexpr size_t kTermsPerReduction = size_t{1} << 30;
  const Modulus& q = *a.q;
  for (size_t t = 0; t < a.tiles; ++t) {
    const uint32_t* plain = a.plain + t * a.terms * 8;
    uint128_t sum[2][8] = {};
    for (size_t r = 0; r < a.terms; ++r) {
      if (r != 0 && r % kTermsPerReduction == 0) {
        for (auto& half : sum) {
          for (uint128_t& s : half) s = q.Reduce(s);
        }
      }
      const uint32_t* p = plain + r * 8;
      const uint64_t* k = a.keys + r * 16;
      for (size_t l = 0; l < 8; ++l) {
        sum[0][l] += static_cast<uint128_t>(p[l]) * k[l];
        sum[1][l] += static_cast<uint128_t>(p[l]) * k[8 + l];
      }
    }
    uint64_t* out = a.out + t * a.out_stride;
    for (size_t h = 0; h < 2; ++h) {
      for (size_t l = 0; l < 8; ++l) out[h * a.half_stride + l] = q.Reduce(sum[h][l]);
    }
  }
}

bool TileDotProductUsesIfma(const TileDotProductArgs& a) {
  return PlainDotProductUsesIfma(*a.q) && a.q->bits() >= 21 && a.q->bits() <= 31 && a.terms <= 2048;
}

bool TileDotProductUsesAvx2(const TileDotProductArgs& a) {
  return CpuHasAvx2() && !TileDotProductUsesIfma(a) && a.q->bits() <= 32;
}

void TileDotProduct(const TileDotProductArgs& a) {
  if (TileDotProductUsesIfma(a)) {
    TileDotProductIfma(a);
  } else if (TileDotProductUsesAvx2(a)) {
    TileDotProductAvx2(a);
  } else {
    TileDotProductReference(a);
  }
}

void SubMulShoupReference(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                          const uint64_t* w, const uint64_t* w_shoup, size_t w_step,
                          uint64_t* out) {
  for (size_t c = 0; c < n; ++c) {
    out[c] = MulShoup(SubMod(x[c], y[c], q.value()), w[c * w_step], w_shoup[c * w_step], q.value());
  }
}

void SubMulShoup(const Modulus& q, size_t n, const uint64_t* x, const uint64_t* y,
                 const uint64_t* w, const uint64_t* w_shoup, size_t w_step, uint64_t* out) {
  if (PlainDotProductUsesIfma(q)) {
    SubMulShoupIfma(q, n, x, y, w, w_shoup, w_step, out);
  } else if (CpuHasAvx2() && q.bits() <= 32) {
    SubMulShoupAvx2(q, n, x, y, w, w_shoup, w_step, out);
  } else {
    SubMulShoupReference(q, n, x, y, w, w_shoup, w_step, out);
  }
}

}  // namespace veil::he::internal
