// The neighbour suite: how much a good client keeps of its throughput when hostile connections
// share its servers (issue 10's isolation and bounded-resource defects, measured).
//
// Two veil-server processes on loopback serve a random fp32 table (--rows x --words). One good
// client (one thread, additive keys, --lookups-per-call rows per call, every row checked against
// the table) runs --duration-s alone and --duration-s with --hostile connections running, in
// rounds of --round-s that alternate (alone, with, with, alone, ...) so that whatever else loads
// the machine weighs on both phases alike. The hostiles, spread over both servers, are this mix
// (index i mod 3); between their rounds they close their connections or pause:
//   0: a slow sender: opens a connection, sends the frame header of a 2 MiB Cap'n Proto message
//      and its first 64 KiB, then trickles 8 bytes every 100 ms, reconnecting when the server
//      drops it;
//   1: an idle connection: connects and sends nothing, reconnecting when dropped;
//   2: a client of another key type: valid XOR keys (ClientOptions::output = kXor) for
//      --lookups-per-call rows per call, a call every --hostile-interval-ms (0: back to back), so
//      that the servers see both key types at once and must not batch them together.
// good_qps_ratio = qps_with / qps_alone (rows per second), p99 per call; good_errors counts the
// good client's failed calls and wrong rows while the hostiles run (and alone). The CPU seconds of
// both servers and of this process (the good client, plus the hostiles in their rounds) in each
// phase tell a slowdown from sharing the cores apart from one inside the servers.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/suite.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/client.h"
#include "tools/launcher.h"

namespace veil::bench {
namespace {

using client::Client;
using client::ClientOptions;

struct NeighbourOptions {
  uint64_t rows;
  uint32_t words;
  int per_call, hostile, threads;
  double duration_s, warmup_s, round_s;
  absl::Duration hostile_interval;
  std::string server_bin;
};

struct Phase {
  std::vector<double> latency_ms;
  double server_cpu_s = 0;  // both servers
  double client_cpu_s = 0;  // this process: the good client, and the hostiles while they run
  uint64_t rows = 0;
  uint64_t errors = 0;
  std::string first_error;
};

// The good client: lookups of random rows for `seconds` (`gen` picks them), every row checked;
// adds to `p`.
void RunGood(Client& client, const embedding::Table& table, const NeighbourOptions& o,
             double seconds, std::mt19937_64& gen, Phase& p) {
  std::vector<uint64_t> wanted(o.per_call);
  const absl::Time end = absl::Now() + absl::Seconds(seconds);
  while (absl::Now() < end) {
    for (uint64_t& row : wanted) row = gen() % o.rows;
    auto got = client.LookupWords(wanted);
    if (!got.ok()) {
      ++p.errors;
      if (p.first_error.empty()) p.first_error = got.status().ToString();
      continue;
    }
    p.latency_ms.push_back(client.last_call().latency_ms);
    for (int i = 0; i < o.per_call; ++i) {
      auto plain = table.row(wanted[i]);
      if (!std::equal(plain.begin(), plain.end(), got->begin() + i * o.words)) ++p.errors;
    }
    p.rows += o.per_call;
  }
}

// A TCP connection to 127.0.0.1:port, or -1.
int ConnectTo(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Whether the server closed `fd` (or reset it) within `wait`; drains anything it sent.
bool ClosedWithin(int fd, absl::Duration wait) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(wait))) <= 0) return false;
  char buffer[4096];
  return recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT) <= 0;
}

struct HostileCounts {
  std::atomic<uint64_t> dropped{0};  // slow or idle connections the servers closed
  std::atomic<uint64_t> lookups{0};  // rows the other-key-type clients fetched
  std::atomic<uint64_t> errors{0};   // their failed calls
};

// While the hostiles run, and whether they should be active now.
struct HostileSwitch {
  std::atomic<bool> stop{false};
  std::atomic<bool> active{false};

  // Waits while inactive; returns false once stopped.
  bool WaitActive() const {
    while (!active.load()) {
      if (stop.load()) return false;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return !stop.load();
  }
  bool Running() const { return active.load() && !stop.load(); }
};

// A slow sender (trickle) or an idle connection (!trickle) on `port` while active.
void RawHostile(int port, bool trickle, const HostileSwitch& on, HostileCounts& counts) {
  constexpr uint32_t kMessageWords = (2u << 20) / 8;
  while (on.WaitActive()) {
    int fd = ConnectTo(port);
    if (fd < 0) {
      absl::SleepFor(absl::Milliseconds(100));
      continue;
    }
    bool open = true;
    if (trickle) {
      std::vector<uint8_t> start(8 + (64 << 10), 0);
      const uint32_t header[2] = {0, kMessageWords};  // one segment of kMessageWords words
      std::memcpy(start.data(), header, sizeof(header));
      open = send(fd, start.data(), start.size(), MSG_NOSIGNAL) > 0;
    }
    bool dropped = false;
    while (open && on.Running()) {
      if (ClosedWithin(fd, absl::Milliseconds(100))) {
        dropped = true;
        break;
      }
      if (trickle) {
        const uint8_t bytes[8] = {};
        open = send(fd, bytes, sizeof(bytes), MSG_NOSIGNAL) > 0;
      }
    }
    if (dropped || !open) ++counts.dropped;
    close(fd);
  }
}

// A client of XOR keys: lookups of random rows every --hostile-interval-ms while active.
void XorHostile(ClientOptions options, const NeighbourOptions& o, uint64_t seed,
                const HostileSwitch& on, HostileCounts& counts) {
  options.output = dpf::OutputType::kXor;
  auto client = Client::Connect(options);
  if (!client.ok()) {
    std::cerr << "neighbour: an XOR client could not connect: " << client.status() << "\n";
    ++counts.errors;
    return;
  }
  std::mt19937_64 gen(seed);
  std::vector<uint64_t> wanted(o.per_call);
  while (on.WaitActive()) {
    for (uint64_t& row : wanted) row = gen() % o.rows;
    auto got = (*client)->LookupWords(wanted);
    if (got.ok()) {
      counts.lookups += o.per_call;
    } else {
      ++counts.errors;
    }
    if (o.hostile_interval > absl::ZeroDuration()) absl::SleepFor(o.hostile_interval);
  }
}

absl::StatusOr<NeighbourOptions> OptionsFromFlags(const Flags& flags) {
  NeighbourOptions o;
  o.rows = flags.Int("rows", 65536);
  o.words = static_cast<uint32_t>(flags.Int("words", 16));
  o.per_call = static_cast<int>(flags.Int("lookups-per-call", 8));
  o.hostile = static_cast<int>(flags.Int("hostile", 8));
  o.threads = static_cast<int>(flags.Int("threads", 1));
  o.duration_s = flags.Double("duration-s", 5);
  o.warmup_s = flags.Double("warmup-s", 1);
  o.round_s = flags.Double("round-s", 0.5);
  o.hostile_interval = absl::Milliseconds(flags.Int("hostile-interval-ms", 20));
  o.server_bin = flags.Str("server-bin", tools::ServerBinaryNextToSelf());
  if (o.rows == 0 || o.words == 0 || o.per_call < 1 || o.hostile < 0 || o.threads < 1 ||
      o.duration_s <= 0 || o.round_s <= 0 || o.warmup_s < 0 ||
      o.hostile_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--rows, --words, --lookups-per-call, --threads, --duration-s and --round-s must be "
        "positive; "
        "--hostile, --warmup-s and --hostile-interval-ms not negative");
  }
  return o;
}

absl::Status Neighbour(const Flags& flags) {
  auto parsed = OptionsFromFlags(flags);
  if (!parsed.ok()) return parsed.status();
  const NeighbourOptions& o = *parsed;
  char dir_template[] = "/tmp/veil-neighbour-XXXXXX";
  if (mkdtemp(dir_template) == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string dir = dir_template;
  const std::string path = dir + "/table.veil";
  std::vector<float> values(o.rows * o.words);
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (float& v : values) v = dist(gen);
  if (absl::Status s = embedding::WriteTable(path, embedding::RowFormat::kFp32, o.words, values,
                                             embedding::TableOptions{});
      !s.ok()) {
    return s;
  }
  auto table = embedding::Table::Open(path);
  if (!table.ok()) return table.status();

  std::unique_ptr<tools::ServerProcess> servers[2];
  for (int party = 0; party < 2; ++party) {
    tools::ServerProcessOptions so;
    so.binary = o.server_bin;
    so.party = party;
    so.table_path = path;
    so.threads = o.threads;
    so.log_path = absl::StrCat(dir, "/server", party, ".log");
    auto started = tools::ServerProcess::Start(so);
    if (!started.ok()) return started.status();
    servers[party] = *std::move(started);
  }
  ClientOptions options;
  options.server0 = servers[0]->address();
  options.server1 = servers[1]->address();
  options.timeout = absl::Seconds(10);
  auto good = Client::Connect(options);
  if (!good.ok()) return good.status();
  std::cerr << "neighbour: servers on " << options.server0 << " and " << options.server1
            << " (logs in " << dir << "); " << o.duration_s << " s alone, then " << o.duration_s
            << " s with " << o.hostile << " hostile connections\n";

  std::mt19937_64 rows_gen(1);
  Phase warmup, alone, with;
  RunGood(**good, **table, o, o.warmup_s, rows_gen, warmup);

  HostileSwitch on;
  HostileCounts counts;
  std::vector<std::thread> hostiles;
  int slow = 0, idle = 0, mixed = 0;
  for (int i = 0; i < o.hostile; ++i) {
    const int port = servers[i % 2]->port();
    switch (i % 3) {
      case 0:
        ++slow;
        hostiles.emplace_back([&, port] { RawHostile(port, true, on, counts); });
        break;
      case 1:
        ++idle;
        hostiles.emplace_back([&, port] { RawHostile(port, false, on, counts); });
        break;
      default:
        ++mixed;
        hostiles.emplace_back([&, i] { XorHostile(options, o, 100 + i, on, counts); });
        break;
    }
  }
  // Rounds alone / with, in the order A B B A A B B A ..., so drift weighs on both alike.
  const int rounds = std::max(1, static_cast<int>(o.duration_s / o.round_s + 0.5));
  for (int r = 0; r < 2 * rounds; ++r) {
    const bool hostile_round = (r % 4 == 1 || r % 4 == 2);
    on.active = hostile_round;
    // Let the hostiles (re)connect before the round counts.
    if (hostile_round) absl::SleepFor(absl::Milliseconds(50));
    Phase& phase = hostile_round ? with : alone;
    auto server_cpu = [&] {
      return ProcessCpuSeconds(servers[0]->pid()) + ProcessCpuSeconds(servers[1]->pid());
    };
    const double server_before = server_cpu(), client_before = SelfCpuSeconds();
    RunGood(**good, **table, o, o.round_s, rows_gen, phase);
    phase.server_cpu_s += server_cpu() - server_before;
    phase.client_cpu_s += SelfCpuSeconds() - client_before;
  }
  on.stop = true;
  for (std::thread& t : hostiles) t.join();
  good->reset();
  for (auto& s : servers) {
    if (absl::Status stopped = s->Stop(); !stopped.ok()) return stopped;
  }
  for (const Phase* p : {&alone, &with}) {
    if (!p->first_error.empty()) {
      std::cerr << "neighbour: good client error: " << p->first_error << "\n";
    }
  }
  const double seconds = rounds * o.round_s;
  const double qps_alone = alone.rows / seconds;
  const double qps_with = with.rows / seconds;
  JsonLine("neighbour")
      .Add("rows", o.rows)
      .Add("words", int64_t{o.words})
      .Add("lookups_per_call", o.per_call)
      .Add("threads", o.threads)
      .Add("duration_s", seconds)
      .Add("round_s", o.round_s)
      .Add("hostile", o.hostile)
      .Add("slow_senders", slow)
      .Add("idle_connections", idle)
      .Add("xor_clients", mixed)
      .Add("hostile_interval_ms", absl::ToDoubleMilliseconds(o.hostile_interval))
      .Add("qps_alone", qps_alone)
      .Add("qps_with", qps_with)
      .Add("good_qps_ratio", qps_alone > 0 ? qps_with / qps_alone : 0.0)
      .Add("p99_alone_ms", Percentile(alone.latency_ms, 0.99))
      .Add("p99_with_ms", Percentile(with.latency_ms, 0.99))
      .Add("good_errors", alone.errors + with.errors)
      .Add("server_cpu_alone_s", alone.server_cpu_s)
      .Add("server_cpu_with_s", with.server_cpu_s)
      .Add("client_cpu_alone_s", alone.client_cpu_s)
      .Add("client_cpu_with_s", with.client_cpu_s)
      .Add("hostile_dropped", counts.dropped.load())
      .Add("hostile_xor_rows", counts.lookups.load())
      .Add("hostile_xor_errors", counts.errors.load())
      .Emit();
  std::filesystem::remove_all(dir);
  return absl::OkStatus();
}

const char kNeighbourHelp[] =
    "[--rows=65536 --words=16 --lookups-per-call=8 --duration-s=5 --round-s=0.5 --warmup-s=1 "
    "--hostile=8 --hostile-interval-ms=20 --threads=1 --server-bin]: two veil-server processes on "
    "loopback; a good client's rows/s and p99 per call alone and with --hostile connections (in "
    "alternating rounds of --round-s, --duration-s each) (slow senders "
    "trickling a partial 2 MiB message, idle connections, and clients of XOR keys calling every "
    "--hostile-interval-ms); good_qps_ratio = qps_with / qps_alone, good_errors (failed calls and "
    "wrong rows of the good client)";

SuiteRegistration neighbour("neighbour", kNeighbourHelp, Neighbour);

}  // namespace
}  // namespace veil::bench
