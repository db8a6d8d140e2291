#include "pir/lattice/double_pack.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/lwe.h"

namespace veil::lattice {
namespace {

// Digit rows per first-level element: its residue (below q' < 2^32) in four bytes.
constexpr uint64_t kDigits = 4;

// M2's digits for the c first-level ciphertexts: ciphertext u's residues in order (c0's N, then
// c1's), four centered bytes each, at u 8N + 4 e + d; row r of column t (the window starting at
// ciphertext t) is then digit t 8N + r.
std::vector<int8_t> DigitsOf(absl::Span<const SwitchedCiphertext> first, uint64_t n) {
  std::vector<int8_t> digits(first.size() * 2 * kDigits * n);
  int8_t* out = digits.data();
  for (const SwitchedCiphertext& ct : first) {
    for (const std::vector<uint32_t>* half : {&ct.c0, &ct.c1}) {
      for (uint64_t e = 0; e < n; ++e) {
        for (uint64_t d = 0; d < kDigits; ++d) {
          *out++ = static_cast<int8_t>(static_cast<uint8_t>((*half)[e] >> (8 * d)));
        }
      }
    }
  }
  return digits;
}

// E[d^2] of M2's centered digits, averaged over a residue's four, for residues uniform below q
// (the bytes well below q's top are uniform, (256^2 + 2) / 12; the top ones are not).
double DigitMeanSquare(uint64_t q) {
  double total = 0;
  for (uint64_t d = 0; d < kDigits; ++d) {
    // The residues with byte d equal to b: whole periods of 2^(8d + 8), then the rest's.
    const uint64_t block = uint64_t{1} << (8 * d), period = block << 8, rest = q % period;
    for (uint64_t b = 0; b < 256; ++b) {
      const uint64_t count =
          q / period * block + std::min(block, rest > b * block ? rest - b * block : 0);
      const double centered = static_cast<int8_t>(static_cast<uint8_t>(b));
      total += centered * centered * static_cast<double>(count);
    }
  }
  return total / static_cast<double>(q) / kDigits;
}

}  // namespace

DoublePackShape DoublePackShapeFor(const RingContext& ring, const Shape& shape) {
  DoublePackShape s;
  s.window = HybridWindowFor(ring, shape);
  s.rows = 2 * kDigits * s.window.window * ring.n();
  s.columns = s.window.starts;
  s.response_bytes = (s.rows / ring.n()) * SwitchedBytes(ring);
  return s;
}

PackingNoise DoublePackNoiseBound(const RingContext& ring, uint64_t columns) {
  const double n = kLweDimension, ring_n = static_cast<double>(ring.n());
  double q = 1;
  for (uint64_t p : ring.params().primes) q *= static_cast<double>(p);
  const double word = std::ldexp(1.0, 32);
  const double var_digit = DigitMeanSquare(ring.response_modulus().value());
  const double var_a = static_cast<double>(columns) * var_digit * (word * word - 1) / 12;
  // The root's fresh error through T and the a-parts (ExpandedKeyVariance with every level
  // deferred: no switch), and the root's rounding (round(Q s_j / 2^32)) times the a-parts:
  // integers of that variance, not words, whose multiples of 2^32 vanish modulo Q. The W_t's
  // key switches (TracePacking's) only through the digits.
  const double at_q = word / q,
               at_switch = word / static_cast<double>(ring.response_modulus().value());
  const uint32_t levels = ExpansionLevels(kLweDimension);
  const double var_q =
      n * ring_n * var_a * ExpandedKeyVariance(ring, kLweDimension, levels) + n * var_a / 12 +
      static_cast<double>(columns) * ring_n * var_digit * TraceSwitchVariance(ring, kLweDimension);
  const double var_switch = 1.0 / 12 + ring_n / 18;
  const double var_lwe = static_cast<double>(columns) * var_digit * kErrorSigma * kErrorSigma;
  PackingNoise noise;
  noise.sigma =
      std::sqrt(var_q * at_q * at_q + var_switch * at_switch * at_switch + var_lwe + 1.0 / 12);
  noise.worst_case = std::numeric_limits<double>::infinity();
  return noise;
}

bool DoublePackNoiseWithinRule(const RingContext& ring, uint64_t columns) {
  return std::sqrt(2 * 41 * std::log(2.0)) * DoublePackNoiseBound(ring, columns).sigma <=
         kDelta / 4.0;
}

absl::StatusOr<std::unique_ptr<DoublePackedServer>> DoublePackedServer::Create(
    std::unique_ptr<LweServer> server, const RingParams& ring) {
  const Seed seed = server->config().seed;
  absl::StatusOr<std::unique_ptr<PackedSimpleServer>> first =
      PackedSimpleServer::Create(std::move(server), ring);
  if (!first.ok()) return first.status();
  const DoublePackShape second = DoublePackShapeFor((*first)->ring(), (*first)->config().shape);
  // A2: G rows of n words from the seed's second domain (SimplePIR uses only the first).
  const PublicMatrix a2(seed, MatrixDomain::kA2, second.columns);
  std::vector<uint32_t> words(second.columns * kLweDimension);
  a2.ExpandRows(0, second.columns, absl::MakeSpan(words));
  absl::StatusOr<TracePacking> w =
      TracePacking::Create((*first)->ring(), kLweDimension, second.columns, words);
  if (!w.ok()) return w.status();
  return std::unique_ptr<DoublePackedServer>(
      new DoublePackedServer(*std::move(first), second, *std::move(w)));
}

std::vector<absl::StatusOr<std::vector<uint8_t>>> DoublePackedServer::AnswerBatch(
    absl::Span<const PackedRequest> requests) const {
  const uint64_t d0 = config().shape.d0, ct_bytes = SecretCiphertextBytes(ring());
  std::vector<absl::StatusOr<std::vector<uint8_t>>> out(requests.size());
  // The first level of the well-formed requests in one batch.
  std::vector<size_t> good;
  std::vector<PackedRequest> first;
  for (size_t r = 0; r < requests.size(); ++r) {
    const PackedRequest& q = requests[r];
    if (q.query.size() != query_words() || q.ciphertext.size() != 2 * ct_bytes ||
        !q.selection.empty() || q.keys == nullptr) {
      out[r] = absl::InvalidArgumentError(absl::StrCat(
          "a query of ", q.query.size(), " words, ciphertexts of ", q.ciphertext.size(),
          " bytes and a selection of ", q.selection.size(), " bytes (expected ", query_words(),
          ", 2 x ", ct_bytes, " and none)", q.keys == nullptr ? " without keys" : ""));
      continue;
    }
    good.push_back(r);
    first.push_back({q.query.first(d0), q.ciphertext.first(ct_bytes), q.keys, {}});
  }
  if (good.empty()) return out;
  // One query's second level per worker at a time (one query alone gets every thread).
  const int threads = good.size() == 1 ? first_->threads() : 1;
  std::vector<absl::StatusOr<std::vector<uint64_t>>> sums(good.size());
  const auto second_sums = [&] {
    he::internal::ParallelFor(first_->threads(), good.size(), [&](size_t i) {
      const PackedRequest& q = requests[good[i]];
      sums[i] = SecondSums(q.ciphertext.subspan(ct_bytes), *q.keys, threads);
    });
  };
  std::vector<absl::StatusOr<std::vector<SwitchedCiphertext>>> switched;
  if (packing_engine().host_switching()) {
    switched = first_->SwitchedBatch(first);
    second_sums();
  } else {
    std::thread beside(second_sums);
    switched = first_->SwitchedBatch(first);
    beside.join();
  }
  he::internal::ParallelFor(first_->threads(), good.size(), [&](size_t i) {
    const PackedRequest& q = requests[good[i]];
    if (!switched[i].ok()) {
      out[good[i]] = switched[i].status();
    } else if (!sums[i].ok()) {
      out[good[i]] = sums[i].status();
    } else {
      out[good[i]] = Second(*switched[i], q.query.subspan(d0), *sums[i], threads);
    }
  });
  return out;
}

absl::StatusOr<std::vector<uint64_t>> DoublePackedServer::SecondSums(
    absl::Span<const uint8_t> ciphertext, const he::GaloisKeys& keys, int threads) const {
  // W_t = sum_j A2[t, j] K_j (both halves) as T(A2_t(X) c).
  std::vector<uint64_t> sums(second_.columns * 2 * ring().k() * ring().n());
  if (absl::Status s = w_.Sums(keys, ciphertext, threads, absl::MakeSpan(sums)); !s.ok()) return s;
  return sums;
}

absl::StatusOr<std::vector<uint8_t>> DoublePackedServer::Second(
    absl::Span<const SwitchedCiphertext> first, absl::Span<const uint32_t> query,
    absl::Span<const uint64_t> sums, int threads) const {
  const RingContext& ctx = ring();
  const uint64_t n = ctx.n(), k = ctx.k(), stride = k * n, columns = second_.columns;
  const uint64_t rows = second_.rows, groups = rows / n;
  const std::vector<int8_t> m2 = DigitsOf(first, n);
  // The b-parts: M2 q2.
  std::vector<uint32_t> b(rows, 0);
  for (uint64_t t = 0; t < columns; ++t) {
    const int8_t* column = m2.data() + t * 2 * kDigits * n;
    for (uint64_t r = 0; r < rows; ++r) b[r] += static_cast<uint32_t>(column[r]) * query[t];
  }
  // Per output group, on the threads: (B - sum_t M2_t W_t.beta, -sum_t M2_t W_t.alpha).
  std::vector<RlweCiphertext> packed(groups);
  he::internal::ParallelFor(threads, groups, [&](size_t h) {
    std::vector<uint64_t> digits(stride), sum0(stride, 0), sum1(stride, 0);
    for (uint64_t t = 0; t < columns; ++t) {
      const int8_t* column = m2.data() + t * 2 * kDigits * n + h * n;
      for (uint64_t p = 0; p < k; ++p) {
        const uint64_t q = ctx.base()[p].value();
        for (uint64_t c = 0; c < n; ++c) {
          digits[p * n + c] = column[c] < 0 ? q - static_cast<uint64_t>(-column[c]) : column[c];
        }
      }
      he::internal::ForwardNtt(ctx.ntt(), digits.data());
      const uint64_t* wt = sums.data() + t * 2 * stride;
      he::internal::MultiplyAccumulateRows(ctx.ntt(), digits.data(), wt, sum0.data());
      he::internal::MultiplyAccumulateRows(ctx.ntt(), digits.data(), wt + stride, sum1.data());
    }
    packed[h] =
        PackedCiphertext(ctx, absl::MakeConstSpan(b).subspan(h * n, n), sum0.data(), sum1.data());
  });
  absl::StatusOr<std::vector<SwitchedCiphertext>> switched =
      packing_engine().Switch(packed, threads);
  if (!switched.ok()) return switched.status();
  return SerializeResponse(*switched);
}

absl::StatusOr<std::unique_ptr<DoublePackedClient>> DoublePackedClient::Create(
    const LweConfig& config, const RingParams& ring) {
  absl::StatusOr<std::unique_ptr<PackedSimpleClient>> first =
      PackedSimpleClient::Create(config, ring);
  if (!first.ok()) return first.status();
  const DoublePackShape second = DoublePackShapeFor((*first)->ring(), config.shape);
  return std::unique_ptr<DoublePackedClient>(
      new DoublePackedClient(config, *std::move(first), second));
}

absl::StatusOr<PreparedQuery> DoublePackedClient::PrepareQuery(RandomSource& rng) const {
  absl::StatusOr<PreparedQuery> first = first_->PrepareQuery(rng);
  if (!first.ok()) return first.status();
  PackedQuery query = std::move(first->query_);
  // The second level asks for the window's start among the G columns of M2.
  std::vector<uint32_t> s2(kLweDimension), q2(second_.columns);
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA2, second_.columns), {kNoHot},
                          rng, absl::MakeSpan(s2), absl::MakeSpan(q2));
  absl::StatusOr<std::vector<uint8_t>> ct = EncryptLweSecret(first_->ring(), first_->secret_, s2);
  sodium_memzero(s2.data(), s2.size() * sizeof(uint32_t));
  if (!ct.ok()) return ct.status();
  query.query.insert(query.query.end(), q2.begin(), q2.end());
  query.ciphertext.insert(query.ciphertext.end(), ct->begin(), ct->end());
  return Prepared(std::move(query));
}

std::vector<UnitVector> DoublePackedClient::UnitVectorsOf(uint64_t row) const {
  std::vector<UnitVector> out = QueryUnitVectors(config_.shape, row);
  out.push_back({config_.shape.d0, second_.columns,
                 second_.window.StartOf(first_->ring(), config_.shape, row)});
  return out;
}

absl::StatusOr<std::vector<uint32_t>> DoublePackedClient::SecondLevelPhases(
    absl::Span<const uint8_t> response) const {
  if (response.size() != second_.response_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a response of ", response.size(), " bytes (expected ", second_.response_bytes, ")"));
  }
  absl::StatusOr<std::vector<SwitchedCiphertext>> outer = ParseResponse(ring(), response);
  if (!outer.ok()) return outer.status();
  return UnpackPhases(ring(), first_->secret_, *outer, second_.rows);
}

absl::Status DoublePackedClient::Decode(const PackedQuery& query,
                                        absl::Span<const uint8_t> response,
                                        absl::Span<uint8_t> record) const {
  const RingContext& ctx = first_->ring();
  const Shape& s = config_.shape;
  const uint64_t n = ctx.n(), row = query.row();
  if (response.size() != second_.response_bytes || record.size() != s.record_bytes ||
      row >= s.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode: response of ", response.size(), " bytes (expected ", second_.response_bytes,
        "), record of ", record.size(), " bytes (expected ", s.record_bytes, "), row ", row));
  }
  absl::StatusOr<std::vector<uint32_t>> phases = SecondLevelPhases(response);
  if (!phases.ok()) return phases.status();
  // The window's first-level ciphertexts, residue by residue from their four digits.
  const uint64_t w = second_.window.window, q = ctx.response_modulus().value();
  std::vector<SwitchedCiphertext> inner(w);
  bool in_range = true;
  for (uint64_t u = 0; u < w; ++u) {
    inner[u].c0.resize(n);
    inner[u].c1.resize(n);
    for (uint64_t rem = 0; rem < 2 * n; ++rem) {
      const uint64_t e = u * 2 * n + rem;
      uint32_t value = 0;
      for (uint64_t d = 0; d < kDigits; ++d) {
        value |= uint32_t{RoundToByte((*phases)[e * kDigits + d])} << (8 * d);
      }
      in_range &= value < q;
      (rem < n ? inner[u].c0 : inner[u].c1)[rem % n] = value;
    }
  }
  sodium_memzero(phases->data(), phases->size() * sizeof(uint32_t));
  if (!in_range) {
    return absl::InvalidArgumentError(
        absl::StrCat("the second level decodes to residues not below q' = ", q));
  }
  const uint64_t start = second_.window.StartOf(ctx, s, row);
  return first_->DecodeRows(row, inner, start * n, record);
}

}  // namespace veil::lattice
