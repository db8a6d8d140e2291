// A client refuses a server that speaks another protocol or another protocol version, with an
// error that says so, before any protocol call. The servers here are stand-ins that answer only
// `hello` (protocol "dpf2" clients must never send them a key), and dpf2 stand-ins that refuse
// every lookup slowly: the client's timeout bounds a lookup whole, retries included.
#include <capnp/ez-rpc.h>

#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"

namespace veil::client {
namespace {

using ::testing::HasSubstr;

class HelloOnly final : public rpc::VeilServer::Server {
 public:
  HelloOnly(std::string protocol, uint16_t version)
      : protocol_(std::move(protocol)), version_(version) {}

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    return testing::AnswerHello(context, protocol_, version_);
  }

 private:
  std::string protocol_;
  uint16_t version_;
};

// A HelloOnly on a loopback port.
std::unique_ptr<testing::StandInServer> StandIn(std::string protocol, uint16_t version) {
  return std::make_unique<testing::StandInServer>([protocol, version] {
    return capnp::Capability::Client(kj::heap<HelloOnly>(protocol, version));
  });
}

TEST(ProtocolTest, AServerOfAnotherProtocolIsRefusedClearly) {
  auto lattice = StandIn("lwe-simple", rpc::PROTOCOL_VERSION);
  ClientOptions options;
  options.server0 = lattice->address();
  options.server1 = lattice->address();
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(),
              HasSubstr("speaks protocol \"lwe-simple\"; this client speaks \"dpf2\""));
}

TEST(ProtocolTest, AServerOfAnotherProtocolVersionIsRefusedClearly) {
  auto future = StandIn("dpf2", rpc::PROTOCOL_VERSION + 1);
  ClientOptions options;
  options.server0 = future->address();
  options.server1 = future->address();
  auto client = Client::Connect(options);
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(client.status())) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("speaks protocol version"));
}

// A dpf2 party whose table was "just rolled away": every answer comes after 400 ms as
// FAILED_PRECONDITION (what a server says of a version it no longer serves), and every config
// after the first after 400 ms too. Its table digest has `digest_bytes` bytes.
class SlowlyRolledAway final : public rpc::PirServer::Server {
 public:
  explicit SlowlyRolledAway(int party, size_t digest_bytes = 32)
      : party_(party), digest_bytes_(digest_bytes) {}

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    return testing::AnswerHello(context, "dpf2");
  }
  kj::Promise<void> config(ConfigContext context) override {
    if (configs_++ > 0) std::this_thread::sleep_for(kDelay);  // blocks only this stand-in
    auto c = context.getResults().initConfig();
    c.setParty(static_cast<uint8_t>(party_));
    const uint8_t digest[32] = {9};
    c.initTable().setDigest(capnp::Data::Reader(digest, digest_bytes_));
    c.getTable().setEpoch(1);
    c.setRows(1024);
    c.setRowWords(4);
    c.setDim(4);
    c.setRowFormat(1);
    c.setLogDomain(10);
    c.initPrgs(1).set(0, static_cast<uint8_t>(dpf::Prg::kAes128));
    auto outputs = c.initOutputTypes(2);
    outputs.set(0, static_cast<uint8_t>(dpf::OutputType::kXor));
    outputs.set(1, static_cast<uint8_t>(dpf::OutputType::kAdditive));
    auto limits = c.initLimits();
    limits.setMaxKeysPerCall(64);
    limits.setMaxMessageBytes(1 << 20);
    return kj::READY_NOW;
  }
  kj::Promise<void> answer(AnswerContext) override {
    std::this_thread::sleep_for(kDelay);
    return rpc::StatusToException(absl::FailedPreconditionError(
        "epoch 1 is no longer served by this server (it serves epoch 1 only)"));
  }

 private:
  static constexpr std::chrono::milliseconds kDelay{400};
  int party_;
  size_t digest_bytes_;
  int configs_ = 0;
};

TEST(ProtocolTest, ALookupEndsWithinItsTimeoutWhateverTheRetries) {
  // Before, each version move and each retry had a timeout of its own: here 3.1 s (0.4 s calls and
  // moves, three retries), 6.6 s with slower replies.
  testing::StandInServer s0(
      [] { return capnp::Capability::Client(kj::heap<SlowlyRolledAway>(0)); });
  testing::StandInServer s1(
      [] { return capnp::Capability::Client(kj::heap<SlowlyRolledAway>(1)); });
  ClientOptions options;
  options.server0 = s0.address();
  options.server1 = s1.address();
  options.timeout = absl::Seconds(1);
  auto client = Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Time start = absl::Now();
  const uint64_t rows[] = {5};
  auto words = (*client)->LookupWords(rows);
  const absl::Duration took = absl::Now() - start;
  EXPECT_FALSE(words.ok());
  EXPECT_LT(took, absl::Milliseconds(2500)) << "a lookup with a 1 s timeout";
}

TEST(ProtocolTest, AVersionNamedByATruncatedDigestIsRefused) {
  testing::StandInServer s0(
      [] { return capnp::Capability::Client(kj::heap<SlowlyRolledAway>(0, 31)); });
  testing::StandInServer s1(
      [] { return capnp::Capability::Client(kj::heap<SlowlyRolledAway>(1, 31)); });
  ClientOptions options;
  options.server0 = s0.address();
  options.server1 = s1.address();
  auto client = Client::Connect(options);
  EXPECT_EQ(client.status().code(), absl::StatusCode::kFailedPrecondition) << client.status();
  EXPECT_THAT(client.status().message(), HasSubstr("digest that is not 32 bytes"));
}

}  // namespace
}  // namespace veil::client
