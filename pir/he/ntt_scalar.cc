// The scalar NTT with Harvey's lazy butterflies (Harvey 2014, Alg. 4 forward, Alg. 3 inverse):
// forward values stay in [0, 4q), inverse values in [0, 2q); one full reduction at the end.
#include "pir/he/ntt.h"

namespace veil::he::internal {

void ForwardScalar(const NttTables& t, uint64_t* a) {
  const uint64_t q = t.modulus().value(), two_q = 2 * q;
  const size_t n = t.n();
  const uint64_t* w = t.roots().data();
  const uint64_t* ws = t.roots_shoup().data();
  for (size_t m = 1, half = n / 2; m < n; m *= 2, half /= 2) {
    for (size_t i = 0; i < m; ++i) {
      uint64_t* x = a + 2 * i * half;
      uint64_t* y = x + half;
      const uint64_t wi = w[m + i], wsi = ws[m + i];
      for (size_t j = 0; j < half; ++j) {
        uint64_t u = x[j];
        u = u >= two_q ? u - two_q : u;
        const uint64_t v = MulShoupLazy(y[j], wi, wsi, q);
        x[j] = u + v;
        y[j] = u - v + two_q;
      }
    }
  }
  for (size_t j = 0; j < n; ++j) {
    uint64_t v = a[j];
    v = v >= two_q ? v - two_q : v;
    a[j] = v >= q ? v - q : v;
  }
}

void InverseScalar(const NttTables& t, uint64_t* a) {
  const uint64_t q = t.modulus().value(), two_q = 2 * q;
  const size_t n = t.n();
  const uint64_t* w = t.inverse_roots().data();
  const uint64_t* ws = t.inverse_roots_shoup().data();
  for (size_t m = n / 2, half = 1; m >= 1; m /= 2, half *= 2) {
    for (size_t i = 0; i < m; ++i) {
      uint64_t* x = a + 2 * i * half;
      uint64_t* y = x + half;
      const uint64_t wi = w[m + i], wsi = ws[m + i];
      for (size_t j = 0; j < half; ++j) {
        const uint64_t u = x[j], v = y[j];
        const uint64_t s = u + v;
        x[j] = s >= two_q ? s - two_q : s;
        y[j] = MulShoupLazy(u - v + two_q, wi, wsi, q);
      }
    }
  }
  const uint64_t ni = t.n_inverse(), nis = t.n_inverse_shoup();
  for (size_t j = 0; j < n; ++j) a[j] = MulShoup(a[j], ni, nis, q);
}

void MultiplyAddScalar(const NttTables& t, uint64_t w, const uint64_t* b, uint64_t* acc,
                       size_t count) {
  const uint64_t q = t.modulus().value(), ws = t.modulus().ShoupOf(w);
  for (size_t i = 0; i < count; ++i) acc[i] = AddMod(acc[i], MulShoup(b[i], w, ws, q), q);
}

}  // namespace veil::he::internal
