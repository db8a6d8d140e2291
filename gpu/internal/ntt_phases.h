// The GPU NTT's kernel body as per-thread phases (the pattern of phases.h): a block transforms one
// polynomial of N <= 2^12 residues in shared memory, one phase per butterfly stage, separated by
// barriers. The same body runs on the device (gpu/ntt.cu) and, thread by thread, on the host
// (gpu/ntt_host_run.cc) in CI.
//
// Arithmetic: Montgomery multiplication (R = 2^64) with the roots stored in Montgomery form, so
// MontMul(x, w R) = x w mod q and the data stay in normal form; every butterfly reduces fully.
// The stages and root order are those of pir/he/ntt.h (forward Cooley-Tukey to bit-reversed
// order, inverse Gentleman-Sande, then N^{-1}): the outputs equal he::NttTables' bit for bit.
#ifndef VEIL_GPU_INTERNAL_NTT_PHASES_H_
#define VEIL_GPU_INTERNAL_NTT_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "pir/he/modarith_hd.h"

#if defined(__CUDACC__)
#define VEIL_GPU_NTT_EXEC_CHECK_DISABLE _Pragma("nv_exec_check_disable")
#else
#define VEIL_GPU_NTT_EXEC_CHECK_DISABLE
#endif

namespace veil::gpu::internal {

inline constexpr int kNttMaxLogN = 12;  // 4096 residues = 32 KiB of shared memory per block
inline constexpr uint32_t kNttBlockThreads = 512;

struct NttArgs {
  const uint64_t* roots = nullptr;  // roots[m + i] of stage m (forward or inverse), Montgomery form
  uint64_t q = 0;
  uint64_t q_inv = 0;       // q^{-1} mod 2^64
  uint64_t n_inv_mont = 0;  // N^{-1} R mod q (inverse)
  int log_n = 0;
  bool inverse = false;
  uint64_t* data = nullptr;  // batch polynomials of N residues, transformed in place
  uint32_t batch = 0;
};

// Butterfly t (< N/2) of the stage whose groups start at roots[m] and are 2 half wide.
VEIL_HD void NttButterfly(const NttArgs& a, uint64_t* x, uint32_t m, uint32_t half, uint32_t t) {
  const uint32_t group = t / half, j = 2 * group * half + t % half;
  const uint64_t w = a.roots[m + group];
  const uint64_t u = x[j], v = x[j + half];
  if (!a.inverse) {
    const uint64_t wv = he::MontMul(v, w, a.q, a.q_inv);
    x[j] = he::AddMod(u, wv, a.q);
    x[j + half] = he::SubMod(u, wv, a.q);
  } else {
    x[j] = he::AddMod(u, v, a.q);
    x[j + half] = he::MontMul(he::SubMod(u, v, a.q), w, a.q, a.q_inv);
  }
}

// One block: polynomial `poly`, shared memory `s` of N residues.
VEIL_GPU_NTT_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void NttBlock(Runner& run, const NttArgs& a, uint32_t poly, uint64_t* s) {
  const uint32_t n = 1u << a.log_n;
  uint64_t* x = a.data + uint64_t{poly} * n;
  run.Phase(n, [&](uint32_t i) { s[i] = x[i]; });
  if (!a.inverse) {
    for (uint32_t m = 1, half = n / 2; m < n; m *= 2, half /= 2) {
      run.Phase(n / 2, [&](uint32_t t) { NttButterfly(a, s, m, half, t); });
    }
    run.Phase(n, [&](uint32_t i) { x[i] = s[i]; });
  } else {
    for (uint32_t m = n / 2, half = 1; m >= 1; m /= 2, half *= 2) {
      run.Phase(n / 2, [&](uint32_t t) { NttButterfly(a, s, m, half, t); });
    }
    run.Phase(n, [&](uint32_t i) { x[i] = he::MontMul(s[i], a.n_inv_mont, a.q, a.q_inv); });
  }
}

// ---- 32-bit lanes, for primes below 2^32 (the lattice rings') --------------------------------
// Montgomery with R = 2^32: a 32 x 32-bit product and two more multiplies per butterfly instead of
// the 64-bit form's three 64 x 64-bit ones, and half the shared memory. Same stages and root
// order, every value fully reduced: the outputs equal NttBlock's (and he::NttTables') bit for bit.
struct Ntt32Args {
  const uint32_t* roots = nullptr;  // roots[m + i] of stage m, w 2^32 mod q
  uint32_t q = 0;
  uint32_t q_inv = 0;       // q^{-1} mod 2^32
  uint32_t n_inv_mont = 0;  // N^{-1} 2^32 mod q (inverse)
};

// a b 2^{-32} mod q for a, b < q < 2^32: m = (a b) q^{-1} mod 2^32 makes a b - m q a multiple of
// 2^32 in (-q 2^32, q 2^32), so its high words' difference is exact.
VEIL_HD uint32_t MontMul32(uint32_t a, uint32_t b, uint32_t q, uint32_t q_inv) {
  const uint64_t t = uint64_t{a} * b;
  const uint32_t m = static_cast<uint32_t>(t) * q_inv;
  const uint32_t t_hi = static_cast<uint32_t>(t >> 32);
  const uint32_t mq_hi = static_cast<uint32_t>((uint64_t{m} * q) >> 32);
  return t_hi >= mq_hi ? t_hi - mq_hi : t_hi - mq_hi + q;
}
// (a + b) mod q for a, b < q < 2^32 (a carry out of 32 bits means the sum is above q).
VEIL_HD uint32_t AddMod32(uint32_t a, uint32_t b, uint32_t q) {
  const uint32_t s = a + b;
  return (s < a || s >= q) ? s - q : s;
}
VEIL_HD uint32_t SubMod32(uint32_t a, uint32_t b, uint32_t q) { return a >= b ? a - b : a - b + q; }

// One block transforms the N residues at x (64-bit words below q) in place, through s (N 32-bit
// words of shared memory).
VEIL_GPU_NTT_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void Ntt32Block(Runner& run, const Ntt32Args& a, int log_n, bool inverse, uint64_t* x,
                        uint32_t* s) {
  const uint32_t n = 1u << log_n;
  run.Phase(n, [&](uint32_t i) { s[i] = static_cast<uint32_t>(x[i]); });
  if (!inverse) {
    for (uint32_t m = 1, half = n / 2; m < n; m *= 2, half /= 2) {
      run.Phase(n / 2, [&](uint32_t t) {
        const uint32_t group = t / half, j = 2 * group * half + t % half;
        const uint32_t u = s[j], wv = MontMul32(s[j + half], a.roots[m + group], a.q, a.q_inv);
        s[j] = AddMod32(u, wv, a.q);
        s[j + half] = SubMod32(u, wv, a.q);
      });
    }
    run.Phase(n, [&](uint32_t i) { x[i] = s[i]; });
  } else {
    for (uint32_t m = n / 2, half = 1; m >= 1; m /= 2, half *= 2) {
      run.Phase(n / 2, [&](uint32_t t) {
        const uint32_t group = t / half, j = 2 * group * half + t % half;
        const uint32_t u = s[j], v = s[j + half];
        s[j] = AddMod32(u, v, a.q);
        s[j + half] = MontMul32(SubMod32(u, v, a.q), a.roots[m + group], a.q, a.q_inv);
      });
    }
    run.Phase(n, [&](uint32_t i) { x[i] = MontMul32(s[i], a.n_inv_mont, a.q, a.q_inv); });
  }
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_NTT_PHASES_H_
