#include "pir/he/dot_product.h"

#include <algorithm>

#include "pir/he/modarith_hd.h"

namespace veil::he::internal {

namespace {

template <typename Plain>
void ReferenceKernel(const DotProductArgsOf<Plain>& a, size_t first_slot) {
  const Modulus& q = *a.q;
  const uint128_t square = static_cast<uint128_t>(q.value() - 1) * (q.value() - 1);
  // Terms a 128-bit sum takes before it could overflow (at least 16 below 2^62).
  const size_t batch = static_cast<size_t>(std::min<uint128_t>(
      ~static_cast<uint128_t>(0) / std::max<uint128_t>(square, 1) - 1, 1 << 20));
  for (size_t c = first_slot; c < a.n; ++c) {
    uint64_t r0 = a.accumulate ? a.out0[c] : 0, r1 = a.accumulate ? a.out1[c] : 0;
    for (size_t first = 0; first < a.terms; first += batch) {
      uint128_t s0 = r0, s1 = r1;
      for (size_t i = first; i < std::min(a.terms, first + batch); ++i) {
        s0 += static_cast<uint128_t>(a.plain[i][c]) * a.c0[i][c];
        s1 += static_cast<uint128_t>(a.plain[i][c]) * a.c1[i][c];
      }
      r0 = q.Reduce(s0);
      r1 = q.Reduce(s1);
    }
    a.out0[c] = r0;
    a.out1[c] = r1;
  }
}

template <typename Plain>
void Dispatch(const DotProductArgsOf<Plain>& a) {
  if (PlainDotProductUsesIfma(*a.q)) {
    PlainDotProductIfma(a);
  } else {
    PlainDotProductReference(a);
  }
}

}  // namespace

void PlainDotProductReference(const DotProductArgs& a, size_t first) { ReferenceKernel(a, first); }
void PlainDotProductReference(const DotProductArgs32& a, size_t first) {
  ReferenceKernel(a, first);
}
void PlainDotProduct(const DotProductArgs& a) { Dispatch(a); }
void PlainDotProduct(const DotProductArgs32& a) { Dispatch(a); }

bool PlainDotProductUsesIfma(const Modulus& q) {
  static const bool ifma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512ifma");
  }();
  return ifma && q.bits() <= 50;
}

void TileDotProductReference(const TileDotProductArgs& a) {
  const Modulus& q = *a.q;
  for (size_t t = 0; t < a.tiles; ++t) {
    const uint32_t* plain = a.plain + t * a.terms * 8;
    uint64_t* out = a.out + t * a.out_stride;
    for (size_t h = 0; h < 2; ++h) {
      for (size_t l = 0; l < 8; ++l) {
        uint64_t sum = 0;
        for (size_t r = 0; r < a.terms; ++r) {
          sum = q.Add(sum, q.Reduce(static_cast<uint128_t>(plain[r * 8 + l]) *
                                    a.keys[(r * 2 + h) * 8 + l]));
        }
        out[h * a.half_stride + l] = sum;
      }
    }
  }
}

bool TileDotProductUsesIfma(const TileDotProductArgs& a) {
  return PlainDotProductUsesIfma(*a.q) && a.q->bits() >= 21 && a.q->bits() <= 31 && a.terms <= 2048;
}

void TileDotProduct(const TileDotProductArgs& a) {
  if (TileDotProductUsesIfma(a)) {
    TileDotProductIfma(a);
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
  } else {
    SubMulShoupReference(q, n, x, y, w, w_shoup, w_step, out);
  }
}

}  // namespace veil::he::internal
