// The soak suite (issue 10): two replicas per party serving a --rows-row table on loopback,
// --clients client threads doing lookups of --lookups-per-call random rows for --duration-s while
// one replica at a time is killed (SIGKILL, no warning) and restarted on its port every
// --kill-every-s seconds, and every replica rolls to a new table version (epoch 2, other
// contents, the same row key) at --roll-at-s.
//
// Every row a client gets is checked against both versions: a row equal to neither is a wrong row
// (there must be none: the rows carry authentication tags the client checks, and a client never
// combines shares of two versions). A lookup that returns an error counts in failed_lookups (there
// must be none while a replica of each party is up); new_version_rows counts rows of epoch 2 (the
// roll reached the clients). p50/p99 are per call. rss_start_mb and
// rss_end_mb are the four servers' resident memory together after the warm-up and at the end (the
// processes restarted in between included): flat memory means no leak across kills and the roll.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/suite.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/client.h"
#include "tools/launcher.h"

namespace veil::bench {
namespace {

constexpr int kParties = 2;
constexpr int kReplicas = 2;

struct SoakOptions {
  uint64_t rows;
  uint32_t dim;
  int clients, per_call;
  double duration_s, kill_every_s, roll_at_s, restart_after_s;
  std::string dir, server_bin;
};

absl::StatusOr<SoakOptions> SoakOptionsFromFlags(const Flags& flags) {
  SoakOptions o;
  o.rows = static_cast<uint64_t>(flags.Int("rows", 65536));
  o.dim = static_cast<uint32_t>(flags.Int("dim", 16));
  o.clients = static_cast<int>(flags.Int("clients", 4));
  o.per_call = static_cast<int>(flags.Int("lookups-per-call", 4));
  o.duration_s = flags.Double("duration-s", 600);
  o.kill_every_s = flags.Double("kill-every-s", 30);
  o.roll_at_s = flags.Double("roll-at-s", o.duration_s / 2);
  o.restart_after_s = flags.Double("restart-after-s", 2);
  o.dir = flags.Str("dir", "soak");
  o.server_bin = flags.Str("server-bin", tools::ServerBinaryNextToSelf());
  if (o.rows < 2 || o.dim == 0 || o.clients < 1 || o.per_call < 1 || o.duration_s <= 0 ||
      o.kill_every_s <= o.restart_after_s || o.restart_after_s < 0) {
    return absl::InvalidArgumentError(
        "--rows (>= 2), --dim, --clients, --lookups-per-call and --duration-s must be positive, "
        "and --kill-every-s larger than --restart-after-s");
  }
  return o;
}

// Random rows of a table, tagged under `key`, written to `path`; returns the table opened.
absl::StatusOr<std::unique_ptr<embedding::Table>> WriteVersion(const SoakOptions& o,
                                                               const std::string& path,
                                                               uint64_t epoch,
                                                               const embedding::RowKey& key) {
  std::vector<float> values(o.rows * o.dim);
  std::mt19937 gen(static_cast<uint32_t>(epoch));
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : values) v = dist(gen);
  embedding::TableOptions options;
  options.epoch = epoch;
  options.row_key = key;
  if (absl::Status s =
          embedding::WriteTable(path, embedding::RowFormat::kFp32, o.dim, values, options);
      !s.ok()) {
    return s;
  }
  return embedding::Table::Open(path);
}

// The four servers: replica r of party p serves its own copy of the table (so that a roll renames
// over that copy only) and keeps its port across restarts.
class Replicas {
 public:
  explicit Replicas(const SoakOptions& o) : o_(o) {}

  absl::Status StartAll(const std::string& table) {
    for (int i = 0; i < kParties * kReplicas; ++i) {
      served_[i] = absl::StrCat(o_.dir, "/served", i, ".veil");
      std::filesystem::copy_file(table, served_[i],
                                 std::filesystem::copy_options::overwrite_existing);
      if (absl::Status s = Start(i, "127.0.0.1:0"); !s.ok()) return s;
      port_[i] = server_[i]->port();
    }
    return absl::OkStatus();
  }
  // "127.0.0.1:A,127.0.0.1:B": party p's replicas.
  std::string Addresses(int party) const {
    return absl::StrCat("127.0.0.1:", port_[party], ",127.0.0.1:", port_[kParties + party]);
  }
  void Kill(int i) { server_[i]->Kill(); }
  absl::Status Restart(int i) { return Start(i, absl::StrCat("127.0.0.1:", port_[i])); }
  absl::Status Roll(int i, const std::string& next) {
    return server_[i]->RollTable(served_[i], next);
  }
  double ResidentMb() const {
    uint64_t kb = 0;
    for (const auto& s : server_) kb += s->ResidentKb();
    return kb / 1024.0;
  }
  absl::Status StopAll() {
    for (auto& s : server_) {
      if (absl::Status stopped = s->Stop(); !stopped.ok()) return stopped;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Start(int i, const std::string& listen) {
    tools::ServerProcessOptions so;
    so.binary = o_.server_bin;
    so.party = i % kParties;
    so.table_path = served_[i];
    so.listen = listen;
    so.log_path = absl::StrCat(o_.dir, "/server", i, ".log");
    auto started = tools::ServerProcess::Start(so);
    if (!started.ok()) return started.status();
    server_[i] = *std::move(started);
    return absl::OkStatus();
  }

  const SoakOptions& o_;
  std::string served_[kParties * kReplicas];
  int port_[kParties * kReplicas] = {};
  std::unique_ptr<tools::ServerProcess> server_[kParties * kReplicas];
};

struct Tally {
  absl::Mutex mu;
  uint64_t lookups = 0, wrong_rows = 0, failed = 0, failovers = 0, hedges = 0;
  uint64_t new_version_rows = 0;  // rows of epoch 2 (the roll reached the clients)
  std::vector<double> latency_ms;
  std::string first_error;
};

// One client: lookups until `stop`, every row checked against both versions.
void RunClient(const client::ClientOptions& options, const embedding::Table* versions[2],
               const SoakOptions& o, int c, const std::atomic<bool>& stop, Tally& tally) {
  auto connected = client::Client::Connect(options);
  if (!connected.ok()) {
    absl::MutexLock lock(&tally.mu);
    ++tally.failed;
    if (tally.first_error.empty()) tally.first_error = connected.status().ToString();
    return;
  }
  client::Client& client = **connected;
  std::mt19937_64 gen(1000 + c);
  std::vector<uint64_t> rows(o.per_call);
  while (!stop) {
    for (uint64_t& r : rows) r = gen() % o.rows;
    const absl::Time start = absl::Now();
    auto words = client.LookupWords(rows);
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    uint64_t wrong = 0, new_version = 0;
    if (words.ok()) {
      for (size_t i = 0; i < rows.size(); ++i) {
        auto got = absl::MakeConstSpan(words->data() + i * o.dim, o.dim);
        bool is[2];
        for (int v = 0; v < 2; ++v) {
          auto want = versions[v]->row(rows[i]);
          is[v] = std::equal(want.begin(), want.begin() + o.dim, got.begin());
        }
        wrong += !is[0] && !is[1];
        new_version += is[1] && !is[0];
      }
    }
    absl::MutexLock lock(&tally.mu);
    tally.lookups += rows.size();
    tally.wrong_rows += wrong;
    tally.new_version_rows += new_version;
    if (!words.ok()) {
      ++tally.failed;
      if (tally.first_error.empty()) tally.first_error = words.status().ToString();
    } else {
      tally.latency_ms.push_back(ms);
    }
  }
  const client::CallStats totals = client.totals();
  absl::MutexLock lock(&tally.mu);
  tally.failovers += totals.failovers;
  tally.hedges += totals.hedges;
}

absl::Status Soak(const Flags& flags) {
  auto parsed = SoakOptionsFromFlags(flags);
  if (!parsed.ok()) return parsed.status();
  const SoakOptions& o = *parsed;
  std::filesystem::create_directories(o.dir);
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string key_file = o.dir + "/table.rowkey";
  if (absl::Status s = embedding::WriteRowKeyFile(key_file, key); !s.ok()) return s;
  std::cerr << "soak: writing two versions of a " << o.rows << " x " << o.dim << " table to "
            << o.dir << "\n";
  auto v1 = WriteVersion(o, o.dir + "/epoch1.veil", 1, key);
  if (!v1.ok()) return v1.status();
  auto v2 = WriteVersion(o, o.dir + "/epoch2.veil", 2, key);
  if (!v2.ok()) return v2.status();
  const embedding::Table* versions[2] = {v1->get(), v2->get()};

  Replicas replicas(o);
  if (absl::Status s = replicas.StartAll(o.dir + "/epoch1.veil"); !s.ok()) return s;
  client::ClientOptions options;
  options.server0 = replicas.Addresses(0);
  options.server1 = replicas.Addresses(1);
  options.row_key_file = key_file;
  options.timeout = absl::Seconds(5);

  Tally tally;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&, c] { RunClient(options, versions, o, c, stop, tally); });
  }
  absl::SleepFor(absl::Seconds(1));
  const double rss_start_mb = replicas.ResidentMb();
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(o.duration_s);
  int kills = 0, next = 0;
  bool rolled = false;
  absl::Status chaos = absl::OkStatus();
  for (absl::Time tick = start + absl::Seconds(o.kill_every_s); chaos.ok() && tick < end;
       tick += absl::Seconds(o.kill_every_s)) {
    absl::SleepFor(std::max(absl::ZeroDuration(), tick - absl::Now()));
    if (!rolled && absl::Now() - start >= absl::Seconds(o.roll_at_s)) {
      std::cerr << "soak: rolling every replica to epoch 2\n";
      for (int i = 0; i < kParties * kReplicas && chaos.ok(); ++i) {
        chaos = replicas.Roll(i, o.dir + "/epoch2.veil");
      }
      rolled = true;
    }
    std::cerr << "soak: "
              << absl::FormatDuration(absl::Trunc(absl::Now() - start, absl::Seconds(1)))
              << ": killing replica " << next / kParties << " of party " << next % kParties << "\n";
    replicas.Kill(next);
    ++kills;
    absl::SleepFor(absl::Seconds(o.restart_after_s));
    if (chaos.ok()) chaos = replicas.Restart(next);
    next = (next + 1) % (kParties * kReplicas);
  }
  absl::SleepFor(std::max(absl::ZeroDuration(), end - absl::Now()));
  const double rss_end_mb = replicas.ResidentMb();
  stop = true;
  for (std::thread& t : clients) t.join();
  if (!chaos.ok()) return chaos;
  if (absl::Status s = replicas.StopAll(); !s.ok()) return s;

  absl::MutexLock lock(&tally.mu);
  if (!tally.first_error.empty()) std::cerr << "soak: first error: " << tally.first_error << "\n";
  JsonLine("soak")
      .Add("rows", o.rows)
      .Add("dim", int64_t{o.dim})
      .Add("clients", o.clients)
      .Add("duration_s", o.duration_s)
      .Add("kills", kills)
      .Add("rolled", rolled)
      .Add("lookups", tally.lookups)
      .Add("wrong_rows", tally.wrong_rows)
      .Add("failed_lookups", tally.failed)
      .Add("new_version_rows", tally.new_version_rows)
      .Add("failovers", tally.failovers)
      .Add("hedges", tally.hedges)
      .Add("p50_ms", Percentile(tally.latency_ms, 0.5))
      .Add("p99_ms", Percentile(tally.latency_ms, 0.99))
      .Add("rss_start_mb", rss_start_mb)
      .Add("rss_end_mb", rss_end_mb)
      .Emit();
  return absl::OkStatus();
}

constexpr char kSoakHelp[] =
    "[--duration-s=600 --clients=4 --rows=65536 --dim=16 --lookups-per-call=4 --kill-every-s=30 "
    "--restart-after-s=2 --roll-at-s=DURATION/2 --dir=soak --server-bin]: two replicas per party, "
    "one replica at a time killed and restarted, one table roll; wrong_rows, failed_lookups, "
    "p99_ms, rss_start_mb, rss_end_mb";

SuiteRegistration soak("soak", kSoakHelp, Soak);

}  // namespace
}  // namespace veil::bench
