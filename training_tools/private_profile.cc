#include "training_tools/private_profile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "pir/he/paillier/aggregate.h"
#include "pir/he/paillier/randomizer.h"
#include "pir/he/paillier/serialize.h"

namespace veil::training {
namespace {

double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The requests of each client, clients in order of first appearance.
std::vector<std::vector<RowRequest>> GroupByClient(const std::vector<RowRequest>& requests,
                                                   const std::vector<int32_t>& clients) {
  absl::flat_hash_map<int32_t, size_t> index;
  std::vector<std::vector<RowRequest>> groups;
  for (size_t i = 0; i < requests.size(); ++i) {
    auto [it, added] = index.try_emplace(clients[i], groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(requests[i]);
  }
  return groups;
}

}  // namespace

he::PackingSpec ReportPacking(uint32_t value_bits, uint64_t clients) {
  return {.value_bits = value_bits, .max_summands = clients};
}

std::vector<uint64_t> ClientCounts(const std::vector<RowRequest>& requests, int32_t num_rows) {
  const AccessProfile own = BuildProfile(requests, num_rows, /*top_k=*/0);
  std::vector<uint64_t> counts(own.frequency.begin(), own.frequency.end());
  counts.push_back(static_cast<uint64_t>(own.num_requests));
  return counts;
}

absl::StatusOr<std::string> ClientReport(const he::PublicKey& key, const he::Packer& packer,
                                         he::Randomizer& randomness,
                                         const std::vector<RowRequest>& requests,
                                         int32_t num_rows) {
  const std::vector<uint64_t> counts = ClientCounts(requests, num_rows);
  auto report = he::EncryptPacked(key, packer, counts, randomness);
  if (!report.ok()) return report.status();
  return he::SerializeBatch(key, *report);
}

absl::StatusOr<he::CiphertextBatch> AggregateReports(const he::PublicKey& key,
                                                     const he::Packer& packer,
                                                     absl::Span<const std::string> reports,
                                                     int32_t num_rows, int threads) {
  std::vector<he::CiphertextBatch> batches;
  batches.reserve(reports.size());
  for (size_t i = 0; i < reports.size(); ++i) {
    auto batch = he::ParseBatch(reports[i], key);
    if (!batch.ok()) {
      return absl::Status(batch.status().code(),
                          absl::StrCat("report ", i, ": ", batch.status().message()));
    }
    if (!(batch->packing == packer.spec()) ||
        batch->values != static_cast<uint64_t>(num_rows) + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "report ", i, ": ", batch->values, " values packed with ", batch->packing.value_bits,
          "-bit values; expected ", num_rows + 1, " with ", packer.spec().value_bits));
    }
    batches.push_back(*std::move(batch));
  }
  return he::AggregateBatches(key, batches, threads);
}

absl::StatusOr<AccessProfile> DecryptProfile(const he::KeyPair& keys, const he::Packer& packer,
                                             const he::CiphertextBatch& total, int32_t num_rows) {
  if (total.values != static_cast<uint64_t>(num_rows) + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("total holds ", total.values, " values, expected ", num_rows + 1));
  }
  auto counts = he::DecryptPacked(keys, packer, total);
  if (!counts.ok()) return counts.status();
  AccessProfile profile;
  profile.num_rows = num_rows;
  profile.num_requests = static_cast<int64_t>(counts->back());
  profile.frequency.assign(counts->begin(), counts->end() - 1);
  profile.co_accessed.resize(num_rows);
  return profile;
}

absl::StatusOr<AccessProfile> BuildPrivateProfile(const std::vector<RowRequest>& requests,
                                                  const std::vector<int32_t>& clients,
                                                  int32_t num_rows,
                                                  const PrivateProfileOptions& options,
                                                  PrivateProfileFigures* figures) {
  if (requests.size() != clients.size() || requests.empty()) {
    return absl::InvalidArgumentError(
        "private profile: one client per request, and at least one request");
  }
  const auto groups = GroupByClient(requests, clients);
  PrivateProfileFigures f;
  f.clients = static_cast<int64_t>(groups.size());

  auto start = std::chrono::steady_clock::now();
  auto keys = he::GenerateKeyPair(options.key);
  if (!keys.ok()) return keys.status();
  f.keygen_s = Since(start);
  const he::PublicKey& key = keys->public_key;
  auto packer = he::Packer::Create(key, ReportPacking(options.value_bits, groups.size()));
  if (!packer.ok()) return packer.status();
  start = std::chrono::steady_clock::now();
  auto randomness = he::FixedBaseRandomizer::Create(key);
  if (!randomness.ok()) return randomness.status();
  f.table_s = Since(start);

  // Clients report concurrently (`threads` at a time), each timed on its own.
  std::vector<absl::StatusOr<std::string>> reports(groups.size(), std::string());
  std::vector<double> report_s(groups.size());
  std::atomic<size_t> next{0};
  start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < std::max(1, options.threads); ++t) {
    workers.emplace_back([&] {
      for (size_t c; (c = next.fetch_add(1)) < groups.size();) {
        const auto client_start = std::chrono::steady_clock::now();
        reports[c] = ClientReport(key, *packer, **randomness, groups[c], num_rows);
        report_s[c] = Since(client_start);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  f.reports_s = Since(start);
  std::vector<std::string> wire;
  for (auto& r : reports) {
    if (!r.ok()) return r.status();
    wire.push_back(*std::move(r));
  }
  f.report_s_max = *std::max_element(report_s.begin(), report_s.end());
  for (double s : report_s) f.report_s_mean += s / report_s.size();
  f.report_bytes = wire[0].size();
  f.slot_bits = packer->slot_bits();
  f.values_per_ciphertext = packer->slots();
  f.ciphertexts_per_report = packer->PlaintextsFor(static_cast<size_t>(num_rows) + 1);

  start = std::chrono::steady_clock::now();
  auto total = AggregateReports(key, *packer, wire, num_rows, std::max(1, options.threads));
  if (!total.ok()) return total.status();
  f.aggregate_s = Since(start);
  start = std::chrono::steady_clock::now();
  auto profile = DecryptProfile(*keys, *packer, *total, num_rows);
  f.decrypt_s = Since(start);
  if (figures != nullptr) *figures = f;
  return profile;
}

}  // namespace veil::training
