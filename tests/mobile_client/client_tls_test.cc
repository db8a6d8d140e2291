// veil::client::Client over TLS against two real veil-server processes: rows stay bit-exact, and every
// mismatch between what the client trusts and what the servers present (another certificate,
// another name, plaintext on either side, a silent peer) fails with a clear status within the
// timeout. Also the client's half of the loopback rule for plaintext.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "tests/server/two_servers.h"

namespace veil::client {
namespace {

using ::testing::HasSubstr;

ClientOptions TlsOptions(const testing::TwoServers& servers, const std::string& trusted,
                         absl::Duration timeout = absl::Seconds(5)) {
  ClientOptions options;
  options.server0 = servers.address(0);
  options.server1 = servers.address(1);
  options.tls_trusted_certs = trusted;
  options.timeout = timeout;
  return options;
}

class ClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("tls.veil", embedding::RowFormat::kFixed32, 300, 6, 21);
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = *path;
    auto table = embedding::Table::Open(path_);
    ASSERT_TRUE(table.ok());
    table_ = *std::move(table);
    auto cert = testing::MakeCertificate();
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
  }

  // Both servers over TLS with `cert` (by default the fixture's, for 127.0.0.1 and localhost).
  testing::TwoServers StartTls(const tools::CertificateFiles* cert = nullptr) {
    auto servers = testing::StartTwoServers(path_, path_, {}, cert != nullptr ? cert : &cert_);
    EXPECT_TRUE(servers.ok()) << servers.status();
    return servers.ok() ? *std::move(servers) : testing::TwoServers();
  }

  std::string path_;
  std::unique_ptr<embedding::Table> table_;
  tools::CertificateFiles cert_;
};

TEST_F(ClientTlsTest, LookupsOverTlsAreBitExact) {
  testing::TwoServers servers = StartTls();
  ASSERT_NE(servers.server[0], nullptr);
  auto client = Client::Connect(TlsOptions(servers, servers.tls_cert));
  ASSERT_TRUE(client.ok()) << client.status();

  std::mt19937_64 rng(5);
  std::vector<uint64_t> rows = {0, 299};
  while (rows.size() < 40) rows.push_back(rng() % 300);
  auto words = (*client)->LookupWords(rows);
  ASSERT_TRUE(words.ok()) << words.status();
  for (size_t i = 0; i < rows.size(); ++i) {
    auto plain = table_->row(rows[i]);
    ASSERT_TRUE(std::equal(plain.begin(), plain.end(), words->begin() + i * 6)) << rows[i];
  }
  // Bytes are counted on the sockets, below TLS: each row comes from both servers.
  EXPECT_GT((*client)->last_call().bytes_down, 2 * rows.size() * 6 * 4);

  auto sums = (*client)->LookupPooledWords({1, 2, 3, 7}, {3, 1}, {});
  ASSERT_TRUE(sums.ok()) << sums.status();
  for (uint32_t j = 0; j < 6; ++j) {
    EXPECT_EQ((*sums)[j], table_->row(1)[j] + table_->row(2)[j] + table_->row(3)[j]);
    EXPECT_EQ((*sums)[6 + j], table_->row(7)[j]);
  }
  std::vector<RowRange> ranges = {{100, 50}, {0, 300}};
  auto ranged = (*client)->LookupWordsInRanges({49, 12}, ranges);
  ASSERT_TRUE(ranged.ok()) << ranged.status();
  auto last = table_->row(149);
  EXPECT_TRUE(std::equal(last.begin(), last.end(), ranged->begin()));

  // By DNS name as well as by IP address: the certificate holds both. (The name is given as the
  // expected name rather than resolved: a bare Debian root has no /etc/hosts entry for it.)
  ClientOptions by_name = TlsOptions(servers, servers.tls_cert);
  by_name.tls_server_name0 = "localhost";
  auto named = Client::Connect(by_name);
  ASSERT_TRUE(named.ok()) << named.status();
  auto again = (*named)->LookupWords({rows[2]});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(std::equal(again->begin(), again->end(), words->begin() + 2 * 6));
}

TEST_F(ClientTlsTest, AClientTrustingAnotherCertificateIsRefused) {
  testing::TwoServers servers = StartTls();
  ASSERT_NE(servers.server[0], nullptr);
  auto other = testing::MakeCertificate();
  ASSERT_TRUE(other.ok());
  auto client = Client::Connect(TlsOptions(servers, other->cert_path));
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr("its TLS certificate is not trusted (self-signed certificate): it does "
                        "not chain to a certificate in " +
                        other->cert_path));
}

TEST_F(ClientTlsTest, SeveralCertificatesInOneFileAreAllTrusted) {
  // Each server its own certificate; the client's file holds an unrelated one and both.
  auto second = testing::MakeCertificate();
  auto unrelated = testing::MakeCertificate();
  ASSERT_TRUE(second.ok() && unrelated.ok());
  testing::TwoServers servers;
  auto a = testing::StartTwoServers(path_, path_, {}, &cert_);
  auto b = testing::StartTwoServers(path_, path_, {}, &*second);
  ASSERT_TRUE(a.ok() && b.ok());
  servers.server[0] = std::move(a->server[0]);
  servers.server[1] = std::move(b->server[1]);
  const std::string bundle = testing::TempPath("bundle.pem");
  {
    std::ofstream out(bundle);
    for (const std::string& pem : {unrelated->cert_path, cert_.cert_path, second->cert_path}) {
      out << std::ifstream(pem).rdbuf();
    }
  }
  auto client = Client::Connect(TlsOptions(servers, bundle));
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_TRUE((*client)->LookupWords({4}).ok());
  // Only the first server's certificate: the second server is refused, by name.
  auto half = Client::Connect(TlsOptions(servers, cert_.cert_path));
  EXPECT_TRUE(absl::IsFailedPrecondition(half.status())) << half.status();
  EXPECT_THAT(half.status().message(), HasSubstr("server 1 ("));
}

TEST_F(ClientTlsTest, ACertificateForAnotherNameIsRefusedUnlessThatNameIsExpected) {
  auto elsewhere = testing::MakeCertificate({"other.example"});
  ASSERT_TRUE(elsewhere.ok());
  testing::TwoServers servers = StartTls(&*elsewhere);
  ASSERT_NE(servers.server[0], nullptr);
  ClientOptions options = TlsOptions(servers, servers.tls_cert);
  auto client = Client::Connect(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("server 0 (", servers.address(0),
                                     "): its TLS certificate is not valid for the name "
                                     "\"127.0.0.1\" (hostname mismatch)")));
  EXPECT_THAT(client.status().message(), HasSubstr("tls_server_name0"));

  options.tls_server_name0 = "other.example";
  options.tls_server_name1 = "other.example";
  auto overridden = Client::Connect(options);
  ASSERT_TRUE(overridden.ok()) << overridden.status();
  EXPECT_TRUE((*overridden)->LookupWords({9}).ok());
}

TEST_F(ClientTlsTest, APlaintextClientOfTlsServersFailsWithinTheTimeout) {
  testing::TwoServers servers = StartTls();
  ASSERT_NE(servers.server[0], nullptr);
  ClientOptions options = TlsOptions(servers, "", absl::Seconds(2));
  const absl::Time start = absl::Now();
  auto client = Client::Connect(options);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("broke the connection before answering"));
  EXPECT_THAT(client.status().message(),
              HasSubstr("a TLS server (--tls-cert) does that to a client without TLS: set "
                        "tls_trusted_certs"));
}

TEST_F(ClientTlsTest, ATlsClientOfPlaintextServersFailsWithinTheTimeout) {
  auto servers = testing::StartTwoServers(path_, path_);
  ASSERT_TRUE(servers.ok()) << servers.status();
  const absl::Time start = absl::Now();
  auto client = Client::Connect(TlsOptions(*servers, cert_.cert_path, absl::Seconds(2)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("the TLS handshake failed ("));
  EXPECT_THAT(client.status().message(),
              HasSubstr("is the server running without TLS (no --tls-cert)"));
}

TEST_F(ClientTlsTest, AServerThatNeverFinishesTheHandshakeTimesOut) {
  // A listening socket nobody accepts from: TCP connects (the kernel's backlog), TLS never starts.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address = {};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), length), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length), 0);
  auto servers = StartTls();
  ASSERT_NE(servers.server[0], nullptr);
  ClientOptions options = TlsOptions(servers, cert_.cert_path, absl::Milliseconds(500));
  options.server0 = absl::StrCat("127.0.0.1:", ntohs(address.sin_port));
  const absl::Time start = absl::Now();
  auto client = Client::Connect(options);
  const absl::Duration took = absl::Now() - start;
  close(fd);
  EXPECT_TRUE(absl::IsDeadlineExceeded(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr(absl::StrCat("no answer from ", "server 0 (", options.server0,
                                     ") (TLS handshake unfinished) within 500ms")))
      << client.status();
  EXPECT_THAT(client.status().message(), ::testing::Not(HasSubstr("server 1")));
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Milliseconds(1500));
}

TEST_F(ClientTlsTest, BadTlsOptionsAreRefusedBeforeConnecting) {
  ClientOptions options;
  options.server0 = "127.0.0.1:1";
  options.server1 = "127.0.0.1:2";
  options.tls_server_name0 = "pir.example";
  EXPECT_TRUE(absl::IsInvalidArgument(Client::Connect(options).status()));
  options.tls_trusted_certs = testing::TempPath("missing.pem");
  auto missing = Client::Connect(options);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(missing.status().message(), HasSubstr(options.tls_trusted_certs));
}

// A non-loopback IPv4 address of this machine, or "" if it has none.
std::string NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a != nullptr && found.empty(); a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    const in_addr ip = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr;
    if ((ntohl(ip.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &ip, text, sizeof(text)) != nullptr) found = text;
  }
  freeifaddrs(list);
  return found;
}

TEST_F(ClientTlsTest, PlaintextOffLoopbackIsRefusedUnlessAllowed) {
  const std::string ip = NonLoopbackAddress();
  if (ip.empty()) GTEST_SKIP() << "this machine has no non-loopback IPv4 address";
  testing::TwoServers servers;
  for (int party = 0; party < 2; ++party) {
    tools::ServerProcessOptions o;
    o.binary = VEIL_SERVER_BINARY;
    o.party = party;
    o.table_path = path_;
    o.listen = ip + ":0";
    o.extra_args = {"--insecure-plaintext"};
    auto started = tools::ServerProcess::Start(o);
    ASSERT_TRUE(started.ok()) << started.status();
    servers.server[party] = *std::move(started);
  }
  ClientOptions options;
  options.server0 = absl::StrCat(ip, ":", servers.server[0]->port());
  options.server1 = absl::StrCat(ip, ":", servers.server[1]->port());
  auto refused = Client::Connect(options);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat("refusing to send queries in plaintext to ", options.server0,
                                     ", which is not a loopback address")));
  options.allow_plaintext = true;
  auto allowed = Client::Connect(options);
  ASSERT_TRUE(allowed.ok()) << allowed.status();
  EXPECT_TRUE((*allowed)->LookupWords({5}).ok());
}

}  // namespace
}  // namespace veil::client
