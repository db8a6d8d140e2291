// Residue number system: a base of pairwise coprime word-sized moduli q_0 .. q_{k-1} with
// Q = prod q_i, CRT composition (to a multi-word integer, or to __int128 where Q < 2^128), and
// conversion between bases as RNS BFV needs it:
//   FastConvert  x -> x + a*Q in the new base, 0 <= a < k, no correction (Bajard, Eynard, Hasan,
//                Zucca, "A Full RNS Variant of FV like Somewhat Homomorphic Encryption Schemes",
//                SAC 2016, Sec. 2.2). Used by decryption, which then corrects with gamma.
//   ExactConvert the centered representative of x in (-Q/2, Q/2], the overflow count a found in
//                double precision (Halevi, Polyakov, Shoup, "An Improved RNS Variant of the BFV
//                Homomorphic Encryption Scheme", CT-RSA 2019, Sec. 2.2). Used by multiplication.
// Polynomials in RNS form are prime-major: residue i of coefficient c at [i * n + c].
#ifndef VEIL_PIR_HE_RNS_H_
#define VEIL_PIR_HE_RNS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/modarith.h"

namespace veil::he {

// Largest base handled by the converters: k products below 2^124 sum below 2^128.
inline constexpr size_t kMaxRnsPrimes = 16;

class RnsBase {
 public:
  // Returns INVALID_ARGUMENT if the list is empty or longer than kMaxRnsPrimes, a modulus is
  // invalid (Modulus::Create) or two moduli share a factor.
  static absl::StatusOr<RnsBase> Create(const std::vector<uint64_t>& moduli);

  size_t size() const { return moduli_.size(); }
  const Modulus& operator[](size_t i) const { return moduli_[i]; }
  const std::vector<Modulus>& moduli() const { return moduli_; }
  std::vector<uint64_t> values() const;
  // Q as size() little-endian words.
  absl::Span<const uint64_t> product() const { return product_; }
  int product_bits() const;
  // Q / q_i as size() words, and [(Q / q_i)^{-1}]_{q_i} with its Shoup companion.
  absl::Span<const uint64_t> punctured_product(size_t i) const {
    return absl::MakeConstSpan(punctured_).subspan(i * size(), size());
  }
  uint64_t punctured_inverse(size_t i) const { return punctured_inv_[i]; }
  uint64_t punctured_inverse_shoup(size_t i) const { return punctured_inv_shoup_[i]; }

  // x in [0, Q) from its residues residues[i * stride], as size() words in `out`.
  void Compose(const uint64_t* residues, size_t stride, absl::Span<uint64_t> out) const;
  // The residues of a multi-word x (any length), written to residues[i * stride].
  void Decompose(absl::Span<const uint64_t> x, uint64_t* residues, size_t stride) const;
  // Compose for Q < 2^128. Returns FAILED_PRECONDITION if Q does not fit in 128 bits.
  absl::StatusOr<uint128_t> ComposeU128(const uint64_t* residues, size_t stride) const;

 private:
  std::vector<Modulus> moduli_;
  std::vector<uint64_t> product_;
  std::vector<uint64_t> punctured_;
  std::vector<uint64_t> punctured_inv_;
  std::vector<uint64_t> punctured_inv_shoup_;
};

class BaseConverter {
 public:
  // Returns INVALID_ARGUMENT if the bases share a modulus.
  static absl::StatusOr<BaseConverter> Create(const RnsBase& from, const RnsBase& to);

  const RnsBase& from() const { return from_; }
  const RnsBase& to() const { return to_; }

  // in: from.size() x n residues (prime-major); out: to.size() x n. out may not alias in.
  // out = x + a*Q for some 0 <= a < from.size() (no correction).
  void FastConvert(const uint64_t* in, size_t n, uint64_t* out) const;
  // out = the centered representative of x mod Q, exact unless it lies within
  // from.size() * 2^-52 * Q of +-Q/2 (then off by +-Q).
  void ExactConvert(const uint64_t* in, size_t n, uint64_t* out) const;

 private:
  // y_i = [x_i (Q/q_i)^{-1}]_{q_i} for coefficient c, then sum_i y_i [Q/q_i]_{p_j} - v [Q]_{p_j}.
  template <bool kExact>
  void Convert(const uint64_t* in, size_t n, uint64_t* out) const;

  RnsBase from_, to_;
  std::vector<uint64_t> punctured_mod_to_;  // [Q/q_i]_{p_j} at j * from.size() + i
  std::vector<uint64_t> product_mod_to_;    // [Q]_{p_j}
  std::vector<double> inverse_moduli_;      // 1 / q_i
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_RNS_H_
