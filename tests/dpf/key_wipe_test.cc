// No DpfKey operation frees heap memory that still holds key material. This binary replaces the
// global operator new/delete with a debug allocator that, while a watch is active, scans every
// buffer handed back for any 16-byte window equal to a watched secret (a root seed, a correction
// seed, a chunk of the final word). Each case runs one operation under the watch: assignments
// that drop or overwrite a key, moves, destruction, key generation, parsing and evaluation.
#include <malloc.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "dpf/eval.h"
#include "dpf/key.h"
#include "dpf/testing/seeded_keys.h"
#include "gtest/gtest.h"

namespace veil::dpf {
namespace {

// Watched secrets live in static storage: the allocator must not see them in a freed buffer.
constexpr int kMaxSecrets = 512;
Block g_secrets[kMaxSecrets];
std::atomic<int> g_num_secrets{0};
std::atomic<bool> g_watching{false};
std::atomic<int> g_leaks{0};

void InspectFreed(void* p) {
  if (p == nullptr || !g_watching.load()) return;
  const auto* bytes = static_cast<const uint8_t*>(p);
  const size_t n = malloc_usable_size(p);
  for (size_t i = 0; i + sizeof(Block) <= n; ++i) {
    for (int s = 0; s < g_num_secrets.load(); ++s) {
      if (std::memcmp(bytes + i, &g_secrets[s], sizeof(Block)) == 0) g_leaks.fetch_add(1);
    }
  }
}

void Watch(const Block& secret) {
  const int i = g_num_secrets.fetch_add(1);
  ASSERT_LT(i, kMaxSecrets);
  g_secrets[i] = secret;
}

// Every 16-byte piece of key material in `key`.
void WatchKey(const DpfKey& key) {
  Watch(key.root());
  for (const Block& cw : key.cw_seed()) Watch(cw);
  const absl::Span<const uint32_t> final_cw = key.final_cw();
  for (size_t i = 0; i + 4 <= final_cw.size(); i += 4) {
    Watch({final_cw[i] | uint64_t{final_cw[i + 1]} << 32,
           final_cw[i + 2] | uint64_t{final_cw[i + 3]} << 32});
  }
}

// Freed buffers that held a watched secret while `run` ran.
template <typename F>
int LeaksDuring(F run) {
  g_leaks = 0;
  g_watching = true;
  run();
  g_watching = false;
  return g_leaks.load();
}

class KeyWipeTest : public ::testing::Test {
 protected:
  void SetUp() override { g_num_secrets = 0; }

  // Keys of 2^log_domain points (add16: log_domain - 4 levels), reproducible per seed.
  static std::pair<DpfKey, DpfKey> Keys(int log_domain, uint64_t seed) {
    SeededRandomForTesting rng(seed);
    return *GenerateKeys(DpfParameters{log_domain}, 3, 1, rng);
  }
};

TEST_F(KeyWipeTest, TheAllocatorSeesAnUnwipedSecret) {
  auto keys = Keys(12, 1);
  WatchKey(keys.first);
  EXPECT_GT(LeaksDuring([&] { delete new std::vector<Block>(keys.first.cw_seed()); }), 0);
}

TEST_F(KeyWipeTest, CopyAssignmentWipesTheBufferItOutgrows) {
  auto small = Keys(6, 1);
  auto large = Keys(20, 2);
  WatchKey(small.first);
  EXPECT_EQ(LeaksDuring([&] { small.first = large.first; }), 0);
}

TEST_F(KeyWipeTest, CopyAssignmentLeavesNoStaleTail) {
  // Assigning a shorter key reuses the buffer: its tail must not keep the old key's seeds.
  auto large = std::make_unique<DpfKey>(Keys(20, 1).first);
  auto small = Keys(6, 2);
  WatchKey(*large);
  EXPECT_EQ(LeaksDuring([&] {
              *large = small.first;
              large.reset();
            }),
            0);
}

TEST_F(KeyWipeTest, MoveAssignmentWipesTheKeyItDrops) {
  auto a = Keys(16, 1);
  auto b = Keys(16, 2);
  WatchKey(a.first);
  EXPECT_EQ(LeaksDuring([&] { a.first = std::move(b.first); }), 0);
}

TEST_F(KeyWipeTest, MovedFromKeyHoldsNoSecret) {
  auto keys = Keys(16, 1);
  const Block root = keys.first.root();
  DpfKey moved(std::move(keys.first));
  EXPECT_EQ(moved.root(), root);
  EXPECT_EQ(keys.first.root(), Block{});
  EXPECT_TRUE(keys.first.cw_seed().empty());
  EXPECT_TRUE(keys.first.cw_right().empty());
  for (uint32_t w : keys.first.final_cw()) EXPECT_EQ(w, 0u);
  DpfKey assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.root(), root);
  EXPECT_EQ(moved.root(), Block{});
  EXPECT_TRUE(moved.cw_seed().empty());
}

TEST_F(KeyWipeTest, GenerationAndDestructionFreeNoSecret) {
  for (const char* output : {"add16", "xor"}) {
    const DpfParameters params = *ParseOutput(output, {18});
    const uint32_t beta = params.output == OutputType::kXor ? 1 : 8;
    auto probe = [&] {
      SeededRandomForTesting rng(9);
      return *GenerateKeys(params, 12345, beta, rng);
    };
    auto keys = probe();  // the same keys the watched call makes
    WatchKey(keys.first);
    WatchKey(keys.second);
    EXPECT_EQ(LeaksDuring([&] { probe(); }), 0) << output;
  }
}

TEST_F(KeyWipeTest, ParsingAndEvaluationFreeNoSecret) {
  auto keys = Keys(14, 3);
  WatchKey(keys.second);
  const std::vector<uint8_t> bytes = keys.second.Serialize();
  EXPECT_EQ(LeaksDuring([&] {
              auto parsed = DpfKey::Parse(bytes);
              ASSERT_TRUE(parsed.ok());
              (void)EvalFull(*parsed);
              (void)EvalPoint(*parsed, 5);
            }),
            0);
}

}  // namespace
}  // namespace veil::dpf

// The debug allocator: malloc/free underneath (as ASan expects), with the freed-buffer scan.
void* operator new(size_t n) {
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  veil::dpf::InspectFreed(p);
  std::free(p);
}
void operator delete(void* p, size_t) noexcept {
  veil::dpf::InspectFreed(p);
  std::free(p);
}
