#include "pir/he/poly.h"

#include <vector>

#include "pir/he/dot_product.h"

namespace veil::he::internal {

void ForwardNtt(absl::Span<const NttTables> rows, uint64_t* p) {
  for (size_t j = 0; j < rows.size(); ++j) rows[j].Forward(p + j * rows[j].n());
}

void InverseNtt(absl::Span<const NttTables> rows, uint64_t* p) {
  for (size_t j = 0; j < rows.size(); ++j) rows[j].Inverse(p + j * rows[j].n());
}

// Cloned for AVX-512 and AVX2, where the loop vectorizes (the baseline, SSE2, has no 64-bit
// compares).
__attribute__((target_clones("avx512f", "avx2", "default"))) void AddRows(
    absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b, uint64_t* out) {
  for (size_t j = 0; j < rows.size(); ++j) {
    const uint64_t q = rows[j].modulus().value();
    const size_t n = rows[j].n(), base = j * n;
    for (size_t c = 0; c < n; ++c) out[base + c] = AddMod(a[base + c], b[base + c], q);
  }
}

// Cloned for AVX-512 and AVX2, where the loop vectorizes (the baseline, SSE2, has no 64-bit
// compares).
__attribute__((target_clones("avx512f", "avx2", "default"))) void SubRows(
    absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b, uint64_t* out) {
  for (size_t j = 0; j < rows.size(); ++j) {
    const uint64_t q = rows[j].modulus().value();
    const size_t n = rows[j].n(), base = j * n;
    for (size_t c = 0; c < n; ++c) out[base + c] = SubMod(a[base + c], b[base + c], q);
  }
}

void NegateRows(absl::Span<const NttTables> rows, const uint64_t* a, uint64_t* out) {
  for (size_t j = 0; j < rows.size(); ++j) {
    const uint64_t q = rows[j].modulus().value();
    const size_t n = rows[j].n(), base = j * n;
    for (size_t c = 0; c < n; ++c) out[base + c] = SubMod(0, a[base + c], q);
  }
}

void MultiplyRows(absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b,
                  uint64_t* out) {
  for (size_t j = 0; j < rows.size(); ++j) {
    const Modulus& q = rows[j].modulus();
    const size_t n = rows[j].n(), base = j * n;
    const size_t done =
        RowProductUsesAvx2F64(q) ? RowProductAvx2F64(q, n, a + base, b + base, out + base) : 0;
    for (size_t c = done; c < n; ++c) out[base + c] = q.Mul(a[base + c], b[base + c]);
  }
}

void MultiplyAccumulateRows(absl::Span<const NttTables> rows, const uint64_t* a, const uint64_t* b,
                            uint64_t* acc) {
  for (size_t j = 0; j < rows.size(); ++j) {
    const Modulus& q = rows[j].modulus();
    const size_t n = rows[j].n(), base = j * n;
    const size_t done =
        RowProductUsesAvx2F64(q) ? RowMultiplyAddAvx2F64(q, n, a + base, b + base, acc + base) : 0;
    for (size_t c = done; c < n; ++c) {
      acc[base + c] = q.Reduce(static_cast<uint128_t>(a[base + c]) * b[base + c] + acc[base + c]);
    }
  }
}

void ApplyGaloisCoefficients(const Modulus& q, int log_n, uint32_t galois, const uint64_t* in,
                             uint64_t* out) {
  const size_t n = size_t{1} << log_n;
  const size_t mask = 2 * n - 1;
  size_t index = 0;  // i * galois mod 2N
  for (size_t i = 0; i < n; ++i, index = (index + galois) & mask) {
    if (index < n) {
      out[index] = in[i];
    } else {
      out[index - n] = q.Neg(in[i]);
    }
  }
}

std::vector<uint32_t> GaloisNttPermutation(int log_n, uint32_t galois) {
  // Slot k holds the evaluation at psi^e, e = 2 bitrev(k) + 1; after X -> X^g it holds the
  // evaluation at psi^(g e), found in slot bitrev((g e mod 2N - 1) / 2).
  const uint32_t n = 1u << log_n, mask = 2 * n - 1;
  std::vector<uint32_t> reversed(n, 0), perm(n);
  for (uint32_t i = 1; i < n; ++i) {
    reversed[i] = (reversed[i >> 1] >> 1) | ((i & 1) << (log_n - 1));
  }
  for (uint32_t k = 0; k < n; ++k) {
    const uint32_t e = 2 * reversed[k] + 1;
    const uint32_t ge = static_cast<uint32_t>((uint64_t{galois} * e) & mask);
    perm[k] = reversed[(ge - 1) / 2];
  }
  return perm;
}

}  // namespace veil::he::internal
