// A lookup leaves no copy of the wanted row, nor the two answer shares that add up to it, in the
// client's freed heap memory. This binary interposes free() (which operator delete, kj's arrays
// and capnp's message buffers all end in) with a debug allocator that, while a watch is active,
// scans every buffer handed back for any 16-byte piece of the wanted row, and records each freed
// buffer's size and first 16 bytes: two freed buffers of one size whose first words add up (or XOR)
// to the row's first words are the two servers' shares. The servers run as processes of their own.
#include <malloc.h>
#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "embedding/table.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "tests/server/two_servers.h"

extern "C" void __libc_free(void* p);  // glibc's free, under the interposed one below

namespace veil::client {
namespace {

// Watched data and records live in static storage: the allocator must not see them freed.
constexpr uint32_t kDim = 16;  // float32 rows of 64 bytes
alignas(16) uint32_t g_row[kDim];
struct Freed {
  size_t size;
  uint32_t first[4];
};
constexpr int kMaxFreed = 1 << 18;
Freed g_freed[kMaxFreed];
std::atomic<int> g_num_freed{0};
std::atomic<bool> g_watching{false};
std::atomic<int> g_row_leaks{0};

void InspectFreed(void* p) {
  if (p == nullptr || !g_watching.load()) return;
  const auto* bytes = static_cast<const uint8_t*>(p);
  const size_t n = malloc_usable_size(p);
  bool holds = false;
  for (size_t i = 0; i + 16 <= n && !holds; ++i) {
    for (size_t j = 0; j + 16 <= sizeof(g_row); j += 16) {
      if (std::memcmp(bytes + i, reinterpret_cast<const uint8_t*>(g_row) + j, 16) == 0) {
        holds = true;
      }
    }
  }
  if (holds) g_row_leaks.fetch_add(1);
  if (n < 16) return;
  const int k = g_num_freed.fetch_add(1);
  if (k >= kMaxFreed) return;
  g_freed[k].size = n;
  std::memcpy(g_freed[k].first, p, 16);
}

// Pairs of freed buffers of one size whose first four words add up (mod 2^32, or by XOR) to the
// row's: the two servers' shares of it.
int SharePairs() {
  const int n = std::min(g_num_freed.load(), kMaxFreed);
  std::sort(g_freed, g_freed + n, [](const Freed& a, const Freed& b) { return a.size < b.size; });
  int pairs = 0;
  for (int a = 0; a < n; ++a) {
    for (int b = a + 1; b < n && g_freed[b].size == g_freed[a].size; ++b) {
      bool sum = true, xor_ = true;
      for (int w = 0; w < 4; ++w) {
        sum &= g_freed[a].first[w] + g_freed[b].first[w] == g_row[w];
        xor_ &= (g_freed[a].first[w] ^ g_freed[b].first[w]) == g_row[w];
      }
      pairs += sum || xor_;
    }
  }
  return pairs;
}

class ClientWipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("wipe.veil", embedding::RowFormat::kFp32, kRows, kDim,
                                          /*seed=*/17);
    ASSERT_TRUE(path.ok()) << path.status();
    auto table = embedding::Table::Open(*path);
    ASSERT_TRUE(table.ok()) << table.status();
    table_ = *std::move(table);
    auto servers = testing::StartTwoServers(*path, *path);
    ASSERT_TRUE(servers.ok()) << servers.status();
    servers_ = *std::move(servers);
    ClientOptions options;
    options.server0 = servers_.address(0);
    options.server1 = servers_.address(1);
    auto client = Client::Connect(options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    auto row = table_->row(kWanted);
    ASSERT_EQ(row.size(), kDim);
    std::copy(row.begin(), row.end(), g_row);
    g_num_freed = 0;
    g_row_leaks = 0;
  }

  static constexpr uint64_t kRows = 300;
  static constexpr uint64_t kWanted = 123;
  std::unique_ptr<embedding::Table> table_;
  testing::TwoServers servers_;
  std::unique_ptr<Client> client_;
};

TEST_F(ClientWipeTest, ALookupFreesNoBufferHoldingTheRowOrItsShares) {
  g_watching = true;
  {
    auto values = client_->Lookup({kWanted});
    ASSERT_TRUE(values.ok()) << values.status();
    ASSERT_EQ(values->size(), kDim);
    EXPECT_EQ(std::memcmp(values->data(), g_row, sizeof(g_row)), 0);
    sodium_memzero(values->data(), values->size() * sizeof(float));  // the caller's own copy
  }
  g_watching = false;
  EXPECT_EQ(g_row_leaks.load(), 0);
  EXPECT_EQ(SharePairs(), 0);
  EXPECT_GT(g_num_freed.load(), 0);  // the allocator saw the lookup's buffers
}

TEST_F(ClientWipeTest, AWordLookupFreesNoBufferHoldingTheRowOrItsShares) {
  g_watching = true;
  {
    auto words = client_->LookupWords({kWanted});
    ASSERT_TRUE(words.ok()) << words.status();
    ASSERT_EQ(words->size(), kDim);
    EXPECT_EQ(std::memcmp(words->data(), g_row, sizeof(g_row)), 0);
    sodium_memzero(words->data(), words->size() * sizeof(uint32_t));
  }
  g_watching = false;
  EXPECT_EQ(g_row_leaks.load(), 0);
  EXPECT_EQ(SharePairs(), 0);
}

}  // namespace
}  // namespace veil::client

// The debug allocator: glibc's free, after the scan. Interposed for the shared libraries too.
extern "C" void free(void* p) {
  veil::client::InspectFreed(p);
  __libc_free(p);
}
