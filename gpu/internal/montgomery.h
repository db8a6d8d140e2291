// Multi-precision Montgomery multiplication and the per-thread phases of the GPU modular product
// (batched Paillier aggregation: the product mod n^2 of many ciphertexts, column by column).
//
// Numbers are `limbs` 32-bit words, little-endian, below an odd modulus N < R = 2^(32 limbs).
// MontMul(a, b) = a b R^(-1) mod N (CIOS: Koc, Acar, Kaliski, "Analyzing and comparing
// Montgomery multiplication algorithms", IEEE Micro 1996). A product of m raw residues computed by
// m - 1 MontMuls, in any tree shape, is their true product times R^-(m-1): every MontMul removes
// one factor R. So the phases multiply raw ciphertexts without converting them into Montgomery
// form, and one final MontMul by R^rows mod N (ProductPlan::correction) restores the product:
//   x R^-(rows-1) * R^rows * R^-1 = x.
//
// Phases (run by gpu/modular_product.cu on the device, by gpu/modular_product.cc on the host):
//   ReduceItem  item (slice s, column c) multiplies the rows s, s + slices, s + 2 slices, ... of
//               column c into one partial product; a launch turns `rows` rows into `slices`.
//   FinishItem  column c: the last partial times the correction.
// Items write disjoint outputs; the only data-dependent branch (the final subtraction of the
// CIOS) depends on public ciphertexts, never on a secret.
#ifndef VEIL_GPU_INTERNAL_MONTGOMERY_H_
#define VEIL_GPU_INTERNAL_MONTGOMERY_H_

#include <cstdint>

#include "dpf/hd.h"

namespace veil::gpu::internal {

// Kernel instantiations by operand size: n^2 of a 1024-, 2048- and 3072-bit Paillier modulus.
inline constexpr int kProductLimbClasses[] = {64, 128, 192};

// -m^(-1) mod 2^32 for odd m (Newton's iteration doubles the correct low bits: 3, 6, 12, 24, 48).
VEIL_HD uint32_t NegInverse32(uint32_t m) {
  uint32_t inv = m;  // m m = 1 mod 8 for odd m
  for (int i = 0; i < 4; ++i) inv *= 2u - m * inv;
  return 0u - inv;
}

// out = a b R^(-1) mod n for a, b < n; out may alias a or b.
template <int kMaxLimbs>
VEIL_HD void MontMul(const uint32_t* a, const uint32_t* b, const uint32_t* n, uint32_t n_inv,
                     int limbs, uint32_t* out) {
  uint32_t t[kMaxLimbs + 2];
  for (int j = 0; j < limbs + 2; ++j) t[j] = 0;
  for (int i = 0; i < limbs; ++i) {
    // t += a b[i]  (each step fits 64 bits: (2^32-1) + (2^32-1)^2 + (2^32-1) = 2^64 - 1)
    const uint64_t bi = b[i];
    uint64_t carry = 0;
    for (int j = 0; j < limbs; ++j) {
      const uint64_t s = uint64_t{t[j]} + uint64_t{a[j]} * bi + carry;
      t[j] = static_cast<uint32_t>(s);
      carry = s >> 32;
    }
    uint64_t s = uint64_t{t[limbs]} + carry;
    t[limbs] = static_cast<uint32_t>(s);
    t[limbs + 1] = static_cast<uint32_t>(s >> 32);
    // t = (t + m n) / 2^32 with m chosen so that the low word vanishes.
    const uint32_t m = t[0] * n_inv;
    carry = (uint64_t{t[0]} + uint64_t{m} * n[0]) >> 32;
    for (int j = 1; j < limbs; ++j) {
      s = uint64_t{t[j]} + uint64_t{m} * n[j] + carry;
      t[j - 1] = static_cast<uint32_t>(s);
      carry = s >> 32;
    }
    s = uint64_t{t[limbs]} + carry;
    t[limbs - 1] = static_cast<uint32_t>(s);
    t[limbs] = t[limbs + 1] + static_cast<uint32_t>(s >> 32);
  }
  // t < 2n: subtract n once if t >= n.
  bool ge = t[limbs] != 0;
  if (!ge) {
    ge = true;  // equal counts as >=
    for (int j = limbs - 1; j >= 0; --j) {
      if (t[j] != n[j]) {
        ge = t[j] > n[j];
        break;
      }
    }
  }
  uint32_t borrow = 0;
  for (int j = 0; j < limbs; ++j) {
    const uint64_t d = uint64_t{t[j]} - (ge ? n[j] : 0u) - borrow;
    out[j] = static_cast<uint32_t>(d);
    borrow = static_cast<uint32_t>(d >> 63);
  }
}

// One launch of the reduction: `rows` x `columns` residues in, `slices` x `columns` out.
struct ProductLaunch {
  const uint32_t* modulus = nullptr;
  uint32_t n_inv = 0;
  int limbs = 0;
  const uint32_t* in = nullptr;  // [row][column][limb]
  uint64_t rows = 0;
  uint64_t columns = 0;
  uint64_t slices = 0;      // 1 <= slices <= rows
  uint32_t* out = nullptr;  // [slice][column][limb]

  VEIL_HD uint64_t items() const { return slices * columns; }
};

template <int kMaxLimbs>
VEIL_HD void ReduceItem(const ProductLaunch& a, uint64_t item) {
  const uint64_t slice = item / a.columns, column = item % a.columns;
  uint32_t acc[kMaxLimbs];
  const uint32_t* first = a.in + (slice * a.columns + column) * a.limbs;
  for (int j = 0; j < a.limbs; ++j) acc[j] = first[j];
  for (uint64_t row = slice + a.slices; row < a.rows; row += a.slices) {
    MontMul<kMaxLimbs>(acc, a.in + (row * a.columns + column) * a.limbs, a.modulus, a.n_inv,
                       a.limbs, acc);
  }
  uint32_t* out = a.out + item * a.limbs;
  for (int j = 0; j < a.limbs; ++j) out[j] = acc[j];
}

// out[column] = partial[column] * correction * R^(-1).
struct FinishLaunch {
  const uint32_t* modulus = nullptr;
  uint32_t n_inv = 0;
  int limbs = 0;
  const uint32_t* partial = nullptr;     // [column][limb]
  const uint32_t* correction = nullptr;  // R^rows mod N
  uint64_t columns = 0;
  uint32_t* out = nullptr;  // [column][limb]
};

template <int kMaxLimbs>
VEIL_HD void FinishItem(const FinishLaunch& a, uint64_t column) {
  MontMul<kMaxLimbs>(a.partial + column * a.limbs, a.correction, a.modulus, a.n_inv, a.limbs,
                     a.out + column * a.limbs);
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_MONTGOMERY_H_
