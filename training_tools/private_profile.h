// Private co-design profiles: the access counts of a training log collected from its clients under
// Paillier encryption (pir/he/paillier), so that nobody but the client sees which rows it touched.
//
//   key holder  generates the key pair; publishes the public key and the fixed-base generator
//               h^n of DJN's randomness (so every client encrypts at table speed); decrypts only
//               the final total.
//   client      (a user, or a document) counts per table row how many of its requests look the
//               row up (BuildProfile's count: distinct rows per request), appends its number of
//               requests, packs the num_rows + 1 counts (he::Packer, headroom for every client)
//               and sends the encrypted report.
//   aggregator  parses and validates the reports and multiplies them element-wise
//               (he::AggregateBatches): the encrypted sum. It never sees a count.
// The decrypted sum is the profile's frequency and num_requests, identical to BuildProfile's.
// Co-access counts are not collected: they are counts over pairs of rows (41 million pairs for
// MovieLens's 9,066 rows, ~350,000 ciphertexts per client), so co_accessed stays empty, as
// BuildProfile(requests, rows, /*top_k=*/0) leaves it, and layouts get no co-location from it.
#ifndef VEIL_TRAINING_TOOLS_PRIVATE_PROFILE_H_
#define VEIL_TRAINING_TOOLS_PRIVATE_PROFILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/packing.h"
#include "pir/he/paillier/paillier.h"
#include "training_tools/profile.h"

namespace veil::training {

// The packing all parties agree on: counts below 2^value_bits, headroom for every client.
he::PackingSpec ReportPacking(uint32_t value_bits, uint64_t clients);

// Client: per row the number of `requests` that look it up, then requests.size().
std::vector<uint64_t> ClientCounts(const std::vector<RowRequest>& requests, int32_t num_rows);

// Client: the serialized encrypted report of `requests`. Returns INVALID_ARGUMENT if a count does
// not fit the packing's value bits, and the encryption's errors.
absl::StatusOr<std::string> ClientReport(const he::PublicKey& key, const he::Packer& packer,
                                         he::Randomizer& randomness,
                                         const std::vector<RowRequest>& requests, int32_t num_rows);

// Aggregator: the element-wise sum of the reports. Returns he::ParseBatch's errors (with the
// report's index), INVALID_ARGUMENT for a report of another size or packing than `packer`'s
// for num_rows + 1 values, and he::AggregateBatches's errors (OUT_OF_RANGE: more reports than the
// packing's headroom).
absl::StatusOr<he::CiphertextBatch> AggregateReports(const he::PublicKey& key,
                                                     const he::Packer& packer,
                                                     absl::Span<const std::string> reports,
                                                     int32_t num_rows, int threads);

// Key holder: the profile of the decrypted total (frequency, num_requests; no co-access).
// Returns he::DecryptPacked's errors, INVALID_ARGUMENT if the total holds another number of
// values than num_rows + 1.
absl::StatusOr<AccessProfile> DecryptProfile(const he::KeyPair& keys, const he::Packer& packer,
                                             const he::CiphertextBatch& total, int32_t num_rows);

struct PrivateProfileOptions {
  he::KeyOptions key;        // 2048 bits by default
  uint32_t value_bits = 16;  // per-row counts and request totals of one client
  int threads = 1;           // clients encrypting at once; aggregation threads
};

// What the roles cost, for the reports of the demo.
struct PrivateProfileFigures {
  int64_t clients = 0;
  uint32_t slot_bits = 0;
  size_t values_per_ciphertext = 0;
  size_t ciphertexts_per_report = 0;
  size_t report_bytes = 0;
  double keygen_s = 0;       // key holder, once
  double table_s = 0;        // the fixed-base table, once (clients may share or rebuild it)
  double report_s_mean = 0;  // one client: count, pack, encrypt, serialize
  double report_s_max = 0;
  double reports_s = 0;    // every client, wall time on `threads`
  double aggregate_s = 0;  // parse, validate and sum every report
  double decrypt_s = 0;    // decrypt and unpack the total
};

// Every role in one process: the requests grouped by client (`clients[i]` made requests[i]), one
// report per client, the aggregate, the decrypted profile. Returns INVALID_ARGUMENT if the two
// vectors differ in length or there are no requests, and the roles' errors.
absl::StatusOr<AccessProfile> BuildPrivateProfile(const std::vector<RowRequest>& requests,
                                                  const std::vector<int32_t>& clients,
                                                  int32_t num_rows,
                                                  const PrivateProfileOptions& options,
                                                  PrivateProfileFigures* figures);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_PRIVATE_PROFILE_H_
