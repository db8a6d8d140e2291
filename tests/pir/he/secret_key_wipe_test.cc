// A BFV secret key dropped by an assignment is wiped first: this binary links the debug allocator
// of tests/testing/freed_scan.h, which scans every buffer freed during an assignment for any
// 16-byte piece of the key it replaced. The control case (a plain vector of the same words) shows
// the scan sees a dropped, unwiped copy.
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/bfv.h"
#include "pir/he/bfv_context.h"
#include "pir/he/bfv_params.h"
#include "tests/testing/freed_scan.h"

namespace veil::he {
namespace {

class SecretKeyWipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ctx_ = *BfvContext::Create(*BfvParams::Standard(12, 20));
    key_ = GenerateSecretKey(*ctx_);
    testing::ClearWatched();
    // Its first 4096 words (the scan's pool is bounded): any buffer holding the key holds them.
    ASSERT_GE(key_.ntt.size(), 4096u);
    testing::WatchSecret(key_.ntt.data(), 4096 * sizeof(uint64_t));
  }

  std::shared_ptr<const BfvContext> ctx_;
  SecretKey key_;
};

TEST_F(SecretKeyWipeTest, AnUnwipedCopyIsSeenWhenFreed) {
  std::vector<uint64_t> copy = key_.ntt;
  EXPECT_GE(testing::FreedBuffersHolding([&] { copy = std::vector<uint64_t>(); })[0], 1);
}

TEST_F(SecretKeyWipeTest, MoveAssignmentWipesTheKeyItDrops) {
  SecretKey other = GenerateSecretKey(*ctx_);
  EXPECT_EQ(testing::FreedBuffersHolding([&] { key_ = std::move(other); })[0], 0);
}

TEST_F(SecretKeyWipeTest, CopyAssignmentWipesTheKeyItDrops) {
  // A larger key: the copy reallocates, freeing the old buffer.
  SecretKey larger;
  larger.ntt.assign(2 * key_.ntt.size(), 7);
  EXPECT_EQ(testing::FreedBuffersHolding([&] { key_ = larger; })[0], 0);
  EXPECT_EQ(key_.ntt, larger.ntt);
}

TEST_F(SecretKeyWipeTest, DestructionWipesTheKey) {
  auto held = std::make_unique<SecretKey>(key_);
  EXPECT_EQ(testing::FreedBuffersHolding([&] { held.reset(); })[0], 0);
}

}  // namespace
}  // namespace veil::he
