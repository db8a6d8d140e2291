// A Cap'n Proto message stream whose message buffers are wiped on release, so that the DPF keys a
// client sends and a server receives, and the answer shares coming back, do not outlive their
// message in freed heap memory. Both ends of every connection that carries keys or shares use it:
// the client's transport (mobile_client/transport.cc) and the server's connections
// (server/connections.cc) build their TwoPartyVatNetwork on it.
//
// Covered: every segment of every message read (wiped when the RPC system releases the message:
// the server once a call's parameters are released, the client once a reply has been handled) and
// of every message written (wiped once it has been handed to the socket or TLS, before capnp frees
// its MallocMessageBuilder: rpc-twoparty attaches the message to the write's promise, which it
// drops only after the promise returned here). The cost is one memset per message byte.
//
// Not covered: a message capnp builds but never writes (the connection was already shut down),
// the segment table (sizes only), the kernel's socket buffers, and TLS record buffers inside
// OpenSSL (kj::TlsContext does not expose the SSL_CTX to set SSL_OP_CLEANSE_PLAINTEXT).
#ifndef VEIL_RPC_WIPING_MESSAGE_STREAM_H_
#define VEIL_RPC_WIPING_MESSAGE_STREAM_H_

#include <capnp/rpc-twoparty.h>
#include <capnp/serialize-async.h>
#include <kj/async-io.h>

namespace veil::rpc {

class WipingMessageStream final : public capnp::MessageStream {
 public:
  // `stream` must outlive this object.
  explicit WipingMessageStream(kj::AsyncIoStream& stream) : inner_(stream) {}

  // The reader returned wipes every segment of the message when it is destroyed.
  kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> tryReadMessage(
      kj::ArrayPtr<kj::AutoCloseFd> fd_space, capnp::ReaderOptions options,
      kj::ArrayPtr<capnp::word> scratch_space) override;
  // The segments are wiped once the returned promise is done with them (resolved, failed or
  // dropped); the caller keeps them alive until then, as MessageStream requires.
  kj::Promise<void> writeMessage(
      kj::ArrayPtr<const int> fds,
      kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) override;
  kj::Promise<void> writeMessages(
      kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) override;
  kj::Maybe<int> getSendBufferSize() override { return inner_.getSendBufferSize(); }
  kj::Promise<void> end() override { return inner_.end(); }

 private:
  capnp::AsyncIoMessageStream inner_;
};

// capnp::TwoPartyClient, over a WipingMessageStream: the client side of a connection.
class WipingTwoPartyClient {
 public:
  // `stream` must outlive this object.
  explicit WipingTwoPartyClient(kj::AsyncIoStream& stream);
  WipingTwoPartyClient(const WipingTwoPartyClient&) = delete;
  WipingTwoPartyClient& operator=(const WipingTwoPartyClient&) = delete;

  // The server's bootstrap capability.
  capnp::Capability::Client Bootstrap();

 private:
  WipingMessageStream messages_;
  capnp::TwoPartyVatNetwork network_;
  capnp::RpcSystem<capnp::rpc::twoparty::VatId> rpc_;
};

}  // namespace veil::rpc

#endif  // VEIL_RPC_WIPING_MESSAGE_STREAM_H_
