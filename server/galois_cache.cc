#include "server/galois_cache.h"

#include <sodium.h>

#include <algorithm>
#include <iterator>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::server {

GaloisKeyCache::Hold::~Hold() { cache_->Release(session_); }

GaloisKeyCache::Notify::~Notify() {
  if (cache.observer_) cache.observer_(cache.counts());
}

GaloisKeyCache::GaloisKeyCache(uint64_t max_bytes, uint64_t wire_bytes, uint64_t parsed_bytes,
                               absl::Duration resume_for, std::function<absl::Time()> now)
    : max_bytes_(max_bytes),
      wire_bytes_(wire_bytes),
      parsed_bytes_(parsed_bytes),
      resume_for_(resume_for),
      now_(std::move(now)) {}

namespace {

std::array<uint8_t, 32> HashToken(absl::Span<const uint8_t> token) {
  std::array<uint8_t, 32> hash;
  crypto_generichash(hash.data(), hash.size(), token.data(), token.size(), nullptr, 0);
  return hash;
}

}  // namespace

std::vector<uint8_t> GaloisKeyCache::NewToken(Session session, Entry& entry) {
  std::vector<uint8_t> token(kResumeTokenBytes);
  randombytes_buf(token.data(), token.size());
  entry.token = HashToken(token);
  tokens_[*entry.token] = session;
  return token;
}

void GaloisKeyCache::SpendPresented(Entry& entry) {
  if (entry.presented.has_value()) tokens_.erase(*entry.presented);
  entry.presented.reset();
}

void GaloisKeyCache::Expire() {
  const absl::Time now = now_();
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (Waiting(it->second) && it->second.expires <= now) {
      Drop(it, State::kEmpty);
      ++counts_.expirations;
    }
    it = next;
  }
}

KeyCacheCounts GaloisKeyCache::counts() const {
  KeyCacheCounts c = counts_;
  c.charged_bytes = charged_;
  c.max_bytes = max_bytes_;
  for (const auto& [session, entry] : entries_) {
    c.sessions += entry.state == State::kReady && !entry.closed;
    c.waiting += Waiting(entry);
  }
  return c;
}

void GaloisKeyCache::OnChange(std::function<void(const KeyCacheCounts&)> observer) {
  observer_ = std::move(observer);
  observer_(counts());
}

uint64_t GaloisKeyCache::ParsedBytes(const he::GaloisKeys& keys) {
  uint64_t bytes = 0;
  for (const auto& [element, key] : keys.keys) {
    bytes += (key.b.size() + key.a.size()) * sizeof(uint64_t) +
             (key.b32.size() + key.a32.size()) * sizeof(uint32_t);
  }
  return bytes;
}

GaloisKeyCache::Session GaloisKeyCache::Open() {
  const Session session = next_session_++;
  entries_[session].last_use = ++clock_;
  return session;
}

void GaloisKeyCache::Close(Session session) {
  const Notify notify(*this);
  auto it = entries_.find(session);
  if (it == entries_.end()) return;
  Expire();
  it->second.closed = true;
  // Its keys or upload stay charged to it while an answer or the parse uses them.
  if (it->second.holds == 0) Leave(it);
}

void GaloisKeyCache::Release(Session session) {
  const Notify notify(*this);
  auto it = entries_.find(session);
  if (it == entries_.end()) return;
  if (--it->second.holds == 0 && it->second.closed) Leave(it);
}

void GaloisKeyCache::Leave(Entries::iterator it) {
  Entry& entry = it->second;
  if (entry.state == State::kReady && entry.token.has_value()) {
    entry.expires = now_() + resume_for_;
    entry.last_use = ++clock_;
    return;
  }
  Drop(it, State::kEmpty);
}

void GaloisKeyCache::Drop(Entries::iterator it, State state) {
  Clear(it->second, state);
  if (it->second.closed) entries_.erase(it);
}

void GaloisKeyCache::Clear(Entry& entry, State state) {
  charged_ -= entry.charge;
  entry.charge = 0;
  entry.upload = std::vector<uint8_t>();
  entry.keys.reset();
  if (entry.token.has_value()) tokens_.erase(*entry.token);
  entry.token.reset();
  SpendPresented(entry);
  entry.state = state;
}

bool GaloisKeyCache::Evictable(const Entry& entry) {
  return entry.holds == 0 && entry.charge > 0 &&
         (entry.state == State::kUploading || entry.state == State::kReady);
}

absl::Status GaloisKeyCache::MakeRoom(Session session, uint64_t bytes) {
  Expire();
  if (charged_ + bytes <= max_bytes_) return absl::OkStatus();
  // Nothing is evicted unless enough can be.
  uint64_t evictable = 0;
  for (const auto& [id, entry] : entries_) {
    if (id != session && Evictable(entry)) evictable += entry.charge;
  }
  if (charged_ - evictable + bytes > max_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the server's Galois key memory (", max_bytes_,
                     " bytes, --max_galois_key_bytes) is "
                     "held by sessions whose keys are in use; retry later"));
  }
  // Waiting keys, then uploads in progress, then installed keys, each least recently used first.
  const auto rank = [](const Entry& e) {
    return Waiting(e) ? 0 : e.state == State::kReady ? 2 : 1;
  };
  while (charged_ + bytes > max_bytes_) {
    auto oldest = entries_.end();
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      const Entry& e = it->second;
      if (it->first == session || !Evictable(e)) continue;
      if (oldest == entries_.end() || rank(e) < rank(oldest->second) ||
          (rank(e) == rank(oldest->second) && e.last_use < oldest->second.last_use)) {
        oldest = it;
      }
    }
    Drop(oldest, State::kEvicted);  // one exists: the evictable charge covers the need
    ++counts_.evictions;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<GaloisKeyCache::Upload>> GaloisKeyCache::Append(
    Session session, uint64_t offset, absl::Span<const uint8_t> chunk) {
  const Notify notify(*this);
  Entry& entry = entries_.at(session);
  if (chunk.empty()) return absl::InvalidArgumentError("empty Galois key chunk");
  if (entry.state == State::kParsing || (offset == 0 && entry.holds > 0)) {
    return absl::FailedPreconditionError(
        "this connection's Galois keys are in use (an answer, or the validation of its previous "
        "upload, is in flight); wait for its reply before uploading again");
  }
  entry.last_use = ++clock_;
  if (offset == 0) {
    Clear(entry, State::kEmpty);
    if (session_bytes() > max_bytes_) {
      return absl::ResourceExhaustedError(
          absl::StrCat("one session's Galois keys need ", session_bytes(),
                       " bytes of server memory; this server holds at most ", max_bytes_,
                       " (--max_galois_key_bytes)"));
    }
    entry.state = State::kUploading;
  } else if (entry.state == State::kEvicted) {
    return absl::AbortedError(
        "this connection's Galois key upload was evicted to make room for another session's; "
        "start again at offset 0");
  } else if (entry.state != State::kUploading) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a Galois key chunk at offset ", offset, " without an upload in progress (start at 0)"));
  }
  if (offset != entry.upload.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Galois key chunk at offset ", offset, "; the next one starts at ", entry.upload.size()));
  }
  if (chunk.size() > wire_bytes_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("Galois key chunk of ", chunk.size(),
                                                   " bytes at offset ", offset,
                                                   " runs past the keys' ", wire_bytes_, " bytes"));
  }
  // The bytes held: the buffer's growth, and with the last chunk the parsed keys to come.
  const uint64_t needed = offset + chunk.size(), held = entry.upload.capacity();
  const uint64_t capacity =
      needed > held ? std::min(wire_bytes_, std::max(needed, 2 * held)) : held;
  const uint64_t more = (capacity - held) + (needed == wire_bytes_ ? parsed_bytes_ : 0);
  if (more > 0) {
    if (absl::Status room = MakeRoom(session, more); !room.ok()) return room;
    entry.charge += more;
    charged_ += more;
  }
  entry.upload.reserve(capacity);
  entry.upload.insert(entry.upload.end(), chunk.begin(), chunk.end());
  if (entry.upload.size() < wire_bytes_) return std::optional<Upload>();
  entry.state = State::kParsing;
  ++entry.holds;
  Upload upload{std::move(entry.upload), std::make_unique<Hold>(this, session)};
  entry.upload = std::vector<uint8_t>();
  return std::optional<Upload>(std::move(upload));
}

absl::StatusOr<std::vector<uint8_t>> GaloisKeyCache::Install(
    Session session, std::shared_ptr<const he::GaloisKeys> keys) {
  const Notify notify(*this);
  auto it = entries_.find(session);
  if (it == entries_.end() || it->second.closed) {
    return absl::CancelledError("the connection closed while its Galois keys were validated");
  }
  Entry& entry = it->second;
  Clear(entry, State::kReady);
  entry.charge = ParsedBytes(*keys);
  charged_ += entry.charge;
  entry.keys = std::move(keys);
  entry.last_use = ++clock_;
  ++counts_.installs;
  // Keys parsed larger than the room reserved for them push idle sessions out, not the bound.
  if (charged_ > max_bytes_) MakeRoom(session, 0).IgnoreError();
  if (resume_for_ <= absl::ZeroDuration()) return std::vector<uint8_t>();
  return NewToken(session, entry);
}

absl::StatusOr<std::vector<uint8_t>> GaloisKeyCache::Resume(Session session,
                                                            absl::Span<const uint8_t> token) {
  const Notify notify(*this);
  Entry& entry = entries_.at(session);
  if (token.size() != kResumeTokenBytes) {
    return absl::InvalidArgumentError(absl::StrCat("a resume token of ", token.size(),
                                                   " bytes (they are ", kResumeTokenBytes, ")"));
  }
  if (entry.state == State::kUploading || entry.state == State::kParsing ||
      entry.state == State::kReady || entry.holds > 0) {
    return absl::FailedPreconditionError(
        "this connection already has Galois keys or an upload of them; resume only on a "
        "connection without");
  }
  Expire();
  // Looked up by the token's hash: the map's comparisons see no byte of a token.
  const TokenHash hash = HashToken(token);
  auto found = tokens_.find(hash);
  if (found == tokens_.end() || entries_.at(found->second).holds > 0) {
    ++counts_.refused_resumes;
    return absl::NotFoundError(absl::StrCat(
        "no Galois keys are held under this resume token (a closed connection's keys wait ",
        absl::FormatDuration(resume_for_),
        ", fewer when the key memory is needed; keys an answer is using do not move; a token "
        "is spent once the keys it moved have answered or its successor was presented): upload "
        "them"));
  }
  // A closed connection's keys, or an open one's: the client has moved on (a new network)
  // before the server noticed, and that connection's next answer gets ABORTED. The old entry's
  // tokens go with it (one of them is `token`, honoured again below).
  const auto old = entries_.find(found->second);
  std::shared_ptr<const he::GaloisKeys> keys = std::move(old->second.keys);
  const uint64_t charge = std::exchange(old->second.charge, 0);
  Drop(old, State::kEvicted);
  Clear(entry, State::kReady);
  entry.keys = std::move(keys);
  entry.charge = charge;  // still counted in charged_: it moves
  entry.last_use = ++clock_;
  ++counts_.resumes;
  std::vector<uint8_t> next = NewToken(session, entry);
  // Until the client shows it got `next`, its reply may have been lost with the connection.
  entry.presented = hash;
  tokens_[hash] = session;
  return next;
}

void GaloisKeyCache::Discard(Session session) {
  const Notify notify(*this);
  auto it = entries_.find(session);
  if (it != entries_.end()) Clear(it->second, State::kEmpty);
}

absl::StatusOr<GaloisKeyCache::Keys> GaloisKeyCache::Acquire(Session session) {
  Entry& entry = entries_.at(session);
  switch (entry.state) {
    case State::kReady:
      break;
    case State::kEvicted:
      return absl::AbortedError(
          "this connection's Galois keys were evicted to make room for another session's (the "
          "server's key memory is bounded); upload them again");
    case State::kUploading:
    case State::kParsing:
      return absl::FailedPreconditionError(
          absl::StrCat("this connection's Galois keys are not installed yet (",
                       entry.state == State::kParsing ? wire_bytes_ : entry.upload.size(), " of ",
                       wire_bytes_, " bytes received); finish uploadGaloisKeys first"));
    case State::kEmpty:
      return absl::FailedPreconditionError(
          "no Galois keys on this connection: upload them (uploadGaloisKeys) before answer");
  }
  entry.last_use = ++clock_;
  ++entry.holds;
  SpendPresented(entry);  // the clients send answers once the resume's reply has come
  return Keys{entry.keys, std::make_unique<Hold>(this, session)};
}

}  // namespace veil::server
