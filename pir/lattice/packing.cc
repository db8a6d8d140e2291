#include "pir/lattice/packing.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"
#include "pir/lattice/params.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kKeyHeaderBytes = 32 + 4;  // seed, lwe_n

// alpha_j for j in [first, first + count) from the seed, into out (count x k x N):
// he::ExpandUniform's residues are uniform modulo each prime, so they serve directly as the NTT
// form of a uniform polynomial.
void ExpandAlpha(const RingContext& ctx, const he::Seed& seed, uint32_t first, uint32_t count,
                 uint64_t* out) {
  const size_t stride = ctx.k() * ctx.n();
  for (uint32_t j = 0; j < count; ++j) {
    he::ExpandUniform(seed, first + j, ctx.base().moduli(), ctx.n(), out + j * stride);
  }
}

}  // namespace

uint64_t PackingKeyBytes(const RingContext& ctx, uint32_t lwe_n) {
  return kKeyHeaderBytes + 4 * uint64_t{lwe_n} * ctx.k() * ctx.n();
}

absl::StatusOr<std::vector<uint8_t>> MakePackingKeys(const RingContext& ctx,
                                                     const RlweSecret& secret,
                                                     absl::Span<const uint32_t> lwe_secret) {
  if (lwe_secret.empty()) return absl::InvalidArgumentError("the LWE secret is empty");
  const size_t n = ctx.n(), stride = ctx.k() * n;
  const uint32_t lwe_n = static_cast<uint32_t>(lwe_secret.size());
  const he::Seed seed = he::RandomSeed();
  std::vector<uint8_t> wire(PackingKeyBytes(ctx, lwe_n));
  std::memcpy(wire.data(), seed.data(), 32);
  // Little-endian words (embedding/table.h asserts a little-endian host).
  std::memcpy(wire.data() + 32, &lwe_n, 4);
  // The constant round(Q s_j / 2^32) is the same value in every NTT slot.
  std::vector<uint64_t> message(stride), alpha(stride), beta(stride);
  std::vector<uint32_t> residues(stride);
  for (uint32_t j = 0; j < lwe_n; ++j) {
    for (size_t i = 0; i < ctx.k(); ++i) {
      const uint64_t mu = ctx.EncodeWord(lwe_secret[j], i);
      std::fill_n(message.begin() + i * n, n, mu);
    }
    ExpandAlpha(ctx, seed, j, 1, alpha.data());
    EncryptWithMask(ctx, secret, message.data(), alpha.data(), beta.data());
    std::copy(beta.begin(), beta.end(), residues.begin());  // primes are below 2^32
    std::memcpy(wire.data() + kKeyHeaderBytes + 4 * j * stride, residues.data(), 4 * stride);
  }
  sodium_memzero(message.data(), message.size() * sizeof(uint64_t));
  return wire;
}

absl::StatusOr<PackingKeysView> ParsePackingKeys(const RingContext& ctx, uint32_t expected_lwe_n,
                                                 absl::Span<const uint8_t> bytes) {
  const uint64_t expected = PackingKeyBytes(ctx, expected_lwe_n);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("packing keys for n = ", expected_lwe_n, " are ",
                                                   expected, " bytes, got ", bytes.size()));
  }
  PackingKeysView keys;
  std::memcpy(keys.seed.data(), bytes.data(), 32);
  std::memcpy(&keys.lwe_n, bytes.data() + 32, 4);
  if (keys.lwe_n != expected_lwe_n) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing keys are for n = ", keys.lwe_n, ", expected ", expected_lwe_n));
  }
  keys.beta = bytes.subspan(kKeyHeaderBytes);
  const size_t n = ctx.n();
  const uint64_t residues = keys.beta.size() / 4;
  for (uint64_t at = 0; at < residues; at += n) {
    const uint32_t q = static_cast<uint32_t>(ctx.base()[(at / n) % ctx.k()].value());
    for (size_t c = 0; c < n; ++c) {
      uint32_t r;
      std::memcpy(&r, keys.beta.data() + 4 * (at + c), 4);
      if (r >= q) {
        return absl::InvalidArgumentError(
            absl::StrCat("packing key residue ", at + c, " is not below its prime ", q));
      }
    }
  }
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
  std::vector<uint64_t> poly(m.stride_);
  for (uint64_t g = 0; g < groups; ++g) {
    const uint64_t first = g * n, count = std::min<uint64_t>(n, rows - first);
    for (uint32_t j = 0; j < lwe_n; ++j) {
      std::fill(poly.begin(), poly.end(), 0);
      for (uint64_t t = 0; t < count; ++t) {
        // Centered in [-2^31, 2^31): halves the key noise's coefficients.
        const int64_t v = static_cast<int32_t>(a[(first + t) * lwe_n + j]);
        for (size_t i = 0; i < k; ++i) poly[i * n + t] = ctx.base()[i].FromSigned(v);
      }
      he::internal::ForwardNtt(ctx.ntt(), poly.data());
      // Residues below the primes, below 2^32 (RingParams).
      std::copy(poly.begin(), poly.end(), m.ntt_.begin() + (g * lwe_n + j) * m.stride_);
    }
  }
  return m;
}

absl::StatusOr<PackingMatrix> PackingMatrix::FromTransforms(const RingContext& ctx, uint64_t groups,
                                                            uint32_t lwe_n,
                                                            std::vector<uint32_t> transforms) {
  const size_t stride = ctx.k() * ctx.n();
  if (groups == 0 || lwe_n == 0 || transforms.size() / stride / lwe_n != groups ||
      transforms.size() != groups * lwe_n * stride) {
    return absl::InvalidArgumentError(absl::StrCat("a packing matrix of ", groups, " x ", lwe_n,
                                                   " polynomials of ", stride, " residues: got ",
                                                   transforms.size(), " words"));
  }
  for (size_t w = 0; w < transforms.size(); ++w) {
    const uint64_t q = ctx.base()[w % stride / ctx.n()].value();
    if (transforms[w] >= q) {
      return absl::InvalidArgumentError(
          absl::StrCat("packing matrix residue ", w, " is not below its prime ", q));
    }
  }
  PackingMatrix m(groups * ctx.n(), lwe_n, groups, stride);
  m.ntt_ = std::move(transforms);
  return m;
}

absl::StatusOr<PackingMatrix> PackingMatrix::Groups(const RingContext& ctx, uint64_t first,
                                                    uint64_t count) const {
  if (count == 0 || first >= groups_ || count > groups_ - first || stride_ != ctx.k() * ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("groups [", first, ", ", first + count, ") of a packing matrix of ", groups_));
  }
  const uint64_t n = ctx.n();
  PackingMatrix m(std::min(rows_ - first * n, count * n), lwe_n_, count, stride_);
  const auto begin = ntt_.begin() + first * lwe_n_ * stride_;
  m.ntt_.assign(begin, begin + count * lwe_n_ * stride_);
  return m;
}

PackAccumulator::PackAccumulator(const RingContext& ctx, const PackingMatrix& matrix)
    : ctx_(ctx),
      matrix_(matrix),
      owned_(PackingSumWords(ctx, matrix), 0),
      sums_(absl::MakeSpan(owned_)),
      added_(matrix.lwe_n(), false) {}

PackAccumulator::PackAccumulator(const RingContext& ctx, const PackingMatrix& matrix,
                                 absl::Span<uint64_t> storage)
    : ctx_(ctx), matrix_(matrix), sums_(storage), added_(matrix.lwe_n(), false) {
  std::fill(sums_.begin(), sums_.end(), 0);
}

void PackAccumulator::Add(uint32_t count, const uint32_t* index, const uint64_t* beta,
                          const uint64_t* alpha) {
  const size_t n = ctx_.n(), k = ctx_.k(), stride = k * n;
  // The keys' slices of this many coefficients (16 keys x 2 halves x 8 bytes: 128 KiB) stay in
  // the core's cache while every group's matrix slice passes them: the keys are read once per
  // block, not once per group (six times over at 2^24 x 64 B, which cost more than the matrix).
  constexpr size_t kSlice = 512;
  const uint32_t* plain[kPackKeysPerBlock];
  const uint64_t* beta_rows[kPackKeysPerBlock];
  const uint64_t* alpha_rows[kPackKeysPerBlock];
  for (uint32_t j = 0; j < count; ++j) {
    if (index[j] >= added_.size() || added_[index[j]]) {
      duplicate_ = true;
      return;
    }
    added_[index[j]] = true;
  }
  added_count_ += count;
  for (size_t i = 0; i < k; ++i) {
    for (size_t c = 0; c < n; c += kSlice) {
      const size_t len = std::min(kSlice, n - c);
      for (uint32_t j = 0; j < count; ++j) {
        beta_rows[j] = beta + j * stride + i * n + c;
        alpha_rows[j] = alpha + j * stride + i * n + c;
      }
      for (uint64_t g = 0; g < matrix_.groups(); ++g) {
        for (uint32_t j = 0; j < count; ++j) plain[j] = matrix_.Polynomial(g, index[j]) + i * n + c;
        uint64_t* sum0 = sums_.data() + g * 2 * stride + i * n + c;
        he::internal::PlainDotProduct(he::internal::DotProductArgs32{
            &ctx_.base()[i], count, len, plain, beta_rows, alpha_rows, sum0, sum0 + stride, true});
      }
    }
  }
}

void PackAccumulator::Merge(const PackAccumulator& other) {
  // Per group and half: k rows.
  for (size_t at = 0; at < sums_.size(); at += ctx_.k() * ctx_.n()) {
    he::internal::AddRows(ctx_.ntt(), sums_.data() + at, other.sums_.data() + at,
                          sums_.data() + at);
  }
  for (size_t j = 0; j < added_.size(); ++j) {
    duplicate_ = duplicate_ || (added_[j] && other.added_[j]);
    added_[j] = added_[j] || other.added_[j];
  }
  added_count_ += other.added_count_;
  duplicate_ = duplicate_ || other.duplicate_;
}

absl::Status PackAccumulator::CheckComplete() const {
  if (duplicate_ || added_count_ != matrix_.lwe_n()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packing needs each of the ", matrix_.lwe_n(), " special ciphertexts once, got ",
        added_count_, duplicate_ ? " and a repeated or out-of-range one" : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RlweCiphertext>> PackAccumulator::Finish(absl::Span<const uint32_t> b) {
  if (absl::Status s = CheckComplete(); !s.ok()) return s;
  return PackedCiphertexts(ctx_, matrix_, sums_, b);
}

uint64_t PackingSumWords(const RingContext& ctx, const PackingMatrix& matrix) {
  return matrix.groups() * 2 * ctx.k() * ctx.n();
}

absl::StatusOr<std::vector<RlweCiphertext>> PackedCiphertexts(const RingContext& ctx,
                                                              const PackingMatrix& matrix,
                                                              absl::Span<const uint64_t> sums,
                                                              absl::Span<const uint32_t> b,
                                                              int threads) {
  const size_t n = ctx.n(), stride = ctx.k() * n;
  if (b.size() != matrix.rows() || sums.size() != PackingSumWords(ctx, matrix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing needs one b word per matrix row (", matrix.rows(), "), got ",
                     b.size(), ", and ", PackingSumWords(ctx, matrix), " sums, got ", sums.size()));
  }
  // (B - sum A_j beta_j, -sum A_j alpha_j).
  std::vector<RlweCiphertext> out(matrix.groups());
  he::internal::ParallelFor(threads, out.size(), [&](size_t g) {
    const uint64_t first = g * n, count = std::min<uint64_t>(n, matrix.rows() - first);
    const uint64_t* sum0 = sums.data() + g * 2 * stride;
    out[g] = PackedCiphertext(ctx, b.subspan(first, count), sum0, sum0 + stride);
  });
  return out;
}

RlweCiphertext PackedCiphertext(const RingContext& ctx, absl::Span<const uint32_t> b,
                                const uint64_t* sum0, const uint64_t* sum1) {
  const size_t n = ctx.n(), k = ctx.k(), stride = k * n;
  RlweCiphertext ct;
  ct.c0.assign(stride, 0);
  for (size_t i = 0; i < k; ++i) {
    for (uint64_t t = 0; t < b.size(); ++t) ct.c0[i * n + t] = ctx.EncodeWord(b[t], i);
  }
  he::internal::ForwardNtt(ctx.ntt(), ct.c0.data());
  he::internal::SubRows(ctx.ntt(), ct.c0.data(), sum0, ct.c0.data());
  ct.c1.resize(stride);
  he::internal::NegateRows(ctx.ntt(), sum1, ct.c1.data());
  return ct;
}

absl::StatusOr<std::vector<RlweCiphertext>> Pack(const RingContext& ctx,
                                                 const PackingMatrix& matrix,
                                                 const PackingKeysView& keys,
                                                 absl::Span<const uint32_t> b) {
  const size_t stride = ctx.k() * ctx.n();
  if (keys.lwe_n != matrix.lwe_n() || keys.beta.size() != 4 * uint64_t{keys.lwe_n} * stride) {
    return absl::InvalidArgumentError(absl::StrCat("packing keys for n = ", keys.lwe_n, " (",
                                                   keys.beta.size() / 4, " residues) do not fit a ",
                                                   "matrix of n = ", matrix.lwe_n()));
  }
  PackAccumulator acc(ctx, matrix);
  std::vector<uint64_t> alpha(kPackKeysPerBlock * stride), beta(kPackKeysPerBlock * stride);
  std::vector<uint32_t> residues(kPackKeysPerBlock * stride);
  uint32_t index[kPackKeysPerBlock];
  for (uint32_t first = 0; first < keys.lwe_n; first += kPackKeysPerBlock) {
    const uint32_t count = std::min(kPackKeysPerBlock, keys.lwe_n - first);
    ExpandAlpha(ctx, keys.seed, first, count, alpha.data());
    std::memcpy(residues.data(), keys.beta.data() + 4 * uint64_t{first} * stride,
                4 * count * stride);
    std::copy_n(residues.begin(), count * stride, beta.begin());
    for (uint32_t j = 0; j < count; ++j) index[j] = first + j;
    acc.Add(count, index, beta.data(), alpha.data());
  }
  return acc.Finish(b);
}

std::vector<SwitchedCiphertext> SwitchResponse(const RingContext& ctx,
                                               absl::Span<const RlweCiphertext> packed) {
  std::vector<SwitchedCiphertext> response;
  response.reserve(packed.size());
  for (const RlweCiphertext& ct : packed) response.push_back(*ModSwitch(ctx, ct));
  return response;
}

std::vector<uint8_t> SerializeResponse(absl::Span<const SwitchedCiphertext> response) {
  std::vector<uint8_t> bytes;
  for (const SwitchedCiphertext& ct : response) {
    const std::vector<uint8_t> one = SerializeSwitched(ct);
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  return bytes;
}

absl::StatusOr<std::vector<SwitchedCiphertext>> ParseResponse(const RingContext& ctx,
                                                              absl::Span<const uint8_t> bytes) {
  const uint64_t one = SwitchedBytes(ctx);
  if (bytes.size() % one != 0) {
    return absl::InvalidArgumentError(absl::StrCat("a response of ", bytes.size(),
                                                   " bytes is not a whole number of ", one,
                                                   "-byte ciphertexts"));
  }
  std::vector<SwitchedCiphertext> out;
  for (uint64_t at = 0; at < bytes.size(); at += one) {
    absl::StatusOr<SwitchedCiphertext> ct = ParseSwitched(ctx, bytes.subspan(at, one));
    if (!ct.ok()) return ct.status();
    out.push_back(*std::move(ct));
  }
  return out;
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
    if (!words.ok()) {
      sodium_memzero(phases.data(), phases.size() * sizeof(uint32_t));
      return words.status();
    }
    phases.insert(phases.end(), words->begin(), words->end());
    // The decrypted column says which column was asked for: wiped like the caller's copy.
    sodium_memzero(words->data(), words->size() * sizeof(uint32_t));
  }
  phases.resize(rows);
  return phases;
}

PackingNoise PackingNoiseBound(const RingContext& ctx, uint32_t lwe_n) {
  return PackingNoiseForKeys(ctx, lwe_n, 10.5, he::kErrorBound);
}

PackingNoise PackingNoiseForKeys(const RingContext& ctx, uint32_t lwe_n, double key_variance,
                                 double key_worst) {
  const double n = lwe_n, ring_n = static_cast<double>(ctx.n());
  double q = 1;
  for (uint64_t p : ctx.params().primes) q *= static_cast<double>(p);
  const double response_q = static_cast<double>(ctx.response_modulus().value());
  const double word = std::ldexp(1.0, 32);
  const double var_a = (word * word - 1) / 12;  // centered uniform over 2^32 values
  const double at_q = word / q, at_switch = word / response_q;
  const double var_q = n * ring_n * var_a * key_variance + n * var_a / 12 + 1.0 / 12;
  const double worst_q =
      n * ring_n * std::ldexp(1.0, 31) * key_worst + n * std::ldexp(1.0, 30) + 0.5;
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
