// veil::client::LweClient: private lookups of embedding-table rows from ONE server speaking
// protocol "lwe-simple" (SimplePIR), "lwe-double" (DoublePIR), "lwe-exppack-s" (SimplePIR with
// packed answers, no hint), "lwe-exppack-d" (DoublePIR with packed answers, no hint) or
// "lwe-hybrid" (lwe-exppack-s whose server returns only the packed ciphertexts of the record's
// window, selected by bits the client sends in one RLWE ciphertext): single-server
// lattice PIR over LWE (pir/lattice/, docs/lattice.md, server/lwe.h, server/lwe_pack.h).
//
// Connect reads the server's config, checks every public parameter against the correctness rule
// and the seed of the public matrices against the table (the server cannot choose them), and
// gets the table's hint: from the hint cache (a folder; one file per hint digest, which names the
// table, protocol and shape) when it holds it, else downloaded in chunks (a lost connection
// resumes at the next chunk) and written to the cache. A new table version has a new digest, so
// its hint is fetched again. Each lookup then sends one query per row (an LWE encryption of the
// row's column under a fresh secret that never leaves the client) and decrypts the answer with
// the hint; the server learns nothing about the row.
//
// lwe-exppack-s has no hint: the client also checks the server's ring parameters and sizes
// against its own (lattice::RingParams::Default), draws a session RLWE secret (wiped with the
// client) and uploads its expansion keys (3.4 MiB, public) to each connection before that
// connection's first query (again after the server evicts them: ABORTED, retried once). Each
// lookup sends the query and the RLWE ciphertext of its secret and decrypts the packed response
// with the session secret. lwe-hybrid does the same (its keys add a conversion key), each lookup
// also sending the selection of its window (pir/lattice/hybrid.h); lwe-exppack-d sends one
// ciphertext per record byte (pir/lattice/pack_double.h); lwe-double-pack two queries and two
// ciphertexts (pir/lattice/double_pack.h).
//
// Replicas: `server` may list replicas of one server ("HOST:PORT,HOST:PORT", as
// ClientOptions::server0); at Connect every replica that answers must serve the same table and
// hint. Each call (a hint chunk, a wave of queries) fails over to another replica and is hedged
// as the two-server client's (mobile_client/transport.h); queries are fresh encryptions, so a
// call answered twice reveals nothing more. A lost connection is reopened by the next call, and a
// replica is used again only if it still serves the session's table and hint.
//
// Never a wrong row: when the table's rows carry authentication tags (embedding/row_tag.h) the
// client needs the table's row key and checks every decrypted row (DATA_LOSS, never returned, on
// a mismatch: a corrupted table, a wrong answer or a failed decryption).
//
// Thread-safe: calls are serialized. Network I/O runs on a thread the client owns.
#ifndef VEIL_MOBILE_CLIENT_LWE_CLIENT_H_
#define VEIL_MOBILE_CLIENT_LWE_CLIENT_H_

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
#include "embedding/row_format.h"
#include "embedding/row_tag.h"
#include "mobile_client/client.h"
#include "mobile_client/failure_latch.h"
#include "rpc/stats.h"

namespace veil::lattice {
class LweClient;
struct LweConfig;
class PackedClient;
class PackedQuery;
class PreparedLookup;
class PreparedQuery;
}  // namespace veil::lattice

namespace veil::client {

class KeyUploads;
class Transport;

struct LweClientOptions {
  std::string server;  // "HOST:PORT", or replicas "HOST:PORT,HOST:PORT"
  // Or lwe-double, lwe-exppack-s, lwe-exppack-d, lwe-hybrid, lwe-double-pack.
  std::string protocol = "lwe-simple";
  // Bound on connecting, on each wave of hint chunks and on each lookup (its reconnection, its
  // calls and the packed protocols' key upload again after an eviction, all together); the whole
  // hint download has a bound of its own: this plus a second per 256 KiB.
  absl::Duration timeout = absl::Seconds(30);
  // TLS as in ClientOptions; empty tls_trusted_certs: plaintext, to loopback only unless
  // allow_plaintext.
  std::string tls_trusted_certs;
  std::string tls_server_name;
  bool allow_plaintext = false;
  // The table's row key file (TABLE.rowkey): required when the table's rows carry tags; with it
  // an untagged table is refused (FAILED_PRECONDITION).
  std::string row_key_file;
  // The oldest table version (epoch) accepted, as in ClientOptions; 0: any.
  uint64_t min_epoch = 0;
  // A file that stops lookups after an answer fails its check (mobile_client/failure_latch.h):
  // a row that fails its tag (DATA_LOSS) writes it, and while it exists Connect and every lookup
  // return FAILED_PRECONDITION. Give every client of the app the same path, in its private
  // storage: a server that made the failure depend on the query then learns one bit per
  // installation, not one per client. Empty: none.
  std::string failure_latch_file;
  // Folder that keeps downloaded hints (created if absent), one file per hint digest; empty:
  // the hint is downloaded at every Connect and kept in memory only.
  std::string hint_cache_dir;
  // The largest hint (lwe-simple, lwe-double) this client downloads and holds: a server asking
  // for more is refused (RESOURCE_EXHAUSTED) before anything is allocated. 2^24 rows of 64 bytes
  // take 90 MiB with SimplePIR.
  uint64_t max_hint_bytes = uint64_t{1} << 30;
};

// The table the server serves, and the protocol's sizes.
struct LweTableInfo {
  uint64_t rows = 0;
  uint32_t dim = 0;
  uint32_t row_words = 0;  // words per row as LookupWords returns them (tags excluded)
  embedding::RowTag row_tag = embedding::RowTag::kNone;
  embedding::RowFormat format = embedding::RowFormat::kFp32;
  int frac_bits = 0;
  uint64_t epoch = 0;
  std::array<uint8_t, 32> digest{};
  std::string digest_hex;
  std::string protocol;                             // "lwe-simple", "lwe-double", ...
  std::string backend;                              // what the server's product runs on
  uint64_t d0 = 0, d1 = 0, records_per_column = 0;  // the database shape
  double log2_failure = 0;    // the correctness rule's bound on one lookup failing, log2
  uint64_t hint_bytes = 0;    // downloaded once per table version (0: lwe-exppack-s)
  uint64_t query_bytes = 0;   // up, per row (lwe-exppack-s: the query and its ciphertext;
                              // lwe-hybrid: and its selection)
  uint64_t answer_bytes = 0;  // down, per row (lwe-exppack-s: the packed response)
  uint64_t key_bytes = 0;     // lwe-exppack-s: expansion keys, up once per connection
  std::string hint_digest_hex;
};

// Client-side work of the last lookup.
struct LweClientTimes {
  double query_ms = 0;    // making the queries (expanding A, encrypting)
  double decode_ms = 0;   // decrypting the answers (and checking tags)
  uint32_t prepared = 0;  // queries finished from prepared ones (PrepareQueries)
};

class LweClient {
 public:
  // Connects, checks the config and gets the hint (cache or download), or (lwe-exppack-s) makes
  // the session's keys and uploads them.
  // Returns INVALID_ARGUMENT for an empty address, an unknown protocol, or a tls_server_name
  // without tls_trusted_certs; the row key file's errors; UNAVAILABLE / DEADLINE_EXCEEDED /
  // FAILED_PRECONDITION as Client::Connect (unreachable server, TLS trust, a server of another
  // protocol: "speaks protocol"); FAILED_PRECONDITION if the config is unusable (parameters
  // other than this client's, a shape the correctness rule refuses, a seed not derived from the
  // table, a hint of the wrong size or digest; lwe-exppack-s: ring parameters or sizes other
  // than this client's) or the table carries row tags and no row key was given; the hint cache
  // folder's errors when it cannot be created or written; the server's error reply (for the key
  // upload: RESOURCE_EXHAUSTED when its key memory is held by keys in use).
  static absl::StatusOr<std::unique_ptr<LweClient>> Connect(const LweClientOptions& options);

  ~LweClient();
  LweClient(const LweClient&) = delete;
  LweClient& operator=(const LweClient&) = delete;

  const LweTableInfo& table() const { return table_; }
  // Whether Connect found the hint in the cache (else it was downloaded).
  bool hint_from_cache() const { return hint_from_cache_; }
  // The packed protocols: expansion key uploads so far (1 after Connect; more after evictions,
  // reconnections the server no longer holds the keys for, or on other replicas), and resumes
  // of them on a reconnection (key_uploads.h).
  uint64_t key_uploads() const;
  uint64_t key_resumes() const;

  // Rows `indices`, dequantized: indices.size() * dim floats.
  // Returns INVALID_ARGUMENT if indices is empty or an index is >= rows; UNAVAILABLE /
  // DEADLINE_EXCEEDED naming the server; FAILED_PRECONDITION if the server came back with
  // another table or hint (connect a new client) or answers from another table; DATA_LOSS if a
  // row fails its authentication tag; the server's error reply.
  absl::StatusOr<std::vector<float>> Lookup(absl::Span<const uint64_t> indices);
  // The same rows as stored: indices.size() * row_words words, bit-exact.
  absl::StatusOr<std::vector<uint32_t>> LookupWords(absl::Span<const uint64_t> indices);

  // Makes the row-free part of `count` queries now (nearly all of a query's client work: the
  // LWE encryptions of zero under fresh secrets and, for the packed protocols, the RLWE
  // ciphertexts of those secrets) and keeps them for the next lookups, which then only add their
  // rows (lattice::LweClient::PrepareLookups, lattice::PackedClient::PrepareQuery). For an app's
  // idle time; runs beside lookups. Each prepared query serves one row, once; they hold secrets
  // (wiped when used or with the client). At most kMaxPreparedBytes of queries are kept.
  // Returns INVALID_ARGUMENT beyond the bound.
  absl::Status PrepareQueries(uint32_t count);
  static constexpr uint64_t kMaxPreparedBytes = uint64_t{64} << 20;
  // Prepared queries not used yet.
  uint64_t prepared_queries() const;

  absl::StatusOr<rpc::StatsSnapshot> ServerStats();

  // The last successful lookup's cost (keys: queries sent), the totals since Connect (the hint
  // download included), and the last lookup's client-side work.
  CallStats last_call() const;
  CallStats totals() const;
  LweClientTimes last_times() const;

  struct ServerConfig;

 private:
  LweClient(LweClientOptions options, std::unique_ptr<Transport> transport);

  // Checks the server's config (FAILED_PRECONDITION naming the problem), adopts it and returns
  // its lattice parameters.
  absl::StatusOr<lattice::LweConfig> Adopt(const ServerConfig& config);
  bool packed() const { return packed_ != nullptr; }
  // The hint blob from the cache or the server (chunk waves, resuming after a lost connection).
  absl::StatusOr<std::vector<uint8_t>> GetHint() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Queries in one answer call: within the server's limits, the queries and their answers each
  // within max_message_bytes.
  size_t QueriesPerCall() const;
  // Sends queries (query_words each) in calls that fit the server's limits, waves that fit its
  // per-connection queue, and writes answer_words per query to `answers`.
  absl::Status SendQueries(absl::Span<const uint32_t> queries, size_t count, absl::Time deadline,
                           absl::Span<uint32_t> answers) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // lwe-exppack-s: records `rows` (one wave) into `records` (record_bytes each), timing the
  // client's work into `times`; keys re-uploaded and the wave retried once after ABORTED.
  absl::Status LookupPacked(absl::Span<const uint64_t> rows, absl::Time deadline,
                            absl::Span<uint8_t> records, LweClientTimes& times)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One answer call per query, each after its replica holds the keys; responses in order.
  absl::Status SendPacked(absl::Span<const lattice::PackedQuery> queries, absl::Time deadline,
                          std::vector<std::vector<uint8_t>>& responses)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const LweClientOptions options_;
  const FailureLatch latch_;
  std::unique_ptr<Transport> transport_;
  std::optional<embedding::RowKey> row_key_;
  LweTableInfo table_;
  std::array<uint8_t, 32> hint_digest_{};
  uint64_t hint_chunk_bytes_ = 0;
  uint32_t record_bytes_ = 0;  // a decrypted record: the row's words, tags included
  uint32_t max_queries_per_call_ = 0;
  uint32_t max_queued_queries_ = 0;  // per connection
  uint64_t max_message_bytes_ = 0;
  bool hint_from_cache_ = false;
  std::unique_ptr<lattice::LweClient> lwe_;        // lwe-simple, lwe-double
  std::unique_ptr<lattice::PackedClient> packed_;  // packed protocols: the session secret
  uint64_t max_chunk_bytes_ = 0;                   // lwe-exppack-s: key bytes per upload call
  std::unique_ptr<KeyUploads> keys_;  // the loop thread's: which replicas hold the keys
  // Each replica's config at Connect (written on the loop thread while Connect waits); once one
  // is adopted (table_ fixed, adopted_ set) a replica that (re)connects is checked against it.
  std::vector<std::unique_ptr<ServerConfig>> replica_configs_;
  std::atomic<bool> adopted_{false};

  mutable absl::Mutex prepared_mu_;  // not held while preparing or looking up
  std::vector<lattice::PreparedQuery> prepared_ ABSL_GUARDED_BY(prepared_mu_);  // packed
  std::vector<lattice::PreparedLookup> prepared_lookups_ ABSL_GUARDED_BY(prepared_mu_);

  mutable absl::Mutex mu_;  // serializes the calls
  CallStats last_call_ ABSL_GUARDED_BY(mu_);
  CallStats totals_ ABSL_GUARDED_BY(mu_);
  LweClientTimes last_times_ ABSL_GUARDED_BY(mu_);
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_LWE_CLIENT_H_
