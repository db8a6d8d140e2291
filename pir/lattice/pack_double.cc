#include "pir/lattice/pack_double.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/parallel.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/hint.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/lwe.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kDigitRows = uint64_t{kDigitsPerWord} * kLweDimension;  // 4n

absl::StatusOr<RingContext> CheckedRing(const Shape& shape, const RingParams& params) {
  if (shape.protocol != Protocol::kDoublePir) {
    return absl::InvalidArgumentError(absl::StrCat("lwe-exppack-d packs DoublePIR answers, not ",
                                                   std::string(ProtocolName(shape.protocol))));
  }
  absl::StatusOr<RingContext> ring = RingContext::Create(params);
  if (!ring.ok()) return ring.status();
  if (absl::Status s = CheckExpansion(*ring, kLweDimension); !s.ok()) return s;
  if (ring->n() < kDigitRows) {
    return absl::InvalidArgumentError(absl::StrCat("lwe-exppack-d packs 4n = ", kDigitRows,
                                                   " rows per ciphertext: N = ", ring->n(),
                                                   " is too small"));
  }
  return ring;
}

void Wipe(std::vector<uint32_t>& v) {
  if (!v.empty()) sodium_memzero(v.data(), v.size() * sizeof(uint32_t));
}

}  // namespace

uint64_t PackedDoubleResponseBytes(const RingContext& ring, const Shape& shape) {
  return shape.record_bytes * SwitchedBytes(ring) +
         4 * (uint64_t{kDigitsPerWord} * shape.record_bytes + kDigitRows);
}

PackingNoise PackedDoubleNoiseBound(const RingContext& ring, const Shape& shape) {
  const double var_digit = (256.0 * 256.0 + 2) / 12;
  const double var_lwe = static_cast<double>(shape.d1) * var_digit * kErrorSigma * kErrorSigma;
  PackingNoise noise = ExpPackNoiseBound(ring, kLweDimension);
  noise.sigma = std::sqrt(var_lwe + noise.sigma * noise.sigma);
  return noise;
}

absl::StatusOr<std::unique_ptr<PackedDoubleServer>> PackedDoubleServer::Create(
    std::unique_ptr<LweServer> server, const RingParams& params) {
  const LweConfig& config = server->config();
  absl::StatusOr<RingContext> ring = CheckedRing(config.shape, params);
  if (!ring.ok()) return ring.status();
  // DoublePIR's client hint is H2 = digits(H1) A2 (4n x n): the a-parts of every a2 word.
  absl::StatusOr<std::vector<uint32_t>> hint =
      ParseClientHint(server->hint_blob(), config.shape, config.seed, config.table_digest);
  if (!hint.ok()) return hint.status();
  absl::StatusOr<PackingMatrix> matrix =
      PackingMatrix::Create(*ring, *hint, kDigitRows, kLweDimension);
  if (!matrix.ok()) return matrix.status();
  std::unique_ptr<PackedDoubleServer> out(
      new PackedDoubleServer(std::move(server), *std::move(ring), *std::move(matrix)));
  out->set_packing_engine(std::make_unique<CpuPackingEngine>(
      out->ring_, out->matrix_, BestDeferredLevels(kLweDimension, out->matrix_.groups()),
      out->server_->threads()));
  return out;
}

std::vector<absl::StatusOr<std::vector<uint8_t>>> PackedDoubleServer::AnswerBatch(
    absl::Span<const PackedRequest> requests) const {
  const Shape& s = server_->shape();
  const uint64_t r_bytes = s.record_bytes, ct_bytes = SecretCiphertextBytes(ring_);
  const uint64_t qw = s.query_words(), aw = s.answer_words(), one = SwitchedBytes(ring_);
  std::vector<absl::StatusOr<std::vector<uint8_t>>> out(requests.size());
  // The well-formed queries share one product.
  std::vector<size_t> good;
  std::vector<uint32_t> queries;
  for (size_t r = 0; r < requests.size(); ++r) {
    const PackedRequest& q = requests[r];
    if (q.query.size() != qw || q.ciphertext.size() != r_bytes * ct_bytes || !q.selection.empty() ||
        q.keys == nullptr) {
      out[r] = absl::InvalidArgumentError(absl::StrCat(
          "a query of ", q.query.size(), " words, ciphertexts of ", q.ciphertext.size(),
          " bytes and a selection of ", q.selection.size(), " bytes (expected ", qw, ", ", r_bytes,
          " x ", ct_bytes, " and none)", q.keys == nullptr ? " without keys" : ""));
      continue;
    }
    good.push_back(r);
    queries.insert(queries.end(), q.query.begin(), q.query.end());
  }
  if (good.empty()) return out;
  std::vector<uint32_t> answers(good.size() * aw);
  if (absl::Status st =
          server_->Answer(queries, static_cast<int>(good.size()), absl::MakeSpan(answers));
      !st.ok()) {
    for (size_t r : good) out[r] = st;
    return out;
  }
  std::vector<std::vector<uint8_t>> responses(good.size(), std::vector<uint8_t>(response_bytes()));
  // The (query, byte) ciphertexts' sums through the engine's SumsBatch (the CPU's streams its
  // folded matrix once for several), a chunk at a time; then each one's packing and switch on a
  // worker.
  const uint64_t tasks = good.size() * r_bytes;
  std::vector<absl::Status> failed(tasks);
  constexpr uint64_t kChunk = 64;
  std::vector<std::vector<uint64_t>> sums(std::min(tasks, kChunk),
                                          std::vector<uint64_t>(PackingSumWords(ring_, matrix_)));
  for (uint64_t first = 0; first < tasks; first += kChunk) {
    const uint64_t size = std::min(kChunk, tasks - first);
    std::vector<std::shared_ptr<const he::GaloisKeys>> keys(size);
    std::vector<absl::Span<const uint8_t>> ciphertexts(size);
    std::vector<absl::Span<uint64_t>> spans(size);
    for (uint64_t c = 0; c < size; ++c) {
      const uint64_t i = (first + c) / r_bytes, j = (first + c) % r_bytes;
      keys[c] = requests[good[i]].keys;
      ciphertexts[c] = requests[good[i]].ciphertext.subspan(j * ct_bytes, ct_bytes);
      spans[c] = absl::MakeSpan(sums[c]);
    }
    const std::vector<absl::Status> summed =
        packing_engine().SumsBatch(keys, ciphertexts, spans, server_->threads());
    he::internal::ParallelFor(server_->threads(), size, [&](size_t c) {
      const uint64_t t = first + c, i = t / r_bytes, j = t % r_bytes;
      absl::StatusOr<std::vector<RlweCiphertext>> packed =
          summed[c].ok() ? PackedCiphertexts(ring_, matrix_, sums[c],
                                             absl::MakeConstSpan(answers).subspan(
                                                 i * aw + j * kDigitRows, kDigitRows))
                         : absl::StatusOr<std::vector<RlweCiphertext>>(summed[c]);
      if (!packed.ok()) {
        failed[t] = packed.status();
        return;
      }
      absl::StatusOr<std::vector<SwitchedCiphertext>> switched =
          packing_engine().Switch(*packed, 1);
      if (!switched.ok()) {
        failed[t] = switched.status();
        return;
      }
      const std::vector<uint8_t> bytes = SerializeSwitched((*switched)[0]);
      std::copy(bytes.begin(), bytes.end(), responses[i].begin() + j * one);
    });
  }
  for (size_t i = 0; i < good.size(); ++i) {
    absl::Status st;
    for (uint64_t j = 0; j < r_bytes && st.ok(); ++j) st = failed[i * r_bytes + j];
    if (!st.ok()) {
      out[good[i]] = st;
      continue;
    }
    // The h2 and h1 words as DoublePIR sends them.
    const uint64_t tail = r_bytes * kDigitRows;
    std::memcpy(responses[i].data() + r_bytes * one, answers.data() + i * aw + tail,
                4 * (aw - tail));
    out[good[i]] = std::move(responses[i]);
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PackedDoubleClient>> PackedDoubleClient::Create(
    const LweConfig& config, const RingParams& params) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  absl::StatusOr<RingContext> ring = CheckedRing(config.shape, params);
  if (!ring.ok()) return ring.status();
  const he::SecretKey key = he::GenerateSecretKey(*ring->expansion());
  absl::StatusOr<std::vector<uint8_t>> keys = MakeExpansionKeys(*ring, key, kLweDimension);
  if (!keys.ok()) return keys.status();
  RlweSecret secret = RlweSecret::FromKey(*ring, key);
  return std::unique_ptr<PackedDoubleClient>(
      new PackedDoubleClient(config, *std::move(ring), std::move(secret), *std::move(keys)));
}

absl::StatusOr<PreparedQuery> PackedDoubleClient::PrepareQuery(RandomSource& rng) const {
  const Shape& s = config_.shape;
  const uint64_t r_bytes = s.record_bytes;
  PackedQuery out;
  out.query.resize(s.query_words());
  out.secrets_.resize((1 + r_bytes) * kLweDimension);
  const absl::Span<uint32_t> secrets = absl::MakeSpan(out.secrets_);
  const absl::Span<uint32_t> query = absl::MakeSpan(out.query);
  // The first level selects the column; the second, one query and secret per record byte, its
  // rows of the first level's answer (as LweClient::MakeQueries): encryptions of zero here.
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA1, s.d0), {kNoHot}, rng,
                          secrets.first(kLweDimension), query.first(s.d0));
  const std::vector<uint64_t> none(r_bytes, kNoHot);
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA2, s.d1), none, rng,
                          secrets.subspan(kLweDimension), query.subspan(s.d0));
  out.ciphertext.reserve(r_bytes * SecretCiphertextBytes(ring_));
  for (uint64_t j = 0; j < r_bytes; ++j) {
    absl::StatusOr<std::vector<uint8_t>> ct =
        EncryptLweSecret(ring_, secret_, secrets.subspan((1 + j) * kLweDimension, kLweDimension));
    if (!ct.ok()) return ct.status();
    out.ciphertext.insert(out.ciphertext.end(), ct->begin(), ct->end());
  }
  return Prepared(std::move(out));
}

std::vector<UnitVector> PackedDoubleClient::UnitVectorsOf(uint64_t row) const {
  return QueryUnitVectors(config_.shape, row);
}

absl::StatusOr<std::vector<uint32_t>> PackedDoubleClient::PackedPhases(
    absl::Span<const uint8_t> response) const {
  const uint64_t r_bytes = config_.shape.record_bytes, one = SwitchedBytes(ring_);
  if (response.size() != response_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("a response of ", response.size(),
                                                   " bytes (expected ", response_bytes(), ")"));
  }
  std::vector<uint32_t> out(r_bytes * kDigitRows);
  for (uint64_t j = 0; j < r_bytes; ++j) {
    absl::StatusOr<SwitchedCiphertext> ct = ParseSwitched(ring_, response.subspan(j * one, one));
    absl::StatusOr<std::vector<uint32_t>> phases =
        ct.ok() ? UnpackPhases(ring_, secret_, {&*ct, 1}, kDigitRows)
                : absl::StatusOr<std::vector<uint32_t>>(ct.status());
    if (!phases.ok()) {
      Wipe(out);
      return phases.status();
    }
    std::copy(phases->begin(), phases->end(), out.begin() + j * kDigitRows);
    Wipe(*phases);
  }
  return out;
}

absl::Status PackedDoubleClient::Decode(const PackedQuery& query,
                                        absl::Span<const uint8_t> response,
                                        absl::Span<uint8_t> record) const {
  const Shape& s = config_.shape;
  const uint64_t r_bytes = s.record_bytes, one = SwitchedBytes(ring_);
  if (response.size() != response_bytes() || record.size() != r_bytes ||
      query.secrets_.size() != (1 + r_bytes) * kLweDimension) {
    return absl::InvalidArgumentError(
        absl::StrCat("decode: response of ", response.size(), " bytes (expected ", response_bytes(),
                     "), record of ", record.size(), " bytes (expected ", r_bytes,
                     "), or a query of another client"));
  }
  // a2_j - H2 s2_j, packed: the digits of H1[row] (row = the byte's row of the column).
  absl::StatusOr<std::vector<uint32_t>> phases = PackedPhases(response);
  if (!phases.ok()) return phases.status();
  // h2 (4 words per byte), then h1 k-major (word k of digit row p at 4k + p): its 4 rows.
  const uint8_t* tail = response.data() + r_bytes * one;
  auto word = [tail](uint64_t i) {
    uint32_t w;
    std::memcpy(&w, tail + 4 * i, 4);
    return w;
  };
  const uint64_t h1_at = r_bytes * kDigitsPerWord;
  std::vector<uint32_t> h1(kDigitRows);
  for (uint64_t k = 0; k < kLweDimension; ++k) {
    for (uint32_t p = 0; p < kDigitsPerWord; ++p) {
      h1[p * kLweDimension + k] = word(h1_at + k * kDigitsPerWord + p);
    }
  }
  const uint32_t* s1 = query.secrets_.data();
  const uint32_t* s2 = s1 + kLweDimension;
  std::vector<uint32_t> h1_mask(r_bytes * kDigitsPerWord);  // h1 s2_j
  MultiplyWords(h1.data(), kDigitsPerWord, kLweDimension, s2, r_bytes, h1_mask.data(),
                kDigitsPerWord);
  std::vector<uint32_t> h1_row(kLweDimension);
  for (uint64_t j = 0; j < r_bytes; ++j) {
    std::fill(h1_row.begin(), h1_row.end(), 0);
    for (uint64_t rho = 0; rho < kDigitRows; ++rho) {
      h1_row[rho / kDigitsPerWord] |= uint32_t{RoundToByte((*phases)[j * kDigitRows + rho])}
                                      << (8 * (rho % kDigitsPerWord));
    }
    uint32_t a1 = 0;
    for (uint32_t p = 0; p < kDigitsPerWord; ++p) {
      const uint32_t noisy = word(j * kDigitsPerWord + p) - h1_mask[j * kDigitsPerWord + p];
      a1 |= uint32_t{RoundToByte(noisy)} << (8 * p);
    }
    uint32_t first_mask = 0;
    MultiplyWords(h1_row.data(), 1, kLweDimension, s1, 1, &first_mask, 1);
    record[j] = RoundToByte(a1 - first_mask);
  }
  Wipe(*phases);
  Wipe(h1_row);
  Wipe(h1_mask);
  return absl::OkStatus();
}

}  // namespace veil::lattice
