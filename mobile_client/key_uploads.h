// The session keys a single-server client uploads to each replica of its server once per
// connection, before that connection's first query: bfv-bag's Galois keys (BagClient) and the
// packed LWE protocols' expansion keys (LweClient). The server holds them per connection and may
// evict them (its key memory is bounded); the client then forgets that replica's keys and the next
// call uploads them again. When a connection closes (the server's idle timeout, a lost network)
// the server keeps its keys a while: the upload's reply carries a resume token, and the replica's
// next connection presents it (resumeGaloisKeys) instead of sending the keys again, uploading
// only if the server no longer holds them.
//
// Loop thread only (the transport's), but for Reset before the first call.
#ifndef VEIL_MOBILE_CLIENT_KEY_UPLOADS_H_
#define VEIL_MOBILE_CLIENT_KEY_UPLOADS_H_

#include <kj/async.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
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
  // What the server replied to a chunk: whether the keys are installed, and (with the last
  // chunk) their resume token, empty where the server keeps none.
  struct ChunkReply {
    bool installed = false;
    std::vector<uint8_t> resume_token;
  };
  // Sends the chunk at `offset` through `server` (the protocol's upload call). Failures are
  // exceptions (the server's error reply).
  using SendChunk = std::function<kj::Promise<ChunkReply>(
      rpc::VeilServer::Client server, uint64_t offset, absl::Span<const uint8_t> chunk)>;
  // Presents a resume token through `server`; resolves to the next token. Failures are
  // exceptions (the server's error reply: NOT_FOUND if it holds no keys under the token).
  using SendResume = std::function<kj::Promise<std::vector<uint8_t>>(
      rpc::VeilServer::Client server, absl::Span<const uint8_t> token)>;

  KeyUploads(SendChunk send, SendResume resume)
      : send_(std::move(send)), resume_(std::move(resume)) {}

  // The uploads of a protocol whose interface has `uploadGaloisKeys(offset, chunk) ->
  // (receivedBytes, installed, resumeToken)` and `resumeGaloisKeys(token) -> (resumeToken)`
  // (rpc::BagServer, rpc::LwePackServer).
  template <typename Interface>
  static std::unique_ptr<KeyUploads> Of() {
    SendChunk send = [](rpc::VeilServer::Client server, uint64_t offset,
                        absl::Span<const uint8_t> chunk) {
      auto request = server.castAs<Interface>().uploadGaloisKeysRequest(
          capnp::MessageSize{chunk.size() / 8 + 16, 0});
      request.setOffset(offset);
      request.setChunk(capnp::Data::Reader(chunk.data(), chunk.size()));
      return request.send().then([](capnp::Response<typename Interface::UploadGaloisKeysResults>
                                        reply) {
        capnp::Data::Reader token = reply.getResumeToken();
        return ChunkReply{reply.getInstalled(), std::vector<uint8_t>(token.begin(), token.end())};
      });
    };
    SendResume resume = [](rpc::VeilServer::Client server, absl::Span<const uint8_t> token) {
      auto request = server.castAs<Interface>().resumeGaloisKeysRequest();
      request.setToken(capnp::Data::Reader(token.data(), token.size()));
      return request.send().then(
          [](capnp::Response<typename Interface::ResumeGaloisKeysResults> reply) {
            capnp::Data::Reader next = reply.getResumeToken();
            return std::vector<uint8_t>(next.begin(), next.end());
          });
    };
    return std::make_unique<KeyUploads>(std::move(send), std::move(resume));
  }

  // The keys (kept by the caller as long as this object) in chunks of chunk_bytes (at least
  // kMinKeyChunkBytes, which the caller checks), for `replicas` replicas, none of which holds
  // them yet.
  void Reset(absl::Span<const uint8_t> keys, uint64_t chunk_bytes, int replicas);
  // `replica`'s connection no longer holds the keys (a new connection: its next call resumes
  // them, or they were evicted: ABORTED).
  void Forget(int replica);
  // Drops every upload in flight (before the transport goes).
  void Clear() { replicas_.clear(); }

  // The keys on `replica` (through `server`, its connection; `who` names it in errors): at once if
  // it holds them, else joining or starting their resume (with the replica's last token) or
  // upload in chunks (pipelined); a refused resume falls back to the upload. A failed upload's
  // exception (a lost connection: the call fails over) or error passes through, and the next call
  // tries again.
  kj::Promise<absl::Status> On(int replica, rpc::VeilServer::Client server, const std::string& who);

  // Not on the loop thread: the keys on the replica `transport` picks for its single server (a
  // no-op if it holds them), by `deadline` (default: the transport's timeout from now; a lookup
  // passes its own, so that an upload after an eviction does not extend it); `what` names the
  // upload in errors. Returns the transport's errors (UNAVAILABLE, DEADLINE_EXCEEDED) and the
  // server's error reply.
  absl::Status Upload(Transport& transport, const char* what,
                      absl::Time deadline = absl::InfiniteFuture());

  // Completed uploads and resumes so far (any thread).
  uint64_t uploads() const { return uploads_.load(); }
  uint64_t resumes() const { return resumes_.load(); }

 private:
  enum class State { kNone, kUploading, kInstalled };
  struct Replica {
    State state = State::kNone;
    kj::Maybe<kj::ForkedPromise<absl::Status>> upload;  // while kUploading (kept after)
    std::vector<uint8_t> resume_token;                  // of the keys it last held
  };

  // The keys in chunks through `server`, the replica's token taken from the last chunk's reply.
  kj::Promise<absl::Status> SendAll(int replica, rpc::VeilServer::Client server,
                                    const std::string& who);

  const SendChunk send_;
  const SendResume resume_;
  absl::Span<const uint8_t> keys_;
  uint64_t chunk_bytes_ = 0;
  std::vector<Replica> replicas_;
  std::atomic<uint64_t> uploads_{0};
  std::atomic<uint64_t> resumes_{0};
};

}  // namespace veil::client

#endif  // VEIL_MOBILE_CLIENT_KEY_UPLOADS_H_
