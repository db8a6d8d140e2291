#include "pir/lattice/packing.h"

#include <sodium.h>

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/poly.h"
#include "pir/lattice/params.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kKeyHeaderBytes = 32 + 4;  // seed, lwe_n

// alpha_j for every j from the seed: he::ExpandUniform's residues are uniform modulo each
// prime, so they serve directly as the NTT form of a uniform polynomial.
std::vector<uint64_t> ExpandAlpha(const RingContext& ctx, const he::Seed& seed, uint32_t lwe_n) {
  const size_t stride = ctx.k() * ctx.n();
  std::vector<uint64_t> alpha(uint64_t{lwe_n} * stride);
  for (uint32_t j = 0; j < lwe_n; ++j) {
    he::ExpandUniform(seed, j, ctx.base().moduli(), ctx.n(), alpha.data() + j * stride);
  }
  return alpha;
}

}  // namespace

absl::StatusOr<PackingKeys> MakePackingKeys(const RingContext& ctx, const RlweSecret& secret,
                                            absl::Span<const uint32_t> lwe_secret) {
  if (lwe_secret.empty()) return absl::InvalidArgumentError("the LWE secret is empty");
  const size_t n = ctx.n(), stride = ctx.k() * n;
  PackingKeys keys;
  keys.lwe_n = static_cast<uint32_t>(lwe_secret.size());
  keys.seed = he::RandomSeed();
  keys.alpha = ExpandAlpha(ctx, keys.seed, keys.lwe_n);
  keys.beta.resize(keys.alpha.size());
  // The constant round(Q s_j / 2^32) is the same value in every NTT slot.
  std::vector<uint64_t> message(stride);
  for (uint32_t j = 0; j < keys.lwe_n; ++j) {
    for (size_t i = 0; i < ctx.k(); ++i) {
      const uint64_t mu = ctx.EncodeWord(lwe_secret[j], i);
      std::fill_n(message.begin() + i * n, n, mu);
    }
    EncryptWithMask(ctx, secret, message.data(), keys.alpha.data() + j * stride,
                    keys.beta.data() + j * stride);
  }
  sodium_memzero(message.data(), message.size() * sizeof(uint64_t));
  return keys;
}

uint64_t PackingKeyBytes(const RingContext& ctx, uint32_t lwe_n) {
  return kKeyHeaderBytes + 4 * uint64_t{lwe_n} * ctx.k() * ctx.n();
}

std::vector<uint8_t> SerializePackingKeys(const PackingKeys& keys) {
  std::vector<uint8_t> bytes(kKeyHeaderBytes + 4 * keys.beta.size());
  std::memcpy(bytes.data(), keys.seed.data(), 32);
  std::memcpy(bytes.data() + 32, &keys.lwe_n, 4);  // little-endian host (embedding/table.h)
  for (size_t w = 0; w < keys.beta.size(); ++w) {
    const uint32_t residue = static_cast<uint32_t>(keys.beta[w]);  // primes are below 2^32
    std::memcpy(bytes.data() + kKeyHeaderBytes + 4 * w, &residue, 4);
  }
  return bytes;
}

absl::StatusOr<PackingKeys> ParsePackingKeys(const RingContext& ctx, uint32_t expected_lwe_n,
                                             absl::Span<const uint8_t> bytes) {
  const uint64_t expected = PackingKeyBytes(ctx, expected_lwe_n);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("packing keys for n = ", expected_lwe_n, " are ",
                                                   expected, " bytes, got ", bytes.size()));
  }
  PackingKeys keys;
  std::memcpy(keys.seed.data(), bytes.data(), 32);
  std::memcpy(&keys.lwe_n, bytes.data() + 32, 4);
  if (keys.lwe_n != expected_lwe_n) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing keys are for n = ", keys.lwe_n, ", expected ", expected_lwe_n));
  }
  const size_t n = ctx.n(), stride = ctx.k() * n;
  keys.beta.resize(uint64_t{keys.lwe_n} * stride);
  for (size_t w = 0; w < keys.beta.size(); ++w) {
    uint32_t residue;
    std::memcpy(&residue, bytes.data() + kKeyHeaderBytes + 4 * w, 4);
    const uint64_t q = ctx.base()[(w % stride) / n].value();
    if (residue >= q) {
      return absl::InvalidArgumentError(
          absl::StrCat("packing key residue ", w, " is not below its prime ", q));
    }
    keys.beta[w] = residue;
  }
  keys.alpha = ExpandAlpha(ctx, keys.seed, keys.lwe_n);
  return keys;
}

absl::StatusOr<PackingMatrix> PackingMatrix::Create(const RingContext& ctx,
                                                    absl::Span<const uint32_t> a, uint64_t rows,
                                                    uint32_t lwe_n) {
  if (rows == 0 || lwe_n == 0 || a.size() != rows * lwe_n) {
    return absl::InvalidArgumentError(absl::StrCat("a packing matrix needs rows x n words with ",
                                                   "rows, n >= 1: got ", a.size(), " words for ",
                                                   rows, " x ", lwe_n));
  }
  const size_t n = ctx.n(), k = ctx.k();
  const uint64_t groups = (rows + n - 1) / n;
  PackingMatrix m(rows, lwe_n, groups, k * n);
  m.ntt_.assign(groups * lwe_n * m.stride_, 0);
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t first = g * n, count = std::min<uint64_t>(n, rows - first);
    uint64_t* group = m.ntt_.data() + g * lwe_n * m.stride_;
    for (uint64_t t = 0; t < count; ++t) {
      const uint32_t* row = a.data() + (first + t) * lwe_n;
      for (uint32_t j = 0; j < lwe_n; ++j) {
        // Centered in [-2^31, 2^31): halves the key noise's coefficients.
        const int64_t v = static_cast<int32_t>(row[j]);
        for (size_t i = 0; i < k; ++i) {
          group[j * m.stride_ + i * n + t] = ctx.base()[i].FromSigned(v);
        }
      }
    }
    for (uint32_t j = 0; j < lwe_n; ++j) he::internal::ForwardNtt(ctx.ntt(), group + j * m.stride_);
  }
  return m;
}

absl::StatusOr<std::vector<RlweCiphertext>> Pack(const RingContext& ctx,
                                                 const PackingMatrix& matrix,
                                                 const PackingKeys& keys,
                                                 absl::Span<const uint32_t> b) {
  const size_t n = ctx.n(), k = ctx.k(), stride = k * n;
  if (b.size() != matrix.rows()) {
    return absl::InvalidArgumentError(absl::StrCat("packing needs one b word per matrix row (",
                                                   matrix.rows(), "), got ", b.size()));
  }
  if (keys.lwe_n != matrix.lwe_n() || keys.beta.size() != uint64_t{keys.lwe_n} * stride ||
      keys.alpha.size() != keys.beta.size()) {
    return absl::InvalidArgumentError(absl::StrCat("packing keys for n = ", keys.lwe_n, " (",
                                                   keys.beta.size(), " residues) do not fit a ",
                                                   "matrix of n = ", matrix.lwe_n()));
  }
  const uint32_t lwe_n = matrix.lwe_n();
  std::vector<const uint64_t*> plain(lwe_n), beta(lwe_n), alpha(lwe_n);
  std::vector<RlweCiphertext> out(matrix.groups());
  for (uint64_t g = 0; g < matrix.groups(); ++g) {
    RlweCiphertext& ct = out[g];
    std::vector<uint64_t> sum0(stride), sum1(stride);
    for (size_t i = 0; i < k; ++i) {
      for (uint32_t j = 0; j < lwe_n; ++j) {
        plain[j] = matrix.Polynomial(g, j) + i * n;
        beta[j] = keys.beta.data() + j * stride + i * n;
        alpha[j] = keys.alpha.data() + j * stride + i * n;
      }
      he::internal::PlainDotProduct({&ctx.base()[i], lwe_n, n, plain.data(), beta.data(),
                                     alpha.data(), sum0.data() + i * n, sum1.data() + i * n});
    }
    // (B - sum A_j beta_j, -sum A_j alpha_j).
    ct.c0.assign(stride, 0);
    const uint64_t first = g * n, count = std::min<uint64_t>(n, matrix.rows() - first);
    for (size_t i = 0; i < k; ++i) {
      for (uint64_t t = 0; t < count; ++t) ct.c0[i * n + t] = ctx.EncodeWord(b[first + t], i);
    }
    he::internal::ForwardNtt(ctx.ntt(), ct.c0.data());
    he::internal::SubRows(ctx.ntt(), ct.c0.data(), sum0.data(), ct.c0.data());
    ct.c1.resize(stride);
    he::internal::NegateRows(ctx.ntt(), sum1.data(), ct.c1.data());
  }
  return out;
}

absl::StatusOr<std::vector<SwitchedCiphertext>> PackResponse(const RingContext& ctx,
                                                             const PackingMatrix& matrix,
                                                             const PackingKeys& keys,
                                                             absl::Span<const uint32_t> b) {
  absl::StatusOr<std::vector<RlweCiphertext>> packed = Pack(ctx, matrix, keys, b);
  if (!packed.ok()) return packed.status();
  std::vector<SwitchedCiphertext> response;
  response.reserve(packed->size());
  for (const RlweCiphertext& ct : *packed) response.push_back(*ModSwitch(ctx, ct));
  return response;
}

absl::StatusOr<std::vector<uint32_t>> UnpackPhases(const RingContext& ctx, const RlweSecret& secret,
                                                   absl::Span<const SwitchedCiphertext> response,
                                                   uint64_t rows) {
  const uint64_t groups = (rows + ctx.n() - 1) / ctx.n();
  if (response.size() < groups) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows, " rows need ", groups, " packed ciphertexts, got ", response.size()));
  }
  std::vector<uint32_t> phases;
  phases.reserve(groups * ctx.n());
  for (uint64_t g = 0; g < groups; ++g) {
    absl::StatusOr<std::vector<uint32_t>> words = DecryptSwitched(ctx, secret, response[g]);
    if (!words.ok()) return words.status();
    phases.insert(phases.end(), words->begin(), words->end());
  }
  phases.resize(rows);
  return phases;
}

PackingNoise PackingNoiseBound(const RingContext& ctx, uint32_t lwe_n) {
  const double n = lwe_n, ring_n = static_cast<double>(ctx.n());
  double q = 1;
  for (uint64_t p : ctx.params().primes) q *= static_cast<double>(p);
  const double response_q = static_cast<double>(ctx.response_modulus().value());
  const double word = std::ldexp(1.0, 32);
  const double var_a = (word * word - 1) / 12;  // centered uniform over 2^32 values
  const double var_e = 10.5;                    // CBD(21)
  const double at_q = word / q, at_switch = word / response_q;
  const double var_q = n * ring_n * var_a * var_e + n * var_a / 12 + 1.0 / 12;
  const double worst_q = n * ring_n * std::ldexp(1.0, 31) * 21 + n * std::ldexp(1.0, 30) + 0.5;
  const double var_switch = 1.0 / 12 + ring_n / 18;  // r0, then N terms r1 z (z^2 = 2/3 on average)
  const double worst_switch = 0.5 + ring_n / 2;
  PackingNoise noise;
  noise.sigma = std::sqrt(var_q * at_q * at_q + var_switch * at_switch * at_switch + 1.0 / 12);
  // + 1.5: the final rounding (1/2) and one unit of slack for the fixed-point fractions.
  noise.worst_case = worst_q * at_q + worst_switch * at_switch + 1.5;
  return noise;
}

bool PackingNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n) {
  return PackingNoiseBound(ctx, lwe_n).worst_case <= (kDelta / 2) / 256.0;
}

}  // namespace veil::lattice
