// A debug allocator for tests of memory hygiene: a binary that links veil_freed_scan has free()
// (which operator delete, kj's arrays and capnp's message buffers all end in) interposed, for
// the shared libraries too, by one that, while a scan runs, looks in every buffer handed back for
// any 16-byte piece (at any offset) of the watched secrets.
#ifndef VEIL_TESTS_TESTING_FREED_SCAN_H_
#define VEIL_TESTS_TESTING_FREED_SCAN_H_

#include <cstddef>
#include <functional>
#include <vector>

namespace veil::testing {

// Watches `bytes` bytes of `secret` (whole 16-byte pieces; copied, at most 64 KiB in all) as
// secret number WatchedCount() - 1.
void WatchSecret(const void* secret, size_t bytes);
void ClearWatched();
int WatchedCount();

// Runs `run` and returns, per watched secret, how many buffers freed meanwhile held a piece of it.
std::vector<int> FreedBuffersHolding(const std::function<void()>& run);

}  // namespace veil::testing

#endif  // VEIL_TESTS_TESTING_FREED_SCAN_H_
