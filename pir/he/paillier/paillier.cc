#include "pir/he/paillier/paillier.h"

#include <sodium.h>

#include <algorithm>
#include <vector>

namespace veil::he {
namespace {

absl::Status CheckPlaintext(const PublicKey& key, const Mpz& m, const char* what) {
  if (mpz_sgn(m.get()) < 0 || mpz_cmp(m.get(), key.n().get()) >= 0) {
    return absl::InvalidArgumentError(std::string(what) + " must be in [0, n)");
  }
  return absl::OkStatus();
}

absl::Status CheckCiphertext(const PublicKey& key, const Ciphertext& c) {
  if (mpz_sgn(c.value.get()) <= 0 || mpz_cmp(c.value.get(), key.n_squared().get()) >= 0) {
    return absl::InvalidArgumentError("ciphertext must be in [1, n^2)");
  }
  return absl::OkStatus();
}

// out = (1 + m n) rn mod n^2 with fixed-size, side-channel silent limb arithmetic: m and rn are
// secret. (For the accepted sizes, multiples of 64 bits, n^2 has exactly twice n's limbs.)
void Combine(const PublicKey& key, const Mpz& m, const Mpz& rn, Mpz& out) {
  const size_t ln = mpz_size(key.n().get());
  SecureModMul mul(key.n_squared());
  const size_t lsq = mul.limbs();
  std::vector<mp_limb_t> mp(ln), np(ln), t(std::max(lsq, 2 * ln)), r(lsq),
      scratch(std::max(mpn_sec_mul_itch(ln, ln), mpn_sec_add_1_itch(lsq)));
  ToLimbs(m, mp.data(), ln);
  ToLimbs(key.n(), np.data(), ln);
  mpn_sec_mul(t.data(), mp.data(), ln, np.data(), ln, scratch.data());  // m n < n^2: no reduction
  mpn_sec_add_1(t.data(), t.data(), lsq, 1, scratch.data());
  ToLimbs(rn, r.data(), lsq);
  mul.Mul(t.data(), r.data(), t.data());
  FromLimbs(t.data(), lsq, out);
  for (auto* v : {&mp, &t, &r, &scratch}) {
    sodium_memzero(v->data(), v->size() * sizeof(mp_limb_t));
  }
}

// m_p = L_p(c^(p-1) mod p^2) h_p mod p: the plaintext modulo one prime (Paillier, Section 7).
void DecryptModPrime(const Mpz& c, const Mpz& p, const Mpz& p_minus_1, const Mpz& p_squared,
                     const Mpz& hp, Mpz& out) {
  mpz_powm_sec(out.get(), c.get(), p_minus_1.get(), p_squared.get());
  mpz_sub_ui(out.get(), out.get(), 1);
  mpz_divexact(out.get(), out.get(), p.get());
  mpz_mul(out.get(), out.get(), hp.get());
  mpz_mod(out.get(), out.get(), p.get());
}

}  // namespace

absl::StatusOr<Ciphertext> Encrypt(const PublicKey& key, const Mpz& m, Randomizer& randomness) {
  if (auto s = CheckPlaintext(key, m, "plaintext"); !s.ok()) return s;
  SecretMpz rn;
  if (auto s = randomness.Next(rn); !s.ok()) return s;
  Ciphertext c;
  Combine(key, m, rn, c.value);
  return c;
}

absl::StatusOr<Ciphertext> EncryptWithR(const PublicKey& key, const Mpz& m, const Mpz& r) {
  if (auto s = CheckPlaintext(key, m, "plaintext"); !s.ok()) return s;
  if (mpz_sgn(r.get()) <= 0 || mpz_cmp(r.get(), key.n().get()) >= 0) {
    return absl::InvalidArgumentError("randomness r must be in [1, n)");
  }
  SecretMpz rn;
  mpz_powm(rn.get(), r.get(), key.n().get(), key.n_squared().get());
  Ciphertext c;
  Combine(key, m, rn, c.value);
  return c;
}

absl::StatusOr<Mpz> Decrypt(const KeyPair& keys, const Ciphertext& c) {
  if (auto s = CheckCiphertext(keys.public_key, c); !s.ok()) return s;
  const SecretKey& sk = keys.secret_key;
  SecretMpz mp, mq;
  DecryptModPrime(c.value, sk.p, sk.p_minus_1, sk.p_squared, sk.hp, mp);
  DecryptModPrime(c.value, sk.q, sk.q_minus_1, sk.q_squared, sk.hq, mq);
  // Garner: m = m_q + q ((m_p - m_q) q^(-1) mod p).
  Mpz m;
  mpz_sub(m.get(), mp.get(), mq.get());
  mpz_mul(m.get(), m.get(), sk.q_inverse_mod_p.get());
  mpz_mod(m.get(), m.get(), sk.p.get());
  mpz_mul(m.get(), m.get(), sk.q.get());
  mpz_add(m.get(), m.get(), mq.get());
  return m;
}

absl::StatusOr<Mpz> DecryptPlain(const KeyPair& keys, const Ciphertext& c) {
  const PublicKey& key = keys.public_key;
  if (auto s = CheckCiphertext(key, c); !s.ok()) return s;
  Mpz m;
  mpz_powm_sec(m.get(), c.value.get(), keys.secret_key.lambda.get(), key.n_squared().get());
  mpz_sub_ui(m.get(), m.get(), 1);
  mpz_divexact(m.get(), m.get(), key.n().get());
  mpz_mul(m.get(), m.get(), keys.secret_key.mu.get());
  mpz_mod(m.get(), m.get(), key.n().get());
  return m;
}

Ciphertext Add(const PublicKey& key, const Ciphertext& a, const Ciphertext& b) {
  Ciphertext out{a.value};
  Mpz scratch;
  MulModInto(key, out.value, b.value, scratch);
  return out;
}

absl::StatusOr<Ciphertext> AddPlain(const PublicKey& key, const Ciphertext& a, const Mpz& m) {
  if (auto s = CheckPlaintext(key, m, "added plaintext"); !s.ok()) return s;
  Ciphertext out;
  Combine(key, m, a.value, out.value);  // (1 + m n) a: a plays the part of r^n
  return out;
}

absl::StatusOr<Ciphertext> MulConst(const PublicKey& key, const Ciphertext& a, const Mpz& k) {
  if (auto s = CheckPlaintext(key, k, "constant"); !s.ok()) return s;
  Ciphertext out;
  mpz_powm(out.value.get(), a.value.get(), k.get(), key.n_squared().get());
  return out;
}

}  // namespace veil::he
