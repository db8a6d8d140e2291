#include "pir/he/parallel.h"

#include <deque>
#include <thread>

namespace veil::he::internal {
namespace {

// Threads wait for jobs; a dispatch that finds fewer idle threads than queued jobs starts the
// difference. Never destroyed (threads blocked in wait at exit are fine).
class Pool {
 public:
  void Dispatch(size_t count, const std::function<void()>& job) {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < count; ++i) jobs_.push_back(job);
    // Idle threads each take a queued job (a woken one may take more, later ones fewer).
    const size_t start = jobs_.size() > idle_ ? jobs_.size() - idle_ : 0;
    for (size_t i = 0; i < start; ++i) std::thread([this] { Work(); }).detach();
    for (size_t i = 0; i < count; ++i) cv_.notify_one();
  }

 private:
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      while (jobs_.empty()) {
        ++idle_;
        cv_.wait(lock);
        --idle_;
      }
      const std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t idle_ = 0;
};

}  // namespace

void DispatchToPool(size_t count, const std::function<void()>& job) {
  static Pool* const pool = new Pool;
  pool->Dispatch(count, job);
}

}  // namespace veil::he::internal
