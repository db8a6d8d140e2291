#include "rpc/wiping_message_stream.h"

#include <kj/function.h>
#include <sodium.h>

#include <utility>

namespace veil::rpc {
namespace {

// The segments of a message are the memory capnp owns for it (a MallocMessageBuilder's segments
// when writing, the reader's own buffer when reading), so they are written here through a cast.
void WipeSegments(kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  for (const kj::ArrayPtr<const capnp::word>& segment : segments) {
    sodium_memzero(const_cast<capnp::word*>(segment.begin()), segment.size() * sizeof(capnp::word));
  }
}

// capnp's stream reader refuses messages of more segments than this.
constexpr uint kMaxSegments = 512;

// A message read from the wire that wipes its segments when released. The segment count is known
// only to the inner reader, which returns an empty segment past the last one (and a peer may send
// empty segments between others, so all are looked at).
class WipingReader final : public capnp::MessageReader {
 public:
  WipingReader(kj::Own<capnp::MessageReader> inner, const capnp::ReaderOptions& options)
      : capnp::MessageReader(options), inner_(kj::mv(inner)) {}
  ~WipingReader() noexcept(false) override {
    for (uint id = 0; id < kMaxSegments; ++id) {
      const kj::ArrayPtr<const capnp::word> segment = inner_->getSegment(id);
      WipeSegments(kj::arrayPtr(&segment, 1));
    }
  }

  kj::ArrayPtr<const capnp::word> getSegment(uint id) override { return inner_->getSegment(id); }

 private:
  kj::Own<capnp::MessageReader> inner_;
};

}  // namespace

kj::Promise<kj::Maybe<capnp::MessageReaderAndFds>> WipingMessageStream::tryReadMessage(
    kj::ArrayPtr<kj::AutoCloseFd> fd_space, capnp::ReaderOptions options,
    kj::ArrayPtr<capnp::word> scratch_space) {
  return inner_.tryReadMessage(fd_space, options, scratch_space)
      .then([options](kj::Maybe<capnp::MessageReaderAndFds>&& read)
                -> kj::Maybe<capnp::MessageReaderAndFds> {
        KJ_IF_MAYBE (message, read) {
          message->reader = kj::heap<WipingReader>(kj::mv(message->reader), options);
        }
        return kj::mv(read);
      });
}

kj::Promise<void> WipingMessageStream::writeMessage(
    kj::ArrayPtr<const int> fds, kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>> segments) {
  return inner_.writeMessage(fds, segments).attach(kj::defer([segments]() {
    WipeSegments(segments);
  }));
}

kj::Promise<void> WipingMessageStream::writeMessages(
    kj::ArrayPtr<kj::ArrayPtr<const kj::ArrayPtr<const capnp::word>>> messages) {
  return inner_.writeMessages(messages).attach(kj::defer([messages]() {
    for (const auto& segments : messages) WipeSegments(segments);
  }));
}

WipingTwoPartyClient::WipingTwoPartyClient(kj::AsyncIoStream& stream)
    : messages_(stream),
      network_(messages_, capnp::rpc::twoparty::Side::CLIENT),
      rpc_(capnp::makeRpcClient(network_)) {}

capnp::Capability::Client WipingTwoPartyClient::Bootstrap() {
  capnp::MallocMessageBuilder message(4);
  auto vat = message.getRoot<capnp::rpc::twoparty::VatId>();
  vat.setSide(capnp::rpc::twoparty::Side::SERVER);
  return rpc_.bootstrap(vat);
}

}  // namespace veil::rpc
