// Where the r^n of an encryption comes from (paillier.h: Enc(m) = (1 + m n) r^n mod n^2).
//
//   TextbookRandomizer   a fresh uniform unit r and one n-bit exponentiation mod n^2 per call:
//                        the baseline, and the generator of the pool.
//   RandomnessPool       r^n values computed ahead of time (offline, on several threads): online
//                        encryption is then one modular multiplication. Each value is used once
//                        and wiped; an empty pool is an error, never a reuse.
//   FixedBaseRandomizer  the Damgard-Jurik-Nielsen variant (DJN, "A generalization of Paillier's
//                        public-key system with applications to electronic voting", IJIS 2010,
//                        Section 4.2): h = -x^2 mod n for a random x, and r^n = (h^n)^alpha mod n^2
//                        with a short uniform alpha of 2*lambda = 256 bits. h^n is fixed, so its
//                        powers h^(n * d * 2^(w i)) sit in a precomputed table and one encryption
//                        costs ceil(256 / w) multiplications. The table entry of each secret
//                        digit is read with GMP's mpn_sec_tabselect (every entry is touched),
//                        zero digits are multiplied like any other, and the products are
//                        SecureModMul's (mpn_sec_*): no branch or address depends on alpha. Its
//                        security rests on DJN's assumption that h^alpha with short alpha is
//                        indistinguishable from a random element of <h>.
#ifndef VEIL_PIR_HE_PAILLIER_RANDOMIZER_H_
#define VEIL_PIR_HE_PAILLIER_RANDOMIZER_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/paillier.h"

namespace veil::he {

class TextbookRandomizer : public Randomizer {
 public:
  explicit TextbookRandomizer(const PublicKey& key) : key_(key) {}
  absl::Status Next(Mpz& rn) override;

 private:
  PublicKey key_;
};

class RandomnessPool : public Randomizer {
 public:
  // Computes `size` values of r^n on `threads` threads. Returns INVALID_ARGUMENT if threads < 1.
  static absl::StatusOr<std::unique_ptr<RandomnessPool>> Create(const PublicKey& key, size_t size,
                                                                int threads);
  // Returns RESOURCE_EXHAUSTED once every value has been handed out.
  absl::Status Next(Mpz& rn) override;
  size_t remaining() const;

 private:
  explicit RandomnessPool(std::vector<SecretMpz> values) : values_(std::move(values)) {}
  std::vector<SecretMpz> values_;
  std::atomic<size_t> next_{0};
};

struct FixedBaseOptions {
  int window_bits = 6;      // table digit width w (1..8): ceil(256/w) x 2^w entries
  int exponent_bits = 256;  // |alpha| = 2 lambda for lambda = 128
};

class FixedBaseRandomizer : public Randomizer {
 public:
  // Draws x, sets the base h^n mod n^2 and fills the table. Returns INVALID_ARGUMENT for
  // window_bits outside 1..8 or exponent_bits outside 128..4096.
  static absl::StatusOr<std::unique_ptr<FixedBaseRandomizer>> Create(
      const PublicKey& key, const FixedBaseOptions& options = {});
  absl::Status Next(Mpz& rn) override;

  // base^alpha mod n^2 through the table; alpha must be in [0, 2^exponent_bits) (higher bits
  // are ignored). The reference is mpz_powm(base(), alpha, n^2).
  void Power(const Mpz& alpha, Mpz& out) const;
  const Mpz& base() const { return base_; }
  size_t table_bytes() const { return table_.size() * sizeof(mp_limb_t); }

 private:
  FixedBaseRandomizer(const PublicKey& key, const FixedBaseOptions& options)
      : key_(key), options_(options) {}
  void FillTable();
  // base^alpha for alpha given as exponent_bits little-endian bits (bytes, low bit first).
  void PowerOfBits(const uint8_t* bits, Mpz& out) const;

  PublicKey key_;
  FixedBaseOptions options_;
  Mpz base_;                      // h^n mod n^2
  size_t limbs_ = 0;              // limbs of n^2
  int windows_ = 0;               // ceil(exponent_bits / window_bits)
  std::vector<mp_limb_t> table_;  // [window][digit][limb]: base^(digit 2^(w window)) mod n^2
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_PAILLIER_RANDOMIZER_H_
