// The LWE secret of a pending lookup is wiped when the lookup is dropped, by destruction or by a
// move-assignment over it: this binary links the debug allocator of tests/testing/freed_scan.h,
// which scans every buffer freed meanwhile for any 16-byte piece of the secret. The secret is
// known to the test because the query is made from a seeded source, and the same seed gives the
// same secret (SampleSecret draws it first).
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/lattice/client.h"
#include "tests/pir/lattice/seeded_source.h"
#include "tests/pir/lattice/test_support.h"
#include "tests/testing/freed_scan.h"

namespace veil::lattice {
namespace {

class PendingLookupWipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937_64 gen(8);
    auto server = LweServer::FromRecords(testing::RandomRecords(40, 4, gen), 40, 4,
                                         testing::DigestOf(5), LweServerOptions());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    client_ = testing::ClientFor(*server_);
    ASSERT_NE(client_, nullptr);
    SeededSource same(11);
    secret_.resize(kLweDimension);
    SampleSecret(same, absl::MakeSpan(secret_));
    ::veil::testing::ClearWatched();
    ::veil::testing::WatchSecret(secret_.data(), secret_.size() * sizeof(uint32_t));
  }

  // A lookup whose secret is secret_.
  PendingLookup Watched() {
    SeededSource source(11);
    std::vector<uint32_t> query(server_->shape().query_words());
    auto lookup = client_->MakeQuery(3, absl::MakeSpan(query), source);
    EXPECT_TRUE(lookup.ok()) << lookup.status();
    return *std::move(lookup);
  }

  std::unique_ptr<LweServer> server_;
  std::unique_ptr<LweClient> client_;
  std::vector<uint32_t> secret_;
};

TEST_F(PendingLookupWipeTest, AnUnwipedCopyIsSeenWhenFreed) {
  std::vector<uint32_t> copy = secret_;
  EXPECT_GE(::veil::testing::FreedBuffersHolding([&] { copy = std::vector<uint32_t>(); })[0], 1);
}

TEST_F(PendingLookupWipeTest, DestructionAndMoveAssignmentWipeTheSecret) {
  auto held = std::make_unique<PendingLookup>(Watched());
  EXPECT_EQ(::veil::testing::FreedBuffersHolding([&] { held.reset(); })[0], 0);

  PendingLookup lookup = Watched();
  std::vector<uint32_t> query(server_->shape().query_words());
  PendingLookup other = *client_->MakeQuery(5, absl::MakeSpan(query));
  EXPECT_EQ(::veil::testing::FreedBuffersHolding([&] { lookup = std::move(other); })[0], 0);
  EXPECT_EQ(lookup.row(), 5u);
}

}  // namespace
}  // namespace veil::lattice
