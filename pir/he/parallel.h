// Runs fn(i) for i < count on up to `threads` threads (the caller's among them), taking indices
// from a shared counter. fn must not throw.
//
// The helpers come from a process-wide pool that keeps its threads (and grows when too few are
// idle, so nested and concurrent calls get the threads they ask for, as with fresh threads): a
// fresh thread per call would start with cold thread-local scratch (scratch.h) and fault its
// megabytes in again on every query. The caller takes indices too and returns when every index
// has run, whether or not a helper came.
#ifndef VEIL_PIR_HE_PARALLEL_H_
#define VEIL_PIR_HE_PARALLEL_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>

namespace veil::he::internal {

// Runs `job` once on each of `count` pool threads.
void DispatchToPool(size_t count, const std::function<void()>& job);

template <class F>
void ParallelFor(int threads, size_t count, const F& fn) {
  const size_t extra = std::min<size_t>(threads > 1 ? threads - 1 : 0, count > 0 ? count - 1 : 0);
  if (extra == 0) {
    for (size_t i = 0; i < count; ++i) fn(i);
    return;
  }
  // Shared with helpers that may start after this call returned: they then find no index left
  // and never touch fn.
  struct State {
    std::atomic<size_t> next{0};
    std::atomic<size_t> done{0};
    std::mutex mu;
    std::condition_variable cv;
  };
  const auto state = std::make_shared<State>();
  const F* f = &fn;
  const auto run = [state, f, count] {
    size_t finished = 0;
    for (size_t i = state->next++; i < count; i = state->next++) {
      (*f)(i);
      ++finished;
    }
    if (finished > 0 && state->done.fetch_add(finished) + finished == count) {
      std::lock_guard<std::mutex> lock(state->mu);
      state->cv.notify_all();
    }
  };
  DispatchToPool(extra, run);
  run();
  std::unique_lock<std::mutex> lock(state->mu);
  state->cv.wait(lock, [&] { return state->done.load() == count; });
}

}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_PARALLEL_H_
