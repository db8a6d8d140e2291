// No Cap'n Proto message buffer is freed while it still holds a DPF key or an answer share. This
// binary links the debug allocator of tests/testing/freed_scan.h, which scans every buffer freed
// during a call for any 16-byte piece of the key or the shares. A client and a server, each a
// TwoPartyVatNetwork over a real socket pair, make one `answer` call: the client sends the key, the
// server reads it and replies with the shares, the client reads them; then both ends are torn down.
// With plain capnp streams the freed buffers hold both (the control case, which shows the scan sees
// them); with WipingMessageStream at both ends they hold neither.
#include "rpc/wiping_message_stream.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <sodium.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "rpc/veil.capnp.h"
#include "tests/testing/freed_scan.h"

namespace veil::rpc {
namespace {

// Watched secrets (testing::WatchSecret): 0 the key, 1 the shares.
constexpr size_t kKeyBytes = 512;
constexpr size_t kShareWords = 64;
alignas(16) uint8_t g_key[kKeyBytes];
alignas(16) uint32_t g_shares[kShareWords];

// Answers `answer` with g_shares once it has read a key equal to g_key.
class SharesServer final : public PirServer::Server {
 protected:
  kj::Promise<void> answer(AnswerContext context) override {
    auto keys = context.getParams().getKeys();
    KJ_REQUIRE(keys.size() == 1 && keys[0].size() == kKeyBytes &&
               std::memcmp(keys[0].begin(), g_key, kKeyBytes) == 0);
    context.releaseParams();
    auto shares = context.getResults().initShares(kShareWords);
    for (size_t i = 0; i < kShareWords; ++i) shares.set(i, g_shares[i]);
    return kj::READY_NOW;
  }
};

// One `answer` call from a client to a server over a socket pair, both ends torn down after;
// `wipe`: both ends on WipingMessageStream, otherwise on capnp's own streams.
void OneCall(bool wipe) {
  auto io = kj::setupAsyncIo();
  {
    auto pipe = io.provider->newTwoWayPipe();
    kj::Own<WipingMessageStream> server_messages;
    kj::Own<capnp::TwoPartyVatNetwork> server_network;
    if (wipe) {
      server_messages = kj::heap<WipingMessageStream>(*pipe.ends[1]);
      server_network =
          kj::heap<capnp::TwoPartyVatNetwork>(*server_messages, capnp::rpc::twoparty::Side::SERVER);
    } else {
      server_network =
          kj::heap<capnp::TwoPartyVatNetwork>(*pipe.ends[1], capnp::rpc::twoparty::Side::SERVER);
    }
    auto server = capnp::makeRpcServer(*server_network, kj::heap<SharesServer>());

    kj::Own<WipingTwoPartyClient> wiping_client;
    kj::Own<capnp::TwoPartyClient> plain_client;
    PirServer::Client cap = nullptr;
    if (wipe) {
      wiping_client = kj::heap<WipingTwoPartyClient>(*pipe.ends[0]);
      cap = wiping_client->Bootstrap().castAs<PirServer>();
    } else {
      plain_client = kj::heap<capnp::TwoPartyClient>(*pipe.ends[0]);
      cap = plain_client->bootstrap().castAs<PirServer>();
    }
    {
      auto request = cap.answerRequest();
      request.initKeys(1).set(0, capnp::Data::Reader(g_key, kKeyBytes));
      auto reply = request.send().wait(io.waitScope);
      auto shares = reply.getShares();
      ASSERT_EQ(shares.size(), kShareWords);
      for (size_t i = 0; i < kShareWords; ++i) ASSERT_EQ(shares[i], g_shares[i]);
    }
    cap = nullptr;
    // Let the last messages (Finish, Release) go out before the connections close.
    io.provider->getTimer().afterDelay(10 * kj::MILLISECONDS).wait(io.waitScope);
  }
}

class WipingMessageStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GE(sodium_init(), 0);
    randombytes_buf(g_key, sizeof(g_key));
    randombytes_buf(g_shares, sizeof(g_shares));
    testing::ClearWatched();
    testing::WatchSecret(g_key, sizeof(g_key));
    testing::WatchSecret(g_shares, sizeof(g_shares));
  }

  // Freed buffers holding the key and the shares while one call runs.
  std::vector<int> Run(bool wipe) {
    return testing::FreedBuffersHolding([wipe] { OneCall(wipe); });
  }
};

TEST_F(WipingMessageStreamTest, PlainStreamsFreeBuffersHoldingTheKeyAndTheShares) {
  const std::vector<int> leaks = Run(/*wipe=*/false);
  // Client and server each free a buffer with the key (written, read), and with the shares.
  EXPECT_GE(leaks[0], 2);
  EXPECT_GE(leaks[1], 2);
}

TEST_F(WipingMessageStreamTest, WipingStreamsFreeNoBufferHoldingTheKeyOrTheShares) {
  const std::vector<int> leaks = Run(/*wipe=*/true);
  EXPECT_EQ(leaks[0], 0);
  EXPECT_EQ(leaks[1], 0);
}

}  // namespace
}  // namespace veil::rpc
