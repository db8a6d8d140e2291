// The lwe-e2e suite: one lwe-simple or lwe-double server process on loopback serving a random
// int8 table (rows tagged), and --clients client threads (one veil::client::LweClient each)
// doing private lookups of --lookups-per-call random rows for --duration-s, every row checked
// against the table (a wrong row or a failed call counts in `errors`).
//
// Fields (BENCHMARKS.md): qps counts rows per second; p50_ms / p99_ms are per call;
// bytes_up_per_lookup / bytes_down_per_lookup are counted on the clients' sockets (RPC framing
// included) and divided by the rows fetched; query_bytes / answer_bytes are one lookup's payload;
// hint_bytes is the one-off download (hint_s: the server computing it at start-up; connect_ms:
// the first client's Connect, which downloads it; the other clients read it from the hint cache).
// client_query_ms / client_decode_ms are per lookup (making the query; decrypting, checking the
// tag). server_cpu_ms_per_query is the server process's CPU time over the window divided by the
// queries it answered; server_p50_ms its median call time; mean_batch its mean pass size.
//
// reference_qps is lwe-answer on the same table (LweServer::Answer in process, one thread like
// the server's default, at --batch, default clients x lookups-per-call capped at the server's
// --max-batch), measured in this run: serving_ratio = qps / reference_qps. On a machine whose
// cores the clients share with the server (making a SimplePIR query expands D0 x n words of A),
// qps is bounded by the clients; serving_cpu_ratio compares CPU time instead, which does not
// depend on them: the server's queries per CPU second over the reference's (one thread, so its
// qps is queries per CPU second).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/suite.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/lwe_client.h"
#include "pir/lattice/client.h"
#include "pir/lattice/server.h"
#include "tools/launcher.h"

namespace veil::bench {
namespace {

struct ClientResult {
  std::vector<double> latency_ms;
  uint64_t lookups = 0;
  uint64_t errors = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  double query_ms = 0;
  double decode_ms = 0;
  std::string first_error;
};

// One client thread: lookups of random rows until `end`, measured after `measure_from`.
ClientResult RunClient(client::LweClient& client, const embedding::Table& table, int per_call,
                       int c, absl::Time measure_from, absl::Time end) {
  ClientResult r;
  std::mt19937_64 gen(100 + c);
  std::vector<uint64_t> wanted(per_call);
  const uint32_t data_words = client.table().row_words;
  bool measuring = false;
  client::CallStats base;
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= end) break;
    if (!measuring && now >= measure_from) {
      measuring = true;
      base = client.totals();
    }
    for (uint64_t& row : wanted) row = gen() % table.rows();
    auto got = client.LookupWords(wanted);
    if (!measuring) continue;
    if (!got.ok()) {
      ++r.errors;
      if (r.first_error.empty()) r.first_error = got.status().ToString();
      continue;
    }
    r.latency_ms.push_back(client.last_call().latency_ms);
    const client::LweClientTimes times = client.last_times();
    r.query_ms += times.query_ms;
    r.decode_ms += times.decode_ms;
    for (int i = 0; i < per_call; ++i) {
      auto plain = table.row(wanted[i]);
      if (!std::equal(plain.begin(), plain.begin() + data_words, got->begin() + i * data_words)) {
        ++r.errors;
      }
    }
    r.lookups += per_call;
  }
  const client::CallStats total = client.totals();
  r.bytes_up = total.bytes_up - base.bytes_up;
  r.bytes_down = total.bytes_down - base.bytes_down;
  return r;
}

// lwe-answer in process on the same table: queries per second at `batch`, one thread.
absl::StatusOr<double> ReferenceQps(const embedding::Table& table, lattice::Protocol protocol,
                                    int batch) {
  auto server = lattice::LweServer::FromTable(table, {.protocol = protocol});
  if (!server.ok()) return server.status();
  auto client = lattice::LweClient::Create((*server)->config(), (*server)->hint_blob());
  if (!client.ok()) return client.status();
  const lattice::Shape& s = (*server)->shape();
  std::vector<uint64_t> rows(batch);
  for (int i = 0; i < batch; ++i) rows[i] = (i * 7919) % s.rows;
  std::vector<uint32_t> queries(batch * s.query_words()), answers(batch * s.answer_words());
  auto pending = (*client)->MakeQueries(rows, absl::MakeSpan(queries));
  if (!pending.ok()) return pending.status();
  absl::Status status;
  const double t = MedianSeconds(
      [&] { status = (*server)->Answer(queries, batch, absl::MakeSpan(answers)); }, 1, 15, 3.0);
  if (!status.ok()) return status;
  return batch / t;
}

absl::Status LweE2e(const Flags& flags) {
  const uint64_t rows = flags.Int("rows", 65536);
  const uint32_t dim = static_cast<uint32_t>(flags.Int("dim", 52));
  const std::string protocol_name = flags.Str("protocol", "simple");
  const int clients = static_cast<int>(flags.Int("clients", 4));
  const int per_call = static_cast<int>(flags.Int("lookups-per-call", 8));
  const int max_batch = static_cast<int>(flags.Int("max-batch", 64));
  const int batch = static_cast<int>(flags.Int("batch", std::min(max_batch, clients * per_call)));
  const double duration_s = flags.Double("duration-s", 10);
  const double warmup_s = 1;
  const std::string server_bin = flags.Str("server-bin", tools::ServerBinaryNextToSelf());
  auto protocol = lattice::ParseProtocol(protocol_name);
  if (!protocol.ok()) return protocol.status();
  const std::string wire_name = absl::StrCat("lwe-", std::string(ProtocolName(*protocol)));
  if (rows == 0 || dim == 0 || clients < 1 || per_call < 1 || max_batch < 1 || batch < 1 ||
      duration_s <= 0) {
    return absl::InvalidArgumentError(
        "--rows, --dim, --clients, --lookups-per-call, --max-batch, --batch and --duration-s "
        "must be positive");
  }
  char dir_template[] = "/tmp/veil-lwe-e2e-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string table_path = dir + "/table.veil", key_path = dir + "/table.rowkey";
  {
    std::vector<float> values(rows * dim);
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    for (float& v : values) v = dist(gen);
    embedding::TableOptions options;
    options.row_key = embedding::NewRowKey();
    if (absl::Status s = embedding::WriteRowKeyFile(key_path, *options.row_key); !s.ok()) return s;
    absl::Status s =
        embedding::WriteTable(table_path, embedding::RowFormat::kInt8RowWise, dim, values, options);
    if (!s.ok()) return s;
  }
  auto table = embedding::Table::Open(table_path);
  if (!table.ok()) return table.status();
  std::cerr << "lwe-e2e: " << rows << " rows x " << 4 * (*table)->row_words() << " B (int8 dim "
            << dim << ", tag included); measuring lwe-answer at batch " << batch << "\n";
  auto reference = ReferenceQps(**table, *protocol, batch);
  if (!reference.ok()) return reference.status();

  tools::ServerProcessOptions so;
  so.binary = server_bin;
  so.protocol = wire_name;
  so.table_path = table_path;
  so.log_path = dir + "/server.log";
  // DoublePIR answers are R * (n + 1) * 16 bytes: room for a call of several.
  so.extra_args = {"--lwe_hint_cache=false", "--max_message_bytes=67108864",
                   absl::StrCat("--max_batch=", max_batch)};
  const absl::Time start_begin = absl::Now();
  auto server = tools::ServerProcess::Start(so);
  if (!server.ok()) return server.status();
  const double start_s = absl::ToDoubleSeconds(absl::Now() - start_begin);

  client::LweClientOptions co;
  co.server = (*server)->address();
  co.protocol = wire_name;
  co.row_key_file = key_path;
  co.hint_cache_dir = dir + "/hints";
  co.timeout = absl::Seconds(120);
  std::vector<std::unique_ptr<client::LweClient>> connected;
  double connect_ms = 0;
  for (int c = 0; c < clients; ++c) {
    const absl::Time t0 = absl::Now();
    auto client = client::LweClient::Connect(co);
    if (!client.ok()) return client.status();
    if (c == 0) connect_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    connected.push_back(*std::move(client));
  }
  const client::LweTableInfo info = connected[0]->table();
  std::cerr << "lwe-e2e: " << wire_name << " server on " << (*server)->address() << " (log in "
            << dir << "), " << info.d1 << " x " << info.d0 << " database, hint " << info.hint_bytes
            << " B; " << clients << " client(s), " << per_call << " lookups per call, "
            << duration_s << " s\n";

  const absl::Time measure_from = absl::Now() + absl::Seconds(warmup_s);
  const absl::Time end = measure_from + absl::Seconds(duration_s);
  std::vector<ClientResult> results(clients);
  std::vector<std::thread> pool;
  for (int c = 0; c < clients; ++c) {
    pool.emplace_back(
        [&, c] { results[c] = RunClient(*connected[c], **table, per_call, c, measure_from, end); });
  }
  // The server's CPU time and queries answered over the window.
  double cpu[2] = {};
  uint64_t queries[2] = {};
  bool stats_ok = true;
  for (int edge = 0; edge < 2; ++edge) {
    absl::SleepFor((edge == 0 ? measure_from : end) - absl::Now());
    cpu[edge] = ProcessCpuSeconds((*server)->pid());
    auto stats = connected[0]->ServerStats();
    stats_ok = stats_ok && stats.ok();
    queries[edge] = stats.ok() ? stats->keys : 0;
  }
  for (std::thread& t : pool) t.join();
  auto server_stats = connected[0]->ServerStats();
  connected.clear();
  if (absl::Status s = (*server)->Stop(); !s.ok()) return s;

  ClientResult all;
  for (const ClientResult& r : results) {
    all.latency_ms.insert(all.latency_ms.end(), r.latency_ms.begin(), r.latency_ms.end());
    all.lookups += r.lookups;
    all.errors += r.errors;
    all.bytes_up += r.bytes_up;
    all.bytes_down += r.bytes_down;
    all.query_ms += r.query_ms;
    all.decode_ms += r.decode_ms;
    if (all.first_error.empty()) all.first_error = r.first_error;
  }
  if (!all.first_error.empty()) std::cerr << "lwe-e2e: first error: " << all.first_error << "\n";
  const double lookups = std::max<double>(1, static_cast<double>(all.lookups));
  const double qps = all.lookups / duration_s;
  const double answered = static_cast<double>(queries[1] - queries[0]);
  const double server_cpu_ms = stats_ok && answered > 0 ? 1e3 * (cpu[1] - cpu[0]) / answered : -1.0;
  JsonLine line("lwe-e2e");
  line.Add("protocol", wire_name)
      .Add("rows", rows)
      .Add("row_bytes", int64_t{4 * (*table)->row_words()})
      .Add("d0", info.d0)
      .Add("d1", info.d1)
      .Add("clients", clients)
      .Add("lookups_per_call", per_call)
      .Add("duration_s", duration_s)
      .Add("qps", qps)
      .Add("p50_ms", Percentile(all.latency_ms, 0.5))
      .Add("p99_ms", Percentile(all.latency_ms, 0.99))
      .Add("errors", all.errors)
      .Add("hint_bytes", info.hint_bytes)
      .Add("query_bytes", info.query_bytes)
      .Add("answer_bytes", info.answer_bytes)
      .Add("bytes_up_per_lookup", all.bytes_up / lookups)
      .Add("bytes_down_per_lookup", all.bytes_down / lookups)
      .Add("client_query_ms", all.query_ms / lookups)
      .Add("client_decode_ms", all.decode_ms / lookups)
      .Add("server_cpu_ms_per_query", server_cpu_ms)
      .Add("server_p50_ms", server_stats.ok() ? server_stats->latency_p50_ms : -1.0)
      .Add("mean_batch", server_stats.ok() ? server_stats->mean_batch_keys : -1.0)
      .Add("server_start_s", start_s)
      .Add("connect_ms", connect_ms)
      .Add("reference_batch", batch)
      .Add("reference_qps", *reference)
      .Add("serving_ratio", qps / *reference)
      .Add("serving_cpu_ratio", server_cpu_ms > 0 ? 1e3 / server_cpu_ms / *reference : -1.0);
  line.Emit();
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

const char kHelp[] =
    "[--protocol=simple|double --rows=65536 --dim=52 --clients=4 --lookups-per-call=8 "
    "--duration-s=10 --max-batch=64 --batch --server-bin]: one lwe-simple / lwe-double server and "
    "--clients LweClients doing private lookups of an int8 table (rows tagged and checked): qps, "
    "p50_ms / p99_ms per call, errors, hint_bytes, bytes_up_per_lookup / bytes_down_per_lookup "
    "(sockets), client_query_ms / client_decode_ms, server_cpu_ms_per_query, and serving_ratio = "
    "qps / lwe-answer's qps on the same table at --batch, measured in this run";

SuiteRegistration lwe_e2e("lwe-e2e", kHelp, LweE2e);

}  // namespace
}  // namespace veil::bench
