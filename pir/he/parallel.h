// Runs fn(i) for i < count on up to `threads` threads (the caller's among them), taking indices
// from a shared counter. fn must not throw.
#ifndef VEIL_PIR_HE_PARALLEL_H_
#define VEIL_PIR_HE_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace veil::he::internal {

template <class F>
void ParallelFor(int threads, size_t count, const F& fn) {
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < count; i = next++) fn(i);
  };
  std::vector<std::thread> pool;
  const size_t extra = std::min<size_t>(threads > 1 ? threads - 1 : 0, count > 0 ? count - 1 : 0);
  for (size_t t = 0; t < extra; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_PARALLEL_H_
