// The Galois keys of protocol bfv-bag's sessions (one per connection), held within a server-wide
// memory bound.
//
// A session uploads its keys in chunks (rpc/veil.capnp, BagServer.uploadGaloisKeys) of exactly
// `wire_bytes` bytes in all; the parsed keys take `parsed_bytes` (about 3 x wire_bytes: the seeded
// halves are expanded and the residues unpacked). Charging: an upload is charged the bytes it
// holds as they arrive (its buffer's capacity, which at most doubles and stops at wire_bytes),
// plus parsed_bytes from its last chunk on (the peak while it is parsed); installed keys are
// charged parsed_bytes. So a client must send bytes to take memory: a few bytes at offset 0 no
// longer claim a whole session's room.
//
// Eviction rule: when a charge would exceed max_bytes, idle sessions lose their upload or keys
// until it fits: closed connections' keys waiting for Resume first, then uploads in progress,
// then installed keys with no answer in flight, each kind least recently used first. A session
// whose keys are in use (an answer queued or running, or its upload being parsed) is never evicted.
// If evicting every idle entry would not make room the charge fails with RESOURCE_EXHAUSTED and
// nothing is evicted (the chunk is not taken: it may be sent again). An evicted session's next
// answer or chunk gets ABORTED (upload again).
//
// Resumption: installed keys come with a resume token (16 random bytes; the cache keeps only
// their hash). When the connection closes (and the last answer using its keys is done) its keys
// stay, charged and idle, for resume_for; a new connection that presents the token (Resume)
// takes them over instead of uploading them again, and gets a new token. The presented token is
// honoured beside the new one until the client shows it has the new one: its connection's first
// answer with the keys, or the new token presented. So a resume whose reply is lost (the
// connection broke) can be presented again on the next connection instead of costing an upload,
// and a token whose keys went on serving answers is spent. Those kept keys are evicted first,
// least recently used first, and dropped once resume_for has passed. A token presented while its
// connection is still open (a phone on a new network before the server noticed the old connection
// die) moves the keys from it unless an answer is using them; that connection's next answer gets
// ABORTED.
//
// Event-loop thread only. A Hold keeps a session's keys (or its upload's charge) alive while the
// worker uses them; a session closed meanwhile is released when its last Hold goes. An observer
// (OnChange) sees the counts after each change, for the metrics endpoint (server/metrics.h).
#ifndef VEIL_SERVER_GALOIS_CACHE_H_
#define VEIL_SERVER_GALOIS_CACHE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "server/stats.h"

namespace veil::server {

class GaloisKeyCache {
 public:
  using Session = uint64_t;

  // Keeps a session's entry (keys in use, or an upload being parsed) from eviction and release.
  class Hold {
   public:
    Hold(GaloisKeyCache* cache, Session session) : cache_(cache), session_(session) {}
    ~Hold();
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;
    Session session() const { return session_; }

   private:
    GaloisKeyCache* cache_;
    Session session_;
  };

  static constexpr size_t kResumeTokenBytes = 16;

  // wire_bytes and parsed_bytes: one session's keys, serialized and parsed. resume_for: how long
  // a closed connection's keys wait for Resume (zero: they go with the connection, and Install
  // issues no token); `now` is the clock that measures it.
  GaloisKeyCache(
      uint64_t max_bytes, uint64_t wire_bytes, uint64_t parsed_bytes,
      absl::Duration resume_for = absl::ZeroDuration(),
      std::function<absl::Time()> now = [] { return absl::Now(); });
  GaloisKeyCache(const GaloisKeyCache&) = delete;
  GaloisKeyCache& operator=(const GaloisKeyCache&) = delete;

  uint64_t session_bytes() const { return wire_bytes_ + parsed_bytes_; }

  Session Open();
  // The connection is gone: now, or when its last Hold goes, its installed keys wait for Resume
  // (if resume_for > 0) and the rest of its charge is released.
  void Close(Session session);

  // A complete upload, ready to parse, and the Hold that keeps its charge while it is parsed.
  struct Upload {
    std::vector<uint8_t> bytes;
    std::unique_ptr<Hold> hold;
  };
  // Adds `chunk` at `offset`, charging its bytes (and the parsed keys' with the last chunk),
  // evicting idle sessions. Offset 0 starts over: the session's keys or upload are dropped first.
  // Returns the whole upload when this chunk completes it (the session is then being parsed until
  // Install or Discard), else nullopt.
  // Returns INVALID_ARGUMENT for an empty chunk, an offset other than the bytes received so far
  // or a chunk past wire_bytes; FAILED_PRECONDITION while the previous upload is being parsed,
  // for offset 0 while an answer uses the keys, or for a chunk after offset 0 without an upload
  // in progress (ABORTED if it was evicted);
  // RESOURCE_EXHAUSTED if one session is larger than the bound or no room can be made.
  absl::StatusOr<std::optional<Upload>> Append(Session session, uint64_t offset,
                                               absl::Span<const uint8_t> chunk);
  // After a successful parse: the session's keys (charged at their actual size) and their resume
  // token (empty if resume_for is zero). Returns CANCELLED if the session was closed meanwhile.
  absl::StatusOr<std::vector<uint8_t>> Install(Session session,
                                               std::shared_ptr<const he::GaloisKeys> keys);
  // The keys held under `token` (a closed connection's, or an open one's that no answer uses),
  // installed on `session` (which has neither keys nor an upload), and their next token; `token`
  // stays good for them until the session's first Acquire or the next token's Resume, and every
  // older token is spent. Returns NOT_FOUND if no keys are held under it (never issued, expired,
  // evicted, spent, or in use: upload them), INVALID_ARGUMENT for a token of another size and
  // FAILED_PRECONDITION if the session has keys or an upload.
  absl::StatusOr<std::vector<uint8_t>> Resume(Session session, absl::Span<const uint8_t> token);
  // After a failed parse: the session has no keys.
  void Discard(Session session);

  struct Keys {
    std::shared_ptr<const he::GaloisKeys> keys;
    std::unique_ptr<Hold> hold;  // the keys are not evicted while it lives
  };
  // The session's keys for one answer (the token that resumed them is spent). Returns
  // FAILED_PRECONDITION if none were uploaded or the upload is incomplete, ABORTED if they were
  // evicted.
  absl::StatusOr<Keys> Acquire(Session session);

  uint64_t charged_bytes() const { return charged_; }
  uint64_t evictions() const { return counts_.evictions; }
  // Closed connections' keys waiting for Resume now.
  size_t waiting() const { return counts().waiting; }
  KeyCacheCounts counts() const;
  // `observer` gets counts() after every call that may change them (Expire runs within calls, so
  // keys past their time count as waiting until the next one).
  void OnChange(std::function<void(const KeyCacheCounts&)> observer);

  // The memory of parsed keys (what Install charges).
  static uint64_t ParsedBytes(const he::GaloisKeys& keys);

 private:
  using TokenHash = std::array<uint8_t, 32>;  // BLAKE2b-256 of a token
  enum class State { kEmpty, kUploading, kParsing, kReady, kEvicted };
  struct Entry {
    State state = State::kEmpty;
    std::vector<uint8_t> upload;                 // kUploading: the bytes so far
    std::shared_ptr<const he::GaloisKeys> keys;  // kReady
    std::optional<TokenHash> token;              // kReady, with resume_for > 0
    std::optional<TokenHash> presented;          // kReady: the token Resume took, until spent
    uint64_t charge = 0;
    uint64_t last_use = 0;
    int holds = 0;
    bool closed = false;
    absl::Time expires = absl::InfiniteFuture();  // waiting: when its keys go
  };
  using Entries = std::map<Session, Entry>;

  // A closed connection's entry kept only for its keys' Resume.
  static bool Waiting(const Entry& entry) {
    return entry.closed && entry.holds == 0 && entry.state == State::kReady;
  }
  void Release(Session session);
  // A closed session with no holds goes, or waits with its installed keys (if they have a token)
  // for Resume until resume_for has passed.
  void Leave(Entries::iterator it);
  // Drops the entry and its charge: erased if its connection is closed, else left `state`.
  void Drop(Entries::iterator it, State state);
  // Idle and charged: an upload in progress or installed keys with no hold (waiting ones too).
  static bool Evictable(const Entry& entry);
  // Drops whatever the entry holds and its charge (state becomes `state`).
  void Clear(Entry& entry, State state);
  // Evicts idle entries other than `session`'s (waiting keys first) until `bytes` more fit.
  // RESOURCE_EXHAUSTED if not.
  absl::Status MakeRoom(Session session, uint64_t bytes);
  // Drops the waiting keys whose time has passed.
  void Expire();
  // A fresh token for the keys of `session`'s entry (its hash kept in the entry and tokens_).
  std::vector<uint8_t> NewToken(Session session, Entry& entry);
  // The token Resume took no longer finds the entry's keys.
  void SpendPresented(Entry& entry);
  // Tells the observer, when it goes out of scope (every return path of a changing call).
  struct Notify {
    explicit Notify(const GaloisKeyCache& cache) : cache(cache) {}
    ~Notify();
    const GaloisKeyCache& cache;
  };

  const uint64_t max_bytes_;
  const uint64_t wire_bytes_;
  const uint64_t parsed_bytes_;
  const absl::Duration resume_for_;
  const std::function<absl::Time()> now_;
  Entries entries_;
  std::map<TokenHash, Session> tokens_;  // the tokens of installed keys, to their session
  Session next_session_ = 1;
  uint64_t clock_ = 0;
  uint64_t charged_ = 0;
  KeyCacheCounts counts_;  // the counters since the start (the gauges are computed)
  std::function<void(const KeyCacheCounts&)> observer_;
};

}  // namespace veil::server

#endif  // VEIL_SERVER_GALOIS_CACHE_H_
