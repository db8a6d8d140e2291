// Encryption, decryption, noise budget, addition and plaintext multiplication.
#include "pir/he/bfv.h"

#include <sodium.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "pir/he/multiword.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {
namespace {

constexpr uint32_t kCiphertextDomain = 0x63743031;  // "ct01": c_1 of a seeded ciphertext

absl::Status CheckPlaintext(const BfvContext& ctx, const Plaintext& m) {
  if (absl::Status s = ctx.CheckId(m.params_id, "plaintext"); !s.ok()) return s;
  if (m.coeffs.size() != ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plaintext has ", m.coeffs.size(), " coefficients, N = ", ctx.n()));
  }
  for (uint64_t c : m.coeffs) {
    if (c >= ctx.params().t) {
      return absl::InvalidArgumentError(
          absl::StrCat("plaintext coefficient ", c, " is not below t = ", ctx.params().t));
    }
  }
  return absl::OkStatus();
}

// c0 += round(Q m / t) (k rows, coefficient form).
void AddScaledMessage(const BfvContext& ctx, const Plaintext& m, uint64_t* c0) {
  // round(Q m / t) = floor(Q / t) m + round((Q mod t) m / t) in each q_j, with no branch or
  // division instruction on the (secret) message: Shoup's products by floor(Q / t) mod q_j, and
  // the rounded quotient by t from Shoup's quotient estimate of (Q mod t) m.
  const size_t n = ctx.n(), k = ctx.q_size();
  const uint64_t t = ctx.params().t, half = (t + 1) / 2;
  const internal::EncodeConstants& e = ctx.encode();
  const uint64_t q_mod_t_shoup = ctx.plain_modulus().ShoupOf(e.q_mod_t);
  std::vector<uint64_t> shoup(k);
  for (size_t j = 0; j < k; ++j) shoup[j] = ctx.modulus(j).ShoupOf(e.q_div_t[j]);
  // A block of coefficients at a time: its rounded quotients, then each prime's row over the
  // block with that prime's constants in registers.
  constexpr size_t kBlock = 256;
  uint64_t fix[kBlock];
  for (size_t first = 0; first < n; first += kBlock) {
    const size_t count = std::min(kBlock, n - first);
    const uint64_t* message = m.coeffs.data() + first;
    for (size_t c = 0; c < count; ++c) {
      fix[c] = ShoupRoundedQuotient(message[c], e.q_mod_t, q_mod_t_shoup, t, half);
    }
    for (size_t j = 0; j < k; ++j) {
      const Modulus& q = ctx.modulus(j);
      const uint64_t q_div_t = e.q_div_t[j], q_div_t_shoup = shoup[j], qv = q.value();
      uint64_t* row = c0 + j * n + first;
      for (size_t c = 0; c < count; ++c) {
        const uint64_t v =
            AddMod(MulShoup(message[c], q_div_t, q_div_t_shoup, qv), q.Reduce(fix[c]), qv);
        row[c] = AddMod(row[c], v, qv);
      }
    }
  }
  sodium_memzero(fix, sizeof(fix));
}

// [c_0 + c_1 s (+ c_2 s^2)]_Q in coefficient form, k rows (wiped by the caller).
std::vector<uint64_t> Phase(const BfvContext& ctx, const SecretKey& sk, const Ciphertext& ct) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const size_t words = ctx.q_size() * ctx.n();
  std::vector<uint64_t> acc(words, 0), tmp(words), s_power(sk.ntt.begin(), sk.ntt.begin() + words);
  for (size_t i = ct.size; i-- > 1;) {  // Horner: ((c_2) s + c_1) s + c_0
    std::copy_n(ct.poly(i, words), words, tmp.data());
    internal::ForwardNtt(ctx.q_ntt(), tmp.data());
    internal::AddRows(ctx.q_ntt(), acc.data(), tmp.data(), acc.data());
    internal::MultiplyRows(ctx.q_ntt(), acc.data(), s_power.data(), acc.data());
  }
  internal::InverseNtt(ctx.q_ntt(), acc.data());
  internal::AddRows(ctx.q_ntt(), acc.data(), ct.poly(0, words), acc.data());
  sodium_memzero(s_power.data(), s_power.size() * sizeof(uint64_t));
  sodium_memzero(tmp.data(), tmp.size() * sizeof(uint64_t));
  return acc;
}

Ciphertext NewCiphertext(const BfvContext& ctx, size_t size) {
  return Ciphertext{ctx.id(), size, std::vector<uint64_t>(size * ctx.q_size() * ctx.n(), 0),
                    std::nullopt};
}

absl::StatusOr<Ciphertext> AddOrSub(const BfvContext& ctx, const Ciphertext& a, const Ciphertext& b,
                                    bool subtract) {
  if (absl::Status s = CheckCiphertext(ctx, a, "first operand"); !s.ok()) return s;
  if (absl::Status s = CheckCiphertext(ctx, b, "second operand"); !s.ok()) return s;
  if (a.size != b.size) {
    return absl::InvalidArgumentError(
        absl::StrCat("operands have sizes ", a.size, " and ", b.size));
  }
  Ciphertext out = NewCiphertext(ctx, a.size);
  const size_t words = ctx.q_size() * ctx.n();
  for (size_t i = 0; i < a.size; ++i) {
    if (subtract) {
      internal::SubRows(ctx.q_ntt(), a.poly(i, words), b.poly(i, words), out.poly(i, words));
    } else {
      internal::AddRows(ctx.q_ntt(), a.poly(i, words), b.poly(i, words), out.poly(i, words));
    }
  }
  return out;
}

absl::Status CheckResidues(const BfvContext& ctx, const std::vector<uint64_t>& v, size_t rows,
                           const char* what) {
  for (size_t j = 0; j < rows; ++j) {
    const uint64_t q = ctx.modulus(j).value();
    for (size_t c = 0; c < ctx.n(); ++c) {
      if (v[j * ctx.n() + c] >= q) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": residue ", v[j * ctx.n() + c],
                                                       " in row ", j, " is not below ", q));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCiphertext(const BfvContext& ctx, const Ciphertext& ct, const char* what) {
  if (absl::Status s = ctx.CheckId(ct.params_id, what); !s.ok()) return s;
  if (ct.size < 2 || ct.size > 3 || ct.data.size() != ct.size * ctx.q_size() * ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has size ", ct.size, " and ", ct.data.size(),
                     " residues; expected size 2 or 3 of ", ctx.q_size() * ctx.n()));
  }
  return absl::OkStatus();
}

absl::Status CheckSecretKey(const BfvContext& ctx, const SecretKey& sk) {
  if (absl::Status s = ctx.CheckId(sk.params_id, "secret key"); !s.ok()) return s;
  if (sk.ntt.size() != (ctx.q_size() + 1) * ctx.n()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secret key has ", sk.ntt.size(), " residues, expected ", (ctx.q_size() + 1) * ctx.n()));
  }
  return CheckResidues(ctx, sk.ntt, ctx.q_size() + 1, "secret key");
}

absl::Status CheckKeySwitchKey(const BfvContext& ctx, const KeySwitchKey& key, const char* what) {
  const size_t words = ctx.q_size() * (ctx.q_size() + 1) * ctx.n();
  if (key.a.size() != words || key.b.size() != words) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has ", key.b.size(), " + ", key.a.size(),
                                                   " residues, expected ", words, " each"));
  }
  if (!key.b32.empty() && (key.b32.size() != words || key.a32.size() != words)) {
    return absl::InvalidArgumentError(absl::StrCat(what, "'s 32-bit form has ", key.b32.size(),
                                                   " + ", key.a32.size(), " residues, expected ",
                                                   words, " each"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Ciphertext> Encrypt(const BfvContext& ctx, const PublicKey& pk, const Plaintext& m) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  if (absl::Status s = ctx.CheckId(pk.params_id, "public key"); !s.ok()) return s;
  const size_t n = ctx.n(), words = ctx.q_size() * n;
  if (pk.p0.size() != words || pk.p1.size() != words) {
    return absl::InvalidArgumentError("public key has the wrong size");
  }
  if (absl::Status s = CheckPlaintext(ctx, m); !s.ok()) return s;
  std::vector<uint64_t> u(words);
  SampleTernary(ctx.q_base().moduli(), n, u.data());
  internal::ForwardNtt(ctx.q_ntt(), u.data());
  Ciphertext ct = NewCiphertext(ctx, 2);
  std::vector<uint64_t> e(words);
  for (size_t i = 0; i < 2; ++i) {
    uint64_t* c = ct.poly(i, words);
    internal::MultiplyRows(ctx.q_ntt(), i == 0 ? pk.p0.data() : pk.p1.data(), u.data(), c);
    internal::InverseNtt(ctx.q_ntt(), c);
    SampleError(ctx.q_base().moduli(), n, e.data());
    internal::AddRows(ctx.q_ntt(), c, e.data(), c);
  }
  AddScaledMessage(ctx, m, ct.poly(0, words));
  sodium_memzero(u.data(), u.size() * sizeof(uint64_t));
  sodium_memzero(e.data(), e.size() * sizeof(uint64_t));
  return ct;
}

absl::StatusOr<Ciphertext> EncryptSymmetric(const BfvContext& ctx, const SecretKey& sk,
                                            const Plaintext& m) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  if (absl::Status s = CheckPlaintext(ctx, m); !s.ok()) return s;
  const size_t n = ctx.n(), words = ctx.q_size() * n;
  Ciphertext ct = NewCiphertext(ctx, 2);
  ct.seed = RandomSeed();
  uint64_t* c0 = ct.poly(0, words);
  uint64_t* c1 = ct.poly(1, words);
  internal::ExpandCiphertextC1(ctx, *ct.seed, c1);
  std::copy_n(c1, words, c0);
  internal::ForwardNtt(ctx.q_ntt(), c0);
  internal::MultiplyRows(ctx.q_ntt(), c0, sk.ntt.data(), c0);
  internal::InverseNtt(ctx.q_ntt(), c0);
  std::vector<uint64_t> e(words);
  SampleError(ctx.q_base().moduli(), n, e.data());
  internal::SubRows(ctx.q_ntt(), e.data(), c0, c0);
  sodium_memzero(e.data(), e.size() * sizeof(uint64_t));
  AddScaledMessage(ctx, m, c0);
  return ct;
}

void internal::ExpandCiphertextC1(const BfvContext& ctx, const Seed& seed, uint64_t* c1) {
  ExpandUniform(seed, kCiphertextDomain, ctx.q_base().moduli(), ctx.n(), c1);
}

absl::StatusOr<Plaintext> Decrypt(const BfvContext& ctx, const SecretKey& sk,
                                  const Ciphertext& ct) {
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  const size_t n = ctx.n(), k = ctx.q_size();
  const internal::DecryptConstants& d = ctx.decrypt();
  std::vector<uint64_t> x = Phase(ctx, sk, ct);
  for (size_t j = 0; j < k; ++j) {
    const Modulus& q = ctx.modulus(j);
    for (size_t c = 0; c < n; ++c) {
      x[j * n + c] =
          MulShoup(x[j * n + c], d.t_gamma_mod_q[j], d.t_gamma_mod_q_shoup[j], q.value());
    }
  }
  std::vector<uint64_t> tg(2 * n);
  d.q_to_t_gamma.FastConvert(x.data(), n, tg.data());
  sodium_memzero(x.data(), x.size() * sizeof(uint64_t));
  const Modulus& t = ctx.plain_modulus();
  const uint64_t gamma = d.gamma.value(), gamma_mod_t = t.Reduce(gamma);
  Plaintext m{ctx.id(), std::vector<uint64_t>(n)};
  for (size_t c = 0; c < n; ++c) {
    const uint64_t zt = t.Mul(tg[c], d.neg_inv_q_mod_t);
    const uint64_t zg = d.gamma.Mul(tg[n + c], d.neg_inv_q_mod_gamma);
    // m = (z_t - centered(z_gamma)) / gamma mod t; the centering is a mask, not a branch.
    const uint64_t negative = 0 - static_cast<uint64_t>(zg > gamma / 2);
    const uint64_t zg_mod_t = t.Reduce(zg);
    const uint64_t centered = t.Sub(zg_mod_t, gamma_mod_t & negative);
    m.coeffs[c] = t.Mul(t.Sub(zt, centered), d.inv_gamma_mod_t);
  }
  sodium_memzero(tg.data(), tg.size() * sizeof(uint64_t));
  return m;
}

absl::StatusOr<int> NoiseBudget(const BfvContext& ctx, const SecretKey& sk, const Ciphertext& ct) {
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  const size_t n = ctx.n(), k = ctx.q_size();
  std::vector<uint64_t> x = Phase(ctx, sk, ct);
  for (size_t j = 0; j < k; ++j) {
    const Modulus& q = ctx.modulus(j);
    for (size_t c = 0; c < n; ++c) x[j * n + c] = q.Mul(x[j * n + c], ctx.params().t);
  }
  const absl::Span<const uint64_t> big_q = ctx.q_base().product();
  std::vector<uint64_t> half(big_q.begin(), big_q.end()), v(k);
  multiword::DivWordInPlace(absl::MakeSpan(half), 2);
  int max_bits = 0;
  for (size_t c = 0; c < n; ++c) {
    ctx.q_base().Compose(x.data() + c, n, absl::MakeSpan(v));
    if (multiword::Compare(v, half) > 0) {  // |v - Q|
      std::vector<uint64_t> neg(big_q.begin(), big_q.end());
      multiword::SubInPlace(absl::MakeSpan(neg), v);
      v = neg;
    }
    max_bits = std::max(max_bits, multiword::BitLength(v));
  }
  sodium_memzero(x.data(), x.size() * sizeof(uint64_t));
  return std::max(0, ctx.q_base().product_bits() - max_bits - 1);
}

absl::StatusOr<Ciphertext> Add(const BfvContext& ctx, const Ciphertext& a, const Ciphertext& b) {
  return AddOrSub(ctx, a, b, false);
}

absl::StatusOr<Ciphertext> Sub(const BfvContext& ctx, const Ciphertext& a, const Ciphertext& b) {
  return AddOrSub(ctx, a, b, true);
}

void internal::LiftForMultiply(const BfvContext& ctx, const uint64_t* coeffs, uint64_t* out) {
  const size_t n = ctx.n();
  const uint64_t t = ctx.params().t;
  for (size_t j = 0; j < ctx.q_size(); ++j) {
    const Modulus& q = ctx.modulus(j);
    for (size_t c = 0; c < n; ++c) {
      const uint64_t v = coeffs[c];
      out[j * n + c] = v <= t / 2 ? q.Reduce(v) : q.Neg(q.Reduce(t - v));
    }
  }
  internal::ForwardNtt(ctx.q_ntt(), out);
}

absl::StatusOr<PlaintextNtt> PrepareForMultiply(const BfvContext& ctx, const Plaintext& m) {
  if (absl::Status s = CheckPlaintext(ctx, m); !s.ok()) return s;
  PlaintextNtt out{ctx.id(), std::vector<uint64_t>(ctx.q_size() * ctx.n())};
  internal::LiftForMultiply(ctx, m.coeffs.data(), out.ntt.data());
  return out;
}

absl::StatusOr<Ciphertext> MultiplyPlain(const BfvContext& ctx, const Ciphertext& ct,
                                         const PlaintextNtt& m) {
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  if (absl::Status s = ctx.CheckId(m.params_id, "plaintext"); !s.ok()) return s;
  const size_t words = ctx.q_size() * ctx.n();
  if (m.ntt.size() != words) {
    return absl::InvalidArgumentError(
        absl::StrCat("prepared plaintext has ", m.ntt.size(), " residues, expected ", words));
  }
  Ciphertext out{ctx.id(), ct.size, ct.data, std::nullopt};
  for (size_t i = 0; i < ct.size; ++i) {
    uint64_t* p = out.poly(i, words);
    internal::ForwardNtt(ctx.q_ntt(), p);
    internal::MultiplyRows(ctx.q_ntt(), p, m.ntt.data(), p);
    internal::InverseNtt(ctx.q_ntt(), p);
  }
  return out;
}

}  // namespace veil::he
