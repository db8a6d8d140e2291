// A real lwe-exppack-s server spoken to at the RPC level: the config's sizes equal the formulas
// (docs/lattice.md), a session's keys are required, checked and its own, hostile calls get
// error replies naming the problem, and a session whose keys were evicted gets ABORTED. And a real
// lwe-hybrid server (the same service with a selection per lookup): its sizes, its selection
// checks, and its client.
#include <capnp/ez-rpc.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/lwe_client.h"
#include "pir/he/serialization.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/hybrid.h"
#include "pir/lattice/pack_simple.h"
#include "pir/lattice/server.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "server/galois_cache.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using ::testing::HasSubstr;

// 3,001 rows of 25 floats (100 bytes): 40 per column, a 4,000 x 76 database (the packed shape:
// one 4,096-row ciphertext down, 304 bytes of query up; SimplePIR's own shape is 400 x 751).
constexpr uint64_t kRows = 3001;
constexpr uint32_t kDim = 25;
// Whether veil-server serves --metrics (built with prometheus-cpp).
#if VEIL_HAVE_PROMETHEUS
constexpr bool kHaveMetrics = true;
#else
constexpr bool kHaveMetrics = false;
#endif

// One connection (one session) to the server, spoken to call by call.
class RawSession {
 public:
  explicit RawSession(int port)
      : rpc_("127.0.0.1", port), cap_(rpc_.getMain<rpc::LwePackServer>()) {}

  capnp::Response<rpc::LwePackServer::ConfigResults> Config() {
    return cap_.configRequest().send().wait(rpc_.getWaitScope());
  }

  // One chunk; returns whether the keys are installed (and keeps the reply's resume token).
  absl::StatusOr<bool> Upload(uint64_t offset, absl::Span<const uint8_t> chunk) {
    auto request = cap_.uploadGaloisKeysRequest();
    request.setOffset(offset);
    request.setChunk(capnp::Data::Reader(chunk.data(), chunk.size()));
    try {
      auto reply = request.send().wait(rpc_.getWaitScope());
      resume_token_.assign(reply.getResumeToken().begin(), reply.getResumeToken().end());
      return reply.getInstalled();
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

  // resumeGaloisKeys; returns the next token.
  absl::StatusOr<std::vector<uint8_t>> Resume(absl::Span<const uint8_t> token) {
    auto request = cap_.resumeGaloisKeysRequest();
    request.setToken(capnp::Data::Reader(token.data(), token.size()));
    try {
      auto reply = request.send().wait(rpc_.getWaitScope());
      return std::vector<uint8_t>(reply.getResumeToken().begin(), reply.getResumeToken().end());
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }
  const std::vector<uint8_t>& resume_token() const { return resume_token_; }

  // All the keys in chunks of `chunk` bytes; returns whether the last one installed them.
  absl::StatusOr<bool> UploadAll(absl::Span<const uint8_t> keys, uint64_t chunk) {
    absl::StatusOr<bool> installed = false;
    for (uint64_t offset = 0; offset < keys.size() && installed.ok(); offset += chunk) {
      installed = Upload(offset, keys.subspan(offset, chunk));
    }
    return installed;
  }

  absl::StatusOr<std::vector<uint8_t>> Answer(absl::Span<const uint32_t> query,
                                              absl::Span<const uint8_t> ciphertext,
                                              absl::Span<const uint8_t> selection = {}) {
    auto request = cap_.answerRequest();
    request.setQuery(
        capnp::Data::Reader(reinterpret_cast<const uint8_t*>(query.data()), 4 * query.size()));
    request.setCiphertext(capnp::Data::Reader(ciphertext.data(), ciphertext.size()));
    request.setSelection(capnp::Data::Reader(selection.data(), selection.size()));
    try {
      auto reply = request.send().wait(rpc_.getWaitScope());
      return std::vector<uint8_t>(reply.getResponse().begin(), reply.getResponse().end());
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

  rpc::LwePackServer::Client& cap() { return cap_; }
  kj::WaitScope& wait_scope() { return rpc_.getWaitScope(); }

 private:
  capnp::EzRpcClient rpc_;
  rpc::LwePackServer::Client cap_;
  std::vector<uint8_t> resume_token_;
};

class LwePackRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("lwe_pack_rpc.veil", embedding::RowFormat::kFp32, kRows,
                                          kDim, 13);
    ASSERT_TRUE(path.ok()) << path.status();
    path_ = *path;
    auto table = embedding::Table::Open(path_);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = *std::move(table);
    // The instance the server makes (the seed is derived from the table, the shape counts the
    // packed answer): the client's config.
    lattice::LweServerOptions options;
    options.shape.packed_ring_n = 4096;
    auto lwe = lattice::LweServer::FromTable(*table_, options);
    ASSERT_TRUE(lwe.ok()) << lwe.status();
    config_ = (*lwe)->config();
    auto server = lattice::PackedSimpleServer::Create(*std::move(lwe));
    ASSERT_TRUE(server.ok()) << server.status();
    packed_ = *std::move(server);
  }

  std::unique_ptr<lattice::PackedSimpleClient> NewClient(
      lattice::PackedProtocol protocol = lattice::PackedProtocol::kExpPackS) const {
    auto client =
        lattice::PackedSimpleClient::Create(config_, lattice::RingParams::Default(), protocol);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // The record bytes of row `row` as stored.
  std::vector<uint8_t> Record(uint64_t row) const {
    absl::Span<const uint32_t> words = table_->row(row);
    std::vector<uint8_t> bytes(4 * words.size());
    std::memcpy(bytes.data(), words.data(), bytes.size());
    return bytes;
  }

  // One session's charge in the server's key memory: its keys uploaded and parsed.
  uint64_t SessionBytes(const lattice::PackedSimpleClient& client) const {
    auto parsed = packed_->ParseKeys(client.expansion_keys());
    EXPECT_TRUE(parsed.ok()) << parsed.status();
    return client.expansion_keys().size() +
           (parsed.ok() ? server::GaloisKeyCache::ParsedBytes(*parsed) : 0);
  }

  std::string path_;
  std::unique_ptr<embedding::Table> table_;
  lattice::LweConfig config_;
  std::unique_ptr<lattice::PackedSimpleServer> packed_;
};

TEST_F(LwePackRpcTest, ConfigSizesAreTheFormulasAndLookupsDecode) {
  auto server = testing::StartLweServer(path_, "lwe-exppack-s");
  ASSERT_TRUE(server.ok()) << server.status();
  capnp::EzRpcClient hello_rpc("127.0.0.1", (*server)->port());
  auto hello =
      hello_rpc.getMain<rpc::VeilServer>().helloRequest().send().wait(hello_rpc.getWaitScope());
  EXPECT_EQ(std::string(hello.getHello().getProtocol().cStr()), "lwe-exppack-s");

  RawSession session((*server)->port());
  auto reply = session.Config();
  rpc::LwePackConfig::Reader c = reply.getConfig();
  const lattice::Shape& shape = config_.shape;
  EXPECT_EQ(c.getLwe().getRows(), kRows);
  EXPECT_EQ(c.getLwe().getLweProtocol(), 1u);
  EXPECT_EQ(c.getLwe().getD0(), shape.d0);
  EXPECT_EQ(c.getLwe().getD1(), shape.d1);
  EXPECT_EQ(shape.d1, 4000u);
  EXPECT_EQ(shape.d0, 76u);
  EXPECT_EQ(c.getLwe().getQueryWords(), shape.d0);
  EXPECT_EQ(kj::arrayPtr(config_.seed.data(), 32), c.getLwe().getSeed());
  EXPECT_EQ(c.getLwe().getLimits().getMaxQueriesPerCall(), 1u);
  EXPECT_EQ(c.getLogN(), 12u);
  ASSERT_EQ(c.getPrimes().size(), 3u);
  EXPECT_EQ(c.getPrimes()[0], 536813569u);
  EXPECT_EQ(c.getSpecialPrime(), 4169729u);
  EXPECT_EQ(c.getExpansionKeyBytes(), 3516676u);
  EXPECT_EQ(c.getSecretCiphertextBytes(), 49184u);
  EXPECT_EQ(c.getResponseBytes(), (shape.d1 + 4095) / 4096 * 32768);
  EXPECT_EQ(c.getResponseBytes(), 32768u);  // D1 <= N: one ciphertext
  EXPECT_EQ(c.getMaxKeyBytes(), uint64_t{2} << 30);

  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const std::vector<uint8_t>& keys = client->expansion_keys();
  ASSERT_EQ(keys.size(), c.getExpansionKeyBytes());
  auto installed = session.UploadAll(keys, c.getMaxChunkBytes());
  ASSERT_TRUE(installed.ok()) << installed.status();
  EXPECT_TRUE(*installed);
  for (uint64_t row : {uint64_t{0}, kRows - 1, uint64_t{1777}}) {
    auto query = client->MakeQuery(row);
    ASSERT_TRUE(query.ok());
    EXPECT_EQ(4 * query->query.size() + query->ciphertext.size(), 4 * shape.d0 + 49184);
    auto response = session.Answer(query->query, query->ciphertext);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->size(), c.getResponseBytes());
    std::vector<uint8_t> record(shape.record_bytes);
    ASSERT_TRUE(client->Decode(row, *response, absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, Record(row)) << "row " << row;
  }
}

TEST_F(LwePackRpcTest, KeysAreRequiredCheckedAndPerConnection) {
  auto server = testing::StartLweServer(path_, "lwe-exppack-s");
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const std::vector<uint8_t>& keys = client->expansion_keys();
  auto query = client->MakeQuery(5);
  ASSERT_TRUE(query.ok());
  RawSession session((*server)->port());
  const uint64_t chunk = session.Config().getConfig().getMaxChunkBytes();

  // An answer before any upload, and with an upload still incomplete.
  auto response = session.Answer(query->query, query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("upload them (uploadGaloisKeys) before"));
  ASSERT_TRUE(session.Upload(0, absl::MakeConstSpan(keys).first(1000)).ok());
  response = session.Answer(query->query, query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition) << response.status();
  // A chunk at the wrong offset, and one past the keys' size.
  auto upload = session.Upload(5000, absl::MakeConstSpan(keys).first(10));
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument) << upload.status();
  std::vector<uint8_t> longer = keys;
  longer.resize(keys.size() + 8, 0);
  upload = session.UploadAll(longer, chunk);
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument) << upload.status();
  EXPECT_THAT(upload.status().message(), HasSubstr("Galois key chunk of"));

  // Keys of the right size that do not parse (garbage), or truncated and padded with garbage.
  const std::vector<uint8_t> garbage(keys.size(), 0xff);
  upload = session.UploadAll(garbage, chunk);
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument) << upload.status();
  EXPECT_THAT(upload.status().message(), HasSubstr("expansion keys: not a veil HE object"));
  std::vector<uint8_t> truncated(keys.begin(), keys.begin() + keys.size() / 2);
  truncated.resize(keys.size(), 0xff);
  upload = session.UploadAll(truncated, chunk);
  EXPECT_EQ(upload.status().code(), absl::StatusCode::kInvalidArgument) << upload.status();
  response = session.Answer(query->query, query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition) << response.status();

  // The real keys; then a ciphertext or a query of the wrong size.
  upload = session.UploadAll(keys, chunk);
  ASSERT_TRUE(upload.ok()) << upload.status();
  EXPECT_TRUE(*upload);
  response = session.Answer(query->query, absl::MakeConstSpan(query->ciphertext).first(100));
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("a ciphertext of 100 bytes"));
  response = session.Answer(absl::MakeConstSpan(query->query).first(3), query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("a query of 12 bytes"));
  response = session.Answer(query->query, query->ciphertext);
  ASSERT_TRUE(response.ok()) << response.status();
  std::vector<uint8_t> record(config_.shape.record_bytes);
  ASSERT_TRUE(client->Decode(5, *response, absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, Record(5));

  // Another connection is another session: it holds no keys until it uploads its own.
  RawSession second((*server)->port());
  response = second.Answer(query->query, query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kFailedPrecondition) << response.status();
}

TEST_F(LwePackRpcTest, CallsPipelinedOnPendingAnswersHoldBoundedMemory) {
  // Eight answers, each with forty 1.5 MiB calls pipelined on its result: the RPC system held
  // every pipelined call until its target resolved, outside --max_buffered_bytes (+444 MiB of
  // server memory for 469 MiB sent). Now the connection's calls in flight stop its reading at
  // ServerLimits::ConnectionBacklogWords (about 8.5 MB here).
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  auto server = testing::StartLweServer(path_, "lwe-exppack-s",
                                        {"--max_buffered_bytes=8388608", "--threads=1"});
  ASSERT_TRUE(server.ok()) << server.status();
  RawSession session((*server)->port());
  const uint64_t chunk = session.Config().getConfig().getMaxChunkBytes();
  ASSERT_TRUE(session.UploadAll(client->expansion_keys(), chunk).ok());
  auto query = client->MakeQuery(7);
  ASSERT_TRUE(query.ok());
  ASSERT_TRUE(session.Answer(query->query, query->ciphertext).ok());
  const uint64_t rss_before = (*server)->ResidentKb();
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> peak{rss_before};
  std::thread sampler([&] {
    while (!stop) {
      const uint64_t kb = (*server)->ResidentKb();
      if (kb > peak) peak = kb;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  const uint64_t interface_id = capnp::typeId<rpc::LwePackServer>();
  constexpr uint16_t kAnswerMethod = 2;
  const std::vector<uint8_t> junk(1536 * 1024, 0x5a);
  kj::Vector<kj::Promise<void>> calls;
  for (int a = 0; a < 8; ++a) {
    auto request = session.cap().typelessRequest(interface_id, kAnswerMethod, nullptr);
    auto params = request.initAs<rpc::LwePackServer::AnswerParams>();
    params.setQuery(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(query->query.data()),
                                        4 * query->query.size()));
    params.setCiphertext(capnp::Data::Reader(query->ciphertext.data(), query->ciphertext.size()));
    auto answer = request.send();
    capnp::Capability::Client target(answer.getPointerField(0).asCap());
    for (int p = 0; p < 40; ++p) {
      auto pipelined = target.typelessRequest(interface_id, kAnswerMethod,
                                              capnp::MessageSize{junk.size() / 8 + 64, 0});
      pipelined.initAs<rpc::LwePackServer::AnswerParams>().setQuery(
          capnp::Data::Reader(junk.data(), junk.size()));
      calls.add(pipelined.send().ignoreResult().catch_([](kj::Exception&&) {}));
    }
    calls.add(answer.ignoreResult().catch_([](kj::Exception&&) {}));
  }
  kj::joinPromises(calls.releaseAsArray()).wait(session.wait_scope());
  stop = true;
  sampler.join();
  EXPECT_LT(peak.load(), rss_before + 96 * 1024) << "KB of server memory at the peak";
  // The connection still serves.
  auto response = session.Answer(query->query, query->ciphertext);
  ASSERT_TRUE(response.ok()) << response.status();
  std::vector<uint8_t> record(config_.shape.record_bytes);
  ASSERT_TRUE(client->Decode(7, *response, absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, Record(7));
}

TEST_F(LwePackRpcTest, AnEvictedSessionGetsAbortedAndUploadsAgain) {
  // Key memory for exactly one session (uploaded + parsed): a second session's upload evicts the
  // first's idle keys.
  auto a = NewClient();
  auto b = NewClient();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  const uint64_t session_bytes = SessionBytes(*a);
  // Below one session the server refuses to start, saying what to raise.
  auto refused = testing::StartLweServer(
      path_, "lwe-exppack-s", {absl::StrCat("--max_galois_key_bytes=", session_bytes - 1)});
  EXPECT_FALSE(refused.ok());
  auto server = testing::StartLweServer(path_, "lwe-exppack-s",
                                        {absl::StrCat("--max_galois_key_bytes=", session_bytes)});
  ASSERT_TRUE(server.ok()) << server.status();

  RawSession first((*server)->port()), second((*server)->port());
  const uint64_t chunk = first.Config().getConfig().getMaxChunkBytes();
  ASSERT_TRUE(first.UploadAll(a->expansion_keys(), chunk).ok());
  ASSERT_TRUE(second.UploadAll(b->expansion_keys(), chunk).ok());
  auto query = a->MakeQuery(kRows - 1);
  ASSERT_TRUE(query.ok());
  auto response = first.Answer(query->query, query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kAborted) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("were evicted"));
  ASSERT_TRUE(first.UploadAll(a->expansion_keys(), chunk).ok());
  response = first.Answer(query->query, query->ciphertext);
  ASSERT_TRUE(response.ok()) << response.status();
  std::vector<uint8_t> record(config_.shape.record_bytes);
  ASSERT_TRUE(a->Decode(kRows - 1, *response, absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, Record(kRows - 1));
}

TEST_F(LwePackRpcTest, ConcurrentSessionsShareAPassAndEachGetsItsRows) {
  // --threads=2: a pass takes up to two queries of any sessions (one product, one expansion per
  // thread, each with its session's keys). Two sessions ask at once, from two threads.
  auto server = testing::StartLweServer(path_, "lwe-exppack-s", {"--threads=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  const uint64_t rows[2][2] = {{0, 2999}, {1500, 17}};
  std::vector<std::vector<uint8_t>> got[2];
  std::vector<std::thread> sessions;
  for (int c = 0; c < 2; ++c) {
    sessions.emplace_back([&, c] {
      auto client = NewClient();
      ASSERT_NE(client, nullptr);
      RawSession session((*server)->port());
      const uint64_t chunk = session.Config().getConfig().getMaxChunkBytes();
      ASSERT_TRUE(session.UploadAll(client->expansion_keys(), chunk).ok());
      for (uint64_t row : rows[c]) {
        auto query = client->MakeQuery(row);
        ASSERT_TRUE(query.ok());
        auto response = session.Answer(query->query, query->ciphertext);
        ASSERT_TRUE(response.ok()) << response.status();
        std::vector<uint8_t> record(config_.shape.record_bytes);
        ASSERT_TRUE(client->Decode(row, *response, absl::MakeSpan(record)).ok());
        got[c].push_back(record);
      }
    });
  }
  for (std::thread& t : sessions) t.join();
  for (int c = 0; c < 2; ++c) {
    ASSERT_EQ(got[c].size(), 2u);
    for (int i = 0; i < 2; ++i) EXPECT_EQ(got[c][i], Record(rows[c][i])) << "row " << rows[c][i];
  }
}

TEST_F(LwePackRpcTest, AResumeTokenMovesTheKeysOnce) {
  const std::string log = testing::TempPath("lwe.log");
  auto server = testing::StartLweServer(
      path_, "lwe-exppack-s",
      kHaveMetrics ? std::vector<std::string>{"--metrics=127.0.0.1:0"} : std::vector<std::string>{},
      log);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = NewClient();
  ASSERT_NE(client, nullptr);
  const uint64_t row = 1234;
  auto query = client->MakeQuery(row);
  ASSERT_TRUE(query.ok());
  auto decodes = [&](RawSession& session) {
    auto response = session.Answer(query->query, query->ciphertext);
    if (!response.ok()) return response.status();
    std::vector<uint8_t> record(config_.shape.record_bytes);
    if (absl::Status s = client->Decode(row, *response, absl::MakeSpan(record)); !s.ok()) return s;
    return record == Record(row) ? absl::OkStatus() : absl::DataLossError("another record");
  };
  absl::StatusOr<std::vector<uint8_t>> renewed;
  {
    RawSession owner((*server)->port());
    const uint64_t chunk = owner.Config().getConfig().getMaxChunkBytes();
    ASSERT_TRUE(owner.UploadAll(client->expansion_keys(), chunk).ok());
    const std::vector<uint8_t> token = owner.resume_token();
    ASSERT_EQ(token.size(), 16u);
    // A hostile client's guesses take nothing.
    RawSession thief((*server)->port());
    std::vector<uint8_t> guess = token;
    guess[0] ^= 0x80;
    EXPECT_EQ(thief.Resume(guess).status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(thief.Resume(absl::MakeConstSpan(token).first(8)).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(decodes(thief).code(), absl::StatusCode::kFailedPrecondition);  // no keys
    EXPECT_TRUE(decodes(owner).ok());
    // The token presented while the owner's connection is open (a client gone on from another
    // network): the keys move, and the owner's next answer is ABORTED.
    RawSession moved((*server)->port());
    renewed = moved.Resume(token);
    ASSERT_TRUE(renewed.ok()) << renewed.status();
    EXPECT_EQ(renewed->size(), 16u);
    EXPECT_NE(*renewed, token);
    EXPECT_TRUE(decodes(moved).ok());
    EXPECT_EQ(decodes(owner).code(), absl::StatusCode::kAborted);
    EXPECT_EQ(moved.Resume(*renewed).status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(thief.Resume(token).status().code(), absl::StatusCode::kNotFound);  // spent
  }
  // Closed, the keys wait under the renewed token. A resume whose reply the client never got (its
  // connection broke): the token it presented still moves the keys, until they answer.
  {
    RawSession lost((*server)->port());
    ASSERT_TRUE(lost.Resume(*renewed).ok());
  }
  RawSession next((*server)->port());
  auto again = next.Resume(*renewed);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(decodes(next).ok());
  RawSession late((*server)->port());
  EXPECT_EQ(late.Resume(*renewed).status().code(), absl::StatusCode::kNotFound);  // spent

  if (!kHaveMetrics) return;  // built without prometheus-cpp: no metrics to check
  // What an operator sees: one upload, three resumes, three tokens refused, one session's keys.
  const absl::StatusOr<int> metrics_port = testing::MetricsPort(log);
  ASSERT_TRUE(metrics_port.ok()) << metrics_port.status();
  auto metrics = testing::Scrape(*metrics_port);
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  auto sample = [&](const std::string& key) { return testing::Sample(*metrics, key); };
  EXPECT_EQ(sample("veil_session_key_uploads_total"), 1);
  EXPECT_EQ(sample("veil_session_key_resumes_total{result=\"resumed\"}"), 3);
  EXPECT_EQ(sample("veil_session_key_resumes_total{result=\"refused\"}"), 3);
  EXPECT_EQ(sample("veil_session_keys{state=\"open\"}"), 1);
  EXPECT_EQ(sample("veil_session_keys{state=\"waiting\"}"), 0);
  EXPECT_EQ(sample("veil_session_key_evictions_total"), 0);
  EXPECT_EQ(sample("veil_session_key_bytes"),
            SessionBytes(*client) - client->expansion_keys().size());
  EXPECT_GE(sample("veil_session_key_limit_bytes"), sample("veil_session_key_bytes"));
}

TEST_F(LwePackRpcTest, ClientsUploadTheirKeysAgainAfterAnEviction) {
  auto probe = NewClient();
  ASSERT_NE(probe, nullptr);
  auto server = testing::StartLweServer(
      path_, "lwe-exppack-s", {absl::StrCat("--max_galois_key_bytes=", SessionBytes(*probe))});
  ASSERT_TRUE(server.ok()) << server.status();
  client::LweClientOptions options;
  options.server = (*server)->address();
  options.protocol = "lwe-exppack-s";
  auto a = client::LweClient::Connect(options);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = client::LweClient::Connect(options);  // evicts a's keys
  ASSERT_TRUE(b.ok()) << b.status();
  auto words = (*a)->LookupWords({kRows - 1});  // ABORTED, keys again (evicting b's), retried
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words,
            std::vector<uint32_t>(table_->row(kRows - 1).begin(), table_->row(kRows - 1).end()));
  EXPECT_EQ((*a)->key_uploads(), 2u);
  EXPECT_GE((*a)->last_call().bytes_up, (*a)->table().key_bytes);  // the upload counts
  words = (*b)->LookupWords({0});
  ASSERT_TRUE(words.ok()) << words.status();
  EXPECT_EQ(*words, std::vector<uint32_t>(table_->row(0).begin(), table_->row(0).end()));
  EXPECT_EQ((*b)->key_uploads(), 2u);
}

TEST_F(LwePackRpcTest, HybridSelectsWithItsBitsAndRefusesOtherSelections) {
  // --lwe-records-per-column=100: three packed ciphertexts and two window starts (one bit).
  auto server = testing::StartLweServer(path_, "lwe-hybrid", {"--lwe-records-per-column=100"});
  ASSERT_TRUE(server.ok()) << server.status();
  capnp::EzRpcClient hello_rpc("127.0.0.1", (*server)->port());
  auto hello =
      hello_rpc.getMain<rpc::VeilServer>().helloRequest().send().wait(hello_rpc.getWaitScope());
  EXPECT_EQ(std::string(hello.getHello().getProtocol().cStr()), "lwe-hybrid");
  RawSession session((*server)->port());
  auto reply = session.Config();
  rpc::LwePackConfig::Reader c = reply.getConfig();
  // The bit travels in one seeded ciphertext; the keys add the conversion key.
  const lattice::RingContext ring = *lattice::RingContext::Create(lattice::RingParams::Default());
  EXPECT_EQ(c.getSelectionBytes(), 49184u);
  EXPECT_EQ(c.getResponseBytes(), 2u * 32768);
  EXPECT_EQ(c.getExpansionKeyBytes(), lattice::HybridKeyBytes(ring));
  EXPECT_EQ(c.getExpansionKeyBytes(), 3516676u + 167468);

  // The client's config: the instance the server makes with 100 records per column.
  lattice::LweServerOptions with_k;
  with_k.shape.packed_ring_n = 4096;
  with_k.shape.records_per_column = 100;
  auto lwe = lattice::LweServer::FromTable(*table_, with_k);
  ASSERT_TRUE(lwe.ok()) << lwe.status();
  const lattice::LweConfig config = (*lwe)->config();
  auto client = lattice::PackedSimpleClient::Create(config, lattice::RingParams::Default(),
                                                    lattice::PackedProtocol::kHybrid);
  ASSERT_TRUE(client.ok()) << client.status();
  // ExpPack(S)'s keys (no conversion key) are too short to install: the answer is refused; the
  // hybrid's install.
  auto exppack = lattice::PackedSimpleClient::Create(config);
  ASSERT_TRUE(exppack.ok()) << exppack.status();
  auto installed = session.UploadAll((*exppack)->expansion_keys(), c.getMaxChunkBytes());
  ASSERT_TRUE(installed.ok()) << installed.status();
  EXPECT_FALSE(*installed);
  auto short_query = (*exppack)->MakeQuery(0);
  ASSERT_TRUE(short_query.ok());
  auto refused =
      session.Answer(short_query->query, short_query->ciphertext, std::vector<uint8_t>(49184));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("not installed yet"));
  RawSession fresh((*server)->port());
  reply = fresh.Config();
  installed = fresh.UploadAll((*client)->expansion_keys(), c.getMaxChunkBytes());
  ASSERT_TRUE(installed.ok()) << installed.status();
  const uint64_t row = 2007;  // slot 64: the window starting at ciphertext 1
  auto query = (*client)->MakeQuery(row);
  ASSERT_TRUE(query.ok());
  ASSERT_EQ(query->selection.size(), 49184u);
  // No selection, one of another size, one with a residue above its prime.
  auto response = fresh.Answer(query->query, query->ciphertext);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("a selection of 0 bytes"));
  std::vector<uint8_t> longer = query->selection;
  longer.push_back(0);
  response = fresh.Answer(query->query, query->ciphertext, longer);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  std::vector<uint8_t> above = query->selection;
  for (size_t i = 32; i < 36; ++i) above[i] = 0xff;
  response = fresh.Answer(query->query, query->ciphertext, above);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("not below"));
  response = fresh.Answer(query->query, query->ciphertext, query->selection);
  ASSERT_TRUE(response.ok()) << response.status();
  std::vector<uint8_t> record(config_.shape.record_bytes);
  ASSERT_TRUE((*client)->Decode(row, *response, absl::MakeSpan(record)).ok());
  EXPECT_EQ(record, Record(row));

  // The client library speaks it; a client of lwe-exppack-s is refused by the hello.
  client::LweClientOptions options;
  options.server = (*server)->address();
  options.protocol = "lwe-hybrid";
  auto hybrid = client::LweClient::Connect(options);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_EQ((*hybrid)->table().query_bytes, 4 * 31 + 2 * 49184);
  EXPECT_EQ((*hybrid)->table().answer_bytes, 2u * 32768);
  auto words = (*hybrid)->LookupWords({3, kRows - 1});
  ASSERT_TRUE(words.ok()) << words.status();
  std::vector<uint32_t> want(table_->row(3).begin(), table_->row(3).end());
  want.insert(want.end(), table_->row(kRows - 1).begin(), table_->row(kRows - 1).end());
  EXPECT_EQ(*words, want);
  options.protocol = "lwe-exppack-s";
  auto other = client::LweClient::Connect(options);
  EXPECT_FALSE(other.ok());
}

TEST_F(LwePackRpcTest, ExpPackDServesSmallRowsWithoutAHint) {
  // 2,000 rows of one float (4 bytes): four expansions per lookup.
  auto path =
      testing::WriteRandomTable("lwe_pack_d.veil", embedding::RowFormat::kFp32, 2000, 1, 14);
  ASSERT_TRUE(path.ok()) << path.status();
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok()) << table.status();
  auto server = testing::StartLweServer(*path, "lwe-exppack-d", {"--threads=2"});
  ASSERT_TRUE(server.ok()) << server.status();
  RawSession session((*server)->port());
  auto reply = session.Config();
  rpc::LwePackConfig::Reader c = reply.getConfig();
  EXPECT_EQ(c.getLwe().getLweProtocol(), 2u);  // DoublePIR
  EXPECT_EQ(c.getCiphertextsPerQuery(), 4u);
  EXPECT_EQ(c.getSecretCiphertextBytes(), 49184u);
  EXPECT_EQ(c.getSelectionBytes(), 0u);
  EXPECT_EQ(c.getResponseBytes(), 4u * 32768 + 4 * (4 * 4 + 4096));
  EXPECT_EQ(c.getLwe().getQueryWords(), c.getLwe().getD0() + 4 * c.getLwe().getD1());

  client::LweClientOptions options;
  options.server = (*server)->address();
  options.protocol = "lwe-exppack-d";
  auto lwe = client::LweClient::Connect(options);
  ASSERT_TRUE(lwe.ok()) << lwe.status();
  EXPECT_EQ((*lwe)->table().hint_bytes, 0u);
  EXPECT_EQ((*lwe)->table().query_bytes, 4 * c.getLwe().getQueryWords() + 4 * 49184);
  auto words = (*lwe)->LookupWords({0, 1999, 777});
  ASSERT_TRUE(words.ok()) << words.status();
  std::vector<uint32_t> want;
  for (uint64_t row : {uint64_t{0}, uint64_t{1999}, uint64_t{777}}) {
    want.insert(want.end(), (*table)->row(row).begin(), (*table)->row(row).end());
  }
  EXPECT_EQ(*words, want);

  // One ciphertext where four are due is refused before anything else.
  std::vector<uint32_t> query(c.getLwe().getQueryWords());
  std::vector<uint8_t> one(49184);
  auto response = session.Answer(query, one);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("a ciphertext of 49184 bytes"));
}

TEST_F(LwePackRpcTest, DoublePackServesTheTableWithASecondFold) {
  // The packed shape is one ciphertext (D1 = 4,000): the second fold has one column and its
  // answer, 2N residues x 4 digits, packs into 8 ciphertexts (tall tables are pir_lattice_test's).
  auto server = testing::StartLweServer(path_, "lwe-double-pack");
  ASSERT_TRUE(server.ok()) << server.status();
  RawSession session((*server)->port());
  auto reply = session.Config();
  rpc::LwePackConfig::Reader c = reply.getConfig();
  EXPECT_EQ(c.getCiphertextsPerQuery(), 2u);
  EXPECT_EQ(c.getResponseBytes(), 8u * 32768);
  client::LweClientOptions options;
  options.server = (*server)->address();
  options.protocol = "lwe-double-pack";
  auto lwe = client::LweClient::Connect(options);
  ASSERT_TRUE(lwe.ok()) << lwe.status();
  EXPECT_EQ((*lwe)->table().query_bytes, 4 * (config_.shape.d0 + 1) + 2 * 49184);
  auto words = (*lwe)->LookupWords({kRows - 1, 5});
  ASSERT_TRUE(words.ok()) << words.status();
  std::vector<uint32_t> want(table_->row(kRows - 1).begin(), table_->row(kRows - 1).end());
  want.insert(want.end(), table_->row(5).begin(), table_->row(5).end());
  EXPECT_EQ(*words, want);
  // The first level's query alone (no second query) is refused.
  std::vector<uint32_t> query(config_.shape.d0);
  std::vector<uint8_t> ciphertexts(2 * 49184);
  auto response = session.Answer(query, ciphertexts);
  EXPECT_EQ(response.status().code(), absl::StatusCode::kInvalidArgument) << response.status();
  EXPECT_THAT(response.status().message(), HasSubstr("a query of"));
}

TEST_F(LwePackRpcTest, RecordsPerColumnGivesHybridAndDoublePackSeveralCiphertexts) {
  // --lwe-records-per-column=100: D1 = 100 records x 100 bytes = 10,000 rows, three packed
  // ciphertexts; a 100-byte record touches a window of two (4,096 is not a multiple of 100), so
  // two windows start: the hybrid sends one bit (in a ciphertext) and gets two back, double
  // packing folds over two starts and gets 16. Rows in both windows decode.
  const lattice::RingContext ring = *lattice::RingContext::Create(lattice::RingParams::Default());
  // Slots (row / 31) 0, 1, 48, 64 and 96: windows starting at ciphertexts 0 and 1.
  const std::vector<uint64_t> rows{0, 40, 1500, 2007, kRows - 1};
  std::vector<uint32_t> want;
  for (uint64_t row : rows)
    want.insert(want.end(), table_->row(row).begin(), table_->row(row).end());
  for (const char* protocol : {"lwe-hybrid", "lwe-double-pack"}) {
    SCOPED_TRACE(protocol);
    auto server = testing::StartLweServer(path_, protocol, {"--lwe-records-per-column=100"});
    ASSERT_TRUE(server.ok()) << server.status();
    RawSession session((*server)->port());
    auto reply = session.Config();
    rpc::LwePackConfig::Reader c = reply.getConfig();
    EXPECT_EQ(c.getLwe().getRecordsPerColumn(), 100u);
    EXPECT_EQ(c.getLwe().getD1(), 10000u);
    EXPECT_EQ(c.getLwe().getD0(), 31u);
    const bool hybrid = std::string_view(protocol) == "lwe-hybrid";
    if (hybrid) {
      EXPECT_EQ(c.getSelectionBytes(), lattice::SecretCiphertextBytes(ring));
      EXPECT_EQ(c.getResponseBytes(), 2u * 32768);
    } else {
      EXPECT_EQ(c.getResponseBytes(), 16u * 32768);
    }
    client::LweClientOptions options;
    options.server = (*server)->address();
    options.protocol = protocol;
    auto lwe = client::LweClient::Connect(options);
    ASSERT_TRUE(lwe.ok()) << lwe.status();
    // The second fold's query: one word per window start.
    EXPECT_EQ((*lwe)->table().query_bytes,
              4 * (31 + (hybrid ? 0 : 2)) + (hybrid ? 1 : 2) * 49184 + c.getSelectionBytes());
    auto words = (*lwe)->LookupWords(rows);
    ASSERT_TRUE(words.ok()) << words.status();
    EXPECT_EQ(*words, want);
  }
  // A K the table cannot take is refused at start, naming the shape.
  auto bad = testing::StartLweServer(path_, "lwe-exppack-s", {"--lwe-records-per-column=5000"});
  EXPECT_FALSE(bad.ok());
}

// The start-up log of a server run with --backend `backend`, and whether it started.
std::string StartUpLog(const std::string& table, const std::string& backend, bool* started,
                       const std::vector<uint64_t>& rows, std::vector<uint32_t>* words) {
  const std::string log = ::testing::TempDir() + "lwe_pack_backend_" + backend + ".log";
  std::remove(log.c_str());
  auto server = testing::StartLweServer(table, "lwe-exppack-s", {"--backend=" + backend}, log);
  *started = server.ok();
  if (server.ok()) {
    client::LweClientOptions options;
    options.server = (*server)->address();
    options.protocol = "lwe-exppack-s";
    auto lwe = client::LweClient::Connect(options);
    EXPECT_TRUE(lwe.ok()) << lwe.status();
    if (lwe.ok()) {
      auto got = (*lwe)->LookupWords(rows);
      EXPECT_TRUE(got.ok()) << got.status();
      if (got.ok()) *words = *std::move(got);
    }
    server->reset();  // the process ends before its log is read
  }
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST_F(LwePackRpcTest, TheExpansionRunsWhereTheBackendSays) {
  const std::vector<uint64_t> rows{1, kRows - 1};
  std::vector<uint32_t> want;
  for (uint64_t row : rows)
    want.insert(want.end(), table_->row(row).begin(), table_->row(row).end());
  bool started = false;
  std::vector<uint32_t> words;
  const std::string cpu = StartUpLog(path_, "cpu", &started, rows, &words);
  ASSERT_TRUE(started) << cpu;
  EXPECT_THAT(cpu, HasSubstr("expansion and packing cpu"));
  EXPECT_EQ(words, want);
  // --backend=gpu: on a device (gpu/exppack.h), else refused at start, saying why, rather than
  // served on the CPU.
  words.clear();
  const std::string gpu = StartUpLog(path_, "gpu", &started, rows, &words);
  if (started) {
    EXPECT_THAT(gpu, HasSubstr("expansion and packing gpu"));
    EXPECT_EQ(words, want);
  } else {
    EXPECT_THAT(gpu, ::testing::AnyOf(HasSubstr("no GPU backend"), HasSubstr("no CUDA device")));
  }
}

}  // namespace
}  // namespace veil
