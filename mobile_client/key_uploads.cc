#include "mobile_client/key_uploads.h"

#include <algorithm>
#include <memory>

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

kj::Promise<absl::Status> KeyUploads::On(int replica, rpc::VeilServer::Client server,
                                         const std::string& who) {
  Replica& r = replicas_[replica];
  if (r.state == State::kInstalled) return absl::OkStatus();
  if (r.state == State::kUploading) {
    KJ_IF_MAYBE (upload, r.upload) {
      return upload->addBranch();
    }
  }
  const size_t chunks = keys_.size() / chunk_bytes_ + (keys_.size() % chunk_bytes_ != 0);
  auto replies = kj::heapArrayBuilder<kj::Promise<absl::Status>>(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    const uint64_t offset = c * chunk_bytes_;
    const bool last = c + 1 == chunks;
    replies.add(send_(server, offset, keys_.subspan(offset, chunk_bytes_))
                    .then([last, who](bool installed) {
                      if (last && !installed) {
                        return absl::InternalError(
                            absl::StrCat(who, " did not install the keys after their last chunk"));
                      }
                      return absl::OkStatus();
                    }));
  }
  auto upload = kj::joinPromises(replies.finish())
                    .then(
                        [this, replica](kj::Array<absl::Status> results) {
                          absl::Status status = FirstError(kj::mv(results));
                          replicas_[replica].state = status.ok() ? State::kInstalled : State::kNone;
                          if (status.ok()) ++uploads_;
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

absl::Status KeyUploads::Upload(Transport& transport, const char* what) {
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
                                     done);
      },
      what);
}

}  // namespace veil::client
