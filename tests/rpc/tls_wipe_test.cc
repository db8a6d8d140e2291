// OpenSSL's TLS record buffers hold the plaintext of what goes over TLS: the DPF keys a server
// reads, the shares a client reads. rpc::WipeOpenSslMemoryOnFree makes OpenSSL wipe every buffer
// it frees. This file is built twice, linked with the debug allocator of
// tests/testing/freed_scan.h (every freed buffer scanned for a 16-byte piece of the key): with
// VEIL_WIPE_TLS=1 the wiping is on (set before OpenSSL's first allocation) and no freed buffer
// holds the key; with VEIL_WIPE_TLS=0 (the control) OpenSSL has allocated first, the wiping is
// refused, and the key turns up in buffers OpenSSL freed, which shows the scan sees them. Both
// ends of the Cap'n Proto connection wipe their own messages (rpc/wiping_message_stream.h), so
// what is found is OpenSSL's.
#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>
#include <sodium.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "rpc/tls.h"
#include "rpc/veil.capnp.h"
#include "rpc/wiping_message_stream.h"
#include "tests/testing/freed_scan.h"
#include "tools/tls_cert.h"

namespace veil::rpc {
namespace {

constexpr size_t kKeyBytes = 512;
alignas(16) uint8_t g_key[kKeyBytes];

class KeyServer final : public PirServer::Server {
 protected:
  kj::Promise<void> answer(AnswerContext context) override {
    auto keys = context.getParams().getKeys();
    KJ_REQUIRE(keys.size() == 1 && keys[0].size() == kKeyBytes &&
               std::memcmp(keys[0].begin(), g_key, kKeyBytes) == 0);
    context.releaseParams();
    context.getResults().initShares(4);
    return kj::READY_NOW;
  }
};

// One `answer` call carrying g_key over TLS (both ends in this process, a socket pair between).
void OneTlsCall(const tools::CertificateFiles& files) {
  auto io = kj::setupAsyncIo();
  auto server_tls = MakeServerTlsContext(files.cert_path, files.key_path);
  ASSERT_TRUE(server_tls.ok()) << server_tls.status();
  auto client_tls = MakeClientTlsContext(files.cert_path);
  ASSERT_TRUE(client_tls.ok()) << client_tls.status();
  auto pipe = io.provider->newTwoWayPipe();
  auto server_side = (*server_tls)->wrapServer(kj::mv(pipe.ends[1])).eagerlyEvaluate(nullptr);
  kj::Own<kj::AsyncIoStream> client_stream =
      (*client_tls)->wrapClient(kj::mv(pipe.ends[0]), "localhost").wait(io.waitScope);
  kj::Own<kj::AsyncIoStream> server_stream = server_side.wait(io.waitScope);
  {
    WipingMessageStream server_messages(*server_stream);
    capnp::TwoPartyVatNetwork network(server_messages, capnp::rpc::twoparty::Side::SERVER);
    auto server = capnp::makeRpcServer(network, kj::heap<KeyServer>());
    WipingTwoPartyClient client(*client_stream);
    auto cap = client.Bootstrap().castAs<PirServer>();
    auto request = cap.answerRequest();
    request.initKeys(1).set(0, capnp::Data::Reader(g_key, kKeyBytes));
    request.send().wait(io.waitScope);
    cap = nullptr;
    // Let the last messages (Finish, Release) go out before the connection closes.
    io.provider->getTimer().afterDelay(10 * kj::MILLISECONDS).wait(io.waitScope);
  }
}

TEST(TlsWipeTest, FreedOpenSslBuffersHoldTheKeyOnlyWithoutWiping) {
#if VEIL_WIPE_TLS
  ASSERT_TRUE(WipeOpenSslMemoryOnFree());  // before OpenSSL's first allocation
#endif
  // A directory of this process's own: the test's two builds (wiping and not) run side by side
  // under ctest -j, and one's certificate written over the other's between its writing and its
  // use failed the handshake ("self-signed certificate").
  auto files = tools::WriteSelfSignedCertificate(
      ::testing::TempDir() + "/veil_tls_wipe_" + std::to_string(getpid()), {"localhost"});
  ASSERT_TRUE(files.ok()) << files.status();
#if !VEIL_WIPE_TLS
  EXPECT_FALSE(WipeOpenSslMemoryOnFree());  // OpenSSL has allocated (the certificate)
#endif
  ASSERT_GE(sodium_init(), 0);
  randombytes_buf(g_key, sizeof(g_key));
  veil::testing::ClearWatched();
  veil::testing::WatchSecret(g_key, sizeof(g_key));
  const std::vector<int> leaks = veil::testing::FreedBuffersHolding([&] { OneTlsCall(*files); });
#if VEIL_WIPE_TLS
  EXPECT_EQ(leaks[0], 0);
#else
  EXPECT_GE(leaks[0], 1);
#endif
}

}  // namespace
}  // namespace veil::rpc
