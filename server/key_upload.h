// The `uploadGaloisKeys` call of the protocols whose sessions upload Galois keys (bfv-bag's
// rotation keys, lwe-exppack-s's expansion keys): chunks go into the GaloisKeyCache, and a
// complete upload is parsed on the scheduler's worker by the protocol's KeysWork item (a
// BatchItem made from the GaloisKeyCache::Upload, whose keys() are the parsed keys), then
// installed; a failed parse leaves the session without keys. The last chunk's reply carries the
// keys' resume token, which `resumeGaloisKeys` takes on a later connection (galois_cache.h).
#ifndef VEIL_SERVER_KEY_UPLOAD_H_
#define VEIL_SERVER_KEY_UPLOAD_H_

#include <kj/async.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "server/galois_cache.h"
#include "server/protocol.h"
#include "server/scheduler.h"

namespace veil::server {

// `reject` throws the call's error reply (ServiceBase::Reject); it is called on the loop thread,
// also from the continuation, so it must outlive the call (a service's member). `owner` is the
// connection (BatchScheduler::Submit).
template <typename KeysWork, typename Context, typename Reject>
kj::Promise<void> ServeKeyUpload(Context context, const void* owner, GaloisKeyCache& cache,
                                 GaloisKeyCache::Session session, BatchScheduler& scheduler,
                                 const ServerLimits& limits, uint64_t key_bytes, Reject reject) {
  auto params = context.getParams();
  if (absl::Status s = CheckCallWords(params.totalSize().wordCount, limits); !s.ok()) reject(s);
  auto chunk = params.getChunk();
  const uint64_t offset = params.getOffset();
  auto appended = cache.Append(session, offset, absl::MakeConstSpan(chunk.begin(), chunk.size()));
  if (!appended.ok()) reject(appended.status());
  if (!appended->has_value()) {
    auto results = context.getResults();
    results.setReceivedBytes(offset + chunk.size());
    results.setInstalled(false);
    return kj::READY_NOW;
  }
  context.releaseParams();
  return scheduler.Submit(std::make_unique<KeysWork>(std::move(**appended)), owner)
      .then([&cache, session, key_bytes, reject,
             context](absl::StatusOr<std::unique_ptr<KeysWork>> done) mutable {
        absl::StatusOr<std::vector<uint8_t>> token =
            done.ok() ? cache.Install(session, (*done)->keys()) : done.status();
        if (!token.ok()) {
          cache.Discard(session);
          reject(token.status());
        }
        auto results = context.getResults();
        results.setReceivedBytes(key_bytes);
        results.setInstalled(true);
        results.setResumeToken(capnp::Data::Reader(token->data(), token->size()));
      });
}

// The `resumeGaloisKeys` call: a closed connection's keys installed on this one
// (GaloisKeyCache::Resume), and their next token.
template <typename Context, typename Reject>
kj::Promise<void> ServeKeyResume(Context context, GaloisKeyCache& cache,
                                 GaloisKeyCache::Session session, Reject reject) {
  capnp::Data::Reader token = context.getParams().getToken();
  absl::StatusOr<std::vector<uint8_t>> next =
      cache.Resume(session, absl::MakeConstSpan(token.begin(), token.size()));
  if (!next.ok()) reject(next.status());
  context.getResults().setResumeToken(capnp::Data::Reader(next->data(), next->size()));
  return kj::READY_NOW;
}

}  // namespace veil::server

#endif  // VEIL_SERVER_KEY_UPLOAD_H_
