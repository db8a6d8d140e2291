// veil::client::BagClient: private pooled lookups (EmbeddingBag) from one server speaking protocol
// "bfv-bag" (pir/he/bag.h, server/bfv_bag.h).
//
// For each bag the client encrypts the weight vector over the whole table (one weight per row,
// zero outside the bag) under its own BFV secret key, and the server returns Enc(T^T w): the
// pooled row, which only the client can decrypt. The server sees one constant-size query per bag
// whatever its rows, size or weights; it needs no second server and keeps no hint. The price is
// bytes and server work: a query is one seeded ciphertext per block of N rows (~142 KiB at
// N = 8192, its c_0 rounded; ~174 KiB to older servers), an answer one compressed ciphertext
// (~139 KiB), and each session uploads Galois keys once (~4-16 MB;
// BagTableInfo::galois_key_bytes).
//
// The sums are exact: the server computes sum_r w_r T[r][j] over integers (fixed-point rows), so
// LookupPooledSums equals the plaintext sum and LookupPooled its dequantized value, as long as
// sum_r |w_r| max|T| stays below 2^57 (INVALID_ARGUMENT otherwise, before anything is sent).
//
// Checked sums: a table built with --row-tag-kind=4 carries a linear MAC in two extra columns
// (embedding/row_tag.h) that the server pools with the data. A client holding the table's row
// key checks every bag's sums against it, and a sum that fails is DATA_LOSS, never returned: a
// server that answers from another table, another epoch or with anything but the bag's sum
// escapes with probability at most 2^-61 per answer.
//
// After an answer fails (its sum fails the tag, or it cannot be decoded or decrypted exactly),
// the client makes no more lookups (FAILED_PRECONDITION): the server chooses what its answers
// hold, any function of the encrypted weights it can compute, so whether one fails tells it
// something about a bag. The stop is the client's: an app that makes a new client after a
// failure gives the server another bit, unless its clients share a failure latch
// (BagClientOptions::failure_latch_file, mobile_client/failure_latch.h). The tag columns count
// toward max|T| (below 2^31), so the weights' L1 norm may then reach 2^26.
//
// The session: Connect reads the server's configuration, generates a BFV secret key (libsodium;
// wiped when the client goes) and the Galois keys the table's product needs (public), and uploads
// them. The keys last as long as the client: if the server evicts them (its key memory is
// bounded) the next lookup uploads them again and retries once; a connection (re)opened to the
// same table gets them before its first query.
//
// Replicas: `server` may list replicas of one server ("HOST:PORT,HOST:PORT", serving the same
// table). Each query fails over to another replica and is hedged as the two-server client's
// (mobile_client/transport.h); a replica gets the session's Galois keys before its first query.
//
// Thread-safe: calls are serialized. Network I/O runs on a thread the client owns.
#ifndef VEIL_MOBILE_CLIENT_BAG_CLIENT_H_
#define VEIL_MOBILE_CLIENT_BAG_CLIENT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "embedding/row_tag.h"
#include "mobile_client/client.h"
#include "mobile_client/failure_latch.h"
#include "rpc/stats.h"

namespace veil::he {
class BagClient;
class BfvContext;
}  // namespace veil::he

namespace veil::client {

class KeyUploads;
class Transport;

struct BagClientOptions {
  std::string server;  // "HOST:PORT", or replicas "HOST:PORT,HOST:PORT"
  // Bound on connecting and on each lookup (its reconnection, its calls and a key upload again
  // after an eviction, all together). Key generation and the upload of the Galois keys
  // (megabytes) are part of Connect.
  absl::Duration timeout = absl::Seconds(30);
  // TLS as in ClientOptions: the PEM certificates to trust, and the name the server's
  // certificate must hold (empty: the address's HOST). Empty tls_trusted_certs: plaintext, to
  // loopback only unless allow_plaintext.
  std::string tls_trusted_certs;
  std::string tls_server_name;
  bool allow_plaintext = false;
  // The table's row key file (veil table build --row-tag-kind=4 writes TABLE.rowkey): with it
  // every pooled sum is checked. Required when the server's table carries tags; with it an
  // untagged table is refused (FAILED_PRECONDITION), as ClientOptions::row_key_file.
  std::string row_key_file;
  // The oldest table version (epoch) to accept, as ClientOptions::min_epoch. 0: any.
  uint64_t min_epoch = 0;
  // As ClientOptions::failure_latch_file: an answer that fails (its tag, its decryption or its
  // decoding) writes it, and while it exists no client given it makes lookups. Without it the
  // stop below is this client object's only.
  std::string failure_latch_file;
  // Threads that encrypt and serialize a lookup's queries (0: as many as the machine has cores).
  int threads = 0;
};

// The table the server serves, and the session's sizes.
struct BagTableInfo {
  uint64_t rows = 0;
  uint32_t dim = 0;
  int frac_bits = 0;  // value = int32 / 2^frac_bits
  uint64_t epoch = 0;
  embedding::RowTag row_tag = embedding::RowTag::kNone;  // kLinearMac61: sums are checked
  std::array<uint8_t, 32> digest{};
  std::string digest_hex;
  int log_n = 0;              // BFV ring degree 2^log_n
  uint32_t query_blocks = 0;  // ciphertexts per query
  // Bits each query ciphertext's c_0 drops on the wire (he::kBagQueryRoundBits), or 0 with a
  // server (or a replica) from before 2026-12-06, which reads only exact queries. A replica that
  // did not answer at Connect counts as reading them; if it turns out not to, it is refused when
  // it connects (FAILED_PRECONDITION), and the others serve.
  int query_round_bits = 0;
  uint64_t query_bytes = 0;       // up, per bag (serialized, before RPC framing)
  uint64_t answer_bytes = 0;      // down, per bag
  uint64_t galois_key_bytes = 0;  // up, per session
};

class BagClient {
 public:
  // Connects, generates the session's keys and uploads the Galois keys.
  // Returns INVALID_ARGUMENT for an empty address or a tls_server_name without
  // tls_trusted_certs; UNAVAILABLE / DEADLINE_EXCEEDED / FAILED_PRECONDITION as Client::Connect
  // (unreachable server, TLS trust, a server of another protocol or version: "speaks protocol");
  // FAILED_PRECONDITION if the server's configuration is unusable (parameters this client cannot
  // make, a table that is not fixed-point, a chunk size of 0); the server's error for the upload
  // (RESOURCE_EXHAUSTED when its key memory is full of keys in use).
  static absl::StatusOr<std::unique_ptr<BagClient>> Connect(const BagClientOptions& options);

  ~BagClient();
  BagClient(const BagClient&) = delete;
  BagClient& operator=(const BagClient&) = delete;

  const BagTableInfo& table() const { return table_; }

  // Exact pooled sums: bag b is the next bag_sizes[b] entries of `indices` (repeated rows add
  // up, as in EmbeddingBag), weighted by `weights` (empty: all 1; else one per index). Returns
  // bag_sizes.size() x dim sums of the fixed-point rows times the weights.
  // Returns INVALID_ARGUMENT for no bags, an empty bag, sizes that do not add up to
  // indices.size(), a weights span of another length, a row >= rows, or weights too large for an
  // exact sum; UNAVAILABLE / DEADLINE_EXCEEDED naming the server; FAILED_PRECONDITION if the
  // server came back with another table or answers from another; DATA_LOSS if an answer cannot be
  // decrypted exactly or a sum fails its tag, INTERNAL for a malformed answer, and
  // FAILED_PRECONDITION for every lookup after either; and the server's error reply.
  absl::StatusOr<std::vector<int64_t>> LookupPooledSums(absl::Span<const uint64_t> indices,
                                                        absl::Span<const uint32_t> bag_sizes,
                                                        absl::Span<const int64_t> weights);
  // The sums dequantized (value = sum / 2^frac_bits), divided by the bag's weight sum for kMean.
  // Returns LookupPooledSums' errors, and INVALID_ARGUMENT for kMean of a bag whose weights sum
  // to 0.
  absl::StatusOr<std::vector<float>> LookupPooled(absl::Span<const uint64_t> indices,
                                                  absl::Span<const uint32_t> bag_sizes,
                                                  absl::Span<const int64_t> weights,
                                                  PoolingMode mode);

  // The server's statistics.
  absl::StatusOr<rpc::StatsSnapshot> ServerStats();

  // The last successful lookup's cost (`keys`: query ciphertexts sent; `calls`: answer calls;
  // bytes include a key upload after an eviction), and the totals since Connect (key uploads
  // included).
  CallStats last_call() const;
  CallStats totals() const;
  // Galois key uploads so far (1 after Connect; more after evictions, reconnections the server
  // no longer holds the keys for, or on other replicas), and resumes of them on a reconnection
  // (key_uploads.h).
  uint64_t key_uploads() const;
  uint64_t key_resumes() const;

  struct ServerConfig;
  struct Bag;

 private:
  BagClient(BagClientOptions options, std::unique_ptr<Transport> transport);

  // Checks the server's configuration and starts the session: the BFV context, the secret key and
  // the Galois keys; queries rounded (he::kBagQueryRoundBits) if `rounded_queries`.
  absl::Status Adopt(const ServerConfig& config, bool rounded_queries);
  // Uploads the Galois keys to the server (a replica that does not hold them yet), by `deadline`
  // (default: the timeout from now).
  absl::Status UploadKeys(absl::Time deadline = absl::InfiniteFuture())
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The server chooses what its answers hold (any function of the encrypted weights it can
  // compute), so whether one fails can tell it something about a bag: records that this client
  // makes no more lookups, and returns `status` saying so.
  absl::Status Stop(absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends one wave of serialized queries (at most the server's per-connection queue) by the
  // deadline and decodes the answers into `sums` (columns_ per query).
  absl::Status SendWave(const std::vector<std::vector<uint8_t>>& queries, absl::Time deadline,
                        absl::Span<int64_t> sums) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BagClientOptions options_;
  const int threads_;  // options_.threads, 0 resolved to the machine's cores
  const FailureLatch latch_;
  std::unique_ptr<Transport> transport_;
  BagTableInfo table_;
  uint32_t columns_ = 0;  // pooled per bag: dim, and the two tag columns of a tagged table
  std::optional<embedding::RowKey> row_key_;
  uint64_t max_chunk_bytes_ = 0;
  uint32_t max_queued_ciphertexts_ = 0;  // per connection
  std::shared_ptr<const he::BfvContext> ctx_;
  std::unique_ptr<he::BagClient> he_;  // holds the secret key (wiped on destruction)
  std::vector<uint8_t> galois_keys_;   // serialized; public
  // Each replica's config at Connect (written on the loop thread while Connect waits); once one
  // is adopted (table_ fixed, adopted_ set) a replica that (re)connects is checked against it.
  std::vector<std::unique_ptr<ServerConfig>> replica_configs_;
  std::atomic<bool> adopted_{false};
  std::unique_ptr<KeyUploads> keys_;  // the loop thread's: which replicas hold the keys

  mutable absl::Mutex mu_;  // serializes the calls
  CallStats last_call_ ABSL_GUARDED_BY(mu_);
  CallStats totals_ ABSL_GUARDED_BY(mu_);
  // Why lookups are refused after an answer failed (could not be decoded, or its sum failed its
  // tag); empty until then.
  std::string stopped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_BAG_CLIENT_H_
