// The listener's idle rule around calls in flight, with a service that never answers (which no
// real protocol has): a connection waiting for a call is kept past the idle timeout, but a call
// unanswered for ten idle timeouts is taken as stuck and its connection closed; a connection
// without calls is closed after one. Listener and client share one event loop.
#include "server/connections.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rpc/veil.capnp.h"

namespace veil::server {
namespace {

// hello never returns; every other method is unimplemented.
class StuckService final : public rpc::BagServer::Server {
 protected:
  kj::Promise<void> hello(HelloContext) override { return kj::NEVER_DONE; }
};

struct Harness {
  Harness() : io(kj::setupAsyncIo()) {
    limits.idle_timeout = absl::Milliseconds(300);
    receiver = io.provider->getNetwork().parseAddress("127.0.0.1", 0).wait(io.waitScope)->listen();
    listener = kj::heap<Listener>(
        *receiver, nullptr, io.provider->getTimer(), io.provider->getNetwork(),
        [](const Peer&) -> kj::Own<capnp::Capability::Server> { return kj::heap<StuckService>(); },
        limits, stats);
    running = listener->Run().eagerlyEvaluate([](kj::Exception&& e) {
      ADD_FAILURE() << "the listener stopped: " << e.getDescription().cStr();
    });
  }
  kj::Own<kj::AsyncIoStream> Connect() {
    return io.provider->getNetwork()
        .parseAddress("127.0.0.1", receiver->getPort())
        .wait(io.waitScope)
        ->connect()
        .wait(io.waitScope);
  }
  // Waits `d` on the loop, so that the listener runs meanwhile.
  void Sleep(absl::Duration d) {
    io.provider->getTimer()
        .afterDelay(absl::ToInt64Milliseconds(d) * kj::MILLISECONDS)
        .wait(io.waitScope);
  }

  kj::AsyncIoContext io;
  ServerLimits limits;
  ServerStats stats;
  kj::Own<kj::ConnectionReceiver> receiver;
  kj::Own<Listener> listener;
  kj::Promise<void> running = nullptr;
};

TEST(ConnectionsTest, ACallInFlightKeepsItsConnectionForTenIdleTimeoutsAtMost) {
  Harness h;
  kj::Own<kj::AsyncIoStream> stream = h.Connect();
  capnp::TwoPartyClient client(*stream);
  auto call = client.bootstrap().castAs<rpc::BagServer>().helloRequest().send();
  bool ended = false;
  std::string why;
  auto watched = call.then([&](auto&&) { ended = true; },
                           [&](kj::Exception&& e) {
                             ended = true;
                             why = e.getDescription().cStr();
                           })
                     .eagerlyEvaluate(nullptr);
  const absl::Time start = absl::Now();
  // Six idle timeouts: kept, the server is still working on the call.
  h.Sleep(absl::Milliseconds(1800));
  EXPECT_FALSE(ended) << "closed after " << absl::Now() - start << ": " << why;
  // Past ten (3 s, swept every 250 ms): closed as stuck, the call failing with it.
  while (!ended && absl::Now() - start < absl::Seconds(10)) h.Sleep(absl::Milliseconds(100));
  ASSERT_TRUE(ended);
  EXPECT_GE(absl::Now() - start, absl::Seconds(3));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(h.stats.Metrics().closed_connections.at("idle"), 1u);
}

TEST(ConnectionsTest, AConnectionWithoutCallsIsClosedAfterOneIdleTimeout) {
  Harness h;
  kj::Own<kj::AsyncIoStream> stream = h.Connect();
  const absl::Time start = absl::Now();
  // Nothing sent: the stream ends when the server closes it.
  char byte;
  auto read = stream->tryRead(&byte, 1, 1).eagerlyEvaluate(nullptr);
  EXPECT_EQ(read.wait(h.io.waitScope), 0u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

}  // namespace
}  // namespace veil::server
