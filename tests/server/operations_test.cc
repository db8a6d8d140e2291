// What operators run the server with: the Prometheus endpoint (--metrics), scraped over real HTTP
// while a real client looks rows up, and configuration files (--config).
#include <capnp/ez-rpc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"
#include "tools/launcher.h"

namespace veil {
namespace {

using ::testing::HasSubstr;
using testing::HttpGet;
using testing::MetricsPort;
using testing::Sample;
using testing::Scrape;
using ::testing::StartsWith;

tools::ServerProcessOptions ServerOptions(const std::string& table, int party,
                                          std::vector<std::string> extra_args,
                                          const std::string& log_path = "") {
  tools::ServerProcessOptions o;
  o.binary = VEIL_SERVER_BINARY;
  o.party = party;
  o.table_path = table;
  o.extra_args = std::move(extra_args);
  o.log_path = log_path;
  return o;
}

// A client of the two (plaintext, loopback) servers.
absl::StatusOr<std::unique_ptr<client::Client>> PlaintextClient(
    const tools::ServerProcess& server0, const tools::ServerProcess& server1) {
  client::ClientOptions options;
  options.server0 = server0.address();
  options.server1 = server1.address();
  options.allow_plaintext = true;
  return client::Client::Connect(options);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The state letter of process `pid` in /proc (R, S, Z...), or 0 if it cannot be read.
char ProcessState(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(in, stat);
  const size_t end = stat.rfind(')');  // the command name may hold spaces
  return end == std::string::npos || end + 2 >= stat.size() ? 0 : stat[end + 2];
}

TEST(LauncherTest, AServerDiesWithTheThreadThatStartedIt) {
  // A launcher that crashes leaves no server behind. Once a crashed test's servers kept the
  // test runner's output pipe open, and ctest reported a timeout 120 s later instead of the
  // crash.
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 64, 8, 1);
  ASSERT_TRUE(table.ok()) << table.status();
  std::unique_ptr<tools::ServerProcess> server;
  std::thread([&] {
    auto started = tools::ServerProcess::Start(ServerOptions(*table, 0, {}));
    ASSERT_TRUE(started.ok()) << started.status();
    server = *std::move(started);
  }).join();
  ASSERT_NE(server, nullptr);
  // Killed, and not yet reaped (the destructor reaps it).
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ProcessState(server->pid()) != 'Z' && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(ProcessState(server->pid()), 'Z') << "the server outlived the thread that started it";
}

TEST(MetricsTest, SeriesMoveWithLookups) {
#if !VEIL_HAVE_PROMETHEUS
  GTEST_SKIP() << "built without prometheus-cpp: veil-server refuses --metrics";
#endif
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 256, 8, 1,
                                         /*epoch=*/3);
  ASSERT_TRUE(table.ok()) << table.status();
  auto loaded = embedding::Table::Load(*table, {});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const std::string log = testing::TempPath("server0.log");
  auto server0 =
      tools::ServerProcess::Start(ServerOptions(*table, 0, {"--metrics=127.0.0.1:0"}, log));
  ASSERT_TRUE(server0.ok()) << server0.status();
  const absl::StatusOr<int> found = MetricsPort(log);
  ASSERT_TRUE(found.ok()) << found.status();
  const int port = *found;
  auto server1 = tools::ServerProcess::Start(ServerOptions(*table, 1, {}));
  ASSERT_TRUE(server1.ok()) << server1.status();

  auto before = Scrape(port);
  ASSERT_TRUE(before.ok()) << before.status();
  const std::string table_info =
      absl::StrCat("veil_table_info{epoch=\"3\",digest=\"", (*loaded)->DigestHex(), "\"}");
  EXPECT_EQ(Sample(*before, table_info), 1) << "no " << table_info;
  EXPECT_GT(Sample(*before, "veil_process_resident_memory_bytes"), 1e6);
  EXPECT_EQ(Sample(*before, "veil_open_connections"), 0);

  auto client = PlaintextClient(**server0, **server1);
  ASSERT_TRUE(client.ok()) << client.status();
  constexpr int kLookups = 5;
  for (int i = 0; i < kLookups; ++i) ASSERT_TRUE((*client)->Lookup({1, 2, 200}).ok());

  auto after = Scrape(port);
  ASSERT_TRUE(after.ok()) << after.status();
  const std::string ok_calls = "veil_requests_total{rpc=\"answer\",code=\"OK\"}";
  EXPECT_EQ(Sample(*after, ok_calls) - Sample(*before, ok_calls), kLookups);
  EXPECT_EQ(Sample(*after, "veil_keys_total") - Sample(*before, "veil_keys_total"), 3 * kLookups);
  EXPECT_EQ(Sample(*after, "veil_request_duration_seconds_count{rpc=\"answer\"}"), kLookups);
  EXPECT_EQ(Sample(*after, "veil_request_duration_seconds_bucket{rpc=\"answer\",le=\"+Inf\"}"),
            kLookups);
  EXPECT_GT(Sample(*after, "veil_request_duration_seconds_sum{rpc=\"answer\"}"), 0);
  EXPECT_GE(Sample(*after, "veil_batch_keys_count") - Sample(*before, "veil_batch_keys_count"), 1);
  EXPECT_EQ(Sample(*after, "veil_batch_keys_sum") - Sample(*before, "veil_batch_keys_sum"),
            3 * kLookups);
  EXPECT_EQ(Sample(*after, "veil_open_connections"), 1);
  EXPECT_EQ(Sample(*after, table_info), 1);
  EXPECT_EQ(Sample(*after, "veil_queued_keys"), 0);
  EXPECT_EQ(Sample(*after, "veil_refused_connections_total"), 0);
}

TEST(MetricsTest, BadAddressesAreRefused) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 16, 4, 1);
  ASSERT_TRUE(table.ok()) << table.status();
  struct Case {
    std::string flag;
    std::string error;
  };
  for (const Case& c :
       std::vector<Case>{{"--metrics=127.0.0.1", "--metrics=127.0.0.1: no port"},
                         {"--metrics=localhost:9464", "not a numeric IPv4 address"},
                         {"--metrics=127.0.0.1:70000", "not a number from 0 to 65535"},
                         {"--metrics=0.0.0.0:0",
                          "refusing to serve metrics on 0.0.0.0:0, which is not a "
                          "loopback address"}}) {
    const std::string log = testing::TempPath("refused.log");
    auto server = tools::ServerProcess::Start(ServerOptions(*table, 0, {c.flag}, log));
    ASSERT_FALSE(server.ok()) << c.flag;
    EXPECT_TRUE(absl::IsUnavailable(server.status())) << server.status();
    EXPECT_THAT(ReadFile(log), HasSubstr(c.error)) << c.flag;
  }
}

// --threads=0 (veil-server's default) answers on one thread per core, which the log's serving
// line (the protocol's description) says; a negative count is refused.
TEST(ThreadsTest, ZeroMeansOnePerCoreAndANegativeCountIsRefused) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 16, 4, 1);
  ASSERT_TRUE(table.ok()) << table.status();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const std::string log = testing::TempPath("threads.log");
  auto server = tools::ServerProcess::Start(ServerOptions(*table, 0, {"--threads=0"}, log));
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE((*server)->Stop().ok());
  EXPECT_THAT(ReadFile(log), HasSubstr(absl::StrCat(" ", cores, " thread(s)")));
  const std::string refused_log = testing::TempPath("threads_refused.log");
  auto refused =
      tools::ServerProcess::Start(ServerOptions(*table, 0, {"--threads=-1"}, refused_log));
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_THAT(ReadFile(refused_log), HasSubstr("--threads must not be negative"));
}

// Every line a real server writes is one key=value event (log pipelines parse them).
TEST(LogTest, EveryLineIsOneKeyValueEvent) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 256, 4, 1);
  ASSERT_TRUE(table.ok()) << table.status();
  const std::string log = testing::TempPath("server0.log");
  auto server0 = tools::ServerProcess::Start(ServerOptions(*table, 0, {}, log));
  ASSERT_TRUE(server0.ok()) << server0.status();
  auto server1 = tools::ServerProcess::Start(ServerOptions(*table, 1, {}));
  ASSERT_TRUE(server1.ok()) << server1.status();
  auto client = PlaintextClient(**server0, **server1);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Lookup({137, 211}).ok());
  EXPECT_FALSE((*client)->Lookup({4096}).ok());  // refused by the client: past the table
  client->reset();
  ASSERT_TRUE((*server0)->Stop().ok());

  const std::regex line_format(
      R"(ts=\S+ prog=veil-server party=0 event=[a-z_]+( suppressed=[0-9]+)? )"
      R"(msg="([^"\\]|\\.)*")");
  std::vector<std::string> events;
  for (absl::string_view line : absl::StrSplit(ReadFile(log), '\n', absl::SkipEmpty())) {
    EXPECT_TRUE(std::regex_match(line.begin(), line.end(), line_format)) << line;
    const size_t event = line.find("event=");
    events.emplace_back(line.substr(event + 6, line.find(' ', event) - event - 6));
  }
  EXPECT_THAT(events, ::testing::ElementsAre("table_loaded", "serving", "stopping", "stopped"));
}

// What a server writes and shows holds nothing of what clients want: after good lookups of two
// rows and a hostile call with malformed keys, neither its log nor its metrics contain the rows'
// indices or a piece of any key (as raw bytes or hex). Rows above 65535 cannot be mistaken for a
// port number in the log.
TEST(LogTest, NeitherTheLogNorTheMetricsHoldRowsOrKeys) {
  constexpr uint64_t kRows = 100003;
  const std::vector<uint64_t> wanted = {77773, 99991};
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, kRows, 1, 2);
  ASSERT_TRUE(table.ok()) << table.status();
  const std::string log = testing::TempPath("server0.log");
  std::vector<std::string> args;
#if VEIL_HAVE_PROMETHEUS
  args.push_back("--metrics=127.0.0.1:0");
#endif
  auto server0 = tools::ServerProcess::Start(ServerOptions(*table, 0, args, log));
  ASSERT_TRUE(server0.ok()) << server0.status();
  auto server1 = tools::ServerProcess::Start(ServerOptions(*table, 1, {}));
  ASSERT_TRUE(server1.ok()) << server1.status();
  auto client = PlaintextClient(**server0, **server1);
  ASSERT_TRUE(client.ok()) << client.status();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*client)->Lookup(wanted).ok());
  std::vector<uint8_t> forged(96);
  for (size_t i = 0; i < forged.size(); ++i) forged[i] = static_cast<uint8_t>(0xa5 ^ (7 * i));
  try {
    capnp::EzRpcClient rpc("127.0.0.1", (*server0)->port());
    auto request = rpc.getMain<rpc::PirServer>().answerRequest();
    request.initKeys(1).set(0, capnp::Data::Reader(forged.data(), forged.size()));
    request.send().wait(rpc.getWaitScope());
    ADD_FAILURE() << "a malformed key was answered";
  } catch (const kj::Exception& e) {
    EXPECT_EQ(rpc::ExceptionToStatus(e, "").code(), absl::StatusCode::kInvalidArgument)
        << e.getDescription().cStr();
  }
  std::string shown;
#if VEIL_HAVE_PROMETHEUS
  const absl::StatusOr<int> port = MetricsPort(log);
  ASSERT_TRUE(port.ok()) << port.status();
  auto metrics = HttpGet(*port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  shown = *metrics;
#endif
  client->reset();
  ASSERT_TRUE((*server0)->Stop().ok());
  const std::string written = ReadFile(log);
  ASSERT_THAT(written, ::testing::HasSubstr("event=rejected"));  // the forged call was logged
  const std::string forged_hex =
      absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(forged.data()), 8));
  for (const std::string& text : {written, shown}) {
    for (uint64_t row : wanted)
      EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr(std::to_string(row))));
    EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr(forged_hex)));
    EXPECT_THAT(text, ::testing::Not(::testing::HasSubstr(
                          std::string(reinterpret_cast<const char*>(forged.data()), 8))));
  }
}

// The served config's limits, from the `config` call.
absl::StatusOr<std::pair<uint32_t, uint64_t>> KeysAndBytesLimits(
    const tools::ServerProcess& server) {
  try {
    capnp::EzRpcClient rpc("127.0.0.1", server.port());
    auto reply = rpc.getMain<rpc::PirServer>().configRequest().send().wait(rpc.getWaitScope());
    rpc::Limits::Reader limits = reply.getConfig().getLimits();
    return std::pair{limits.getMaxKeysPerCall(), limits.getMaxMessageBytes()};
  } catch (const kj::Exception& e) {
    return rpc::ExceptionToStatus(e, server.address());
  }
}

std::string WriteConfig(const std::string& text) {
  const std::string path = testing::TempPath("server.conf");
  std::ofstream(path) << text;
  return path;
}

TEST(ConfigFileTest, FileSetsFlagsAndTheCommandLineOverridesIt) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 16, 4, 1);
  ASSERT_TRUE(table.ok()) << table.status();
  const std::string config = WriteConfig(
      "# limits of this deployment\n"
      "\n"
      "max-keys-per-call = 17\n"
      "--max_message_bytes=65536\n");
  auto server = tools::ServerProcess::Start(
      ServerOptions(*table, 0, {"--config=" + config, "--max_message_bytes=131072"}));
  ASSERT_TRUE(server.ok()) << server.status();
  auto limits = KeysAndBytesLimits(**server);
  ASSERT_TRUE(limits.ok()) << limits.status();
  EXPECT_EQ(limits->first, 17u);       // from the file
  EXPECT_EQ(limits->second, 131072u);  // the command line wins
}

TEST(ConfigFileTest, BadLinesAreErrorsNamingTheLine) {
  auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 16, 4, 1);
  ASSERT_TRUE(table.ok()) << table.status();
  struct Case {
    std::string text;
    std::string error;  // after "PATH:"
  };
  for (const Case& c : std::vector<Case>{
           {"max_batch=8\n# fine\nno_such_flag=1\n", "3: unknown flag \"no_such_flag\""},
           {"max_batch=eight\n", "1: max_batch: "},
           {"\nmax_batch\n", "2: expected flag=value, got \"max_batch\""},
           {"helpfull=true\n", "1: unknown flag \"helpfull\""},
           {"config=other.conf\n", "1: unknown flag \"config\""}}) {
    const std::string config = WriteConfig(c.text);
    const std::string log = testing::TempPath("config.log");
    auto server =
        tools::ServerProcess::Start(ServerOptions(*table, 0, {"--config=" + config}, log));
    ASSERT_FALSE(server.ok()) << c.text;
    EXPECT_THAT(ReadFile(log),
                HasSubstr(absl::StrCat("veil-server: --config: ", config, ":", c.error)))
        << c.text;
  }
  const std::string log = testing::TempPath("missing.log");
  auto server = tools::ServerProcess::Start(
      ServerOptions(*table, 0, {"--config=" + testing::TempPath("absent.conf")}, log));
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(ReadFile(log), HasSubstr("cannot read config file"));
}

}  // namespace
}  // namespace veil
