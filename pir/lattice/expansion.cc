#include "pir/lattice/expansion.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/poly.h"
#include "pir/he/sampling.h"
#include "pir/he/serialization.h"
#include "pir/lattice/params.h"

namespace veil::lattice {
namespace {

// c1 of the secret's ciphertext is ExpandUniform(seed, this domain): uniform residues, used as
// the NTT form of a uniform polynomial (as the packing keys' alpha).
constexpr uint32_t kSecretMaskDomain = 0;

// out = in X^{-t} in R_Q (coefficient form, k rows): coefficient m moves to m - t, negated when
// it wraps (X^N = -1).
void MultiplyByInverseMonomial(const RingContext& ctx, size_t t, const uint64_t* in,
                               uint64_t* out) {
  const size_t n = ctx.n();
  for (size_t i = 0; i < ctx.k(); ++i) {
    const he::Modulus& q = ctx.base()[i];
    const uint64_t* row = in + i * n;
    uint64_t* dst = out + i * n;
    for (size_t c = 0; c + t < n; ++c) dst[c] = row[c + t];
    for (size_t c = n - t; c < n; ++c) dst[c] = q.Neg(row[c + t - n]);
  }
}

// The depth-first expansion of one ciphertext (expansion.h): node[l] holds the ciphertext of
// level l on the current path, right[l] the right child of level l's node waiting for its turn.
class Expander {
 public:
  Expander(const RingContext& ctx, const he::GaloisKeys& keys, uint32_t lwe_n, SpecialSink sink)
      : ctx_(ctx),
        bfv_(*ctx.expansion()),
        keys_(keys),
        lwe_n_(lwe_n),
        levels_(ExpansionLevels(lwe_n)),
        elements_(ExpansionElements(ctx, lwe_n)),
        sink_(sink),
        node_(levels_ + 1),
        right_(levels_),
        beta_(kPackKeysPerBlock * ctx.k() * ctx.n()),
        alpha_(beta_.size()) {}

  // root: the secret's ciphertext in coefficient form.
  absl::Status Run(he::Ciphertext root) {
    node_[0] = std::move(root);
    if (absl::Status s = Visit(0, 0); !s.ok()) return s;
    Flush();
    return absl::OkStatus();
  }

 private:
  absl::Status Visit(uint32_t level, uint32_t index) {
    if (level == levels_) {
      Emit(index);
      return absl::OkStatus();
    }
    const he::Ciphertext& c = node_[level];
    absl::StatusOr<he::Ciphertext> rotated = he::ApplyGalois(bfv_, c, elements_[level], keys_);
    if (!rotated.ok()) return rotated.status();
    const uint64_t step = uint64_t{1} << level;
    const bool has_right = index + step < lwe_n_;
    if (has_right) {
      absl::StatusOr<he::Ciphertext> diff = he::Sub(bfv_, c, *rotated);
      if (!diff.ok()) return diff.status();
      right_[level] = *std::move(diff);
      const size_t words = ctx_.k() * ctx_.n();
      std::vector<uint64_t> shifted(2 * words);
      for (size_t h = 0; h < 2; ++h) {
        MultiplyByInverseMonomial(ctx_, step, right_[level].data.data() + h * words,
                                  shifted.data() + h * words);
      }
      right_[level].data = std::move(shifted);
    }
    absl::StatusOr<he::Ciphertext> sum = he::Add(bfv_, c, *rotated);
    if (!sum.ok()) return sum.status();
    node_[level + 1] = *std::move(sum);
    if (absl::Status s = Visit(level + 1, index); !s.ok()) return s;
    if (has_right) {
      node_[level + 1] = std::move(right_[level]);
      if (absl::Status s = Visit(level + 1, index + step); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  void Emit(uint32_t index) {
    const size_t words = ctx_.k() * ctx_.n();
    const he::Ciphertext& leaf = node_[levels_];
    uint64_t* beta = beta_.data() + count_ * words;
    uint64_t* alpha = alpha_.data() + count_ * words;
    std::copy_n(leaf.data.begin(), words, beta);
    std::copy_n(leaf.data.begin() + words, words, alpha);
    he::internal::ForwardNtt(ctx_.ntt(), beta);
    he::internal::ForwardNtt(ctx_.ntt(), alpha);
    index_[count_++] = index;
    if (count_ == kPackKeysPerBlock) Flush();
  }

  void Flush() {
    if (count_ > 0) sink_(count_, index_, beta_.data(), alpha_.data());
    count_ = 0;
  }

  const RingContext& ctx_;
  const he::BfvContext& bfv_;
  const he::GaloisKeys& keys_;
  const uint32_t lwe_n_;
  const uint32_t levels_;
  const std::vector<uint32_t> elements_;
  SpecialSink sink_;
  std::vector<he::Ciphertext> node_, right_;
  std::vector<uint64_t> beta_, alpha_;
  uint32_t index_[kPackKeysPerBlock] = {};
  uint32_t count_ = 0;
};

}  // namespace

uint32_t ExpansionLevels(uint32_t lwe_n) {
  uint32_t levels = 0;
  while ((uint64_t{1} << levels) < lwe_n) ++levels;
  return levels;
}

std::vector<uint32_t> ExpansionElements(const RingContext& ctx, uint32_t lwe_n) {
  std::vector<uint32_t> elements;
  for (uint32_t l = 0; l < ExpansionLevels(lwe_n); ++l) {
    elements.push_back(static_cast<uint32_t>(ctx.n() >> l) + 1);
  }
  return elements;
}

absl::Status CheckExpansion(const RingContext& ctx, uint32_t lwe_n) {
  if (ctx.expansion() == nullptr) {
    return absl::FailedPreconditionError(
        "ExpPack needs a special prime for key switching; these ring parameters have none");
  }
  if (lwe_n == 0 || lwe_n > ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expansion makes 1 to N = ", ctx.n(), " special ciphertexts, not ", lwe_n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> MakeExpansionKeys(const RingContext& ctx,
                                                       const he::SecretKey& key, uint32_t lwe_n) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  absl::StatusOr<he::GaloisKeys> keys =
      he::GenerateGaloisKeys(*ctx.expansion(), key, ExpansionElements(ctx, lwe_n));
  if (!keys.ok()) return keys.status();
  return he::SerializeGaloisKeys(*ctx.expansion(), *keys);
}

uint64_t ExpansionKeyBytes(const RingContext& ctx, uint32_t lwe_n) {
  if (ctx.expansion() == nullptr) return 0;
  // Header (magic, version, kind, parameter id), the count, then the keys with their elements.
  return 12 + 4 + ExpansionLevels(lwe_n) * he::GaloisKeyBytes(*ctx.expansion());
}

absl::StatusOr<he::GaloisKeys> ParseExpansionKeys(const RingContext& ctx, uint32_t lwe_n,
                                                  absl::Span<const uint8_t> bytes) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  absl::StatusOr<he::GaloisKeys> keys = he::ParseGaloisKeys(*ctx.expansion(), bytes);
  if (!keys.ok()) return keys.status();
  const std::vector<uint32_t> elements = ExpansionElements(ctx, lwe_n);
  bool exact = keys->keys.size() == elements.size();
  for (uint32_t g : elements) exact = exact && keys->keys.count(g) == 1;
  if (!exact) {
    return absl::InvalidArgumentError(
        absl::StrCat("expansion keys for n = ", lwe_n, " are the Galois keys of the ",
                     elements.size(), " elements N / 2^l + 1 (l < ", elements.size(),
                     "); these hold ", keys->keys.size(), " other keys"));
  }
  return keys;
}

uint64_t SecretCiphertextBytes(const RingContext& ctx) { return 32 + 4 * ctx.k() * ctx.n(); }

absl::StatusOr<std::vector<uint8_t>> EncryptLweSecret(const RingContext& ctx, const RlweSecret& z,
                                                      absl::Span<const uint32_t> lwe_secret) {
  const uint32_t lwe_n = static_cast<uint32_t>(lwe_secret.size());
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  const size_t n = ctx.n(), words = ctx.k() * n;
  // round(Q s_j / 2^32) 2^-L: expansion multiplies by 2^L.
  const uint64_t scale_up = uint64_t{1} << ExpansionLevels(lwe_n);
  std::vector<uint64_t> message(words, 0), a(words), c0(words);
  for (size_t i = 0; i < ctx.k(); ++i) {
    const he::Modulus& q = ctx.base()[i];
    const uint64_t inverse = *q.Inverse(q.Reduce(scale_up));
    for (uint32_t j = 0; j < lwe_n; ++j) {
      message[i * n + j] = q.Mul(ctx.EncodeWord(lwe_secret[j], i), inverse);
    }
  }
  he::internal::ForwardNtt(ctx.ntt(), message.data());
  const he::Seed seed = he::RandomSeed();
  he::ExpandUniform(seed, kSecretMaskDomain, ctx.base().moduli(), n, a.data());
  EncryptWithMask(ctx, z, message.data(), a.data(), c0.data());
  sodium_memzero(message.data(), message.size() * sizeof(uint64_t));
  std::vector<uint8_t> wire(SecretCiphertextBytes(ctx));
  std::memcpy(wire.data(), seed.data(), 32);
  for (size_t r = 0; r < words; ++r) {
    const uint32_t residue = static_cast<uint32_t>(c0[r]);  // primes are below 2^32
    std::memcpy(wire.data() + 32 + 4 * r, &residue, 4);
  }
  return wire;
}

absl::Status ExpandLweSecret(const RingContext& ctx, const he::GaloisKeys& keys, uint32_t lwe_n,
                             absl::Span<const uint8_t> ciphertext, SpecialSink sink) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  const size_t n = ctx.n(), words = ctx.k() * n;
  if (ciphertext.size() != SecretCiphertextBytes(ctx)) {
    return absl::InvalidArgumentError(absl::StrCat("the secret's ciphertext is ",
                                                   SecretCiphertextBytes(ctx), " bytes, got ",
                                                   ciphertext.size()));
  }
  he::Ciphertext root;
  root.params_id = ctx.expansion()->id();
  root.size = 2;
  root.data.resize(2 * words);
  for (size_t r = 0; r < words; ++r) {
    uint32_t residue;
    std::memcpy(&residue, ciphertext.data() + 32 + 4 * r, 4);
    const uint64_t q = ctx.base()[r / n].value();
    if (residue >= q) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret ciphertext residue ", r, " is not below its prime ", q));
    }
    root.data[r] = residue;
  }
  he::Seed seed;
  std::memcpy(seed.data(), ciphertext.data(), 32);
  he::ExpandUniform(seed, kSecretMaskDomain, ctx.base().moduli(), n, root.data.data() + words);
  he::internal::InverseNtt(ctx.ntt(), root.data.data());
  he::internal::InverseNtt(ctx.ntt(), root.data.data() + words);
  for (uint32_t g : ExpansionElements(ctx, lwe_n)) {
    if (keys.keys.count(g) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("the expansion keys lack the Galois key of element ", g));
    }
  }
  return Expander(ctx, keys, lwe_n, sink).Run(std::move(root));
}

double ExpandedKeyVariance(const RingContext& ctx, uint32_t lwe_n) {
  const size_t n = ctx.n();
  const double ring_n = static_cast<double>(n);
  double digit_square = 0;  // sum_i E[d_i^2], d_i uniform in (-q_i/2, q_i/2]
  for (uint64_t q : ctx.params().primes) digit_square += std::pow(static_cast<double>(q), 2) / 12;
  const double p = static_cast<double>(ctx.params().special);
  const double key_switch = ring_n * 10.5 * digit_square / (p * p) + (1 + 2 * ring_n / 3) / 12;
  const uint32_t levels = ExpansionLevels(lwe_n);
  // Depth first as the expansion: v[l] the coefficients' variances at the node of level l.
  std::vector<std::vector<double>> v(levels + 1, std::vector<double>(n));
  std::fill(v[0].begin(), v[0].end(), 10.5);
  double total = 0;
  // Coefficient c goes to c g mod 2N under X -> X^g: position c g mod N, negated if the
  // quotient is odd; it is fixed (up to sign) exactly when c is a multiple of 2^l for g_l.
  auto visit = [&](auto&& self, uint32_t level, uint64_t index) -> void {
    if (level == levels) {
      for (double x : v[levels]) total += x;
      return;
    }
    const uint64_t g = (n >> level) + 1, step = uint64_t{1} << level;
    std::vector<double> rotated(n), left(n), right(n);
    std::vector<int> fixed_sign(n, 0);  // +1 / -1: coefficient fixed by g, with that sign
    for (size_t c = 0; c < n; ++c) {
      const uint64_t to = (c * g) % (2 * n);
      rotated[to % n] = v[level][c];
      if (to % n == c) fixed_sign[c] = to < n ? 1 : -1;
    }
    for (size_t c = 0; c < n; ++c) {
      // c +- g(c): a fixed coefficient doubles or cancels; others add independent variances.
      const double x = v[level][c];
      const double plus = fixed_sign[c] == 0 ? x + rotated[c] : (fixed_sign[c] > 0 ? 4 * x : 0);
      const double minus = fixed_sign[c] == 0 ? x + rotated[c] : (fixed_sign[c] > 0 ? 0 : 4 * x);
      left[c] = plus + key_switch;
      right[(c + n - step) % n] = minus + key_switch;  // times X^{-2^l}: a cyclic shift
    }
    v[level + 1] = left;
    self(self, level + 1, index);
    if (index + step < lwe_n) {
      v[level + 1] = right;
      self(self, level + 1, index + step);
    }
  };
  visit(visit, 0, 0);
  return total / (static_cast<double>(lwe_n) * ring_n);
}

PackingNoise ExpPackNoiseBound(const RingContext& ctx, uint32_t lwe_n) {
  return PackingNoiseForKeys(ctx, lwe_n, ExpandedKeyVariance(ctx, lwe_n),
                             std::numeric_limits<double>::infinity());
}

bool ExpPackNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n) {
  const double limit = (kDelta / 2) / 256.0;
  return std::sqrt(2 * 41 * std::log(2.0)) * ExpPackNoiseBound(ctx, lwe_n).sigma <= limit;
}

}  // namespace veil::lattice
