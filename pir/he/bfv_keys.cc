// Key generation: secret, public, relinearisation and Galois keys.
#include <sodium.h>

#include "absl/strings/str_cat.h"
#include "pir/he/bfv.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {
namespace {

// Expansion domains of the seeded halves (key-switching digits use their index, below 64).
constexpr uint32_t kPublicKeyDomain = 0x70756231;  // "pub1"

// A vector of secret residues, wiped when it goes.
struct WipedWords {
  explicit WipedWords(size_t n) : words(n) {}
  ~WipedWords() { sodium_memzero(words.data(), words.size() * sizeof(uint64_t)); }
  uint64_t* data() { return words.data(); }
  std::vector<uint64_t> words;
};

}  // namespace

KeySwitchKey internal::MakeKeySwitchKey(const BfvContext& ctx, const uint64_t* under,
                                        const uint64_t* from) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const size_t n = ctx.n(), k = ctx.q_size(), rows = k + 1, words = rows * n;
  KeySwitchKey key;
  key.seed = RandomSeed();
  key.a.resize(k * words);
  key.b.resize(k * words);
  internal::ExpandKeySwitchA(ctx, key.seed, key.a.data());
  for (size_t i = 0; i < k; ++i) {
    uint64_t* a = key.a.data() + i * words;
    uint64_t* b = key.b.data() + i * words;
    SampleError(ctx.qp_base().moduli(), n, b);
    internal::ForwardNtt(ctx.qp_ntt(), b);
    // b = e - a s
    WipedWords as(words);
    internal::MultiplyRows(ctx.qp_ntt(), a, under, as.data());
    internal::SubRows(ctx.qp_ntt(), b, as.data(), b);
    // + P s' in row i only (the CRT basis vector of q_i is 1 mod q_i, 0 mod the others and P).
    const Modulus& q = ctx.modulus(i);
    const uint64_t p = ctx.key_switch().p_mod_q[i];
    for (size_t c = 0; c < n; ++c) {
      b[i * n + c] = q.Add(b[i * n + c], q.Mul(p, from[i * n + c]));
    }
  }
  return key;
}

namespace {

// g^-1 mod 2N (g odd; 2N divides 2^64).
uint32_t InverseGaloisElement(const BfvContext& ctx, uint32_t g) {
  return static_cast<uint32_t>(InverseMod2Pow64(g) & (2 * ctx.n() - 1));
}

absl::Status CheckGaloisElement(const BfvContext& ctx, uint32_t galois) {
  if (galois % 2 == 0 || galois >= 2 * ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Galois element ", galois, " must be odd and below 2N = ", 2 * ctx.n()));
  }
  return absl::OkStatus();
}

}  // namespace

void internal::ExpandPublicKeyP1(const BfvContext& ctx, const Seed& seed, uint64_t* p1) {
  ExpandUniform(seed, kPublicKeyDomain, ctx.q_base().moduli(), ctx.n(), p1);
}

void internal::ExpandKeySwitchA(const BfvContext& ctx, const Seed& seed, uint64_t* a) {
  const size_t words = (ctx.q_size() + 1) * ctx.n();
  for (size_t i = 0; i < ctx.q_size(); ++i) {
    ExpandUniform(seed, static_cast<uint32_t>(i), ctx.qp_base().moduli(), ctx.n(), a + i * words);
  }
}

SecretKey::~SecretKey() { sodium_memzero(ntt.data(), ntt.size() * sizeof(uint64_t)); }

SecretKey& SecretKey::operator=(const SecretKey& other) {
  if (this != &other) {
    sodium_memzero(ntt.data(), ntt.size() * sizeof(uint64_t));
    params_id = other.params_id;
    ntt = other.ntt;
  }
  return *this;
}

SecretKey& SecretKey::operator=(SecretKey&& other) noexcept {
  if (this != &other) {
    sodium_memzero(ntt.data(), ntt.size() * sizeof(uint64_t));
    params_id = other.params_id;
    ntt = std::move(other.ntt);
  }
  return *this;
}

SecretKey GenerateSecretKey(const BfvContext& ctx) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  SecretKey sk;
  sk.params_id = ctx.id();
  sk.ntt.resize((ctx.q_size() + 1) * ctx.n());
  SampleTernary(ctx.qp_base().moduli(), ctx.n(), sk.ntt.data());
  internal::ForwardNtt(ctx.qp_ntt(), sk.ntt.data());
  return sk;
}

absl::StatusOr<PublicKey> GeneratePublicKey(const BfvContext& ctx, const SecretKey& sk) {
  internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  const size_t n = ctx.n(), words = ctx.q_size() * n;
  PublicKey pk;
  pk.params_id = ctx.id();
  pk.seed = RandomSeed();
  pk.p1.resize(words);
  pk.p0.resize(words);
  internal::ExpandPublicKeyP1(ctx, pk.seed, pk.p1.data());
  SampleError(ctx.q_base().moduli(), n, pk.p0.data());
  internal::ForwardNtt(ctx.q_ntt(), pk.p0.data());
  WipedWords as(words);
  internal::MultiplyRows(ctx.q_ntt(), pk.p1.data(), sk.ntt.data(), as.data());
  internal::SubRows(ctx.q_ntt(), pk.p0.data(), as.data(), pk.p0.data());
  return pk;
}

absl::StatusOr<RelinKey> GenerateRelinKey(const BfvContext& ctx, const SecretKey& sk) {
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  WipedWords square(sk.ntt.size());
  internal::MultiplyRows(ctx.qp_ntt(), sk.ntt.data(), sk.ntt.data(), square.data());
  return RelinKey{ctx.id(), internal::MakeKeySwitchKey(ctx, sk.ntt.data(), square.data())};
}

absl::StatusOr<GaloisKeys> GenerateGaloisKeys(const BfvContext& ctx, const SecretKey& sk,
                                              const std::vector<uint32_t>& elements) {
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  GaloisKeys gk;
  gk.params_id = ctx.id();
  const size_t n = ctx.n();
  for (uint32_t g : elements) {
    if (absl::Status s = CheckGaloisElement(ctx, g); !s.ok()) return s;
    if (gk.keys.count(g)) continue;
    // Rotations switch keys before the automorphism (keyswitch.cc): the key takes s to
    // s(X^(g^-1)), a permutation of the NTT slots of s.
    const std::vector<uint32_t>& perm = ctx.GaloisPermutation(InverseGaloisElement(ctx, g));
    WipedWords rotated(sk.ntt.size());
    for (size_t j = 0; j <= ctx.q_size(); ++j) {
      for (size_t c = 0; c < n; ++c) rotated.words[j * n + c] = sk.ntt[j * n + perm[c]];
    }
    gk.keys.emplace(g, internal::MakeKeySwitchKey(ctx, rotated.data(), sk.ntt.data()));
  }
  return gk;
}

absl::StatusOr<uint32_t> GaloisElementForStep(int log_n, int step) {
  const int64_t row = int64_t{1} << (log_n - 1);
  const uint64_t two_n = uint64_t{2} << log_n;
  if (step <= -row || step >= row) {
    return absl::InvalidArgumentError(
        absl::StrCat("rotation step ", step, " is outside (-N/2, N/2) = (-", row, ", ", row, ")"));
  }
  if (step == 0) return static_cast<uint32_t>(two_n - 1);
  const uint64_t exponent = step > 0 ? step : row + step;
  uint64_t g = 1;
  for (uint64_t i = 0; i < exponent; ++i) g = (g * 3) & (two_n - 1);
  return static_cast<uint32_t>(g);
}

}  // namespace veil::he
