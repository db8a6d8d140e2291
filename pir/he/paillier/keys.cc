#include "pir/he/paillier/keys.h"

#include <sodium.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace veil::he {
namespace {

// GMP: Baillie-PSW plus (reps - 24) Miller-Rabin rounds with random bases.
constexpr int kPrimalityReps = 50;

uint64_t KeyId(const Mpz& n) {
  std::vector<uint8_t> bytes((n.bits() + 7) / 8);
  ToFixedBytes(n, absl::MakeSpan(bytes));
  uint8_t digest[crypto_generichash_BYTES_MIN];
  crypto_generichash(digest, sizeof(digest), bytes.data(), bytes.size(), nullptr, 0);
  uint64_t id;
  std::memcpy(&id, digest, sizeof(id));
  return id;
}

// A probable prime of exactly `bits` bits with its top two bits set (the product of two such has
// exactly 2 * bits bits).
SecretMpz RandomPrime(int bits) {
  for (;;) {
    SecretMpz candidate = RandomBits(bits);
    mpz_setbit(candidate.get(), bits - 1);
    mpz_setbit(candidate.get(), bits - 2);
    mpz_setbit(candidate.get(), 0);
    if (mpz_probab_prime_p(candidate.get(), kPrimalityReps) > 0) return candidate;
  }
}

// The CRT constant of prime `p` (Paillier, Section 7): h_p = L_p(g^(p-1) mod p^2)^(-1) mod p with
// L_p(x) = (x - 1) / p.
void CrtConstant(const Mpz& g, const Mpz& p, const Mpz& p_minus_1, const Mpz& p_squared,
                 SecretMpz& h) {
  SecretMpz t;
  mpz_powm_sec(t.get(), g.get(), p_minus_1.get(), p_squared.get());
  mpz_sub_ui(t.get(), t.get(), 1);
  mpz_divexact(t.get(), t.get(), p.get());
  mpz_invert(h.get(), t.get(), p.get());
}

}  // namespace

absl::Status CheckModulusBits(int modulus_bits, bool insecure_for_comparison) {
  if (modulus_bits == 2048 || modulus_bits == 3072) return absl::OkStatus();
  if (modulus_bits == 1024) {
    if (insecure_for_comparison) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "1024-bit Paillier moduli are insecure: accepted only with insecure_for_comparison");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Paillier modulus of ", modulus_bits, " bits: use 2048 or 3072"));
}

absl::StatusOr<PublicKey> PublicKey::FromModulus(const Mpz& n, bool insecure_for_comparison) {
  const int bits = static_cast<int>(n.bits());
  if (auto s = CheckModulusBits(bits, insecure_for_comparison); !s.ok()) return s;
  if (mpz_even_p(n.get()) || mpz_perfect_square_p(n.get())) {
    return absl::InvalidArgumentError("Paillier modulus must be odd and not a square");
  }
  PublicKey key;
  key.n_ = n;
  mpz_mul(key.n_squared_.get(), n.get(), n.get());
  key.modulus_bits_ = bits;
  key.id_ = KeyId(n);
  return key;
}

absl::StatusOr<KeyPair> KeyPairFromPrimes(const Mpz& p, const Mpz& q,
                                          bool insecure_for_comparison) {
  if (p.bits() != q.bits() || p == q) {
    return absl::InvalidArgumentError("Paillier primes must be distinct and of equal size");
  }
  if (mpz_probab_prime_p(p.get(), kPrimalityReps) == 0 ||
      mpz_probab_prime_p(q.get(), kPrimalityReps) == 0) {
    return absl::InvalidArgumentError("Paillier key: p or q is not prime");
  }
  SecretMpz n;
  mpz_mul(n.get(), p.get(), q.get());
  auto public_key = PublicKey::FromModulus(n, insecure_for_comparison);
  if (!public_key.ok()) return public_key.status();

  SecretKey sk;
  mpz_set(sk.p.get(), p.get());
  mpz_set(sk.q.get(), q.get());
  mpz_mul(sk.p_squared.get(), p.get(), p.get());
  mpz_mul(sk.q_squared.get(), q.get(), q.get());
  mpz_sub_ui(sk.p_minus_1.get(), p.get(), 1);
  mpz_sub_ui(sk.q_minus_1.get(), q.get(), 1);
  Mpz g = n;
  mpz_add_ui(g.get(), g.get(), 1);
  CrtConstant(g, sk.p, sk.p_minus_1, sk.p_squared, sk.hp);
  CrtConstant(g, sk.q, sk.q_minus_1, sk.q_squared, sk.hq);
  mpz_invert(sk.q_inverse_mod_p.get(), q.get(), p.get());
  mpz_lcm(sk.lambda.get(), sk.p_minus_1.get(), sk.q_minus_1.get());
  // With g = n + 1, L(g^lambda mod n^2) = lambda mod n, so mu = lambda^(-1) mod n.
  if (mpz_invert(sk.mu.get(), sk.lambda.get(), n.get()) == 0) {
    return absl::InvalidArgumentError("Paillier key: gcd(lambda, n) != 1");
  }
  return KeyPair{*std::move(public_key), std::move(sk)};
}

absl::StatusOr<KeyPair> GenerateKeyPair(const KeyOptions& options) {
  if (auto s = CheckModulusBits(options.modulus_bits, options.insecure_for_comparison); !s.ok()) {
    return s;
  }
  const int half = options.modulus_bits / 2;
  for (;;) {
    SecretMpz p = RandomPrime(half);
    SecretMpz q = RandomPrime(half);
    if (p == q) continue;  // probability ~2^-500: kept for the proof, not for practice
    return KeyPairFromPrimes(p, q, options.insecure_for_comparison);
  }
}

}  // namespace veil::he
