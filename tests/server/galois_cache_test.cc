// GaloisKeyCache: chunked uploads, the memory bound (an upload charged as its bytes arrive), the
// eviction rule (closed connections' keys, then idle uploads, then idle keys, least recently used
// first; keys in use never), releasing closed sessions only after their holds, and resuming keys
// with their token (until the client shows it got the next one, within the wait, never keys an
// answer is using).
#include "server/galois_cache.h"

#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::server {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kWire = 10;
constexpr uint64_t kParsed = 16;  // one key: b and a of one word each
constexpr uint64_t kSession = kWire + kParsed;

std::shared_ptr<const he::GaloisKeys> FakeKeys() {
  auto keys = std::make_shared<he::GaloisKeys>();
  keys->keys[3].b = {1};
  keys->keys[3].a = {2};
  return keys;
}

// Uploads a whole session (one chunk) and installs fake keys of kParsed bytes; their resume
// token into `token` if given.
void Install(GaloisKeyCache& cache, GaloisKeyCache::Session session,
             std::vector<uint8_t>* token = nullptr) {
  std::vector<uint8_t> bytes(kWire, 7);
  auto upload = cache.Append(session, 0, bytes);
  ASSERT_TRUE(upload.ok()) << upload.status();
  ASSERT_TRUE(upload->has_value());
  EXPECT_EQ((*upload)->bytes, bytes);
  auto installed = cache.Install(session, FakeKeys());
  ASSERT_TRUE(installed.ok()) << installed.status();
  if (token != nullptr) *token = *installed;
}

TEST(GaloisKeyCache, AssemblesChunksInOrder) {
  GaloisKeyCache cache(1000, kWire, kParsed);
  const auto s = cache.Open();
  EXPECT_THAT(cache.Acquire(s).status().message(), HasSubstr("no Galois keys on this connection"));
  EXPECT_EQ(cache.Append(s, 4, std::vector<uint8_t>(2)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto first = cache.Append(s, 0, std::vector<uint8_t>{0, 1, 2, 3});
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(first->has_value());
  EXPECT_EQ(cache.charged_bytes(), 4u);  // the bytes received, not yet the session
  EXPECT_THAT(cache.Acquire(s).status().message(), HasSubstr("(4 of 10 bytes received)"));
  EXPECT_EQ(cache.Append(s, 5, std::vector<uint8_t>(1)).status().message(),
            "Galois key chunk at offset 5; the next one starts at 4");
  EXPECT_THAT(cache.Append(s, 4, std::vector<uint8_t>(7)).status().message(),
              HasSubstr("runs past the keys' 10 bytes"));
  EXPECT_EQ(cache.Append(s, 4, {}).status().message(), "empty Galois key chunk");
  auto last = cache.Append(s, 4, std::vector<uint8_t>{4, 5, 6, 7, 8, 9});
  ASSERT_TRUE(last.ok() && last->has_value());
  EXPECT_EQ((*last)->bytes, (std::vector<uint8_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(cache.charged_bytes(), kSession);  // the upload and the keys it is parsed into
  // While it is parsed, no new upload and no answer.
  EXPECT_EQ(cache.Append(s, 0, std::vector<uint8_t>(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(cache.Acquire(s).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(cache.Install(s, FakeKeys()).ok());
  (*last)->hold.reset();
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  auto keys = cache.Acquire(s);
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->keys->keys.size(), 1u);
}

TEST(GaloisKeyCache, EvictsTheLeastRecentlyUsedIdleSession) {
  GaloisKeyCache cache(2 * kSession, kWire, kParsed);
  const auto a = cache.Open(), b = cache.Open(), c = cache.Open();
  Install(cache, a);
  Install(cache, b);
  ASSERT_TRUE(cache.Acquire(a).ok());  // a is now more recent than b (its hold is gone again)
  // c's whole upload needs kSession more: b, the least recently used, goes.
  ASSERT_TRUE(cache.Append(c, 0, std::vector<uint8_t>(kWire)).ok());
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_TRUE(cache.Acquire(a).ok());
  const absl::Status evicted = cache.Acquire(b).status();
  EXPECT_EQ(evicted.code(), absl::StatusCode::kAborted);
  EXPECT_THAT(evicted.message(), HasSubstr("evicted to make room"));
  EXPECT_LE(cache.charged_bytes(), 2 * kSession);
}

// Keys parsed larger than the session's reserved room (kParsed) still keep the bound: idle
// sessions make the difference.
TEST(GaloisKeyCache, KeysLargerThanReservedPushIdleSessionsOut) {
  GaloisKeyCache cache(kParsed + kSession, kWire, kParsed);
  const auto a = cache.Open(), b = cache.Open();
  Install(cache, a);
  ASSERT_TRUE(cache.Append(b, 0, std::vector<uint8_t>(kWire)).ok());
  EXPECT_EQ(cache.charged_bytes(), kParsed + kSession);
  auto larger = std::make_shared<he::GaloisKeys>(*FakeKeys());
  larger->keys[5] = larger->keys[3];
  ASSERT_TRUE(cache.Install(b, larger).ok());
  EXPECT_EQ(cache.charged_bytes(), 2 * kParsed);  // b's keys alone
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(cache.Acquire(a).status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(cache.Acquire(b).ok());
}

TEST(GaloisKeyCache, KeysInUseAreNeverEvicted) {
  GaloisKeyCache cache(kSession, kWire, kParsed);
  const auto a = cache.Open(), b = cache.Open();
  Install(cache, a);
  auto in_use = cache.Acquire(a);
  ASSERT_TRUE(in_use.ok());
  const absl::Status full = cache.Append(b, 0, std::vector<uint8_t>(kWire)).status();
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(full.message(), HasSubstr("held by sessions whose keys are in use"));
  // An answer in flight also keeps its own session from starting over.
  EXPECT_EQ(cache.Append(a, 0, std::vector<uint8_t>(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  in_use->hold.reset();
  ASSERT_TRUE(cache.Append(b, 0, std::vector<uint8_t>(kWire)).ok());
  EXPECT_EQ(cache.Acquire(a).status().code(), absl::StatusCode::kAborted);
}

TEST(GaloisKeyCache, AFewBytesClaimOnlyTheirOwnRoom) {
  // Room for two sessions' keys and one upload: clients that send a byte at offset 0, however
  // many, evict nobody's keys (they once claimed a whole session each).
  GaloisKeyCache cache(2 * kParsed + kWire, kWire, kParsed);
  const auto a = cache.Open(), b = cache.Open();
  Install(cache, a);
  Install(cache, b);
  std::vector<GaloisKeyCache::Session> pokes;
  for (int i = 0; i < 20; ++i) {
    pokes.push_back(cache.Open());
    ASSERT_TRUE(cache.Append(pokes.back(), 0, std::vector<uint8_t>(1)).ok());
  }
  EXPECT_TRUE(cache.Acquire(a).ok());
  EXPECT_TRUE(cache.Acquire(b).ok());
  EXPECT_LE(cache.charged_bytes(), 2 * kParsed + kWire);
  // The pokes pushed out one another's uploads, least recently used first.
  EXPECT_EQ(cache.Append(pokes.front(), 1, std::vector<uint8_t>(1)).status().code(),
            absl::StatusCode::kAborted);
  EXPECT_TRUE(cache.Append(pokes.back(), 1, std::vector<uint8_t>(1)).ok());
}

TEST(GaloisKeyCache, UploadsInProgressAreEvictedBeforeInstalledKeys) {
  GaloisKeyCache cache(kSession, kWire, kParsed);
  const auto a = cache.Open(), b = cache.Open(), c = cache.Open();
  Install(cache, a);  // the least recently used, but installed
  ASSERT_TRUE(cache.Append(b, 0, std::vector<uint8_t>(4)).ok());
  ASSERT_TRUE(cache.Append(c, 0, std::vector<uint8_t>(4)).ok());
  EXPECT_EQ(cache.charged_bytes(), kParsed + 8);  // a's keys, b's and c's four bytes
  // c's next chunk needs 4 bytes more: b's upload goes, not a's keys.
  ASSERT_TRUE(cache.Append(c, 4, std::vector<uint8_t>(4)).ok());
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_TRUE(cache.Acquire(a).ok());
  // An evicted upload must start over.
  EXPECT_EQ(cache.Append(b, 4, std::vector<uint8_t>(1)).status().code(),
            absl::StatusCode::kAborted);
  // c's last chunk needs the parsed keys' room too: only a's keys are left to evict.
  auto done = cache.Append(c, 8, std::vector<uint8_t>(2));
  ASSERT_TRUE(done.ok() && done->has_value()) << done.status();
  EXPECT_EQ(cache.Acquire(a).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(cache.charged_bytes(), kSession);
}

TEST(GaloisKeyCache, RefusesASessionLargerThanTheBound) {
  GaloisKeyCache cache(kSession - 1, kWire, kParsed);
  const absl::Status status = cache.Append(cache.Open(), 0, std::vector<uint8_t>(1)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("need 26 bytes of server memory"));
  EXPECT_EQ(cache.charged_bytes(), 0u);
}

TEST(GaloisKeyCache, ClosedSessionsAreReleasedAfterTheirLastHold) {
  GaloisKeyCache cache(1000, kWire, kParsed);
  const auto a = cache.Open();
  Install(cache, a);
  auto in_use = cache.Acquire(a);
  ASSERT_TRUE(in_use.ok());
  cache.Close(a);
  EXPECT_EQ(cache.charged_bytes(), kParsed);  // still used by the answer
  in_use->hold.reset();
  EXPECT_EQ(cache.charged_bytes(), 0u);

  // Closed while its upload is parsed: Install refuses, the hold releases the charge.
  const auto b = cache.Open();
  auto upload = cache.Append(b, 0, std::vector<uint8_t>(kWire));
  ASSERT_TRUE(upload.ok() && upload->has_value());
  cache.Close(b);
  EXPECT_EQ(cache.Install(b, FakeKeys()).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(cache.charged_bytes(), kSession);
  (*upload)->hold.reset();
  EXPECT_EQ(cache.charged_bytes(), 0u);
}

TEST(GaloisKeyCache, DiscardDropsAFailedUpload) {
  GaloisKeyCache cache(1000, kWire, kParsed);
  const auto a = cache.Open();
  auto upload = cache.Append(a, 0, std::vector<uint8_t>(kWire));
  ASSERT_TRUE(upload.ok() && upload->has_value());
  cache.Discard(a);
  (*upload)->hold.reset();
  EXPECT_EQ(cache.charged_bytes(), 0u);
  EXPECT_THAT(cache.Acquire(a).status().message(), HasSubstr("no Galois keys"));
  Install(cache, a);  // and it may upload again
  EXPECT_EQ(cache.charged_bytes(), kParsed);
}

TEST(GaloisKeyCache, ATokenMovesItsKeysOnce) {
  GaloisKeyCache cache(1000, kWire, kParsed, absl::Minutes(5));
  const auto a = cache.Open();
  std::vector<uint8_t> token;
  Install(cache, a, &token);
  ASSERT_EQ(token.size(), GaloisKeyCache::kResumeTokenBytes);
  const he::GaloisKeys* keys = cache.Acquire(a)->keys.get();
  cache.Close(a);
  EXPECT_EQ(cache.waiting(), 1u);
  EXPECT_EQ(cache.charged_bytes(), kParsed);  // still held, for the resume

  const auto b = cache.Open();
  std::vector<uint8_t> wrong = token;
  wrong[5] ^= 1;
  EXPECT_EQ(cache.Resume(b, wrong).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.Resume(b, absl::MakeConstSpan(token).first(15)).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto next = cache.Resume(b, token);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->size(), GaloisKeyCache::kResumeTokenBytes);
  EXPECT_NE(*next, token);
  EXPECT_EQ(cache.Acquire(b)->keys.get(), keys);  // the same keys, not a copy
  EXPECT_EQ(cache.waiting(), 0u);
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  // A token serves once; a connection with keys resumes nothing.
  const auto c = cache.Open();
  EXPECT_THAT(cache.Resume(c, token).status().message(), HasSubstr("upload them"));
  EXPECT_EQ(cache.Resume(b, *next).status().code(), absl::StatusCode::kFailedPrecondition);
  // An open connection's keys move while no answer uses them (the client went on from another
  // network); that connection's next answer is ABORTED.
  auto in_use = cache.Acquire(b);
  ASSERT_TRUE(in_use.ok());
  EXPECT_EQ(cache.Resume(c, *next).status().code(), absl::StatusCode::kNotFound);
  in_use->hold.reset();
  EXPECT_TRUE(cache.Resume(c, *next).ok());
  EXPECT_EQ(cache.Acquire(b).status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(cache.Acquire(c)->keys.get(), keys);
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  cache.Close(b);
  cache.Close(c);
  EXPECT_EQ(cache.waiting(), 1u);  // c's keys wait in turn
  EXPECT_EQ(cache.charged_bytes(), kParsed);
}

TEST(GaloisKeyCache, AResumeWhoseReplyWasLostIsPresentedAgain) {
  GaloisKeyCache cache(1000, kWire, kParsed, absl::Minutes(5));
  const auto a = cache.Open();
  std::vector<uint8_t> t0;
  Install(cache, a, &t0);
  const he::GaloisKeys* keys = cache.Acquire(a)->keys.get();
  cache.Close(a);
  // b resumes, but its connection breaks before the reply (t1) reaches the client.
  const auto b = cache.Open();
  auto t1 = cache.Resume(b, t0);
  ASSERT_TRUE(t1.ok()) << t1.status();
  cache.Close(b);
  EXPECT_EQ(cache.waiting(), 1u);
  // The client presents t0 again on its next connection: the keys move, no upload.
  const auto c = cache.Open();
  auto t2 = cache.Resume(c, t0);
  ASSERT_TRUE(t2.ok()) << t2.status();
  EXPECT_NE(*t2, *t1);
  EXPECT_EQ(cache.counts().resumes, 2u);
  // t1 went with b's entry; t0 is spent by c's first answer.
  const auto d = cache.Open();
  EXPECT_EQ(cache.Resume(d, *t1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.Acquire(c)->keys.get(), keys);
  cache.Close(c);
  EXPECT_EQ(cache.Resume(d, t0).status().code(), absl::StatusCode::kNotFound);
  auto t3 = cache.Resume(d, *t2);
  ASSERT_TRUE(t3.ok()) << t3.status();
  // Presenting the newer token spends the older one, answer or not.
  cache.Close(d);
  const auto e = cache.Open();
  auto t4 = cache.Resume(e, *t3);
  ASSERT_TRUE(t4.ok()) << t4.status();
  cache.Close(e);
  const auto f = cache.Open();
  EXPECT_EQ(cache.Resume(f, *t2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(cache.Resume(f, *t3).ok());  // the reply to e's resume may have been lost too
  EXPECT_EQ(cache.Acquire(f)->keys.get(), keys);
  EXPECT_EQ(cache.counts().refused_resumes, 3u);
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  cache.Close(f);
  EXPECT_EQ(cache.waiting(), 1u);
}

TEST(GaloisKeyCache, WaitingKeysExpireAndAreEvictedFirst) {
  absl::Time now = absl::UnixEpoch();
  // Room for one upload being parsed and one session's keys.
  GaloisKeyCache cache(kSession + kParsed, kWire, kParsed, absl::Seconds(60), [&] { return now; });
  const auto a = cache.Open();
  std::vector<uint8_t> token;
  Install(cache, a, &token);
  cache.Close(a);
  now += absl::Seconds(61);
  const auto b = cache.Open();
  EXPECT_EQ(cache.Resume(b, token).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(cache.charged_bytes(), 0u);  // expired and dropped

  // Waiting keys go before an idle connection's installed keys, even more recently used.
  const auto c = cache.Open();
  Install(cache, c, &token);
  cache.Close(c);
  Install(cache, b);
  EXPECT_EQ(cache.waiting(), 1u);
  const auto d = cache.Open();
  Install(cache, d);  // needs the waiting keys' room
  EXPECT_EQ(cache.waiting(), 0u);
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_TRUE(cache.Acquire(b).ok());
  EXPECT_EQ(cache.Resume(cache.Open(), token).status().code(), absl::StatusCode::kNotFound);
}

TEST(GaloisKeyCache, KeysInUseWhenTheirConnectionClosesStillWait) {
  GaloisKeyCache cache(1000, kWire, kParsed, absl::Minutes(5));
  const auto a = cache.Open();
  std::vector<uint8_t> token;
  Install(cache, a, &token);
  auto in_use = cache.Acquire(a);
  ASSERT_TRUE(in_use.ok());
  cache.Close(a);
  in_use->hold.reset();
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  EXPECT_TRUE(cache.Resume(cache.Open(), token).ok());
}

TEST(GaloisKeyCache, KeysInUseKeepTheirChargeAfterTheirConnectionCloses) {
  // Room for one session's keys and a little: the keys of a closed connection still used by an
  // answer cannot make room for another upload until the answer is done.
  GaloisKeyCache cache(kSession + 4, kWire, kParsed, absl::Minutes(5));
  const auto a = cache.Open();
  Install(cache, a);
  auto in_use = cache.Acquire(a);
  ASSERT_TRUE(in_use.ok());
  cache.Close(a);
  EXPECT_EQ(cache.waiting(), 0u);  // not before the answer is done
  const auto b = cache.Open();
  EXPECT_EQ(cache.Append(b, 0, std::vector<uint8_t>(kWire)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  in_use->hold.reset();
  EXPECT_EQ(cache.waiting(), 1u);
  EXPECT_EQ(cache.charged_bytes(), kParsed);
  Install(cache, b);  // evicts the waiting keys
  EXPECT_EQ(cache.waiting(), 0u);
  EXPECT_EQ(cache.evictions(), 1u);
}

TEST(GaloisKeyCache, ARefusedChargeEvictsNothing) {
  // Waiting keys (a) and an upload being parsed (b, in use): an upload that would not fit even
  // without the waiting keys is refused and leaves them waiting.
  GaloisKeyCache cache(kSession + kParsed, kWire, kParsed, absl::Minutes(5));
  const auto a = cache.Open();
  std::vector<uint8_t> token;
  Install(cache, a, &token);
  cache.Close(a);
  const auto b = cache.Open();
  auto parsing = cache.Append(b, 0, std::vector<uint8_t>(kWire));
  ASSERT_TRUE(parsing.ok() && parsing->has_value());
  const auto c = cache.Open();
  EXPECT_EQ(cache.Append(c, 0, std::vector<uint8_t>(kWire)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(cache.waiting(), 1u);
  EXPECT_EQ(cache.evictions(), 0u);
  EXPECT_EQ(cache.charged_bytes(), kSession + kParsed);
  EXPECT_TRUE(cache.Resume(cache.Open(), token).ok());
}

TEST(GaloisKeyCache, WithoutAWaitKeysGoWithTheirConnection) {
  GaloisKeyCache cache(1000, kWire, kParsed);
  const auto a = cache.Open();
  std::vector<uint8_t> token = {1};
  Install(cache, a, &token);
  EXPECT_TRUE(token.empty());
  cache.Close(a);
  EXPECT_EQ(cache.charged_bytes(), 0u);
  EXPECT_EQ(cache.waiting(), 0u);
}

TEST(GaloisKeyCache, TheObserverSeesEveryChange) {
  absl::Time now = absl::UnixEpoch();
  // Room for one session's keys and one upload being parsed, not for two keys and an upload.
  constexpr uint64_t kBound = kSession + 2 * kParsed - 1;
  GaloisKeyCache cache(kBound, kWire, kParsed, absl::Seconds(60), [&] { return now; });
  std::vector<KeyCacheCounts> seen;
  cache.OnChange([&](const KeyCacheCounts& c) { seen.push_back(c); });
  ASSERT_EQ(seen.size(), 1u);  // the counts at once
  EXPECT_EQ(seen.back().max_bytes, kBound);
  EXPECT_EQ(seen.back().charged_bytes, 0u);

  const auto a = cache.Open(), b = cache.Open();
  std::vector<uint8_t> token_a, token_b;
  Install(cache, a, &token_a);
  Install(cache, b, &token_b);
  EXPECT_EQ(seen.back().installs, 2u);
  EXPECT_EQ(seen.back().sessions, 2u);
  EXPECT_EQ(seen.back().charged_bytes, 2 * kParsed);
  cache.Close(a);
  cache.Close(b);
  EXPECT_EQ(seen.back().sessions, 0u);
  EXPECT_EQ(seen.back().waiting, 2u);
  EXPECT_EQ(seen.back().charged_bytes, 2 * kParsed);

  const auto c = cache.Open();
  EXPECT_EQ(
      cache.Resume(c, std::vector<uint8_t>(GaloisKeyCache::kResumeTokenBytes)).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(seen.back().refused_resumes, 1u);
  ASSERT_TRUE(cache.Resume(c, token_a).ok());
  EXPECT_EQ(seen.back().resumes, 1u);
  EXPECT_EQ(seen.back().sessions, 1u);
  EXPECT_EQ(seen.back().waiting, 1u);

  // An answer's hold going is a change too (the keys of a closed connection start to wait).
  auto in_use = cache.Acquire(c);
  ASSERT_TRUE(in_use.ok());
  cache.Close(c);
  EXPECT_EQ(seen.back().waiting, 1u);
  EXPECT_EQ(seen.back().sessions, 0u);
  in_use->hold.reset();
  EXPECT_EQ(seen.back().waiting, 2u);

  // A third session's upload evicts one waiting session's keys (b's, the least recently used).
  const auto d = cache.Open();
  Install(cache, d);
  EXPECT_EQ(seen.back().evictions, 1u);
  EXPECT_EQ(seen.back().waiting, 1u);
  EXPECT_EQ(seen.back().installs, 3u);
  // The other waits out its time.
  now += absl::Seconds(61);
  cache.Close(d);
  EXPECT_EQ(seen.back().expirations, 1u);
  EXPECT_EQ(seen.back().waiting, 1u);  // d's, from now
  EXPECT_EQ(seen.back().charged_bytes, kParsed);
  EXPECT_EQ(seen.back().evictions, cache.evictions());
  EXPECT_EQ(seen.back().waiting, cache.waiting());
}

}  // namespace
}  // namespace veil::server
