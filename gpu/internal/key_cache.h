// A bounded cache of what an engine makes from one session's Galois keys (a device's copy of its
// expansion keys: gpu/exppack.h), so that a session's keys go to the device once, not per query.
//
// Identity: a session is the keys object its std::shared_ptr owns. An entry is found again only
// through a pointer to the same object sharing its owner (the same control block); the entry
// keeps a weak_ptr, so that control block, and with it the identity, cannot be reused by other
// keys while the entry lives, even at the same address. An entry whose keys are gone is dropped
// at the next Get. Keys without a control block (lattice::BorrowKeys) are never cached. Beyond
// `capacity` entries the least recently used goes. Thread-safe.
#ifndef VEIL_GPU_INTERNAL_KEY_CACHE_H_
#define VEIL_GPU_INTERNAL_KEY_CACHE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "pir/he/bfv.h"

namespace veil::gpu::internal {

template <class T>
class SessionKeyCache {
 public:
  explicit SessionKeyCache(size_t capacity) : capacity_(capacity) {}

  // The value made for `keys` (not null): the cached one, or make(*keys) (an
  // absl::StatusOr<std::unique_ptr<T>>), cached if the keys are owned. Returns make's errors.
  // make runs outside the lock, so that other sessions' hits do not wait for an upload; two
  // threads making the same session's value at once keep the first cached.
  template <class Make>
  absl::StatusOr<std::shared_ptr<const T>> Get(const std::shared_ptr<const he::GaloisKeys>& keys,
                                               Make&& make) {
    const bool owned = keys.use_count() > 0;
    std::vector<Entry> dropped;  // released after the lock (a device value frees device memory)
    {
      std::lock_guard<std::mutex> lock(mu_);
      DropExpired(dropped);
      if (owned) {
        if (Entry* e = Find(keys)) {
          e->last_use = ++clock_;
          ++hits_;
          return e->value;
        }
      }
    }
    absl::StatusOr<std::unique_ptr<T>> made = make(*keys);
    if (!made.ok()) return made.status();
    std::shared_ptr<const T> value(*std::move(made));
    std::lock_guard<std::mutex> lock(mu_);
    ++made_;
    if (!owned || capacity_ == 0) return value;
    if (Entry* e = Find(keys)) {  // made meanwhile by another thread
      e->last_use = ++clock_;
      return e->value;
    }
    if (entries_.size() >= capacity_) {
      auto lru =
          std::min_element(entries_.begin(), entries_.end(),
                           [](const Entry& a, const Entry& b) { return a.last_use < b.last_use; });
      dropped.push_back(std::move(*lru));
      entries_.erase(lru);
    }
    entries_.push_back(Entry{keys, keys.get(), value, ++clock_});
    return value;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_.size();
  }
  uint64_t hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
  }
  uint64_t made() const {
    std::lock_guard<std::mutex> lock(mu_);
    return made_;
  }

 private:
  struct Entry {
    std::weak_ptr<const he::GaloisKeys> owner;
    const he::GaloisKeys* keys = nullptr;
    std::shared_ptr<const T> value;
    uint64_t last_use = 0;
  };

  // Under mu_: the entry of the same keys object (the same control block), or null.
  Entry* Find(const std::shared_ptr<const he::GaloisKeys>& keys) {
    for (Entry& e : entries_) {
      if (e.keys == keys.get() && !e.owner.owner_before(keys) && !keys.owner_before(e.owner)) {
        return &e;
      }
    }
    return nullptr;
  }
  // Under mu_: moves the entries whose keys are gone to `dropped`.
  void DropExpired(std::vector<Entry>& dropped) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->owner.expired()) {
        dropped.push_back(std::move(*it));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0, hits_ = 0, made_ = 0;
};

}  // namespace veil::gpu::internal

#endif  // VEIL_GPU_INTERNAL_KEY_CACHE_H_
