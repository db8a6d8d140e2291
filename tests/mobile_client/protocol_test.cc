// A client refuses a server that speaks another protocol or another protocol version, with an
// error that says so, before any protocol call. The servers here are stand-ins that answer only
// `hello` (protocol "dpf2" clients must never send them a key).
#include <capnp/ez-rpc.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
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
    auto hello = context.getResults().initHello();
    hello.setProtocol(protocol_);
    hello.setProtocolVersion(version_);
    return kj::READY_NOW;
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

}  // namespace
}  // namespace veil::client
