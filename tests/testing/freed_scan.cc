#include "tests/testing/freed_scan.h"

#include <malloc.h>

#include <atomic>
#include <cstdint>
#include <cstring>

extern "C" void __libc_free(void* p);  // glibc's free, under the interposed one below

namespace veil::testing {
namespace {

// Watched secrets and counts live in static storage: the scan must not see them freed.
constexpr size_t kPoolBytes = 64 << 10;
constexpr int kMaxSecrets = 64;
alignas(16) uint8_t g_pool[kPoolBytes];
size_t g_begin[kMaxSecrets + 1];
std::atomic<int> g_secrets{0};
std::atomic<int> g_leaks[kMaxSecrets];
std::atomic<bool> g_scanning{false};

bool Holds(const uint8_t* bytes, size_t n, size_t begin, size_t end) {
  for (size_t i = 0; i + 16 <= n; ++i) {
    for (size_t j = begin; j + 16 <= end; j += 16) {
      if (std::memcmp(bytes + i, g_pool + j, 16) == 0) return true;
    }
  }
  return false;
}

}  // namespace

void WatchSecret(const void* secret, size_t bytes) {
  const int s = g_secrets.load();
  bytes -= bytes % 16;
  if (s == kMaxSecrets || g_begin[s] + bytes > kPoolBytes) std::abort();
  std::memcpy(g_pool + g_begin[s], secret, bytes);
  g_begin[s + 1] = g_begin[s] + bytes;
  g_secrets.store(s + 1);
}

void ClearWatched() { g_secrets.store(0); }

int WatchedCount() { return g_secrets.load(); }

std::vector<int> FreedBuffersHolding(const std::function<void()>& run) {
  for (auto& leaks : g_leaks) leaks.store(0);
  g_scanning.store(true);
  run();
  g_scanning.store(false);
  std::vector<int> out(g_secrets.load());
  for (size_t s = 0; s < out.size(); ++s) out[s] = g_leaks[s].load();
  return out;
}

void InspectFreed(void* p) {
  if (p == nullptr || !g_scanning.load()) return;
  const auto* bytes = static_cast<const uint8_t*>(p);
  const size_t n = malloc_usable_size(p);
  for (int s = 0; s < g_secrets.load(); ++s) {
    if (Holds(bytes, n, g_begin[s], g_begin[s + 1])) g_leaks[s].fetch_add(1);
  }
}

}  // namespace veil::testing

// The debug allocator: glibc's free, after the scan.
extern "C" void free(void* p) {
  veil::testing::InspectFreed(p);
  __libc_free(p);
}
