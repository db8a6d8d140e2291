// Fuzz target for what bfv-bag clients send before any parsing: the Galois key uploads
// (BagServer.uploadGaloisKeys: offset and chunk) and answers, as the server's GaloisKeyCache
// (server/galois_cache.h) admits them. Each input is a sequence of operations by up to four
// sessions (open, close, upload a chunk at an offset, finish or fail the parse, acquire keys for
// an answer, finish answers, resume with a token seen earlier or a made-up one, let time pass);
// the target keeps a model of what each session uploaded and of every token.
// Invariants: the memory charged never exceeds the bound; every refusal has a documented code; a
// completed upload is exactly the chunks the session sent since offset 0; keys are acquired only
// after an install and are the installed ones; a resume succeeds only with an issued token not
// yet spent (by an answer with the keys it moved, or by a resume with a later token of theirs);
// when every session is closed, every hold released and the wait over, nothing is charged.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/time/time.h"
#include "server/galois_cache.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

using server::GaloisKeyCache;

constexpr uint64_t kWireBytes = 10;
constexpr uint64_t kParsedBytes = 16;  // two words: InstalledKeys()
constexpr uint64_t kMaxBytes = 60;     // two uploads (26 bytes each), or several installed keys
constexpr int kSessions = 4;

constexpr absl::Duration kResumeFor = absl::Seconds(100);

enum Op : uint8_t {
  kOpen,
  kClose,
  kAppend,
  kInstall,
  kDiscard,
  kAcquire,
  kRelease,
  kResume,
  kTick,
  kOps
};

// What the model knows of a token: its keys' connection is open or closed, or it is spent (its
// keys answered after it moved them, or moved again with another of their tokens).
enum class TokenState { kLive, kClosed, kSpent };

std::shared_ptr<const he::GaloisKeys> InstalledKeys() {
  auto keys = std::make_shared<he::GaloisKeys>();
  keys->keys[3].b = {1};
  keys->keys[3].a = {2};
  return keys;
}

struct Session {
  std::optional<GaloisKeyCache::Session> id;
  std::vector<uint8_t> sent;                      // chunks since offset 0 (the model)
  std::unique_ptr<GaloisKeyCache::Hold> parsing;  // a completed upload being "parsed"
  std::vector<GaloisKeyCache::Keys> answers;      // keys held by answers in flight
  std::vector<uint8_t> token;                     // of the keys it last installed or resumed
  std::vector<uint8_t> presented;                 // the token that resumed them, until spent
};

void CheckCode(const absl::Status& status, std::initializer_list<absl::StatusCode> allowed,
               const char* what) {
  bool ok = false;
  for (absl::StatusCode code : allowed) ok = ok || status.code() == code;
  Check(ok, what);
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  // Operation bytes: op, session (low 2 bits), then for kAppend an offset and a chunk length.
  return {
      {kOpen, 0, kAppend, 0, 0, 4, kAppend, 0, 4, 6, kInstall, 0, kAcquire, 0, kRelease, 0},
      {kOpen,   0, kOpen, 1,  kOpen,    2, kAppend,  0, 0,        3,
       kAppend, 1, 0,     10, kAppend,  2, 0,        5, kDiscard, 1,
       kAppend, 0, 3,     7,  kInstall, 0, kAcquire, 2, kClose,   1},
      {kOpen, 3, kAppend, 3, 0, 10, kClose, 3, kInstall, 3, kOpen, 1, kAppend, 1, 2, 2},
      // Keys installed, their connection closed, resumed by another, then with the same token by
      // a third (no answer came on the second: its reply may have been lost).
      {kOpen, 0, kAppend, 0, 0, 10,    kInstall, 0,   kClose, 0, kOpen, 1, kResume, 1, 0,
       kOpen, 2, kResume, 2, 0, kTick, 2,        200, kClose, 1, kOpen, 3, kResume, 3, 1},
      // An open connection's token: refused while an answer uses the keys, then moves them.
      {kOpen,   0, kAppend, 0,        0, 10,      kInstall, 0, kAcquire, 0, kOpen,    1,
       kResume, 1, 0,       kRelease, 0, kResume, 1,        0, kAcquire, 0, kAcquire, 1},
      // A resume presented again after a lost reply; an answer spends the token, not its successor.
      {kOpen,    0, kAppend, 0,      0,     10,    kInstall, 0,       kClose, 0,       kOpen,    1,
       kResume,  1, 0,       kClose, 1,     kOpen, 2,        kResume, 2,      0,       kAcquire, 2,
       kRelease, 2, kClose,  2,      kOpen, 3,     kResume,  3,       0,      kResume, 3,        2},
  };
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace veil::fuzz;
  using absl::StatusCode;
  absl::Time now = absl::UnixEpoch();
  GaloisKeyCache cache(kMaxBytes, kWireBytes, kParsedBytes, kResumeFor, [&now] { return now; });
  const std::shared_ptr<const veil::he::GaloisKeys> installed = InstalledKeys();
  Check(GaloisKeyCache::ParsedBytes(*installed) == kParsedBytes, "InstalledKeys' size");
  veil::server::KeyCacheCounts observed;  // what the metrics endpoint would export
  cache.OnChange([&observed](const veil::server::KeyCacheCounts& c) { observed = c; });
  Session sessions[kSessions];
  std::map<std::vector<uint8_t>, TokenState> tokens;
  std::map<std::vector<uint8_t>, int> owners;  // the session slot whose keys a token finds
  // Which install or resume put the keys a token finds where they are: a resume spends the
  // tokens of its keys' last one.
  std::map<std::vector<uint8_t>, int> moves;
  int next_move = 0;
  std::vector<std::vector<uint8_t>> seen;  // every token issued, in order
  auto issued = [&](Session& s, std::vector<uint8_t> token) {
    Check(token.size() == GaloisKeyCache::kResumeTokenBytes, "a token of another size");
    Check(tokens.count(token) == 0, "a token issued twice");
    tokens[token] = TokenState::kLive;
    owners[token] = static_cast<int>(&s - sessions);
    moves[token] = next_move;
    seen.push_back(token);
    s.token = std::move(token);
  };
  size_t i = 0;
  auto next = [&]() -> uint8_t { return i < size ? data[i++] : 0; };
  while (i < size) {
    const uint8_t op = next() % kOps;
    Session& s = sessions[next() % kSessions];
    if (op != kOpen && !s.id.has_value()) continue;
    switch (op) {
      case kOpen:
        if (!s.id.has_value()) s.id = cache.Open();
        break;
      case kClose:
        cache.Close(*s.id);
        for (const std::vector<uint8_t>* t : {&s.token, &s.presented}) {
          if (!t->empty() && tokens[*t] == TokenState::kLive) tokens[*t] = TokenState::kClosed;
        }
        s = Session();
        break;
      case kAppend: {
        const uint64_t offset = next() % (kWireBytes + 2);
        const size_t length = next() % (kWireBytes + 2);
        std::vector<uint8_t> chunk;
        for (size_t k = 0; k < length; ++k) chunk.push_back(static_cast<uint8_t>(offset + k));
        auto upload = cache.Append(*s.id, offset, chunk);
        if (!upload.ok()) {
          CheckCode(upload.status(),
                    {StatusCode::kInvalidArgument, StatusCode::kFailedPrecondition,
                     StatusCode::kAborted, StatusCode::kResourceExhausted},
                    "Append: undocumented code");
          // A non-empty chunk at offset 0 drops the previous upload even when it is refused
          // later (no room, too long), unless the keys are in use.
          if (offset == 0 && !chunk.empty() &&
              upload.status().code() != StatusCode::kFailedPrecondition) {
            s.sent.clear();
          }
          break;
        }
        if (offset == 0) s.sent.clear();
        Check(offset == s.sent.size(), "a chunk at the wrong offset was accepted");
        s.sent.insert(s.sent.end(), chunk.begin(), chunk.end());
        Check(s.sent.size() <= kWireBytes, "an upload past the keys' size was accepted");
        Check(upload->has_value() == (s.sent.size() == kWireBytes),
              "an upload completed at the wrong size");
        if (upload->has_value()) {
          Check((*upload)->bytes == s.sent, "a completed upload differs from what was sent");
          s.parsing = std::move((*upload)->hold);
          s.sent.clear();
        }
        break;
      }
      case kInstall:
        if (s.parsing != nullptr) {
          auto token = cache.Install(*s.id, installed);
          Check(token.ok(), "Install of an open session failed");
          ++next_move;
          issued(s, *std::move(token));
          s.presented.clear();
          s.parsing.reset();
        }
        break;
      case kDiscard:
        if (s.parsing != nullptr) {
          cache.Discard(*s.id);
          s.parsing.reset();
        }
        break;
      case kAcquire: {
        auto keys = cache.Acquire(*s.id);
        if (keys.ok()) {
          Check(keys->keys == installed, "Acquire gave other keys than those installed");
          s.answers.push_back(*std::move(keys));
          if (!s.presented.empty()) tokens[s.presented] = TokenState::kSpent;
          s.presented.clear();
        } else {
          CheckCode(keys.status(), {StatusCode::kFailedPrecondition, StatusCode::kAborted},
                    "Acquire: undocumented code");
        }
        break;
      }
      case kRelease:
        s.answers.clear();
        break;
      case kResume: {
        // A token seen earlier, or (one choice more) one never issued.
        const size_t pick = next() % (seen.size() + 1);
        std::vector<uint8_t> token =
            pick < seen.size() ? seen[pick]
                               : std::vector<uint8_t>(GaloisKeyCache::kResumeTokenBytes, next());
        auto renewed = cache.Resume(*s.id, token);
        if (!renewed.ok()) {
          CheckCode(renewed.status(), {StatusCode::kNotFound, StatusCode::kFailedPrecondition},
                    "Resume: undocumented code");
          break;
        }
        auto known = tokens.find(token);
        Check(known != tokens.end() && known->second != TokenState::kSpent,
              "a resume succeeded with a token never issued or spent");
        Check(known->second != TokenState::kLive || sessions[owners[token]].answers.empty(),
              "a resume moved keys an answer is using");
        const int from = moves[token];
        for (auto& [t, state] : tokens) {
          if (moves[t] == from) state = TokenState::kSpent;
        }
        ++next_move;
        known->second = TokenState::kLive;  // until s answers or its successor moves the keys
        owners[token] = static_cast<int>(&s - sessions);
        moves[token] = next_move;
        s.sent.clear();
        s.presented = token;
        issued(s, *std::move(renewed));
        break;
      }
      case kTick:
        now += absl::Seconds(next());
        break;
    }
    Check(cache.charged_bytes() <= kMaxBytes, "the cache charged more than its bound");
    Check(observed == cache.counts(),
          "the observer saw other counts than the cache's after a call");
  }
  for (Session& s : sessions) {
    if (s.id.has_value()) cache.Close(*s.id);
    s = Session();
  }
  now += kResumeFor;
  cache.Close(cache.Open());  // any call drops the keys whose wait is over
  Check(cache.waiting() == 0, "keys still wait after their time");
  Check(cache.charged_bytes() == 0, "memory stays charged after every session closed");
  Check(observed.charged_bytes == 0 && observed.waiting == 0 && observed.sessions == 0,
        "the observer's last counts are not the empty cache's");
  return 0;
}
