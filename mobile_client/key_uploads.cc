#include "mobile_client/key_uploads.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "mobile_client/transport.h"

namespace veil::client {

void KeyUploads::Reset(absl::Span<const uint8_t> keys, uint64_t chunk_bytes, int replicas) {
  keys_ = keys;
  chunk_bytes_ = chunk_bytes;
  replicas_ = std::vector<Replica>(replicas);
}

void KeyUploads::Forget(int replica) {
  if (static_cast<size_t>(replica) < replicas_.size()) replicas_[replica].state = State::kNone;
}

kj::Promise<absl::Status> KeyUploads::SendAll(int replica, rpc::VeilServer::Client server,
                                              const std::string& who) {
  const size_t chunks = keys_.size() / chunk_bytes_ + (keys_.size() % chunk_bytes_ != 0);
  auto replies = kj::heapArrayBuilder<kj::Promise<absl::Status>>(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    const uint64_t offset = c * chunk_bytes_;
    const bool last = c + 1 == chunks;
    replies.add(send_(server, offset, keys_.subspan(offset, chunk_bytes_))
                    .then([this, replica, last, who](ChunkReply reply) {
                      if (!last) return absl::OkStatus();
                      if (!reply.installed) {
                        return absl::InternalError(
                            absl::StrCat(who, " did not install the keys after their last chunk"));
                      }
                      replicas_[replica].resume_token = std::move(reply.resume_token);
                      return absl::OkStatus();
                    }));
  }
  return kj::joinPromises(replies.finish()).then([this](kj::Array<absl::Status> results) {
    absl::Status status = FirstError(kj::mv(results));
    if (status.ok()) ++uploads_;
    return status;
  });
}

kj::Promise<absl::Status> KeyUploads::On(int replica, rpc::VeilServer::Client server,
                                         const std::string& who) {
  Replica& r = replicas_[replica];
  if (r.state == State::kInstalled) return absl::OkStatus();
  if (r.state == State::kUploading) {
    KJ_IF_MAYBE (upload, r.upload) {
      return upload->addBranch();
    }
  }
  kj::Promise<absl::Status> keys = nullptr;
  if (r.resume_token.empty()) {
    keys = SendAll(replica, server, who);
  } else {
    // The server's reply replaces the token, or refuses it.
    std::vector<uint8_t> token = std::exchange(r.resume_token, {});
    keys = resume_(server, token)
               .then(
                   [this, replica](std::vector<uint8_t> next) -> kj::Promise<absl::Status> {
                     replicas_[replica].resume_token = std::move(next);
                     ++resumes_;
                     return absl::OkStatus();
                   },
                   [this, replica, server, who,
                    token](kj::Exception&& e) mutable -> kj::Promise<absl::Status> {
                     // A lost connection fails the call over, the token kept for the next one
                     // (the server honours it until the keys answer, so a resume whose reply was
                     // lost is presented again); any reply of the server (no keys under the
                     // token, or an older server without resume) means upload.
                     if (e.getType() == kj::Exception::Type::DISCONNECTED) {
                       replicas_[replica].resume_token = std::move(token);
                       kj::throwFatalException(kj::mv(e));
                     }
                     return SendAll(replica, kj::mv(server), who);
                   });
  }
  auto upload = keys.then(
                        [this, replica](absl::Status status) {
                          replicas_[replica].state = status.ok() ? State::kInstalled : State::kNone;
                          return status;
                        },
                        [this, replica](kj::Exception&& e) -> absl::Status {
                          replicas_[replica].state = State::kNone;
                          kj::throwFatalException(kj::mv(e));
                        })
                    .fork();
  r.state = State::kUploading;
  auto branch = upload.addBranch();
  r.upload = kj::mv(upload);
  return branch;
}

absl::Status KeyUploads::Upload(Transport& transport, const char* what, absl::Time deadline) {
  return transport.Run(
      [&]() -> kj::Promise<absl::Status> {
        auto done = std::make_shared<std::vector<bool>>(1, false);
        auto upload = transport.Call(0, [this, &transport](rpc::VeilServer::Client cap, int r) {
          return On(r, kj::mv(cap), transport.ReplicaName(0, r));
        });
        return transport.WithTimeout(upload.then([done](absl::Status s) {
          (*done)[0] = s.ok();
          return s;
        }),
                                     done, deadline);
      },
      what);
}

}  // namespace veil::client
