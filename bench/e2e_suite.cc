// The e2e suite: two veil-server processes on loopback serving a synthetic random table, and
// --clients client threads (one veil::client::Client each) doing private lookups for --duration-s.
//
// A client call fetches --lookups-per-call rows (the per-call RPC envelope is shared by them, as
// an app batching the ids of one inference would). qps counts rows per second (each needs one
// answer from each server); p50_ms / p99_ms are per call; bytes are counted on the client's
// sockets (RPC framing, connection set-up excluded) and divided by the rows fetched. Every row is
// checked against the table; a wrong row or a failed call counts in `errors`.
//
// reference_qps is `pir-answer --batch=32 --threads=1` on the same table, measured in this run
// (one party's backend alone, in process): serving_ratio = qps / reference_qps is the share of
// the backend's throughput that survives the serving layer. On a shared machine both figures
// depend on what else runs, so the suite also compares CPU time, which does not:
// server_keys_per_cpu_s is keys answered per CPU second of the server processes (event loop,
// parsing, scheduling and backend together) during the measurement, reference_keys_per_cpu_s the
// same for the backend alone, and serving_cpu_ratio their quotient. client_cpu_s is this process's
// CPU time (the clients) over the same window.
//
// --tls=on runs both servers over TLS (a self-signed certificate made in the run's folder, the
// clients trusting only it); bytes then include TLS records. The default is off, so that figures
// stay comparable with runs from before TLS existed.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/suite.h"
#include "dpf/params.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/client.h"
#include "pir/two_server/backend.h"
#include "pir/two_server/query.h"
#include "rpc/tls.h"
#include "tools/launcher.h"
#include "tools/tls_cert.h"

namespace veil::bench {
namespace {

using client::CallStats;
using client::Client;
using client::ClientOptions;

struct Reference {
  double qps = 0;
  double keys_per_cpu_s = 0;
};

// One party's CPU backend alone on `table`: keys per second (and per CPU second) at batch 32 on
// one thread.
absl::StatusOr<Reference> MeasureReference(const embedding::Table& table, dpf::Prg prg) {
  constexpr int kBatch = 32;
  auto backend = pir::CreateCpuBackend(table.view(), 1);
  if (!backend.ok()) return backend.status();
  std::vector<pir::QueryKeys> queries;
  std::mt19937_64 gen(2);
  for (int i = 0; i < kBatch; ++i) {
    auto q = pir::MakeQuery(table.rows(), gen() % table.rows(), 1, prg);
    if (!q.ok()) return q.status();
    queries.push_back(*std::move(q));
  }
  std::vector<const dpf::DpfKey*> keys;
  for (const auto& q : queries) keys.push_back(&q.key[0]);
  std::vector<uint32_t> out(kBatch * table.row_words());
  absl::Status status;
  int passes = 0;
  double cpu_before = SelfCpuSeconds();
  double t = MedianSeconds(
      [&] {
        status = (*backend)->Answer(keys, absl::MakeSpan(out));
        ++passes;
      },
      1, 7);
  double cpu = SelfCpuSeconds() - cpu_before;
  if (!status.ok()) return status;
  return Reference{kBatch / t, passes * kBatch / cpu};
}

struct ClientResult {
  std::vector<double> latency_ms;
  uint64_t lookups = 0;
  uint64_t errors = 0;
  uint64_t bytes_up = 0;
  uint64_t bytes_down = 0;
  std::string first_error;
};

struct E2eOptions {
  uint64_t rows;
  uint32_t words;
  int clients;
  double duration_s, warmup_s;
  std::string backend;
  int threads, per_call;
  bool reference, tls;
  dpf::Prg prg;
  std::string server_bin;
  std::vector<std::string> server_args;
};

absl::StatusOr<E2eOptions> OptionsFromFlags(const Flags& flags) {
  E2eOptions o;
  o.rows = flags.Int("rows", 65536);
  o.words = static_cast<uint32_t>(flags.Int("words", 16));
  o.clients = static_cast<int>(flags.Int("clients", 1));
  o.duration_s = flags.Double("duration-s", 10);
  o.warmup_s = flags.Double("warmup-s", 1);
  o.backend = flags.Str("backend", "cpu");
  o.threads = static_cast<int>(flags.Int("threads", 1));
  o.per_call = static_cast<int>(flags.Int("lookups-per-call", 8));
  o.reference = flags.Int("reference", 1) != 0;
  o.server_bin = flags.Str("server-bin", tools::ServerBinaryNextToSelf());
  if (flags.Has("max-batch")) {
    o.server_args.push_back(absl::StrCat("--max_batch=", flags.Int("max-batch", 64)));
  }
  if (flags.Has("max-wait-us")) {
    o.server_args.push_back(absl::StrCat("--max_wait_us=", flags.Int("max-wait-us", 2000)));
  }
  const std::string tls = flags.Str("tls", "off");
  if (tls != "on" && tls != "off") return absl::InvalidArgumentError("--tls must be on or off");
  o.tls = tls == "on";
  auto prg = dpf::ParsePrg(flags.Str("prg", "aes128"));
  if (!prg.ok()) return prg.status();
  o.prg = *prg;
  if (o.rows == 0 || o.words == 0 || o.clients < 1 || o.per_call < 1 || o.duration_s <= 0 ||
      o.threads < 1) {
    return absl::InvalidArgumentError(
        "--rows, --words, --clients, --lookups-per-call, --threads and --duration-s must be "
        "positive");
  }
  return o;
}

// The table: random fp32 rows (dim = words, so a row is `words` words).
absl::StatusOr<std::unique_ptr<embedding::Table>> WriteRandomTable(const E2eOptions& o,
                                                                   const std::string& path) {
  std::cerr << "e2e: writing a " << o.rows << " x " << o.words << " table to " << path << "\n";
  std::vector<float> values(o.rows * o.words);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : values) v = dist(gen);
  absl::Status s = embedding::WriteTable(path, embedding::RowFormat::kFp32, o.words, values,
                                         embedding::TableOptions{});
  if (!s.ok()) return s;
  return embedding::Table::Open(path);
}

// Both parties' servers on loopback (TLS with a certificate made in `dir` when asked); fills
// `options` with their addresses and the certificate to trust.
absl::Status StartServers(const E2eOptions& o, const std::string& dir,
                          const std::string& table_path,
                          std::unique_ptr<tools::ServerProcess> (&servers)[2],
                          ClientOptions& options) {
  tools::CertificateFiles certificate;
  if (o.tls) {
    auto made = tools::WriteSelfSignedCertificate(dir + "/tls", {"127.0.0.1"});
    if (!made.ok()) return made.status();
    certificate = *made;
  }
  for (int party = 0; party < 2; ++party) {
    tools::ServerProcessOptions so;
    so.binary = o.server_bin;
    so.party = party;
    so.table_path = table_path;
    so.backend = o.backend;
    so.threads = o.threads;
    so.extra_args = o.server_args;
    so.log_path = absl::StrCat(dir, "/server", party, ".log");
    so.tls_cert_path = certificate.cert_path;
    so.tls_key_path = certificate.key_path;
    auto started = tools::ServerProcess::Start(so);
    if (!started.ok()) return started.status();
    servers[party] = *std::move(started);
  }
  options.server0 = servers[0]->address();
  options.server1 = servers[1]->address();
  options.prg = o.prg;
  options.timeout = absl::Seconds(30);
  options.tls_trusted_certs = certificate.cert_path;
  return absl::OkStatus();
}

// One client thread: lookups of random rows until `end`, measured after `measure_from`, every
// row checked against the table.
ClientResult RunClient(Client& client, const embedding::Table& table, const E2eOptions& o, int c,
                       absl::Time measure_from, absl::Time end) {
  ClientResult r;
  std::mt19937_64 gen(100 + c);
  std::vector<uint64_t> wanted(o.per_call);
  bool measuring = false;
  CallStats base;
  for (;;) {
    const absl::Time now = absl::Now();
    if (now >= end) break;
    if (!measuring && now >= measure_from) {
      measuring = true;
      base = client.totals();
    }
    for (uint64_t& row : wanted) row = gen() % o.rows;
    auto got = client.LookupWords(wanted);
    if (!measuring) continue;
    if (!got.ok()) {
      ++r.errors;
      if (r.first_error.empty()) r.first_error = got.status().ToString();
      continue;
    }
    r.latency_ms.push_back(client.last_call().latency_ms);
    for (int i = 0; i < o.per_call; ++i) {
      auto plain = table.row(wanted[i]);
      if (!std::equal(plain.begin(), plain.end(), got->begin() + i * o.words)) ++r.errors;
    }
    r.lookups += o.per_call;
  }
  const CallStats total = client.totals();
  r.bytes_up = total.bytes_up - base.bytes_up;
  r.bytes_down = total.bytes_down - base.bytes_down;
  return r;
}

// The servers' CPU time and keys answered over the measurement window, from a client of its own.
struct ServerWindow {
  double server_cpu_s = 0;
  double server_keys = 0;
  double client_cpu_s = 0;  // this process (the clients)
  bool ok = true;
};

absl::StatusOr<ServerWindow> WatchServers(const ClientOptions& options,
                                          std::unique_ptr<tools::ServerProcess> (&servers)[2],
                                          absl::Time measure_from, absl::Time end) {
  auto monitor = Client::Connect(options);
  if (!monitor.ok()) return monitor.status();
  double cpu[2][2] = {};     // [edge][party]
  uint64_t keys[2][2] = {};  // [edge][party]
  double client_cpu[2] = {};
  ServerWindow w;
  for (int edge = 0; edge < 2; ++edge) {
    absl::SleepFor((edge == 0 ? measure_from : end) - absl::Now());
    client_cpu[edge] = SelfCpuSeconds();
    for (int party = 0; party < 2; ++party) {
      auto stats = (*monitor)->ServerStats(party);
      w.ok = w.ok && stats.ok();
      cpu[edge][party] = ProcessCpuSeconds(servers[party]->pid());
      keys[edge][party] = stats.ok() ? stats->keys : 0;
    }
  }
  w.server_cpu_s = cpu[1][0] - cpu[0][0] + cpu[1][1] - cpu[0][1];
  w.server_keys = static_cast<double>(keys[1][0] - keys[0][0] + keys[1][1] - keys[0][1]);
  w.client_cpu_s = client_cpu[1] - client_cpu[0];
  return w;
}

void EmitE2e(const E2eOptions& o, const ClientResult& all, const ServerWindow& w,
             const absl::StatusOr<rpc::StatsSnapshot>& server_stats, const Reference& ref) {
  dpf::DpfParameters key_params;
  key_params.log_domain = dpf::LogDomainForRows(o.rows);
  key_params.prg = o.prg;
  const double qps = all.lookups / o.duration_s;
  const double lookups = std::max<double>(1, static_cast<double>(all.lookups));
  JsonLine line("e2e");
  line.Add("rows", o.rows)
      .Add("words", int64_t{o.words})
      .Add("clients", o.clients)
      .Add("duration_s", o.duration_s)
      .Add("backend", o.backend)
      .Add("threads", o.threads)
      .Add("lookups_per_call", o.per_call)
      .Add("prg", std::string(dpf::PrgName(o.prg)))
      .Add("tls", o.tls)
      .Add("key_bytes", static_cast<uint64_t>(dpf::DpfKey::SerializedSize(key_params)))
      .Add("row_bytes", static_cast<uint64_t>(o.words) * 4)
      .Add("qps", qps)
      .Add("p50_ms", Percentile(all.latency_ms, 0.50))
      .Add("p99_ms", Percentile(all.latency_ms, 0.99))
      .Add("bytes_up_per_lookup", all.bytes_up / lookups)
      .Add("bytes_down_per_lookup", all.bytes_down / lookups)
      .Add("errors", all.errors)
      .Add("calls", static_cast<uint64_t>(all.latency_ms.size()));
  if (server_stats.ok()) {
    line.Add("server_mean_batch_keys", server_stats->mean_batch_keys)
        .Add("server_p50_ms", server_stats->latency_p50_ms);
  }
  const double server_keys_per_cpu_s = w.ok ? w.server_keys / std::max(1e-9, w.server_cpu_s) : 0;
  line.Add("server_cpu_s", w.server_cpu_s)
      .Add("client_cpu_s", w.client_cpu_s)
      .Add("server_keys_per_cpu_s", server_keys_per_cpu_s);
  if (o.reference) {
    line.Add("reference_qps", ref.qps)
        .Add("serving_ratio", qps / ref.qps)
        .Add("reference_keys_per_cpu_s", ref.keys_per_cpu_s)
        .Add("serving_cpu_ratio", server_keys_per_cpu_s / ref.keys_per_cpu_s);
  }
  line.Emit();
}

absl::Status E2e(const Flags& flags) {
  auto options = OptionsFromFlags(flags);
  if (!options.ok()) return options.status();
  const E2eOptions& o = *options;
  char dir_template[] = "/tmp/veil-e2e-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string table_path = dir + "/table.veil";
  auto table = WriteRandomTable(o, table_path);
  if (!table.ok()) return table.status();
  Reference ref;
  if (o.reference) {
    std::cerr << "e2e: measuring the backend alone (pir-answer --batch=32 --threads=1)\n";
    auto r = MeasureReference(**table, o.prg);
    if (!r.ok()) return r.status();
    ref = *r;
  }
  std::unique_ptr<tools::ServerProcess> servers[2];
  ClientOptions client_options;
  if (absl::Status s = StartServers(o, dir, table_path, servers, client_options); !s.ok()) {
    return s;
  }
  std::cerr << "e2e: servers on " << servers[0]->address() << " and " << servers[1]->address()
            << (o.tls ? " over TLS" : " in plaintext") << " (logs in " << dir << "); " << o.clients
            << " client(s), " << o.per_call << " lookups per call, " << o.warmup_s << " s warm-up, "
            << o.duration_s << " s\n";
  std::vector<std::unique_ptr<Client>> connected;
  for (int c = 0; c < o.clients; ++c) {
    auto client = Client::Connect(client_options);
    if (!client.ok()) return client.status();
    connected.push_back(*std::move(client));
  }
  const absl::Time measure_from = absl::Now() + absl::Seconds(o.warmup_s);
  const absl::Time end = measure_from + absl::Seconds(o.duration_s);
  std::vector<ClientResult> results(o.clients);
  std::vector<std::thread> pool;
  for (int c = 0; c < o.clients; ++c) {
    pool.emplace_back(
        [&, c] { results[c] = RunClient(*connected[c], **table, o, c, measure_from, end); });
  }
  auto window = WatchServers(client_options, servers, measure_from, end);
  for (std::thread& t : pool) t.join();
  if (!window.ok()) return window.status();

  ClientResult all;
  for (const ClientResult& r : results) {
    all.latency_ms.insert(all.latency_ms.end(), r.latency_ms.begin(), r.latency_ms.end());
    all.lookups += r.lookups;
    all.errors += r.errors;
    all.bytes_up += r.bytes_up;
    all.bytes_down += r.bytes_down;
    if (all.first_error.empty()) all.first_error = r.first_error;
  }
  auto server_stats = connected[0]->ServerStats(0);
  connected.clear();
  for (auto& s : servers) {
    if (absl::Status stopped = s->Stop(); !stopped.ok()) return stopped;
  }
  if (!all.first_error.empty()) std::cerr << "e2e: first error: " << all.first_error << "\n";
  EmitE2e(o, all, *window, server_stats, ref);
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

const char kE2eHelp[] =
    "--rows --words --clients --duration-s --backend [--threads --lookups-per-call=8 "
    "--warmup-s=1 --prg --reference=1 --max-batch --max-wait-us --server-bin --tls=off|on]: two "
    "veil-server processes on loopback and --clients client threads doing private lookups; qps "
    "(rows/s), p50_ms/p99_ms per call, bytes per row fetched on the client sockets, errors "
    "(failed calls and wrong rows), reference_qps (pir-answer --batch=32 --threads=1 on the same "
    "table, this run) and serving_ratio = qps / reference_qps. --tls=on serves over TLS (a "
    "self-signed certificate; bytes include TLS records); the default is off so that figures "
    "stay comparable with earlier runs; the \"tls\" field says which";

SuiteRegistration e2e("e2e", kE2eHelp, E2e);

}  // namespace
}  // namespace veil::bench
