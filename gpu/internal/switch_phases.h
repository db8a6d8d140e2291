// The packed response's switch to q' (pir/lattice's ModSwitch) on the GPU as per-thread phases:
// one block per ciphertext half. Its k rows go back to coefficients one after the other in the
// block's shared memory (the GPU NTT's phases); the last row's inverse transform ends in the
// switch itself, which reads that row from shared memory and the others from global memory:
// round(q' x / Q) of each coefficient x from its residues, as RingContext::SwitchResidue computes
// it (sum_i frac(y_i / q_i) in 64-bit fixed point, y_i = x_i (Q / q_i)^{-1} mod q_i), so the words
// equal ModSwitch's bit for bit.
#ifndef VEIL_GPU_INTERNAL_SWITCH_PHASES_H_
#define VEIL_GPU_INTERNAL_SWITCH_PHASES_H_

#include <cstdint>

#include "dpf/hd.h"
#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/phases.h"
#include "pir/he/modarith_hd.h"

namespace veil::gpu::internal {

inline constexpr uint32_t kSwitchMaxPrimes = 16;

struct SwitchArgs {
  uint32_t log_n = 0, k = 0;
  NttArgs inverse[kSwitchMaxPrimes];  // per prime; data set per row
  uint64_t moduli[kSwitchMaxPrimes] = {};
  uint64_t punctured[kSwitchMaxPrimes] = {};        // (Q / q_i)^{-1} mod q_i
  uint64_t punctured_shoup[kSwitchMaxPrimes] = {};  // its Shoup factor
  uint64_t ratio_hi[kSwitchMaxPrimes] = {};         // floor(2^128 / q_i), high and low words
  uint64_t ratio_lo[kSwitchMaxPrimes] = {};
  uint64_t target = 0;         // q'
  uint64_t* halves = nullptr;  // half h's k rows at h k N (NTT form; left in coefficient form)
  uint32_t* out = nullptr;     // half h's N words at h N
};

// round(target f / 2^64) mod target (RingContext's ScaleFraction), branch-free.
VEIL_HD uint32_t ScaleFraction(uint64_t f, uint64_t target) {
  const uint64_t r = he::MulHi64(f, target) + ((f * target) >> 63);
  return static_cast<uint32_t>(r - (target & (0 - static_cast<uint64_t>(r == target))));
}

VEIL_GPU_EXEC_CHECK_DISABLE
template <class Runner>
VEIL_HD void SwitchBlock(Runner& run, const SwitchArgs& a, uint32_t half, uint64_t* s) {
  const uint32_t n = 1u << a.log_n, last = a.k - 1;
  uint64_t* rows = a.halves + uint64_t{half} * a.k * n;
  for (uint32_t i = 0; i < a.k; ++i) {
    NttArgs t = a.inverse[i];
    t.data = rows + uint64_t{i} * n;
    t.batch = 1;
    if (i < last) {
      NttBlock(run, t, 0, s);
      continue;
    }
    // The last row: the inverse transform in shared memory, then the switch.
    run.Phase(n, [&](uint32_t c) { s[c] = t.data[c]; });
    for (uint32_t m = n / 2, w = 1; m >= 1; m /= 2, w *= 2) {
      run.Phase(n / 2, [&](uint32_t b) { NttButterfly(t, s, m, w, b); });
    }
    run.Phase(n, [&](uint32_t c) {
      uint64_t f = 0;
      for (uint32_t j = 0; j < a.k; ++j) {
        const uint64_t x =
            j == last ? he::MontMul(s[c], t.n_inv_mont, t.q, t.q_inv) : rows[uint64_t{j} * n + c];
        const uint64_t y = he::MulShoup(x, a.punctured[j], a.punctured_shoup[j], a.moduli[j]);
        f += y * a.ratio_hi[j] + he::MulHi64(y, a.ratio_lo[j]);
      }
      a.out[uint64_t{half} * n + c] = ScaleFraction(f, a.target);
    });
  }
}

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_SWITCH_PHASES_H_
