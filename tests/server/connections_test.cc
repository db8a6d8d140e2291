// The listener's idle rule around calls in flight, with a service that never answers (which no
// real protocol has): a connection waiting for a call is kept past the idle timeout, but a call
// unanswered for ten idle timeouts is taken as stuck and its connection closed; a connection
// without calls is closed after one. And around replies: a client reading a large reply slowly
// (but steadily) is neither closed as idle nor taken for a newcomer at the connection limit.
// Listener and client share one event loop.
#include "server/connections.h"

#include <capnp/rpc-twoparty.h>
#include <kj/async-io.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rpc/veil.capnp.h"

namespace veil::server {
namespace {

// hello never returns; answer returns kReplyBytes at once; every other method is unimplemented.
constexpr size_t kReplyBytes = 24 << 20;
class StuckService final : public rpc::BagServer::Server {
 protected:
  kj::Promise<void> hello(HelloContext) override { return kj::NEVER_DONE; }
  kj::Promise<void> answer(AnswerContext context) override {
    auto data = context.getResults().initAnswer(kReplyBytes);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<kj::byte>(i * 7 + 1);
    return kj::READY_NOW;
  }
};

// A client's stream that reads at most kPiece bytes every kPause: 12.8 MiB/s, so a kReplyBytes
// reply takes about two seconds to read, most of it with the server's write waiting on the client
// (loopback's socket buffers hold a few MiB). Or, with `reads` false, that never reads.
class SlowReader final : public kj::AsyncIoStream {
 public:
  static constexpr size_t kPiece = 128 << 10;
  static constexpr kj::Duration kPause = 10 * kj::MILLISECONDS;
  SlowReader(kj::Own<kj::AsyncIoStream> inner, kj::Timer& timer, bool reads = true)
      : inner_(kj::mv(inner)), timer_(timer), reads_(reads) {}
  kj::Promise<size_t> tryRead(void* buffer, size_t min_bytes, size_t max_bytes) override {
    if (!reads_) return kj::NEVER_DONE;
    return Read(static_cast<kj::byte*>(buffer), min_bytes, max_bytes, 0);
  }
  kj::Promise<void> write(const void* buffer, size_t size) override {
    return inner_->write(buffer, size);
  }
  kj::Promise<void> write(kj::ArrayPtr<const kj::ArrayPtr<const kj::byte>> pieces) override {
    return inner_->write(pieces);
  }
  kj::Promise<void> whenWriteDisconnected() override { return inner_->whenWriteDisconnected(); }
  void shutdownWrite() override { inner_->shutdownWrite(); }

 private:
  kj::Promise<size_t> Read(kj::byte* buffer, size_t min_bytes, size_t max_bytes, size_t done) {
    return timer_.afterDelay(kPause).then([this, buffer, min_bytes, max_bytes, done] {
      return inner_->tryRead(buffer + done, 1, std::min(max_bytes - done, kPiece))
          .then([this, buffer, min_bytes, max_bytes, done](size_t n) -> kj::Promise<size_t> {
            if (n == 0 || done + n >= min_bytes) return done + n;
            return Read(buffer, min_bytes, max_bytes, done + n);
          });
    });
  }

  kj::Own<kj::AsyncIoStream> inner_;
  kj::Timer& timer_;
  bool reads_;
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

  // Sends answer on a connection that reads slowly; `done` is set when the reply has come whole
  // (true) or failed (`why`).
  struct SlowDownload {
    kj::Own<kj::AsyncIoStream> stream;
    kj::Own<capnp::TwoPartyClient> client;
    kj::Promise<void> call = nullptr;
    bool done = false;
    bool whole = false;
    std::string why;
  };
  kj::Own<SlowDownload> StartSlowDownload() {
    limits.max_message_bytes = kReplyBytes;  // replies up to twice that (HardMessageWords)
    auto d = kj::heap<SlowDownload>();
    d->stream = kj::heap<SlowReader>(Connect(), io.provider->getTimer());
    d->client = kj::heap<capnp::TwoPartyClient>(*d->stream);
    SlowDownload* p = d.get();
    d->call = d->client->bootstrap()
                  .castAs<rpc::BagServer>()
                  .answerRequest()
                  .send()
                  .then(
                      [p](auto&& response) {
                        auto data = response.getAnswer();
                        p->whole = data.size() == kReplyBytes && data[0] == 1 &&
                                   data[kReplyBytes - 1] ==
                                       static_cast<kj::byte>((kReplyBytes - 1) * 7 + 1);
                        p->done = true;
                      },
                      [p](kj::Exception&& e) {
                        p->why = e.getDescription().cStr();
                        p->done = true;
                      })
                  .eagerlyEvaluate(nullptr);
    return d;
  }
  uint64_t Closed(const std::string& reason) {
    const auto closed = stats.Metrics().closed_connections;
    return closed.count(reason) ? closed.at(reason) : 0;
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

TEST(ConnectionsTest, AReplyReadSlowlyButSteadilyKeepsItsConnection) {
  Harness h;  // idle timeout 300 ms; the reply takes about two seconds to read
  auto download = h.StartSlowDownload();
  const absl::Time start = absl::Now();
  while (!download->done && absl::Now() - start < absl::Seconds(30)) {
    h.Sleep(absl::Milliseconds(50));
  }
  ASSERT_TRUE(download->done);
  EXPECT_TRUE(download->whole) << download->why;
  EXPECT_GT(absl::Now() - start, absl::Seconds(1)) << "the reply was not read slowly";
  EXPECT_EQ(h.Closed("idle"), 0u);
}

TEST(ConnectionsTest, AReplyNeverReadClosesItsConnectionAsIdle) {
  Harness h;
  h.limits.max_message_bytes = kReplyBytes;
  SlowReader stream(h.Connect(), h.io.provider->getTimer(), /*reads=*/false);
  // The call is written, and nothing is read back: the server's write stalls once the socket
  // buffers are full, and a second later the connection counts as idle.
  capnp::TwoPartyClient client(stream);
  auto call = client.bootstrap().castAs<rpc::BagServer>().answerRequest().send();
  const absl::Time start = absl::Now();
  while (h.Closed("idle") == 0 && absl::Now() - start < absl::Seconds(10)) {
    h.Sleep(absl::Milliseconds(50));
  }
  EXPECT_EQ(h.Closed("idle"), 1u);
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
}

TEST(ConnectionsTest, AReplyBeingReadIsNotTakenForANewcomerAtTheLimit) {
  Harness h;
  h.limits.max_connections = 1;
  h.limits.min_idle_to_evict = absl::Milliseconds(100);
  h.limits.idle_timeout = absl::Seconds(10);  // this test is about the limit alone
  auto download = h.StartSlowDownload();
  h.Sleep(absl::Milliseconds(600));  // the server's write now waits on the client
  ASSERT_FALSE(download->done) << download->why;
  // A newcomer from the same address: nothing idle to take, so it is refused.
  kj::Own<kj::AsyncIoStream> stream = h.Connect();
  capnp::TwoPartyClient newcomer(*stream);
  std::string refusal;
  newcomer.bootstrap()
      .castAs<rpc::VeilServer>()
      .helloRequest()
      .send()
      .then([](auto&&) {}, [&](kj::Exception&& e) { refusal = e.getDescription().cStr(); })
      .wait(h.io.waitScope);
  EXPECT_NE(refusal.find("connection limit"), std::string::npos) << refusal;
  const absl::Time start = absl::Now();
  while (!download->done && absl::Now() - start < absl::Seconds(30)) {
    h.Sleep(absl::Milliseconds(50));
  }
  EXPECT_TRUE(download->whole) << download->why;
  EXPECT_EQ(h.Closed("limit_idle"), 0u);
  EXPECT_EQ(h.Closed("limit_fair_share"), 0u);
  EXPECT_EQ(h.stats.Metrics().refused_connections, 1u);
}

}  // namespace
}  // namespace veil::server
