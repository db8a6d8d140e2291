// Worst-case bounds on the invariant noise v of BFV ciphertexts (bfv.h), as log2 ||v||_inf, and
// the budgets they imply (-1 - log2 ||v||). Every bound is deterministic: it uses the infinity
// norm with the ring expansion factor N (||a b|| <= N ||a|| ||b||), the hard bound 21 of the
// CBD(21) errors and |s|, |u| <= 1. Measured budgets (NoiseBudget) must stay at or above the
// predicted ones; they are typically far above (random products grow like sqrt(N), not N).
//   fresh symmetric   c(s) = round(Q m / t) + e:            ||v|| <= t (B + 1/2) / Q
//   fresh public      e u + e0 + e1 s:                        ||v|| <= t (B (2N + 1) + 1/2) / Q
//   add               v1 + v2
//   plain multiply    v m, m centered:                        ||v|| N ||m||
//   key switching     sum_i d_i e_i / P + rounding:           t (k N q_max B / P + (N+1)/2) / Q
//   multiply + relin  HPS: m1 v2 + m2 v1 + v1 v2 + t (v1 r2 + v2 r1) + rounding, with
//                     ||r_i|| <= (N+1)/2 (c_0 + c_1 s over Z is at most (N+1) Q / 2), then the
//                     relinearisation's key switching.
#ifndef VEIL_PIR_HE_NOISE_MODEL_H_
#define VEIL_PIR_HE_NOISE_MODEL_H_

#include "pir/he/bfv_context.h"

namespace veil::he {

class NoiseModel {
 public:
  explicit NoiseModel(const BfvContext& ctx);

  // log2 ||v|| after each operation.
  double FreshSymmetric() const;
  double FreshPublic() const;
  double Add(double a, double b) const;
  // plain_norm: the largest |coefficient| of the centered plaintext (t/2 for arbitrary slots).
  double MultiplyPlain(double v, double plain_norm) const;
  double Rotate(double v) const;
  double MultiplyRelin(double a, double b) const;
  // The budget in bits that a bound implies (may be negative: decryption may fail).
  static double Budget(double log2_v) { return -1.0 - log2_v; }

 private:
  double KeySwitchTerm() const;  // log2 of the invariant noise one key switch adds

  double log2_q_, log2_t_, n_, k_, log2_q_max_, log2_p_;
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_NOISE_MODEL_H_
