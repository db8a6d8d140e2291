// Everything derived from BfvParams once: RNS bases, NTT tables, and the constants of encoding,
// decryption (BEHZ), key switching (hybrid, special prime) and multiplication (HPS). Immutable
// and shared (std::shared_ptr<const BfvContext>) by every object of one parameter set.
//
// Prime indices: 0 .. k-1 are the ciphertext primes q_i, k is the special prime P ("QP" rows);
// the auxiliary base R of multiplication and gamma of decryption are separate.
#ifndef VEIL_PIR_HE_BFV_CONTEXT_H_
#define VEIL_PIR_HE_BFV_CONTEXT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv_params.h"
#include "pir/he/ntt.h"
#include "pir/he/rns.h"

namespace veil::he {

namespace internal {

// round(Q m / t) mod q_i = [floor(Q/t)]_{q_i} m + floor(((Q mod t) m + floor((t+1)/2)) / t).
struct EncodeConstants {
  std::vector<uint64_t> q_div_t;  // [floor(Q / t)]_{q_i}
  uint64_t q_mod_t = 0;
};

// BEHZ decryption (Bajard et al., SAC 2016, Sec. 4): fast conversion of t*gamma*[c(s)]_Q to
// {t, gamma}, then the centered gamma residue removes the conversion error.
struct DecryptConstants {
  Modulus gamma;
  BaseConverter q_to_t_gamma;
  std::vector<uint64_t> t_gamma_mod_q, t_gamma_mod_q_shoup;  // [t gamma]_{q_i}
  uint64_t neg_inv_q_mod_t = 0, neg_inv_q_mod_gamma = 0;     // [-Q^{-1}]
  uint64_t inv_gamma_mod_t = 0;
};

// Hybrid key switching with one special prime (SEAL's scheme; digits are the RNS residues).
struct KeySwitchConstants {
  std::vector<uint64_t> p_mod_q;                         // [P]_{q_i}
  std::vector<uint64_t> p_inv_mod_q, p_inv_mod_q_shoup;  // [P^{-1}]_{q_i}
};

// HPS multiplication (Halevi, Polyakov, Shoup, CT-RSA 2019, Sec. 4): tensor in Q u R, then
// round(t x / Q) computed in R ("complex scaling"), then converted back to Q. With
// t R / q_i = omega_i + theta_i (integer + fraction) and a_i = [x_i (QR/q_i)^{-1}]_{q_i}:
//   [round(t x / Q)]_{r_j} = [sum_i a_i [omega_i]_{r_j} + round(sum_i a_i theta_i)
//                              + x_{r_j} [t Q^{-1}]_{r_j}]_{r_j}.
// The fractional sum is taken in double precision: an error there is +-1 on a coefficient, i.e.
// a little extra noise, never a wrong result.
struct MultiplyConstants {
  RnsBase aux;  // R: NTT primes with log2 R > log2 Q + log2 t + log2 N + 3
  std::vector<NttTables> aux_ntt;
  BaseConverter q_to_aux, aux_to_q;
  std::vector<uint64_t> qr_inv_mod_q, qr_inv_mod_q_shoup;  // [(QR/q_i)^{-1}]_{q_i}
  std::vector<uint64_t> omega;                             // [omega_i]_{r_j} at j * k + i
  std::vector<double> theta;
  std::vector<uint64_t> t_inv_q_mod_aux;  // [t Q^{-1}]_{r_j}
};

}  // namespace internal

class BfvContext {
 public:
  // Returns the errors of BfvParams::Create (the parameters are re-validated).
  static absl::StatusOr<std::shared_ptr<const BfvContext>> Create(const BfvParams& params);

  const BfvParams& params() const { return params_; }
  uint64_t id() const { return id_; }
  int log_n() const { return params_.log_n; }
  size_t n() const { return params_.n(); }
  // k: ciphertext primes.
  size_t q_size() const { return params_.q.size(); }
  const RnsBase& q_base() const { return q_base_; }
  const RnsBase& qp_base() const { return qp_base_; }
  // The modulus and NTT tables of QP row i (i == q_size() is P).
  const Modulus& modulus(size_t i) const { return qp_base_[i]; }
  const NttTables& ntt(size_t i) const { return ntt_[i]; }
  // The tables of the Q rows and of the QP rows.
  absl::Span<const NttTables> q_ntt() const { return absl::MakeConstSpan(ntt_).first(q_size()); }
  absl::Span<const NttTables> qp_ntt() const { return ntt_; }
  const Modulus& plain_modulus() const { return plain_ntt_.modulus(); }
  const NttTables& plain_ntt() const { return plain_ntt_; }

  // Batching: slot i (row i / (N/2), column i % (N/2)) is NTT index slot_index()[i] mod t, the
  // evaluation at psi^(3^i) in row 0 and psi^(-3^i) in row 1 (SEAL's matrix_reps_index_map).
  const std::vector<uint32_t>& slot_index() const { return slot_index_; }

  // The NTT-domain permutation of Galois element g (internal::GaloisNttPermutation), computed on
  // first use and cached; thread-safe. g must be odd and below 2N.
  const std::vector<uint32_t>& GaloisPermutation(uint32_t galois) const;

  const internal::EncodeConstants& encode() const { return encode_; }
  const internal::DecryptConstants& decrypt() const { return decrypt_; }
  const internal::KeySwitchConstants& key_switch() const { return key_switch_; }
  const internal::MultiplyConstants& multiply() const { return multiply_; }

  // INVALID_ARGUMENT "<what> belongs to parameters <id>, not to these (<id>)" unless ids match.
  absl::Status CheckId(uint64_t object_id, const char* what) const;

 private:
  BfvContext() = default;
  absl::Status Init();
  absl::Status InitDecrypt();
  absl::Status InitMultiply();

  BfvParams params_;
  uint64_t id_ = 0;
  RnsBase q_base_, qp_base_;
  std::vector<NttTables> ntt_;
  NttTables plain_ntt_;
  std::vector<uint32_t> slot_index_;
  internal::EncodeConstants encode_;
  internal::DecryptConstants decrypt_;
  internal::KeySwitchConstants key_switch_;
  internal::MultiplyConstants multiply_;
  mutable std::mutex galois_mutex_;
  mutable std::map<uint32_t, std::unique_ptr<const std::vector<uint32_t>>> galois_perms_;
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_BFV_CONTEXT_H_
