#include "pir/lattice/packed.h"

#include <sodium.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/parallel.h"
#include "pir/lattice/expansion.h"

namespace veil::lattice {

PackedQuery& PackedQuery::operator=(PackedQuery&& other) noexcept {
  if (this != &other) {
    if (!secrets_.empty()) sodium_memzero(secrets_.data(), secrets_.size() * sizeof(uint32_t));
    query = std::move(other.query);
    ciphertext = std::move(other.ciphertext);
    selection = std::move(other.selection);
    row_ = other.row_;
    secrets_ = std::move(other.secrets_);
  }
  return *this;
}

PackedQuery::~PackedQuery() {
  if (!secrets_.empty()) sodium_memzero(secrets_.data(), secrets_.size() * sizeof(uint32_t));
}

PackedClient::PackedClient() : id_(NewClientId()) {}

PreparedQuery PackedClient::Prepared(PackedQuery query) const {
  PreparedQuery prepared;
  prepared.owner_ = id_;
  prepared.query_ = std::move(query);
  return prepared;
}

absl::StatusOr<PackedQuery> PackedClient::MakeQuery(uint64_t row, RandomSource& rng) const {
  if (row >= rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row ", row, " is outside the table (", rows(), " rows)"));
  }
  absl::StatusOr<PreparedQuery> prepared = PrepareQuery(rng);
  if (!prepared.ok()) return prepared.status();
  return FinishQuery(row, *std::move(prepared));
}

absl::StatusOr<PackedQuery> PackedClient::FinishQuery(uint64_t row, PreparedQuery prepared) const {
  if (row >= rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("row ", row, " is outside the table (", rows(), " rows)"));
  }
  PackedQuery query = std::move(prepared.query_);
  if (prepared.owner_ != id_ || query.query.size() != query_words() ||
      query.selection.size() != selection_bytes()) {
    return absl::InvalidArgumentError(
        "a prepared query of another client (or moved from): prepare it with this client");
  }
  for (const UnitVector& v : UnitVectorsOf(row)) {
    AddUnitVector(v.index, absl::MakeSpan(query.query).subspan(v.begin, v.length));
  }
  if (absl::Status s = AddSelection(row, absl::MakeSpan(query.selection)); !s.ok()) return s;
  query.row_ = row;
  return query;
}

namespace internal {

absl::Status CheckSumsArguments(const std::shared_ptr<const he::GaloisKeys>& keys,
                                uint64_t sum_words, absl::Span<const uint64_t> sums) {
  if (keys == nullptr || sums.size() != sum_words) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing sums: ", keys == nullptr ? "no keys, " : "", sums.size(),
                     " sums (expected ", sum_words, ")"));
  }
  return absl::OkStatus();
}

}  // namespace internal

std::vector<absl::Status> PackingEngine::SumsBatch(
    absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts,
    absl::Span<const absl::Span<uint64_t>> sums, int threads) const {
  if (absl::Status s =
          internal::CheckSumsBatch(keys.size(), ciphertexts.size(), sums.size(), threads);
      !s.ok()) {
    return std::vector<absl::Status>(keys.size(), s);
  }
  std::vector<absl::Status> out(keys.size());
  he::internal::ParallelFor(threads, keys.size(), [&](size_t q) {
    out[q] = Sums(keys[q], ciphertexts[q], keys.size() == 1 ? threads : 1, sums[q]);
  });
  return out;
}

CpuPackingEngine::CpuPackingEngine(const RingContext& ctx, const PackingMatrix& matrix,
                                   uint32_t deferred_levels, int threads)
    : ctx_(ctx),
      matrix_(matrix),
      levels_(EngineDeferredLevels(ctx, matrix.lwe_n(), deferred_levels)),
      threads_(std::max(threads, 1)) {}

void CpuPackingEngine::Prepare() const {
  absl::call_once(prepared_, [this] {
    if (levels_ == 0) return;
    // Cannot fail: the levels and n were checked above.
    absl::StatusOr<DeferredPacking> deferred =
        DeferredPacking::Create(ctx_, matrix_, levels_, threads_);
    if (deferred.ok()) deferred_.emplace(*std::move(deferred));
  });
}

absl::Status CpuPackingEngine::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                    absl::Span<const uint8_t> ciphertext, int threads,
                                    absl::Span<uint64_t> sums) const {
  if (absl::Status s = internal::CheckSumsArguments(keys, PackingSumWords(ctx_, matrix_), sums);
      !s.ok()) {
    return s;
  }
  if (threads < 1) return absl::InvalidArgumentError("packing sums need at least one thread");
  Prepare();
  if (deferred_) return deferred_->Sums(*keys, ciphertext, threads, sums);
  absl::StatusOr<absl::Span<const uint64_t>> full =
      ExpandIntoPackingSums(ctx_, *keys, matrix_, ciphertext, threads);
  if (!full.ok()) return full.status();
  std::copy(full->begin(), full->end(), sums.begin());
  return absl::OkStatus();
}

std::vector<absl::Status> CpuPackingEngine::SumsBatch(
    absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts,
    absl::Span<const absl::Span<uint64_t>> sums, int threads) const {
  Prepare();
  if (!deferred_ || keys.size() < 2) {
    return PackingEngine::SumsBatch(keys, ciphertexts, sums, threads);
  }
  std::vector<const he::GaloisKeys*> raw(keys.size());
  for (size_t q = 0; q < keys.size(); ++q) raw[q] = keys[q].get();
  return deferred_->SumsBatch(raw, ciphertexts, sums, threads);
}

absl::StatusOr<std::vector<SwitchedCiphertext>> CpuPackingEngine::Switch(
    absl::Span<const RlweCiphertext> packed, int threads) const {
  std::vector<absl::StatusOr<SwitchedCiphertext>> each(packed.size());
  he::internal::ParallelFor(threads, packed.size(),
                            [&](size_t g) { each[g] = ModSwitch(ctx_, packed[g]); });
  std::vector<SwitchedCiphertext> out;
  out.reserve(packed.size());
  for (absl::StatusOr<SwitchedCiphertext>& one : each) {
    if (!one.ok()) return one.status();
    out.push_back(*std::move(one));
  }
  return out;
}

uint64_t PackedServer::key_bytes() const { return ExpansionKeyBytes(ring(), kLweDimension); }

absl::StatusOr<std::vector<uint8_t>> PackedServer::MakeKeys(const he::SecretKey& key) const {
  return MakeExpansionKeys(ring(), key, kLweDimension);
}

absl::StatusOr<he::GaloisKeys> PackedServer::ParseKeys(absl::Span<const uint8_t> bytes) const {
  return ParseExpansionKeys(ring(), kLweDimension, bytes, host_switching());
}

absl::StatusOr<std::vector<uint8_t>> PackedServer::Answer(
    absl::Span<const uint32_t> query, absl::Span<const uint8_t> ciphertext,
    const he::GaloisKeys& keys, absl::Span<const uint8_t> selection) const {
  const PackedRequest request{query, ciphertext, BorrowKeys(keys), selection};
  return std::move(AnswerBatch({&request, 1})[0]);
}

}  // namespace veil::lattice
