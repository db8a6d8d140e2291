#include "pir/lattice/pack_simple.h"

#include <sodium.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/parallel.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/lwe.h"

namespace veil::lattice {
namespace {

absl::Status CheckSimple(const Shape& shape, PackedProtocol protocol) {
  if (shape.protocol != Protocol::kSimplePir) {
    return absl::InvalidArgumentError(absl::StrCat(PackedProtocolName(protocol),
                                                   " packs SimplePIR answers, not ",
                                                   std::string(ProtocolName(shape.protocol))));
  }
  return absl::OkStatus();
}

// A session's keys under `key`: the hybrid's add the conversion key (hybrid.h).
absl::StatusOr<std::vector<uint8_t>> MakeSessionKeys(const RingContext& ring,
                                                     const he::SecretKey& key,
                                                     PackedProtocol protocol) {
  if (protocol == PackedProtocol::kHybrid) return MakeHybridKeys(ring, key);
  return MakeExpansionKeys(ring, key, kLweDimension);
}

}  // namespace

SumsSchedule SumsScheduleChoice::Next() {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t call = calls_++;
  if (call < 2 * kTrials) {
    return call % 2 == 0 ? SumsSchedule::kAfterProduct : SumsSchedule::kAlongsideProduct;
  }
  const SumsSchedule preferred = PreferredLocked();
  if (call % kRetry != 0) return preferred;
  return preferred == SumsSchedule::kAlongsideProduct ? SumsSchedule::kAfterProduct
                                                      : SumsSchedule::kAlongsideProduct;
}

SumsSchedule SumsScheduleChoice::Preferred() {
  std::lock_guard<std::mutex> lock(mu_);
  return PreferredLocked();
}

SumsSchedule SumsScheduleChoice::PreferredLocked() const {
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  const bool alongside =
      !times_[1].empty() && (times_[0].empty() || median(times_[1]) < median(times_[0]));
  return alongside ? SumsSchedule::kAlongsideProduct : SumsSchedule::kAfterProduct;
}

void SumsScheduleChoice::Record(SumsSchedule schedule, double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<double>& times = times_[schedule == SumsSchedule::kAlongsideProduct ? 1 : 0];
  if (times.size() == kTrials) times.erase(times.begin());
  times.push_back(seconds);
}

const char* PackedProtocolName(PackedProtocol protocol) {
  return protocol == PackedProtocol::kHybrid ? "lwe-hybrid" : "lwe-exppack-s";
}

uint64_t PackedResponseBytes(const RingContext& ring, const Shape& shape, PackedProtocol protocol) {
  if (protocol == PackedProtocol::kHybrid) return HybridResponseBytes(ring, shape);
  return (shape.d1 + ring.n() - 1) / ring.n() * SwitchedBytes(ring);
}

uint64_t PackedSelectionBytes(const RingContext& ring, const Shape& shape,
                              PackedProtocol protocol) {
  return protocol == PackedProtocol::kHybrid ? HybridSelectionBytes(ring, shape) : 0;
}

absl::StatusOr<std::unique_ptr<PackedSimpleServer>> PackedSimpleServer::Create(
    std::unique_ptr<LweServer> server, const RingParams& ring, PackedProtocol protocol) {
  const LweConfig& config = server->config();
  if (absl::Status s = CheckSimple(config.shape, protocol); !s.ok()) return s;
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
  std::unique_ptr<PackedSimpleServer> out(
      new PackedSimpleServer(std::move(server), *std::move(ctx), *std::move(matrix), protocol));
  out->set_packing_engine(std::make_unique<CpuPackingEngine>(
      out->ring_, out->matrix_, BestDeferredLevels(kLweDimension, out->matrix_.groups()),
      out->server_->threads()));
  return out;
}

uint64_t PackedSimpleServer::response_bytes() const {
  return PackedResponseBytes(ring_, server_->shape(), protocol_);
}

uint64_t PackedSimpleServer::selection_bytes() const {
  return PackedSelectionBytes(ring_, server_->shape(), protocol_);
}

uint64_t PackedSimpleServer::key_bytes() const {
  return protocol_ == PackedProtocol::kHybrid ? HybridKeyBytes(ring_) : PackedServer::key_bytes();
}

absl::StatusOr<std::vector<uint8_t>> PackedSimpleServer::MakeKeys(const he::SecretKey& key) const {
  return MakeSessionKeys(ring_, key, protocol_);
}

absl::StatusOr<he::GaloisKeys> PackedSimpleServer::ParseKeys(
    absl::Span<const uint8_t> bytes) const {
  if (protocol_ == PackedProtocol::kHybrid) return ParseHybridKeys(ring_, bytes);
  return PackedServer::ParseKeys(bytes);
}

std::vector<absl::StatusOr<std::vector<uint8_t>>> PackedSimpleServer::AnswerBatch(
    absl::Span<const PackedRequest> requests) const {
  std::vector<absl::StatusOr<std::vector<SwitchedCiphertext>>> switched = SwitchedBatch(requests);
  std::vector<absl::StatusOr<std::vector<uint8_t>>> out(requests.size());
  for (size_t r = 0; r < requests.size(); ++r) {
    if (!switched[r].ok()) {
      out[r] = switched[r].status();
      continue;
    }
    out[r] = SerializeResponse(*switched[r]);
  }
  return out;
}

std::vector<absl::StatusOr<std::vector<SwitchedCiphertext>>> PackedSimpleServer::SwitchedBatch(
    absl::Span<const PackedRequest> requests) const {
  const Shape& shape = server_->shape();
  const uint64_t qw = shape.query_words(), aw = shape.answer_words();
  std::vector<absl::StatusOr<std::vector<SwitchedCiphertext>>> out(requests.size());
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
  const int threads = server_->threads();
  std::vector<uint32_t> answers(good.size() * aw);
  std::vector<absl::StatusOr<PackSums>> sums(good.size());
  absl::Status product;
  // A query alone may run its sums beside the CPU's product (SumsSchedule).
  const bool may_overlap = good.size() == 1 && threads > 1 &&
                           server_->database_product().on_host() &&
                           schedule_ != SumsSchedule::kAfterProduct;
  const SumsSchedule schedule = !may_overlap                           ? SumsSchedule::kAfterProduct
                                : schedule_ == SumsSchedule::kAdaptive ? choice_.Next()
                                                                       : schedule_;
  const auto start = std::chrono::steady_clock::now();
  if (schedule == SumsSchedule::kAlongsideProduct) {
    const int product_threads = threads / 2;
    std::thread alongside(
        [&] { product = server_->Answer(queries, 1, absl::MakeSpan(answers), product_threads); });
    const int sums_threads = threads - product_threads;
    sums = Sums(requests, good, Selections(requests, good, sums_threads), sums_threads);
    alongside.join();
  } else if (protocol_ == PackedProtocol::kHybrid && !server_->database_product().on_host()) {
    // The selections' expansions (on the CPU) while a device multiplies.
    Selected selected;
    std::thread beside([&] { selected = Selections(requests, good, threads); });
    product = server_->Answer(queries, static_cast<int>(good.size()), absl::MakeSpan(answers));
    beside.join();
    if (product.ok()) sums = Sums(requests, good, std::move(selected), threads);
  } else {
    // A batch's queries each expanded on one worker alone, the folded matrix streamed once for
    // several (PackingEngine::SumsBatch).
    product = server_->Answer(queries, static_cast<int>(good.size()), absl::MakeSpan(answers));
    if (product.ok()) sums = Sums(requests, good, Selections(requests, good, threads), threads);
  }
  if (may_overlap && schedule_ == SumsSchedule::kAdaptive && product.ok() && sums[0].ok()) {
    choice_.Record(schedule,
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  if (!product.ok()) {
    for (size_t r : good) out[r] = product;
    return out;
  }
  // A query alone spreads its selection's CMuxes over the threads.
  const int each = good.size() == 1 ? threads : 1;
  he::internal::ParallelFor(good.size() == 1 ? 1 : threads, good.size(), [&](size_t i) {
    if (!sums[i].ok()) {
      out[good[i]] = sums[i].status();
      return;
    }
    out[good[i]] = Finish(absl::MakeConstSpan(answers).subspan(i * aw, aw), *sums[i], each);
  });
  return out;
}

absl::Status PackedSimpleServer::Selection(const PackedRequest& request, PackSums& out,
                                           int threads) const {
  // The selection is expanded (a few key switches) before the packing's work.
  if (protocol_ == PackedProtocol::kHybrid) {
    absl::StatusOr<std::vector<he::QRgswCiphertext>> expanded = ExpandHybridSelection(
        ring_, HybridWindowFor(ring_, server_->shape()), *request.keys, request.selection, threads);
    if (!expanded.ok()) return expanded.status();
    out.bits = *std::move(expanded);
  } else if (!request.selection.empty()) {
    return absl::InvalidArgumentError("lwe-exppack-s takes no selection");
  }
  out.sums.resize(PackingSumWords(ring_, matrix_));
  return absl::OkStatus();
}

PackedSimpleServer::Selected PackedSimpleServer::Selections(
    absl::Span<const PackedRequest> requests, absl::Span<const size_t> which, int threads) const {
  Selected out{std::vector<PackSums>(which.size()), std::vector<absl::Status>(which.size())};
  const int each = std::max(1, threads / static_cast<int>(which.size()));
  he::internal::ParallelFor(threads, which.size(), [&](size_t i) {
    out.status[i] = Selection(requests[which[i]], out.made[i], each);
  });
  return out;
}

std::vector<absl::StatusOr<PackedSimpleServer::PackSums>> PackedSimpleServer::Sums(
    absl::Span<const PackedRequest> requests, absl::Span<const size_t> which, Selected selected,
    int threads) const {
  std::vector<PackSums>& made = selected.made;
  std::vector<absl::Status>& status = selected.status;
  std::vector<size_t> ready;
  std::vector<std::shared_ptr<const he::GaloisKeys>> keys;
  std::vector<absl::Span<const uint8_t>> ciphertexts;
  std::vector<absl::Span<uint64_t>> sums;
  for (size_t i = 0; i < which.size(); ++i) {
    if (!status[i].ok()) continue;
    ready.push_back(i);
    keys.push_back(requests[which[i]].keys);
    ciphertexts.push_back(requests[which[i]].ciphertext);
    sums.push_back(absl::MakeSpan(made[i].sums));
  }
  const std::vector<absl::Status> summed =
      packing_engine().SumsBatch(keys, ciphertexts, sums, threads);
  for (size_t j = 0; j < ready.size(); ++j) status[ready[j]] = summed[j];
  std::vector<absl::StatusOr<PackSums>> out;
  out.reserve(which.size());
  for (size_t i = 0; i < which.size(); ++i) {
    if (status[i].ok()) {
      out.push_back(std::move(made[i]));
    } else {
      out.push_back(status[i]);
    }
  }
  return out;
}

absl::StatusOr<std::vector<SwitchedCiphertext>> PackedSimpleServer::Finish(
    absl::Span<const uint32_t> answer, const PackSums& sums, int threads) const {
  absl::StatusOr<std::vector<RlweCiphertext>> packed =
      PackedCiphertexts(ring_, matrix_, sums.sums, answer, threads);
  if (!packed.ok()) return packed.status();
  if (protocol_ == PackedProtocol::kHybrid) {
    packed =
        SelectWindow(ring_, HybridWindowFor(ring_, server_->shape()), *packed, sums.bits, threads);
    if (!packed.ok()) return packed.status();
  }
  return packing_engine().Switch(*packed, threads);
}

absl::StatusOr<std::unique_ptr<PackedSimpleClient>> PackedSimpleClient::Create(
    const LweConfig& config, const RingParams& ring, PackedProtocol protocol) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  if (absl::Status s = CheckSimple(config.shape, protocol); !s.ok()) return s;
  absl::StatusOr<RingContext> ctx = RingContext::Create(ring);
  if (!ctx.ok()) return ctx.status();
  if (absl::Status s = CheckExpansion(*ctx, kLweDimension); !s.ok()) return s;
  he::SecretKey key = he::GenerateSecretKey(*ctx->expansion());
  absl::StatusOr<std::vector<uint8_t>> keys = MakeSessionKeys(*ctx, key, protocol);
  if (!keys.ok()) return keys.status();
  return std::unique_ptr<PackedSimpleClient>(
      new PackedSimpleClient(config, *std::move(ctx), protocol, key, *std::move(keys)));
}

uint64_t PackedSimpleClient::response_bytes() const {
  return PackedResponseBytes(ring_, config_.shape, protocol_);
}

uint64_t PackedSimpleClient::selection_bytes() const {
  return PackedSelectionBytes(ring_, config_.shape, protocol_);
}

absl::StatusOr<PreparedQuery> PackedSimpleClient::PrepareQuery(RandomSource& rng) const {
  const Shape& s = config_.shape;
  PackedQuery out;
  out.query.resize(s.query_words());
  std::vector<uint32_t> lwe_secret(kLweDimension);
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA1, s.d0), {kNoHot}, rng,
                          absl::MakeSpan(lwe_secret), absl::MakeSpan(out.query));
  absl::StatusOr<std::vector<uint8_t>> ciphertext = EncryptLweSecret(ring_, secret_, lwe_secret);
  // The client needs s no longer: packed answers decrypt with z.
  sodium_memzero(lwe_secret.data(), lwe_secret.size() * sizeof(uint32_t));
  if (!ciphertext.ok()) return ciphertext.status();
  out.ciphertext = *std::move(ciphertext);
  if (protocol_ == PackedProtocol::kHybrid) {
    absl::StatusOr<std::vector<uint8_t>> selection =
        PrepareHybridSelection(ring_, secret_, HybridWindowFor(ring_, s));
    if (!selection.ok()) return selection.status();
    out.selection = *std::move(selection);
  }
  return Prepared(std::move(out));
}

std::vector<UnitVector> PackedSimpleClient::UnitVectorsOf(uint64_t row) const {
  return QueryUnitVectors(config_.shape, row);
}

absl::Status PackedSimpleClient::AddSelection(uint64_t row, absl::Span<uint8_t> selection) const {
  if (protocol_ != PackedProtocol::kHybrid) return absl::OkStatus();
  const HybridWindow window = HybridWindowFor(ring_, config_.shape);
  return AddHybridSelection(ring_, window, window.StartOf(ring_, config_.shape, row), selection);
}

absl::Status PackedSimpleClient::Decode(uint64_t row, absl::Span<const uint8_t> response,
                                        absl::Span<uint8_t> record) const {
  const Shape& s = config_.shape;
  const uint64_t expected = response_bytes();
  if (row >= s.rows || record.size() != s.record_bytes || response.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode: row ", row, " of ", s.rows, ", record of ", record.size(), " bytes (expected ",
        s.record_bytes, "), response of ", response.size(), " bytes (expected ", expected, ")"));
  }
  absl::StatusOr<std::vector<SwitchedCiphertext>> cts = ParseResponse(ring_, response);
  if (!cts.ok()) return cts.status();
  // The response holds the column's rows from `first` on (all of them, for ExpPack(S)).
  uint64_t first = 0;
  if (protocol_ == PackedProtocol::kHybrid) {
    first = HybridWindowFor(ring_, s).StartOf(ring_, s, row) * ring_.n();
  }
  return DecodeRows(row, *cts, first, record);
}

absl::Status PackedSimpleClient::DecodeRows(uint64_t row, absl::Span<const SwitchedCiphertext> cts,
                                            uint64_t first, absl::Span<uint8_t> record) const {
  const Shape& s = config_.shape;
  const uint64_t count = std::min<uint64_t>(cts.size() * ring_.n(), s.d1 - first);
  absl::StatusOr<std::vector<uint32_t>> phases = UnpackPhases(ring_, secret_, cts, count);
  if (!phases.ok()) return phases.status();
  // Every row of the response is decrypted and the record's rows selected with masks: the slot
  // (and the hybrid's window) is secret, so it picks no row by address. Row first + i is byte
  // `byte` of slot `at`, counted on from first without a branch.
  const uint64_t slot = s.slot_of(row);
  uint64_t byte = first % s.record_bytes, at = first / s.record_bytes;
  std::fill(record.begin(), record.end(), 0);
  for (uint64_t i = 0; i < count; ++i) {
    record[byte] |= RoundToByte((*phases)[i]) & ByteMask(at, slot);
    const uint64_t wrap = uint64_t{0} - static_cast<uint64_t>(byte + 1 == s.record_bytes);
    byte = (byte + 1) & ~wrap;
    at += wrap & 1;
  }
  sodium_memzero(phases->data(), phases->size() * sizeof(uint32_t));
  return absl::OkStatus();
}

}  // namespace veil::lattice
