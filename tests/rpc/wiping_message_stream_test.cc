// No Cap'n Proto message buffer is freed while it still holds a DPF key or an answer share. This
// binary interposes free() (which capnp's MallocMessageBuilder, kj's arrays and operator delete
// all end in) with a debug allocator that, while a watch is active, scans every buffer handed back
// for any 16-byte piece of a watched key or share. A client and a server, each a TwoPartyVatNetwork
// over a real socket pair, make one `answer` call: the client sends the key, the server reads it
// and replies with the shares, the client reads them; then both ends are torn down. With plain
// capnp streams the freed buffers hold both (the control case, which shows the scan sees them);
// with WipingMessageStream at both ends they hold neither.
#include "rpc/wiping_message_stream.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <malloc.h>
#include <sodium.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"
#include "rpc/veil.capnp.h"

extern "C" void __libc_free(void* p);  // glibc's free, under the interposed one below

namespace veil::rpc {
namespace {

// Watched secrets live in static storage: the allocator must not see them in a freed buffer.
constexpr size_t kKeyBytes = 512;
constexpr size_t kShareWords = 64;
alignas(16) uint8_t g_key[kKeyBytes];
alignas(16) uint32_t g_shares[kShareWords];
std::atomic<bool> g_watching{false};
std::atomic<int> g_key_leaks{0};
std::atomic<int> g_share_leaks{0};

// Freed buffers holding any aligned 16-byte piece of `secret` (at any offset in the buffer).
bool Holds(const uint8_t* bytes, size_t n, const void* secret, size_t secret_bytes) {
  const auto* s = static_cast<const uint8_t*>(secret);
  for (size_t i = 0; i + 16 <= n; ++i) {
    for (size_t j = 0; j + 16 <= secret_bytes; j += 16) {
      if (std::memcmp(bytes + i, s + j, 16) == 0) return true;
    }
  }
  return false;
}

void InspectFreed(void* p) {
  if (p == nullptr || !g_watching.load()) return;
  const auto* bytes = static_cast<const uint8_t*>(p);
  const size_t n = malloc_usable_size(p);
  if (Holds(bytes, n, g_key, sizeof(g_key))) g_key_leaks.fetch_add(1);
  if (Holds(bytes, n, g_shares, sizeof(g_shares))) g_share_leaks.fetch_add(1);
}

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
    g_key_leaks = 0;
    g_share_leaks = 0;
  }

  void Run(bool wipe) {
    g_watching = true;
    OneCall(wipe);
    g_watching = false;
  }
};

TEST_F(WipingMessageStreamTest, PlainStreamsFreeBuffersHoldingTheKeyAndTheShares) {
  Run(/*wipe=*/false);
  // Client and server each free a buffer with the key (written, read), and with the shares.
  EXPECT_GE(g_key_leaks.load(), 2);
  EXPECT_GE(g_share_leaks.load(), 2);
}

TEST_F(WipingMessageStreamTest, WipingStreamsFreeNoBufferHoldingTheKeyOrTheShares) {
  Run(/*wipe=*/true);
  EXPECT_EQ(g_key_leaks.load(), 0);
  EXPECT_EQ(g_share_leaks.load(), 0);
}

}  // namespace
}  // namespace veil::rpc

// The debug allocator: glibc's free, after the scan. Interposed for the shared libraries too.
extern "C" void free(void* p) {
  veil::rpc::InspectFreed(p);
  __libc_free(p);
}
