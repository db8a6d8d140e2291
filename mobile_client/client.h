// veil::client::Client: private lookups of embedding-table rows through two non-colluding PIR
// servers (protocol "dpf2").
//
// For each wanted row the client makes a pair of DPF keys (pir::MakeQuery), sends key b to server
// b, and adds the two answer shares; a single server only ever sees one key, which reveals nothing
// about the row. Before any lookup both servers must report the same table (digest and epoch);
// every answer is checked against it again, so rows are never built from two different tables.
// Rolling updates: servers may serve several versions (epochs) of the table for a while; the
// client uses the newest version both serve, names it in every call, and moves to a newer one
// (retrying a call refused because its version was dropped) without failing lookups.
// There is no fallback to asking one server in the clear: if every replica of a server is down,
// every lookup fails with UNAVAILABLE (or DEADLINE_EXCEEDED) naming it. A lost connection is
// reopened by a later call, which uses it only if the server still serves the session's table
// version; with replicas, the other replicas of that party answer meanwhile
// (ClientOptions::server0).
//
// Layout lookups (LookupLayout) fetch the rows an inference wants through a batch-PIR layout
// (embedding/layout.h, pir/batch/): always the same number of keys to every bin, whatever is
// wanted, with rows that collide reported as missing, never replaced by wrong rows.
//
// Transport (mobile_client/transport.h): whoever reads the connections to both servers learns the
// rows, so with tls_trusted_certs every connection is TLS and each server must present a
// certificate for its name that chains to those certificates; without TLS the client talks to
// loopback servers only, unless allow_plaintext is set (rpc/tls.h).
//
// Thread-safe: calls from several threads are serialized. Network I/O runs on a thread the client
// owns (a KJ event loop), so callers need no event loop of their own.
#ifndef VEIL_MOBILE_CLIENT_CLIENT_H_
#define VEIL_MOBILE_CLIENT_CLIENT_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "dpf/params.h"
#include "embedding/layout.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"
#include "pir/batch/planner.h"
#include "pir/two_server/row_range.h"
#include "rpc/stats.h"

namespace veil::client {

using pir::RowRange;

class ShareExchange;  // mobile_client/share_exchange.h

struct ClientOptions {
  // "HOST:PORT" of party 0, or its replicas "HOST:PORT,HOST:PORT,..." (mobile_client/replicas.h).
  // Replicas of one party must serve the same table (Connect refuses one that does not, naming
  // it); Connect needs one replica of each party up, and waits for every replica's answer (a
  // silent one's for up to `timeout`). A call that fails on a replica (connection
  // lost, UNAVAILABLE, RESOURCE_EXHAUSTED, the server's DEADLINE_EXCEEDED, a replica that cannot
  // be reached) is sent again with the same keys to another replica of that party (a failover),
  // and a call whose reply is slower than the 95th percentile of the party's recent replies (at
  // least 10 ms) is also sent to another replica (a hedge); the first good reply wins, all within
  // `timeout`. A replica that failed is avoided for a backoff (100 ms, doubling up to 5 s), then
  // reconnected in the background.
  std::string server0;
  std::string server1;  // the same for party 1
  // Bound on connecting and on every lookup, both servers together.
  absl::Duration timeout = absl::Seconds(5);
  dpf::Prg prg = dpf::Prg::kAes128;
  // Key type of Lookup(): additive (sum of shares) or XOR (smaller keys). Pooled lookups are
  // always additive.
  dpf::OutputType output = dpf::OutputType::kAdditive;
  // Pads every pooled bag with weight-0 keys (which add nothing) up to this many keys, so that the
  // servers see the same key count for every bag instead of the bag's size; a larger bag is
  // INVALID_ARGUMENT. Padding costs a key per missing row, to each server (docs/privacy.md).
  // 0: no padding, and the servers learn every bag's size.
  uint32_t pad_bags_to = 32;

  // TLS: a PEM file of the certificates to trust (the servers' self-signed certificates, or the
  // operator's CA; several may follow each other). Only these are trusted, not the system's store
  // (give /etc/ssl/certs/ca-certificates.crt for the public CAs). Empty: plaintext.
  std::string tls_trusted_certs;
  // The name server s's certificate must hold (a DNS name or IP address); empty: the HOST of its
  // "HOST:PORT" address. Only with tls_trusted_certs.
  std::string tls_server_name0;
  std::string tls_server_name1;
  // Without TLS, servers at non-loopback addresses are refused (FAILED_PRECONDITION) unless this
  // is set, for networks protected otherwise.
  bool allow_plaintext = false;

  // The table's row key file (veil table build writes TABLE.rowkey): with it every fetched row's
  // authentication tag is checked, and a row that fails is an error (DATA_LOSS), never returned.
  // Required when the servers' table carries tags; with it an untagged table is refused
  // (FAILED_PRECONDITION). Pooled lookups of a tagged table fetch every key's row, checked, and
  // sum the bags on the client (LookupPooled).
  std::string row_key_file;
  // The oldest table version (epoch) this client accepts: servers that serve only older ones are
  // refused (FAILED_PRECONDITION), at Connect and later. Row tags prove that a row is the table's,
  // not that the table is the newest: an app that knows the current epoch (seen before, or told
  // out of band) sets it so that servers cannot hold a new session on an older version. 0: any.
  uint64_t min_epoch = 0;
  // A file that stops lookups after an answer fails its check (mobile_client/failure_latch.h):
  // a row that fails its tag (DATA_LOSS) writes it, and while it exists Connect and every lookup
  // return FAILED_PRECONDITION. Give every client of the app the same path, in its private
  // storage: a server that made the failure depend on the query then learns one bit per
  // installation, not one per client. Its folder must exist and take new files (else Connect is
  // INVALID_ARGUMENT). Empty: none.
  std::string failure_latch_file;
};

// The table both servers serve (from their `config` replies, which must agree).
struct TableInfo {
  uint64_t rows = 0;
  uint32_t dim = 0;
  uint32_t row_words = 0;  // words per row as LookupWords returns it (the data; tags excluded)
  embedding::RowTag row_tag = embedding::RowTag::kNone;  // rows' authentication tags
  embedding::RowFormat format = embedding::RowFormat::kFp32;
  int frac_bits = 0;
  uint64_t epoch = 0;  // the version in use: the newest both servers serve
  std::array<uint8_t, 32> digest{};
  std::string digest_hex;
  std::string backend[2];          // what each server runs ("cpu", "gpu")
  uint32_t max_keys_per_call = 0;  // the smaller of the two servers' limits
  bool range_queries = false;      // both servers answer keys over row ranges (LookupInRanges)
};

// One call's cost, both servers together. Bytes are counted on the sockets (RPC framing
// included).
struct CallStats {
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  double latency_ms = 0;
  uint32_t lookups = 0;  // rows (Lookup), bags (LookupPooled) or keys (LookupLayout) returned
  uint32_t keys = 0;     // keys sent to each server
  uint32_t calls = 0;    // RPC calls per server (a lookup is split at max_keys_per_call)
  // Calls sent again to another replica of their server after a failure, and calls also sent to
  // another replica because the first was slow (ClientOptions::server0).
  uint32_t failovers = 0;
  uint32_t hedges = 0;
};

enum class PoolingMode { kSum, kMean };

// What each bag's sum is divided by: 1 (kSum), or the bag's weight sum (kMean; its size without
// weights), so that a pooled lookup refuses an undefined mean before it sends anything.
// INVALID_ARGUMENT for a mean over weights that sum to 0; sizes that do not add up to `count`
// indices, or weights of another length, are left to the lookup to refuse (all 1 here).
template <typename Weight>
absl::StatusOr<std::vector<double>> BagDivisors(size_t count, absl::Span<const uint32_t> bag_sizes,
                                                absl::Span<const Weight> weights,
                                                PoolingMode mode) {
  std::vector<double> divisors(bag_sizes.size(), 1.0);
  size_t total = 0;
  for (uint32_t size : bag_sizes) total += size;
  if (mode == PoolingMode::kSum || total != count ||
      (!weights.empty() && weights.size() != count)) {
    return divisors;
  }
  size_t next = 0;
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    double sum = 0;
    for (uint32_t k = 0; k < bag_sizes[b]; ++k, ++next) {
      sum += weights.empty() ? 1.0 : static_cast<double>(weights[next]);
    }
    if (sum == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("bag ", b, " has weight sum 0: its mean is undefined"));
    }
    divisors[b] = sum;
  }
  return divisors;
}

// The rows of one inference, fetched through a layout.
struct LayoutLookup {
  std::vector<int32_t> rows;     // the distinct wanted rows, increasing
  std::vector<float> values;     // rows.size() x the layout's row_words values; zeros if missing
  std::vector<uint8_t> missing;  // per rows[i]: 1 if the plan could not serve it
  batch::FetchPlan plan;         // what was sent (fetches include the dummies)
  CallStats call;                // the lookup's cost, both servers
};

class Client {
 public:
  // Connects to both servers and compares their configurations.
  // Returns INVALID_ARGUMENT for an empty or unparsable address or replica list, or a
  // tls_server_name without
  // tls_trusted_certs; tls_trusted_certs' error if it cannot be read (NOT_FOUND,
  // PERMISSION_DENIED) or holds no certificate (INVALID_ARGUMENT); UNAVAILABLE naming the server
  // that cannot be reached, whose TLS handshake fails (a server without TLS, for instance), or
  // which closes a plaintext connection before answering (a TLS server, for instance);
  // DEADLINE_EXCEEDED if a server does not answer (or finish its handshake) within the timeout;
  // FAILED_PRECONDITION if a server's certificate is not trusted or does not hold its name, if a
  // plaintext connection would leave loopback without allow_plaintext, or if the servers serve
  // different tables (digest, epoch or shape), report the wrong party, speak another protocol or
  // protocol version, or do not support the chosen PRG / key type.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // The table's shape and the version (epoch, digest) lookups use now, which changes when both
  // servers have rolled to a newer one.
  TableInfo table() const;

  // Rows `indices`, dequantized: indices.size() * dim floats, row after row.
  // Returns INVALID_ARGUMENT if indices is empty or an index is >= rows, UNAVAILABLE /
  // DEADLINE_EXCEEDED naming the server that failed, FAILED_PRECONDITION if a server's answer is
  // for another table than the one checked at Connect, DATA_LOSS naming the server pair if a
  // reconstructed row fails its authentication tag (a corrupted or tampered table or answer), or
  // the server's error reply.
  absl::StatusOr<std::vector<float>> Lookup(absl::Span<const uint64_t> indices);
  // The same rows as stored: indices.size() * row_words words, bit-exact.
  absl::StatusOr<std::vector<uint32_t>> LookupWords(absl::Span<const uint64_t> indices);

  // Range lookups: row first_row + indices[i] of ranges[i] (one range per index), each key built
  // over its range only (domain LogDomainForRows(ranges[i].rows)), so the upload and the servers'
  // work follow the range's size, not the table's. The servers learn each key's range, never the
  // index within it. Returns INVALID_ARGUMENT if indices is empty, the spans differ in length, a
  // range is empty or outside the table, or an index is >= its range's rows; FAILED_PRECONDITION
  // if a server does not answer range queries; otherwise what Lookup returns.
  absl::StatusOr<std::vector<float>> LookupInRanges(absl::Span<const uint64_t> indices,
                                                    absl::Span<const RowRange> ranges);
  absl::StatusOr<std::vector<uint32_t>> LookupWordsInRanges(absl::Span<const uint64_t> indices,
                                                            absl::Span<const RowRange> ranges);

  // Pooled lookups (EmbeddingBag) on a fixed-point table: bag b is the next bag_sizes[b] entries
  // of `indices`; each bag comes back as one row (summed on the servers, so the download is one
  // row per bag). `weights` is empty (all 1) or one int32 weight per index; the weights travel
  // inside the keys, hidden from the servers. kMean divides by the bag's weight sum (its size
  // without weights). Returns bag_sizes.size() * dim floats.
  // A tagged table's sums cannot be checked: there the servers answer each key (padding
  // included) with its row, every row's tag is checked, and the client sums the bags (the same
  // sums mod 2^32; a download of one row per key instead of per bag; DATA_LOSS for a row that
  // fails its tag, as Lookup).
  // Returns FAILED_PRECONDITION for a table that is not fixed-point, INVALID_ARGUMENT for empty
  // bags, sizes that do not add up to indices.size(), a weights span of another length, a bag
  // larger than pad_bags_to (when set), or a zero weight sum with kMean, and otherwise what Lookup
  // returns.
  absl::StatusOr<std::vector<float>> LookupPooled(absl::Span<const uint64_t> indices,
                                                  absl::Span<const uint32_t> bag_sizes,
                                                  absl::Span<const int32_t> weights,
                                                  PoolingMode mode);
  // The pooled sums as words (the int32 sums mod 2^32 of the fixed-point rows, times weights):
  // bag_sizes.size() * row_words words.
  absl::StatusOr<std::vector<uint32_t>> LookupPooledWords(absl::Span<const uint64_t> indices,
                                                          absl::Span<const uint32_t> bag_sizes,
                                                          absl::Span<const int32_t> weights);

  // Layout lookup: the rows `rows` (any order, duplicates allowed, each in [0,
  // layout.num_rows())) of the table `layout` arranges, fetched as one inference. The servers
  // must serve the layout's physical table (embedding/layout_table.h) with row_words values per
  // row of each entry; every bin gets its constant number of keys, each over its bin's rows.
  // Returns INVALID_ARGUMENT for a row out of range, FAILED_PRECONDITION if the servers' table is
  // not the layout's physical table or does not answer range queries, INTERNAL if a fetched entry
  // does not hold the row the plan says, and otherwise what LookupInRanges returns.
  absl::StatusOr<LayoutLookup> LookupLayout(const embedding::Layout& layout,
                                            absl::Span<const int32_t> rows);

  // Server `party`'s statistics. Returns INVALID_ARGUMENT for a party other than 0 or 1.
  absl::StatusOr<rpc::StatsSnapshot> ServerStats(int party);

  // The last successful lookup's cost, and the totals since Connect (connection set-up included).
  CallStats last_call() const;
  CallStats totals() const;

  explicit Client(std::unique_ptr<ShareExchange> exchange);

 private:
  std::unique_ptr<ShareExchange> exchange_;
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_CLIENT_H_
