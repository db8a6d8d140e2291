// Rolling table updates (issue 10): real servers move from table version 1 to 2 (SIGHUP after the
// --table file is replaced) while a client looks rows up. No lookup fails, every row is version
// 1's or version 2's (all rows of one lookup from the same version, their tags checked), a client
// moves to version 2 only once both parties serve it, a version past its grace period is refused
// and freed, and a bad new version is refused while the old one keeps serving.
#include <capnp/ez-rpc.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "pir/two_server/query.h"
#include "rpc/status.h"
#include "rpc/veil.capnp.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kRows = 200;
constexpr uint32_t kDim = 8;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Which version a lookup's rows come from.
enum class Version { kOne, kTwo, kMixed };

class RollingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    key_ = embedding::NewRowKey();
    key_file_ = testing::TempPath("table.rowkey");
    ASSERT_TRUE(embedding::WriteRowKeyFile(key_file_, key_).ok());
    // Two versions of one table: other contents, the same shape and row key.
    for (int v = 0; v < 2; ++v) {
      auto path = testing::WriteRandomTable(absl::StrCat("v", v + 1, ".veil"),
                                            embedding::RowFormat::kFp32, kRows, kDim, 10 + v,
                                            /*epoch=*/v + 1, &key_);
      ASSERT_TRUE(path.ok()) << path.status();
      version_path_[v] = *path;
      auto table = embedding::Table::Open(*path);
      ASSERT_TRUE(table.ok());
      version_[v] = *std::move(table);
    }
  }

  // Both parties on version 1, each from a table file of its own (rolled one at a time).
  void StartServers(std::vector<std::string> args) {
    for (int party = 0; party < 2; ++party) {
      served_path_[party] = testing::TempPath(absl::StrCat("served", party, ".veil"));
      std::filesystem::copy_file(version_path_[0], served_path_[party]);
      log_path_[party] = testing::TempPath(absl::StrCat("server", party, ".log"));
      tools::ServerProcessOptions o;
      o.binary = VEIL_SERVER_BINARY;
      o.party = party;
      o.table_path = served_path_[party];
      o.extra_args = args;
      o.log_path = log_path_[party];
      auto started = tools::ServerProcess::Start(o);
      ASSERT_TRUE(started.ok()) << started.status();
      server_[party] = *std::move(started);
    }
  }

  // A client of the two servers, with the row key.
  client::ClientOptions Options() const {
    client::ClientOptions o;
    o.server0 = server_[0]->address();
    o.server1 = server_[1]->address();
    o.row_key_file = key_file_;
    return o;
  }

  std::unique_ptr<client::Client> Connect() {
    auto c = client::Client::Connect(Options());
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Rolls `party` to version 2 and waits until it serves versions 1 and 2.
  void RollToTwo(int party) {
    ASSERT_TRUE(server_[party]->RollTable(served_path_[party], version_path_[1]).ok());
    absl::Status rolled = testing::WaitForEpochs(*server_[party], {1, 2});
    ASSERT_TRUE(rolled.ok()) << rolled;
  }

  // The version `words` (rows `rows`, as LookupWords returns them) come from.
  Version VersionOf(const std::vector<uint64_t>& rows, const std::vector<uint32_t>& words) const {
    bool matches[2] = {true, true};
    for (int v = 0; v < 2; ++v) {
      for (size_t i = 0; i < rows.size(); ++i) {
        auto row = version_[v]->row(rows[i]).first(kDim);
        matches[v] = matches[v] && std::equal(row.begin(), row.end(), words.begin() + i * kDim);
      }
    }
    return matches[0] ? Version::kOne : matches[1] ? Version::kTwo : Version::kMixed;
  }

  // Looks up `rows` and returns the version they come from; fails the test on an error.
  Version LookUp(client::Client& c, const std::vector<uint64_t>& rows) {
    auto words = c.LookupWords(rows);
    EXPECT_TRUE(words.ok()) << words.status();
    return words.ok() ? VersionOf(rows, *words) : Version::kMixed;
  }

  // Server `party`'s `answer` with one key for row 3, naming table version `epoch` (`digest`).
  absl::Status AnswerNaming(int party, uint64_t epoch, const embedding::TableDigestBytes& digest) {
    capnp::EzRpcClient rpc("127.0.0.1", server_[party]->port());
    auto request = rpc.getMain<rpc::PirServer>().answerRequest();
    const std::vector<uint8_t> key = pir::MakeQuery(kRows, 3, 1)->key[party].Serialize();
    request.initKeys(1).set(0, capnp::Data::Reader(key.data(), key.size()));
    request.initTable().setEpoch(epoch);
    request.getTable().setDigest(capnp::Data::Reader(digest.data(), digest.size()));
    try {
      auto reply = request.send().wait(rpc.getWaitScope());
      EXPECT_EQ(reply.getTable().getEpoch(), epoch);
      return absl::OkStatus();
    } catch (const kj::Exception& e) {
      return rpc::ExceptionToStatus(e, "server");
    }
  }

  embedding::RowKey key_;
  std::string key_file_;
  std::string version_path_[2];
  std::unique_ptr<embedding::Table> version_[2];
  std::string served_path_[2];
  std::string log_path_[2];
  std::unique_ptr<tools::ServerProcess> server_[2];
};

TEST_F(RollingTest, RollingBothPartiesFailsNoLookupAndNeverMixesVersions) {
  StartServers({"--epoch_grace_s=60"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  std::atomic<bool> stop{false};
  std::atomic<int> failed{0}, mixed{0}, ones{0}, twos{0}, twos_then_ones{0};
  std::thread lookups([&] {
    std::mt19937_64 rng(5);
    bool seen_two = false;
    while (!stop) {
      std::vector<uint64_t> rows;
      for (int i = 0; i < 4; ++i) rows.push_back(rng() % kRows);
      auto words = c->LookupWords(rows);
      if (!words.ok()) {
        ++failed;
        ADD_FAILURE() << words.status();
        continue;
      }
      switch (VersionOf(rows, *words)) {
        case Version::kOne:
          ++ones;
          if (seen_two) ++twos_then_ones;
          break;
        case Version::kTwo:
          ++twos;
          seen_two = true;
          break;
        case Version::kMixed:
          ++mixed;
          break;
      }
    }
  });
  absl::SleepFor(absl::Milliseconds(200));
  RollToTwo(0);
  absl::SleepFor(absl::Milliseconds(200));
  RollToTwo(1);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (twos < 20 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(10));
  stop = true;
  lookups.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(mixed, 0);
  EXPECT_GT(ones, 0);
  EXPECT_GE(twos, 20);
  EXPECT_EQ(twos_then_ones, 0) << "the client went back to version 1";
  EXPECT_EQ(c->table().epoch, 2u);
  EXPECT_EQ(c->table().digest_hex, version_[1]->DigestHex());
  EXPECT_EQ(LookUp(*c, {0, 1, kRows - 1}), Version::kTwo);
}

TEST_F(RollingTest, OnePartyRolledKeepsTheClientOnTheCommonVersion) {
  StartServers({"--epoch_grace_s=60"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  RollToTwo(0);
  // Server 0 announces version 2 in its replies; server 1 serves only version 1.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(LookUp(*c, {7, 8}), Version::kOne) << i;
  EXPECT_EQ(c->table().epoch, 1u);
  // A new client also picks the newest common version.
  auto fresh = Connect();
  ASSERT_NE(fresh, nullptr);
  EXPECT_EQ(fresh->table().epoch, 1u);

  RollToTwo(1);
  // The first call's replies announce version 2; the next call moves to it.
  EXPECT_EQ(LookUp(*c, {7, 8}), Version::kOne);
  EXPECT_EQ(LookUp(*c, {7, 8}), Version::kTwo);
  EXPECT_EQ(c->table().epoch, 2u);
  EXPECT_EQ(Connect()->table().epoch, 2u);
}

// A lying dpf2 party: says hello, serves whatever config it is given (a real server's, then a
// tampered one, set from the test's thread while it serves) and answers every lookup with
// FAILED_PRECONDITION.
class LyingParty final : public rpc::PirServer::Server {
 public:
  void SetConfig(const rpc::Config::Reader& config) {
    absl::MutexLock lock(&mu_);
    config_ = std::make_unique<capnp::MallocMessageBuilder>();
    config_->setRoot(config);
  }

 protected:
  kj::Promise<void> hello(HelloContext context) override {
    return testing::AnswerHello(context, "dpf2");
  }
  kj::Promise<void> config(ConfigContext context) override {
    absl::MutexLock lock(&mu_);
    context.getResults().setConfig(config_->getRoot<rpc::Config>().asReader());
    return kj::READY_NOW;
  }
  kj::Promise<void> answer(AnswerContext) override {
    return rpc::StatusToException(absl::FailedPreconditionError("this version is not served"));
  }

 private:
  absl::Mutex mu_;
  std::unique_ptr<capnp::MallocMessageBuilder> config_ ABSL_GUARDED_BY(mu_);
};

TEST_F(RollingTest, ASessionNeverMovesToAnOlderVersion) {
  // Servers that announce only an older version on live connections would hold the client on
  // stale rows (the row tags do not bind the version): it stays on its own and fails the calls.
  StartServers({"--epoch_grace_s=60"});
  RollToTwo(0);
  RollToTwo(1);
  std::vector<std::unique_ptr<capnp::EzRpcClient>> real;
  std::vector<capnp::Response<rpc::PirServer::ConfigResults>> configs;
  std::vector<std::unique_ptr<LyingParty>> parties;  // outlive the servers serving them
  std::vector<std::unique_ptr<testing::StandInServer>> liars;
  for (int party = 0; party < 2; ++party) {
    real.push_back(std::make_unique<capnp::EzRpcClient>("127.0.0.1", server_[party]->port()));
    configs.push_back(real.back()->getMain<rpc::PirServer>().configRequest().send().wait(
        real.back()->getWaitScope()));
    parties.push_back(std::make_unique<LyingParty>());
    parties.back()->SetConfig(configs.back().getConfig());
    liars.push_back(std::make_unique<testing::StandInServer>([p = parties.back().get()] {
      return capnp::Capability::Client(kj::Own<LyingParty>(p, kj::NullDisposer::instance));
    }));
  }
  client::ClientOptions o = Options();
  o.server0 = liars[0]->address();
  o.server1 = liars[1]->address();
  auto c = client::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ((*c)->table().epoch, 2u);
  // Both now list version 1 alone (version 1's id, as the real servers still serve it).
  for (int party = 0; party < 2; ++party) {
    capnp::MallocMessageBuilder older;
    older.setRoot(configs[party].getConfig());
    rpc::Config::Builder config = older.getRoot<rpc::Config>();
    config.setTable(config.getEpochs()[0].asReader());
    capnp::MallocMessageBuilder one;
    auto epochs = one.initRoot<rpc::Config>().initEpochs(1);
    epochs.setWithCaveats(0, config.getEpochs()[0].asReader());
    config.setEpochs(epochs.asReader());
    ASSERT_EQ(config.getTable().getEpoch(), 1u);
    parties[party]->SetConfig(config.asReader());
  }
  auto words = (*c)->LookupWords({7});
  EXPECT_TRUE(absl::IsFailedPrecondition(words.status())) << words.status();
  EXPECT_EQ((*c)->table().epoch, 2u) << "the session went back to an older version";
}

TEST_F(RollingTest, ANewClientRefusesVersionsOlderThanItsMinEpoch) {
  // Mid-roll (party 1 still on version 1 alone), a new client takes version 1, whose rows pass
  // their tags (same row key); one that knows version 2 exists refuses it until both serve it.
  StartServers({"--epoch_grace_s=60"});
  RollToTwo(0);
  client::ClientOptions o = Options();
  auto any = client::Client::Connect(o);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ((*any)->table().epoch, 1u);
  o.min_epoch = 2;
  auto refused = client::Client::Connect(o);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("epoch 1, older than the oldest this client "
                                                    "accepts (min_epoch 2)"));
  RollToTwo(1);
  auto c = client::Client::Connect(o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->table().epoch, 2u);
  EXPECT_EQ(LookUp(**c, {3, 40}), Version::kTwo);
}

TEST_F(RollingTest, AVersionPastItsGraceIsFreedAndRefusedWhileIdleClientsMoveOn) {
  StartServers({"--epoch_grace_s=1"});
  auto idle = Connect();  // on version 1, makes no call during the roll
  ASSERT_NE(idle, nullptr);
  RollToTwo(0);
  RollToTwo(1);
  // The grace period ends: version 1 is no longer listed (and its memory goes with it).
  for (int party = 0; party < 2; ++party) {
    absl::Status freed = testing::WaitForEpochs(*server_[party], {2}, absl::Seconds(10));
    ASSERT_TRUE(freed.ok()) << freed;
  }
  EXPECT_THAT(ReadAll(log_path_[0]), HasSubstr("epoch 1's grace period is over"));

  absl::Status old = AnswerNaming(0, 1, version_[0]->digest());
  EXPECT_TRUE(absl::IsFailedPrecondition(old)) << old;
  EXPECT_THAT(old.message(), HasSubstr("epoch 1 is no longer served (serving 2)"));
  absl::Status unknown = AnswerNaming(1, 9, version_[1]->digest());
  EXPECT_TRUE(absl::IsFailedPrecondition(unknown)) << unknown;
  EXPECT_THAT(unknown.message(), HasSubstr("epoch 9 is not served (serving 2)"));
  absl::Status wrong_digest = AnswerNaming(1, 2, version_[0]->digest());
  EXPECT_TRUE(absl::IsFailedPrecondition(wrong_digest)) << wrong_digest;
  EXPECT_THAT(wrong_digest.message(), HasSubstr("epoch 2 here has digest"));
  EXPECT_TRUE(AnswerNaming(1, 2, version_[1]->digest()).ok());

  // The idle client's call names version 1, is refused, and goes again on version 2.
  EXPECT_EQ(LookUp(*idle, {3, 4, 5}), Version::kTwo);
  EXPECT_EQ(idle->table().epoch, 2u);
}

TEST_F(RollingTest, BadNewVersionsAreRefusedAndTheServedOneKeepsServing) {
  StartServers({"--epoch_grace_s=60"});
  auto c = Connect();
  ASSERT_NE(c, nullptr);
  // Another shape (fewer rows), a file whose rows do not match its digest, an epoch that is not
  // newer, and a file that is not a table.
  auto smaller = testing::WriteRandomTable("smaller.veil", embedding::RowFormat::kFp32, kRows / 2,
                                           kDim, 3, /*epoch=*/2, &key_);
  auto same_epoch = testing::WriteRandomTable("same_epoch.veil", embedding::RowFormat::kFp32, kRows,
                                              kDim, 4, /*epoch=*/1, &key_);
  ASSERT_TRUE(smaller.ok() && same_epoch.ok());
  std::string bytes = ReadAll(version_path_[1]);
  bytes[sizeof(embedding::TableHeader) + 100 * version_[1]->stride_words() * 4 + 3] ^= 0x04;
  const std::string corrupted = testing::TempPath("corrupted.veil");
  std::ofstream(corrupted, std::ios::binary) << bytes;
  const std::string junk = testing::TempPath("junk.veil");
  std::ofstream(junk) << "not a table";
  const std::pair<std::string, std::string> cases[] = {
      {*smaller, "is not the served one's"},
      {corrupted, "digest mismatch"},
      {*same_epoch, "is not newer than the served 1"},
      {junk, "roll refused"}};
  int refusals = 0;
  for (const auto& [file, reason] : cases) {
    SCOPED_TRACE(reason);
    ASSERT_TRUE(server_[0]->RollTable(served_path_[0], file).ok());
    ++refusals;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    auto count = [&] {
      const std::string log = ReadAll(log_path_[0]);
      int n = 0;
      for (size_t at = log.find("roll refused"); at != std::string::npos;
           at = log.find("roll refused", at + 1)) {
        ++n;
      }
      return n;
    };
    while (count() < refusals && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(20));
    ASSERT_EQ(count(), refusals);
    EXPECT_THAT(ReadAll(log_path_[0]), HasSubstr(reason));
    EXPECT_THAT(testing::ServedEpochs(*server_[0]).value(), ElementsAre(1));
    EXPECT_EQ(LookUp(*c, {1, 100, 150}), Version::kOne);
  }
  // A good version after the refused ones is taken.
  RollToTwo(0);
}

}  // namespace
}  // namespace veil
