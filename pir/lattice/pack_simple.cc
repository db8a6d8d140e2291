#include "pir/lattice/pack_simple.h"

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/lwe.h"

namespace veil::lattice {
namespace {

absl::Status CheckSimple(const Shape& shape) {
  if (shape.protocol != Protocol::kSimplePir) {
    return absl::InvalidArgumentError(absl::StrCat("lwe-exppack-s packs SimplePIR answers, not ",
                                                   std::string(ProtocolName(shape.protocol))));
  }
  return absl::OkStatus();
}

uint64_t Groups(const RingContext& ring, const Shape& shape) {
  return (shape.d1 + ring.n() - 1) / ring.n();
}

}  // namespace

uint64_t PackedResponseBytes(const RingContext& ring, const Shape& shape) {
  return Groups(ring, shape) * SwitchedBytes(ring);
}

absl::StatusOr<std::unique_ptr<PackedSimpleServer>> PackedSimpleServer::Create(
    std::unique_ptr<LweServer> server, const RingParams& ring) {
  const LweConfig& config = server->config();
  if (absl::Status s = CheckSimple(config.shape); !s.ok()) return s;
  absl::StatusOr<RingContext> ctx = RingContext::Create(ring);
  if (!ctx.ok()) return ctx.status();
  if (absl::Status s = CheckExpansion(*ctx, kLweDimension); !s.ok()) return s;
  // The hint H = DB A1 is the a-part of every answer word: answer[i] = H[i] s + e' + Delta x.
  absl::StatusOr<std::vector<uint32_t>> hint =
      ParseClientHint(server->hint_blob(), config.shape, config.seed, config.table_digest);
  if (!hint.ok()) return hint.status();
  absl::StatusOr<PackingMatrix> matrix =
      PackingMatrix::Create(*ctx, *hint, config.shape.d1, kLweDimension);
  if (!matrix.ok()) return matrix.status();
  return std::unique_ptr<PackedSimpleServer>(
      new PackedSimpleServer(std::move(server), *std::move(ctx), *std::move(matrix)));
}

absl::StatusOr<he::GaloisKeys> PackedSimpleServer::ParseKeys(
    absl::Span<const uint8_t> bytes) const {
  return ParseExpansionKeys(ring_, kLweDimension, bytes);
}

absl::StatusOr<std::vector<uint8_t>> PackedSimpleServer::Answer(
    absl::Span<const uint32_t> query, absl::Span<const uint8_t> secret_ciphertext,
    const he::GaloisKeys& keys) const {
  const PackedRequest request{query, secret_ciphertext, &keys};
  return std::move(AnswerBatch({&request, 1})[0]);
}

std::vector<absl::StatusOr<std::vector<uint8_t>>> PackedSimpleServer::AnswerBatch(
    absl::Span<const PackedRequest> requests) const {
  const Shape& shape = server_->shape();
  const uint64_t qw = shape.query_words(), aw = shape.answer_words();
  std::vector<absl::StatusOr<std::vector<uint8_t>>> out(requests.size());
  // The well-formed queries share one product.
  std::vector<size_t> good;
  std::vector<uint32_t> queries;
  for (size_t r = 0; r < requests.size(); ++r) {
    if (requests[r].query.size() != qw || requests[r].keys == nullptr) {
      out[r] = absl::InvalidArgumentError(
          absl::StrCat("a query of ", requests[r].query.size(), " words (expected ", qw, ")",
                       requests[r].keys == nullptr ? " without keys" : ""));
      continue;
    }
    good.push_back(r);
    queries.insert(queries.end(), requests[r].query.begin(), requests[r].query.end());
  }
  if (good.empty()) return out;
  std::vector<uint32_t> answers(good.size() * aw);
  if (absl::Status s =
          server_->Answer(queries, static_cast<int>(good.size()), absl::MakeSpan(answers));
      !s.ok()) {
    for (size_t r : good) out[r] = s;
    return out;
  }
  const int threads = server_->threads();
  if (good.size() == 1) {
    out[good[0]] = Pack(answers, requests[good[0]].ciphertext, *requests[good[0]].keys, threads);
    return out;
  }
  // One query per worker at a time, each expanded on its worker alone.
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < good.size(); i = next++) {
      const PackedRequest& request = requests[good[i]];
      out[good[i]] = Pack(absl::MakeConstSpan(answers).subspan(i * aw, aw), request.ciphertext,
                          *request.keys, 1);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min<int>(threads, static_cast<int>(good.size())); ++t) {
    pool.emplace_back(work);
  }
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

absl::StatusOr<std::vector<uint8_t>> PackedSimpleServer::Pack(
    absl::Span<const uint32_t> answer, absl::Span<const uint8_t> secret_ciphertext,
    const he::GaloisKeys& keys, int threads) const {
  // One accumulator per worker of the expansion, merged.
  std::vector<PackAccumulator> acc(threads, PackAccumulator(ring_, matrix_));
  const absl::Status expanded = ExpandLweSecret(
      ring_, keys, kLweDimension, secret_ciphertext, threads,
      [&acc](int worker, uint32_t count, const uint32_t* index, const uint64_t* beta,
             const uint64_t* alpha) { acc[worker].Add(count, index, beta, alpha); });
  if (!expanded.ok()) return expanded;
  for (int w = 1; w < threads; ++w) acc[0].Merge(acc[w]);
  absl::StatusOr<std::vector<RlweCiphertext>> packed = acc[0].Finish(answer);
  if (!packed.ok()) return packed.status();
  std::vector<uint8_t> bytes;
  bytes.reserve(PackedResponseBytes(ring_, server_->shape()));
  for (const SwitchedCiphertext& ct : SwitchResponse(ring_, *packed)) {
    const std::vector<uint8_t> one = SerializeSwitched(ct);
    bytes.insert(bytes.end(), one.begin(), one.end());
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<PackedSimpleClient>> PackedSimpleClient::Create(
    const LweConfig& config, const RingParams& ring) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  if (absl::Status s = CheckSimple(config.shape); !s.ok()) return s;
  absl::StatusOr<RingContext> ctx = RingContext::Create(ring);
  if (!ctx.ok()) return ctx.status();
  if (absl::Status s = CheckExpansion(*ctx, kLweDimension); !s.ok()) return s;
  const he::SecretKey key = he::GenerateSecretKey(*ctx->expansion());
  absl::StatusOr<std::vector<uint8_t>> keys = MakeExpansionKeys(*ctx, key, kLweDimension);
  if (!keys.ok()) return keys.status();
  RlweSecret secret = RlweSecret::FromKey(*ctx, key);
  return std::unique_ptr<PackedSimpleClient>(
      new PackedSimpleClient(config, *std::move(ctx), std::move(secret), *std::move(keys)));
}

absl::StatusOr<PackedQuery> PackedSimpleClient::MakeQuery(uint64_t row, RandomSource& rng) const {
  const Shape& s = config_.shape;
  if (row >= s.rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("row ", row, " is outside the table (", s.rows, " rows)"));
  }
  PackedQuery out;
  out.query.resize(s.query_words());
  std::vector<uint32_t> lwe_secret(kLweDimension);
  const uint64_t column = s.column_of(row);
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA1, s.d0), {column}, rng,
                          absl::MakeSpan(lwe_secret), absl::MakeSpan(out.query));
  absl::StatusOr<std::vector<uint8_t>> ciphertext = EncryptLweSecret(ring_, secret_, lwe_secret);
  // The client needs s no longer: packed answers decrypt with z.
  sodium_memzero(lwe_secret.data(), lwe_secret.size() * sizeof(uint32_t));
  if (!ciphertext.ok()) return ciphertext.status();
  out.ciphertext = *std::move(ciphertext);
  return out;
}

absl::Status PackedSimpleClient::Decode(uint64_t row, absl::Span<const uint8_t> response,
                                        absl::Span<uint8_t> record) const {
  const Shape& s = config_.shape;
  const uint64_t expected = PackedResponseBytes(ring_, s);
  if (row >= s.rows || record.size() != s.record_bytes || response.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode: row ", row, " of ", s.rows, ", record of ", record.size(), " bytes (expected ",
        s.record_bytes, "), response of ", response.size(), " bytes (expected ", expected, ")"));
  }
  const uint64_t one = SwitchedBytes(ring_);
  std::vector<SwitchedCiphertext> cts;
  for (uint64_t at = 0; at < response.size(); at += one) {
    absl::StatusOr<SwitchedCiphertext> ct = ParseSwitched(ring_, response.subspan(at, one));
    if (!ct.ok()) return ct.status();
    cts.push_back(*std::move(ct));
  }
  absl::StatusOr<std::vector<uint32_t>> phases = UnpackPhases(ring_, secret_, cts, s.d1);
  if (!phases.ok()) return phases.status();
  // Every row of the column is decrypted and the record's rows selected with masks: the slot
  // is secret, so it picks no row by address.
  const uint64_t slot = s.slot_of(row);
  std::fill(record.begin(), record.end(), 0);
  for (uint64_t i = 0; i < s.d1; ++i) {
    record[i % s.record_bytes] |= RoundToByte((*phases)[i]) & ByteMask(i / s.record_bytes, slot);
  }
  sodium_memzero(phases->data(), phases->size() * sizeof(uint32_t));
  return absl::OkStatus();
}

}  // namespace veil::lattice
