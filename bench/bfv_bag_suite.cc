// The bfv-bag-e2e suite: one bfv-bag server process on loopback serving a random fixed-point
// table, a BagClient doing --reps pooled lookups of --bag rows with random weights, and, side by
// side on the same table and bags, the two-server DPF pooled lookup (two dpf2 servers,
// Client::LookupPooled).
//
// Fields (BENCHMARKS.md): server_ms is the server's median call time (arrival to reply: parsing,
// the matrix-vector product, serialization; one client, so no queueing), bytes_up / bytes_down
// are per pooled lookup on the client's socket (RPC framing included), errors counts failed
// lookups and bags whose integer sums differ from the plaintext sums, max_abs_error is the largest
// |float result - exact pooled value| (float rounding only, since the sums are exact).
// galois_key_bytes is the session's one-off upload, connect_ms the client's Connect (key
// generation and upload). The dpf_* fields are the same for the two-server lookup (both servers'
// bytes; dpf_server_ms is server 0's median call time).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/suite.h"
#include "embedding/row_format.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/bag_client.h"
#include "mobile_client/client.h"
#include "tools/launcher.h"

namespace veil::bench {
namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Bag {
  std::vector<uint64_t> rows;  // distinct
  std::vector<int64_t> weights;
};

// The exact pooled sums of `bag` over the table's fixed-point values.
std::vector<int64_t> PlainSums(const embedding::Table& table, const Bag& bag) {
  std::vector<int64_t> sums(table.dim(), 0);
  for (size_t i = 0; i < bag.rows.size(); ++i) {
    absl::Span<const uint32_t> row = table.row(bag.rows[i]);
    for (uint32_t j = 0; j < table.dim(); ++j) {
      sums[j] += bag.weights[i] * static_cast<int32_t>(row[j]);
    }
  }
  return sums;
}

struct Side {
  std::vector<double> latency_ms;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  uint64_t errors = 0;
  double max_abs_error = 0;
  std::string first_error;

  void Fail(const absl::Status& status) {
    ++errors;
    if (first_error.empty()) first_error = status.ToString();
  }
};

// Compares one lookup's integer sums (mod 2^32 for dpf2: `words`) and floats with the plaintext.
void Check(const embedding::Table& table, const Bag& bag, const std::vector<int64_t>& sums,
           bool mod32, Side& side) {
  const std::vector<int64_t> plain = PlainSums(table, bag);
  std::vector<float> values(plain.size());
  if (!embedding::DecodePooledFixed(table.frac_bits(), sums, 1.0, absl::MakeSpan(values)).ok()) {
    ++side.errors;
    return;
  }
  bool same = true;
  for (size_t j = 0; j < plain.size(); ++j) {
    same = same && (mod32 ? static_cast<uint32_t>(sums[j]) == static_cast<uint32_t>(plain[j])
                          : sums[j] == plain[j]);
    const double exact = std::ldexp(static_cast<double>(plain[j]), -table.frac_bits());
    side.max_abs_error = std::max(side.max_abs_error, std::fabs(values[j] - exact));
  }
  if (!same) ++side.errors;
}

absl::StatusOr<std::unique_ptr<tools::ServerProcess>> StartServer(
    const std::string& binary, const std::string& protocol, int party, const std::string& table,
    int threads, const std::string& log) {
  tools::ServerProcessOptions o;
  o.binary = binary;
  o.protocol = protocol;
  o.party = party;
  o.table_path = table;
  o.threads = threads;
  o.log_path = log;
  // A query of a large table exceeds the default 1 MiB call limit (one ciphertext per 8192 rows).
  o.extra_args = {"--max_message_bytes=67108864", "--max_queued_ciphertexts=1024",
                  "--max_queued_ciphertexts_per_connection=1024"};
  if (protocol == "dpf2") o.extra_args = {"--max_keys_per_call=4096"};
  return tools::ServerProcess::Start(o);
}

absl::Status BfvBagE2e(const Flags& flags) {
  const uint64_t rows = flags.Int("rows", 65536);
  const uint32_t dim = static_cast<uint32_t>(flags.Int("dim", 64));
  const uint32_t bag_size = static_cast<uint32_t>(flags.Int("bag", 32));
  const int reps = static_cast<int>(flags.Int("reps", 10));
  const int threads = static_cast<int>(flags.Int("threads", 1));
  // The two-server lookup pads every bag to this many keys (ClientOptions::pad_bags_to; 0: not).
  const uint32_t pad_bags = static_cast<uint32_t>(flags.Int("pad-bags", 32));
  const std::string server_bin = flags.Str("server-bin", tools::ServerBinaryNextToSelf());
  // 1: the table is tagged with the linear MAC (row tag kind 4) and both clients check what
  // they get (bfv-bag its sums, dpf2 every row of its bags).
  const bool row_tags = flags.Int("row-tags", 0) != 0;
  if (rows == 0 || dim == 0 || bag_size == 0 || bag_size > rows || reps < 1 || threads < 1) {
    return absl::InvalidArgumentError(
        "--rows, --dim, --bag (<= rows), --reps and --threads must be positive");
  }
  char dir_template[] = "/tmp/veil-bfv-bag-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string table_path = dir + "/table.veil";
  std::cerr << "bfv-bag-e2e: writing a " << rows << " x " << dim << " fixed-point table\n";
  {
    std::vector<float> values(rows * dim);
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : values) v = dist(gen);
    embedding::TableOptions options;
    options.frac_bits = 16;
    if (row_tags) {
      options.row_key = embedding::NewRowKey();
      options.row_tag = embedding::RowTag::kLinearMac61;
      if (absl::Status s = embedding::WriteRowKeyFile(dir + "/table.rowkey", *options.row_key);
          !s.ok()) {
        return s;
      }
    }
    absl::Status s =
        embedding::WriteTable(table_path, embedding::RowFormat::kFixed32, dim, values, options);
    if (!s.ok()) return s;
  }
  auto table = embedding::Table::Open(table_path);
  if (!table.ok()) return table.status();

  std::cerr << "bfv-bag-e2e: starting one bfv-bag server (encoding the table) and two dpf2 "
               "servers (logs in "
            << dir << ")\n";
  auto bag_server =
      StartServer(server_bin, "bfv-bag", 0, table_path, threads, dir + "/bfv-bag.log");
  if (!bag_server.ok()) return bag_server.status();
  std::unique_ptr<tools::ServerProcess> dpf_servers[2];
  for (int party = 0; party < 2; ++party) {
    auto started = StartServer(server_bin, "dpf2", party, table_path, threads,
                               absl::StrCat(dir, "/dpf2-", party, ".log"));
    if (!started.ok()) return started.status();
    dpf_servers[party] = *std::move(started);
  }

  client::BagClientOptions bag_options;
  bag_options.server = (*bag_server)->address();
  bag_options.timeout = absl::Seconds(300);
  if (row_tags) bag_options.row_key_file = dir + "/table.rowkey";
  const absl::Time connect_start = absl::Now();
  auto bag_client = client::BagClient::Connect(bag_options);
  if (!bag_client.ok()) return bag_client.status();
  const double connect_ms = absl::ToDoubleMilliseconds(absl::Now() - connect_start);
  client::ClientOptions dpf_options;
  dpf_options.server0 = dpf_servers[0]->address();
  dpf_options.server1 = dpf_servers[1]->address();
  dpf_options.timeout = absl::Seconds(60);
  dpf_options.pad_bags_to = pad_bags;
  if (row_tags) dpf_options.row_key_file = dir + "/table.rowkey";
  auto dpf_client = client::Client::Connect(dpf_options);
  if (!dpf_client.ok()) return dpf_client.status();
  std::cerr << "bfv-bag-e2e: connected (" << connect_ms << " ms with key generation and "
            << (*bag_client)->table().galois_key_bytes << " bytes of Galois keys); " << reps
            << " lookups of " << bag_size << " rows\n";

  std::mt19937_64 gen(7);
  Side he, dpf;
  for (int rep = 0; rep < reps; ++rep) {
    Bag bag;
    std::vector<int32_t> weights32;
    while (bag.rows.size() < bag_size) {
      const uint64_t row = gen() % rows;
      if (std::find(bag.rows.begin(), bag.rows.end(), row) != bag.rows.end()) continue;
      bag.rows.push_back(row);
      bag.weights.push_back(static_cast<int64_t>(gen() % 9) - 4);
      weights32.push_back(static_cast<int32_t>(bag.weights.back()));
    }
    const std::vector<uint32_t> sizes = {bag_size};
    auto sums = (*bag_client)->LookupPooledSums(bag.rows, sizes, bag.weights);
    if (sums.ok()) {
      Check(**table, bag, *sums, false, he);
      const client::CallStats call = (*bag_client)->last_call();
      he.latency_ms.push_back(call.latency_ms);
      he.bytes_up += call.bytes_up;
      he.bytes_down += call.bytes_down;
    } else {
      he.Fail(sums.status());
    }
    auto words = (*dpf_client)->LookupPooledWords(bag.rows, sizes, weights32);
    if (words.ok()) {
      std::vector<int64_t> as_sums(words->begin(), words->end());
      for (int64_t& s : as_sums) s = static_cast<int32_t>(static_cast<uint32_t>(s));
      Check(**table, bag, as_sums, true, dpf);
      const client::CallStats call = (*dpf_client)->last_call();
      dpf.latency_ms.push_back(call.latency_ms);
      dpf.bytes_up += call.bytes_up;
      dpf.bytes_down += call.bytes_down;
    } else {
      dpf.Fail(words.status());
    }
  }
  auto he_stats = (*bag_client)->ServerStats();
  auto dpf_stats = (*dpf_client)->ServerStats(0);
  const client::BagTableInfo info = (*bag_client)->table();
  bag_client->reset();
  dpf_client->reset();
  for (const Side* side : {&he, &dpf}) {
    if (!side->first_error.empty())
      std::cerr << "bfv-bag-e2e: first error: " << side->first_error << "\n";
  }
  const double n = std::max<double>(1, static_cast<double>(he.latency_ms.size()));
  const double m = std::max<double>(1, static_cast<double>(dpf.latency_ms.size()));
  JsonLine line("bfv-bag-e2e");
  line.Add("rows", rows)
      .Add("dim", int64_t{dim})
      .Add("bag", int64_t{bag_size})
      .Add("reps", reps)
      .Add("threads", threads)
      .Add("row_tags", int64_t{row_tags})
      .Add("log_n", info.log_n)
      .Add("query_blocks", int64_t{info.query_blocks})
      .Add("server_ms", he_stats.ok() ? he_stats->latency_p50_ms : -1.0)
      .Add("latency_ms", Median(he.latency_ms))
      .Add("bytes_up", static_cast<uint64_t>(std::llround(he.bytes_up / n)))
      .Add("bytes_down", static_cast<uint64_t>(std::llround(he.bytes_down / n)))
      .Add("errors", he.errors)
      .Add("max_abs_error", he.max_abs_error)
      .Add("galois_key_bytes", info.galois_key_bytes)
      .Add("connect_ms", connect_ms)
      .Add("dpf_pad_bags", int64_t{pad_bags})
      .Add("dpf_server_ms", dpf_stats.ok() ? dpf_stats->latency_p50_ms : -1.0)
      .Add("dpf_latency_ms", Median(dpf.latency_ms))
      .Add("dpf_bytes_up", static_cast<uint64_t>(std::llround(dpf.bytes_up / m)))
      .Add("dpf_bytes_down", static_cast<uint64_t>(std::llround(dpf.bytes_down / m)))
      .Add("dpf_errors", dpf.errors)
      .Add("dpf_max_abs_error", dpf.max_abs_error);
  line.Emit();
  (*bag_server)->Stop().IgnoreError();
  for (auto& s : dpf_servers) s->Stop().IgnoreError();
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

const char kHelp[] =
    "--rows --dim --bag [--reps=10 --threads=1 --pad-bags=32 --row-tags=0|1 --server-bin]: one "
    "bfv-bag server and a BagClient "
    "doing --reps pooled lookups of --bag random rows with random weights: server_ms (median call "
    "time on the server), bytes_up / bytes_down per lookup, errors, max_abs_error, "
    "galois_key_bytes (once per session), connect_ms; and dpf_* for the two-server DPF pooled "
    "lookup of the same bags on the same table, its bags padded to --pad-bags keys (0: not "
    "padded). --row-tags=1 tags the table with the linear MAC (kind 4) and both clients check "
    "it: bfv-bag its pooled sums, dpf2 each row of its bags (fetched one by one and summed on the "
    "client)";

SuiteRegistration bfv_bag_e2e("bfv-bag-e2e", kHelp, BfvBagE2e);

}  // namespace
}  // namespace veil::bench
