// The servers' privacy policy (issue 17): which PRGs dpf2 accepts is tested with the request
// parser; here, who may call `stats` — loopback peers only unless --stats_from_any.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "server/connections.h"
#include "tests/server/two_servers.h"
#include "tools/launcher.h"

namespace veil {
namespace {

using ::testing::HasSubstr;

// The IPv4 or IPv6 address written `text`.
sockaddr_storage Address(const char* text) {
  sockaddr_storage address{};
  if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in*>(&address)->sin_addr) == 1) {
    address.ss_family = AF_INET;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, text, &reinterpret_cast<sockaddr_in6*>(&address)->sin6_addr), 1)
        << text;
    address.ss_family = AF_INET6;
  }
  return address;
}

bool Loopback(const char* text) {
  const sockaddr_storage address = Address(text);
  return server::IsLoopback(reinterpret_cast<const sockaddr*>(&address));
}

std::string Group(const char* text) {
  const sockaddr_storage address = Address(text);
  return server::AddressGroup(reinterpret_cast<const sockaddr*>(&address));
}

TEST(IsLoopbackTest, LoopbackAddressesOfBothFamilies) {
  EXPECT_TRUE(Loopback("127.0.0.1"));
  EXPECT_TRUE(Loopback("127.200.3.4"));
  EXPECT_TRUE(Loopback("::1"));
  EXPECT_TRUE(Loopback("::ffff:127.0.0.1"));
  EXPECT_FALSE(Loopback("10.0.0.1"));
  EXPECT_FALSE(Loopback("128.0.0.1"));
  EXPECT_FALSE(Loopback("0.0.0.0"));
  EXPECT_FALSE(Loopback("::"));
  EXPECT_FALSE(Loopback("::ffff:10.1.2.3"));
  EXPECT_FALSE(Loopback("2001:db8::1"));
}

TEST(AddressGroupTest, OneGroupPerIpv4AddressAndPerIpv6Slash64) {
  EXPECT_EQ(Group("127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(Group("10.1.2.3"), "10.1.2.3");
  EXPECT_NE(Group("10.1.2.3"), Group("10.1.2.4"));
  EXPECT_EQ(Group("::ffff:10.1.2.3"), "10.1.2.3") << "an IPv4 client of a dual-stack socket";
  EXPECT_EQ(Group("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::/64");
  EXPECT_EQ(Group("2001:db8:1:2:ffff:1:2:3"), Group("2001:db8:1:2::1"))
      << "one host's /64, whatever addresses it takes in it";
  EXPECT_NE(Group("2001:db8:1:3::1"), Group("2001:db8:1:2::1"));
  EXPECT_EQ(Group("::1"), "::/64");
}

// An IPv4 address of this machine that is not a loopback one, if it has one.
std::optional<std::string> NonLoopbackAddress() {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = list; a != nullptr && !found; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if (server::IsLoopback(a->ifa_addr)) continue;
    char text[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text));
    found = text;
  }
  freeifaddrs(list);
  return found;
}

// Two plaintext servers on every address (--insecure_plaintext); a client reaching them through
// this machine's non-loopback address, so that they see a non-loopback peer.
class StatsPolicyTest : public ::testing::Test {
 protected:
  absl::StatusOr<std::unique_ptr<client::Client>> ConnectFromOutside(
      const std::vector<std::string>& extra_args) {
    auto table = testing::WriteRandomTable("t.veil", embedding::RowFormat::kFp32, 64, 4, 1);
    if (!table.ok()) return table.status();
    client::ClientOptions options;
    options.allow_plaintext = true;
    for (int party = 0; party < 2; ++party) {
      tools::ServerProcessOptions o;
      o.binary = VEIL_SERVER_BINARY;
      o.party = party;
      o.table_path = *table;
      o.listen = "0.0.0.0:0";
      o.extra_args = extra_args;
      o.extra_args.push_back("--insecure_plaintext");
      auto started = tools::ServerProcess::Start(o);
      if (!started.ok()) return started.status();
      server_[party] = *std::move(started);
      (party == 0 ? options.server0 : options.server1) =
          absl::StrCat(*address_, ":", server_[party]->port());
    }
    return client::Client::Connect(options);
  }

  void SetUp() override {
    address_ = NonLoopbackAddress();
    if (!address_) GTEST_SKIP() << "this machine has no non-loopback IPv4 address";
  }

  std::optional<std::string> address_;
  std::unique_ptr<tools::ServerProcess> server_[2];
};

TEST_F(StatsPolicyTest, StatsAreForLoopbackPeersByDefault) {
  auto client = ConnectFromOutside({});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Lookup({3}).ok());  // lookups are for everyone
  auto stats = (*client)->ServerStats(0);
  EXPECT_TRUE(absl::IsPermissionDenied(stats.status())) << stats.status();
  EXPECT_THAT(stats.status().message(), HasSubstr("only to loopback connections"));
}

TEST_F(StatsPolicyTest, StatsFromAnyOpensThem) {
  auto client = ConnectFromOutside({"--stats_from_any"});
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->Lookup({3}).ok());
  auto stats = (*client)->ServerStats(1);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_GE(stats->calls, 1u);
}

}  // namespace
}  // namespace veil
