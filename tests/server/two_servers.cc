#include "tests/server/two_servers.h"

#include <arpa/inet.h>
#include <capnp/ez-rpc.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "gtest/gtest.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"

namespace veil::testing {

std::string TempPath(const std::string& name) {
  // A directory of this process's own (mkdtemp), so a file a process with the same pid left
  // behind in an earlier test run can never be mistaken for one of ours.
  static const std::string dir = [] {
    std::string pattern = absl::StrCat(::testing::TempDir(), "/veil_test_XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
      std::abort();
    }
    return pattern;
  }();
  static std::atomic<int> counter{0};
  return absl::StrCat(dir, "/", counter++, "_", name);
}

absl::StatusOr<std::string> WriteRandomTable(const std::string& name, embedding::RowFormat format,
                                             uint64_t rows, uint32_t dim, uint64_t seed,
                                             uint64_t epoch, const embedding::RowKey* row_key,
                                             embedding::RowTag kind) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  std::vector<float> values(rows * dim);
  for (float& v : values) v = value(rng);
  std::string path = TempPath(name);
  embedding::TableOptions options;
  options.epoch = epoch;
  options.frac_bits = 16;
  if (row_key != nullptr) options.row_key = *row_key;
  options.row_tag = kind;
  if (absl::Status s = embedding::WriteTable(path, format, dim, values, options); !s.ok()) {
    return s;
  }
  return path;
}

std::string RewriteTable(const std::string& path, const std::string& name, uint64_t epoch,
                         embedding::RowTag kind, const embedding::RowKey* key, int frac_bits) {
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  embedding::TableHeader header;
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.epoch = epoch;
  header.row_tag = static_cast<uint8_t>(kind);
  if (frac_bits >= 0) header.frac_bits = static_cast<uint8_t>(frac_bits);
  auto* rows = reinterpret_cast<uint32_t*>(bytes.data() + sizeof(header));
  const uint32_t data_words = header.row_words - embedding::TagWords(kind);
  for (uint64_t r = 0; key != nullptr && r < header.rows; ++r) {
    uint32_t* row = rows + r * header.stride_words;
    const auto tag = embedding::ComputeRowTag(
        kind, *key, epoch, r,
        {static_cast<embedding::RowFormat>(header.format), header.frac_bits, header.dim},
        absl::MakeConstSpan(row, data_words));
    std::copy(tag.begin(), tag.end(), row + data_words);
  }
  const embedding::TableDigestBytes digest = embedding::DigestTable(
      header,
      absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(rows), bytes.size() - sizeof(header)));
  std::copy(digest.begin(), digest.end(), header.digest);
  std::memcpy(bytes.data(), &header, sizeof(header));
  const std::string copy = TempPath(name);
  std::ofstream(copy, std::ios::binary | std::ios::trunc) << bytes;
  return copy;
}

sockaddr_in LoopbackAddress(int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return address;
}

int ConnectLoopback(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  const sockaddr_in address = LoopbackAddress(port);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

kj::Promise<void> AnswerHello(
    capnp::CallContext<rpc::VeilServer::HelloParams, rpc::VeilServer::HelloResults> context,
    const std::string& protocol, uint16_t version) {
  auto hello = context.getResults().initHello();
  hello.setProtocol(protocol);
  hello.setProtocolVersion(version);
  return kj::READY_NOW;
}

absl::StatusOr<int> MetricsPort(const std::string& log_path) {
  std::ifstream in(log_path);
  constexpr std::string_view kMark = " port ";
  for (std::string line; std::getline(in, line);) {
    if (!absl::StrContains(line, "event=metrics_listening")) continue;
    const size_t at = line.find(kMark);
    int port = 0;
    if (at != std::string::npos &&
        absl::SimpleAtoi(
            line.substr(at + kMark.size(), line.find(' ', at + kMark.size()) - (at + kMark.size())),
            &port) &&
        port > 0) {
      return port;
    }
  }
  return absl::NotFoundError(absl::StrCat("no metrics port in the log ", log_path));
}

absl::StatusOr<std::string> HttpGet(int port, const std::string& path) {
  const int fd = ConnectLoopback(port);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot connect to port ", port));
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::UnavailableError("short write");
  }
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof(buffer))) > 0;) response.append(buffer, n);
  close(fd);
  return response;
}

absl::StatusOr<Samples> Scrape(int port) {
  absl::StatusOr<std::string> response = HttpGet(port, "/metrics");
  if (!response.ok()) return response.status();
  if (!absl::StartsWith(*response, "HTTP/1.1 200") &&
      !absl::StartsWith(*response, "HTTP/1.0 200")) {
    return absl::InternalError(absl::StrCat("not a 200 response: ", response->substr(0, 200)));
  }
  const size_t body = response->find("\r\n\r\n");
  if (body == std::string::npos) return absl::InternalError("no end of headers");
  Samples samples;
  for (absl::string_view line : absl::StrSplit(response->substr(body + 4), '\n')) {
    if (line.empty() || line.front() == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      return absl::InternalError(absl::StrCat("bad sample line \"", line, "\""));
    }
    samples[std::string(line.substr(0, space))] = value;
  }
  return samples;
}

double Sample(const Samples& samples, const std::string& key) {
  auto it = samples.find(key);
  return it == samples.end() ? 0 : it->second;
}

absl::StatusOr<tools::CertificateFiles> MakeCertificate(const std::vector<std::string>& hosts) {
  return tools::WriteSelfSignedCertificate(TempPath("tls"), hosts);
}

absl::StatusOr<TwoServers> StartTwoServers(const std::string& table0, const std::string& table1,
                                           const std::vector<std::string>& extra_args,
                                           const tools::CertificateFiles* tls) {
  TwoServers servers;
  if (tls != nullptr) servers.tls_cert = tls->cert_path;
  for (int party = 0; party < 2; ++party) {
    tools::ServerProcessOptions options;
    options.binary = VEIL_SERVER_BINARY;
    options.party = party;
    options.table_path = party == 0 ? table0 : table1;
    options.backend = "cpu";
    options.extra_args = extra_args;
    if (tls != nullptr) {
      options.tls_cert_path = tls->cert_path;
      options.tls_key_path = tls->key_path;
    }
    auto started = tools::ServerProcess::Start(options);
    if (!started.ok()) return started.status();
    servers.server[party] = *std::move(started);
  }
  return servers;
}

absl::StatusOr<std::vector<uint64_t>> ServedEpochs(const tools::ServerProcess& server) {
  try {
    capnp::EzRpcClient rpc("127.0.0.1", server.port());
    auto reply = rpc.getMain<rpc::PirServer>().configRequest().send().wait(rpc.getWaitScope());
    std::vector<uint64_t> epochs;
    for (rpc::TableId::Reader id : reply.getConfig().getEpochs()) epochs.push_back(id.getEpoch());
    return epochs;
  } catch (const kj::Exception& e) {
    return rpc::ExceptionToStatus(e, server.address());
  }
}

absl::Status WaitForEpochs(const tools::ServerProcess& server, const std::vector<uint64_t>& want,
                           absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    absl::StatusOr<std::vector<uint64_t>> epochs = ServedEpochs(server);
    if (epochs.ok() && *epochs == want) return absl::OkStatus();
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(server.address(), " serves epochs ",
                       epochs.ok() ? absl::StrJoin(*epochs, ", ") : epochs.status().ToString(),
                       ", not ", absl::StrJoin(want, ", ")));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
}

absl::StatusOr<std::unique_ptr<tools::ServerProcess>> StartBagServer(
    const std::string& table, const std::vector<std::string>& extra_args,
    const tools::CertificateFiles* tls, const std::string& log_path) {
  tools::ServerProcessOptions options;
  options.binary = VEIL_SERVER_BINARY;
  options.protocol = "bfv-bag";
  options.table_path = table;
  options.extra_args = extra_args;
  options.log_path = log_path;
  if (tls != nullptr) {
    options.tls_cert_path = tls->cert_path;
    options.tls_key_path = tls->key_path;
  }
  return tools::ServerProcess::Start(options);
}

absl::StatusOr<std::unique_ptr<tools::ServerProcess>> StartLweServer(
    const std::string& table, const std::string& protocol,
    const std::vector<std::string>& extra_args, const std::string& log_path) {
  tools::ServerProcessOptions options;
  options.binary = VEIL_SERVER_BINARY;
  options.protocol = protocol;
  options.table_path = table;
  options.extra_args = {"--lwe_hint_cache=false"};
  options.extra_args.insert(options.extra_args.end(), extra_args.begin(), extra_args.end());
  options.log_path = log_path;
  // The server prints its port once its hint is ready: 30 s for a 65,536 x 80 B table on a
  // machine without AVX-512 (2026-12-06), a few on one with it.
  options.start_timeout = absl::Seconds(180);
  return tools::ServerProcess::Start(options);
}

StandInServer::StandInServer(std::function<capnp::Capability::Client()> make) {
  thread_ = std::thread([this, make = std::move(make)] {
    capnp::EzRpcServer server(make(), "127.0.0.1", 0);
    port_ = server.getPort().wait(server.getWaitScope());
    auto stop = kj::newPromiseAndCrossThreadFulfiller<void>();
    stop_ = kj::mv(stop.fulfiller);
    started_.Notify();
    stop.promise.wait(server.getWaitScope());
  });
  started_.WaitForNotification();
}

StandInServer::~StandInServer() {
  stop_->fulfill();
  thread_.join();
}

}  // namespace veil::testing
