// The session keys a single-server client uploads to each replica of its server once per
// connection, before that connection's first query: bfv-bag's Galois keys (BagClient) and
// lwe-exppack-s's expansion keys (LweClient). The server holds them per connection and may evict
// them (its key memory is bounded); the client then forgets that replica's keys and the next call
// uploads them again.
//
// Loop thread only (the transport's), but for Reset before the first call.
#ifndef VEIL_MOBILE_CLIENT_KEY_UPLOADS_H_
#define VEIL_MOBILE_CLIENT_KEY_UPLOADS_H_

#include <kj/async.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "rpc/veil.capnp.h"

namespace veil::client {

class Transport;

// The smallest key chunk a client accepts a server to ask for (a server asking for less would
// make it send millions of calls).
inline constexpr uint64_t kMinKeyChunkBytes = 4096;

class KeyUploads {
 public:
  // Sends the chunk at `offset` through `server` (the protocol's upload call); resolves to whether
  // the server reports the keys installed. Failures are exceptions (the server's error reply).
  using SendChunk = std::function<kj::Promise<bool>(rpc::VeilServer::Client server, uint64_t offset,
                                                    absl::Span<const uint8_t> chunk)>;

  explicit KeyUploads(SendChunk send) : send_(std::move(send)) {}

  // The SendChunk of a protocol whose interface has
  // `uploadGaloisKeys(offset, chunk) -> (receivedBytes, installed)` (rpc::BagServer,
  // rpc::LwePackServer).
  template <typename Interface>
  static SendChunk UploadGaloisKeysOf() {
    return [](rpc::VeilServer::Client server, uint64_t offset, absl::Span<const uint8_t> chunk) {
      auto request = server.castAs<Interface>().uploadGaloisKeysRequest(
          capnp::MessageSize{chunk.size() / 8 + 16, 0});
      request.setOffset(offset);
      request.setChunk(capnp::Data::Reader(chunk.data(), chunk.size()));
      return request.send().then(
          [](capnp::Response<typename Interface::UploadGaloisKeysResults> reply) {
            return reply.getInstalled();
          });
    };
  }

  // The keys (kept by the caller as long as this object) in chunks of chunk_bytes (at least
  // kMinKeyChunkBytes, which the caller checks), for `replicas` replicas, none of which holds
  // them yet.
  void Reset(absl::Span<const uint8_t> keys, uint64_t chunk_bytes, int replicas);
  // `replica` no longer holds the keys (a new connection, or they were evicted: ABORTED).
  void Forget(int replica);
  // Drops every upload in flight (before the transport goes).
  void Clear() { replicas_.clear(); }

  // The keys on `replica` (through `server`, its connection; `who` names it in errors): at once if
  // it holds them, else joining or starting their upload in chunks (pipelined). A failed upload's
  // exception (a lost connection: the call fails over) or error passes through, and the next call
  // tries again.
  kj::Promise<absl::Status> On(int replica, rpc::VeilServer::Client server, const std::string& who);

  // Not on the loop thread: the keys on the replica `transport` picks for its single server (a
  // no-op if it holds them), within the transport's timeout; `what` names the upload in errors.
  // Returns the transport's errors (UNAVAILABLE, DEADLINE_EXCEEDED) and the server's error reply.
  absl::Status Upload(Transport& transport, const char* what);

  // Completed uploads so far (any thread).
  uint64_t uploads() const { return uploads_.load(); }

 private:
  enum class State { kNone, kUploading, kInstalled };
  struct Replica {
    State state = State::kNone;
    kj::Maybe<kj::ForkedPromise<absl::Status>> upload;  // while kUploading (kept after)
  };

  const SendChunk send_;
  absl::Span<const uint8_t> keys_;
  uint64_t chunk_bytes_ = 0;
  std::vector<Replica> replicas_;
  std::atomic<uint64_t> uploads_{0};
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_KEY_UPLOADS_H_
