// What the C ABI's files (veil_c.cc, veil_c_single_server.cc) share: the live-handle registry,
// the per-thread last error, and the checks every entry point makes. Not part of the ABI.
#ifndef VEIL_MOBILE_CLIENT_VEIL_C_SUPPORT_H_
#define VEIL_MOBILE_CLIENT_VEIL_C_SUPPORT_H_

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <string>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mobile_client/client.h"
#include "mobile_client/veil.h"

namespace veil_c_support {

inline thread_local std::string last_error;

// Every handle given out and not yet closed, with its kind and object. A handle is a token that
// is never given out again, not the object's address (which the allocator may hand to a later
// object, so that a stale handle would name it): a closed, foreign or wrong-kind handle is
// refused before anything is dereferenced, and closing twice does nothing. (A handle closed by
// one thread while another uses it is not detected.)
class HandleRegistry {
 public:
  const void* Add(void* object, const char* kind) {
    absl::MutexLock lock(&mu_);
    next_ += kTokenStride;
    live_[next_] = {object, kind};
    return reinterpret_cast<const void*>(next_);
  }
  // The object of a live handle of `kind`, else nullptr; Remove also forgets the handle.
  void* Find(const void* handle, const char* kind) const {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    return it != live_.end() && it->second.kind == kind ? it->second.object : nullptr;
  }
  void* Remove(const void* handle, const char* kind) {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(handle));
    if (it == live_.end() || it->second.kind != kind) return nullptr;
    void* object = it->second.object;
    live_.erase(it);
    return object;
  }

 private:
  // Tokens look like aligned pointers, from an address no object has.
  static constexpr uintptr_t kTokenStride = 16;
  struct Entry {
    void* object;
    const char* kind;
  };
  mutable absl::Mutex mu_;
  uintptr_t next_ ABSL_GUARDED_BY(mu_) = 0x10000;
  absl::flat_hash_map<uintptr_t, Entry> live_ ABSL_GUARDED_BY(mu_);
};

inline HandleRegistry& Handles() {
  static HandleRegistry* registry = new HandleRegistry;
  return *registry;
}

template <typename T>
constexpr const char* kKind = nullptr;

// Replaces a live handle of its kind by its object and returns true; false for anything else
// (NULL, closed, foreign, another kind), leaving `handle` as it was.
template <typename T>
bool Resolve(T*& handle) {
  if (handle == nullptr) return false;
  T* object = static_cast<T*>(Handles().Find(handle, kKind<std::remove_const_t<T>>));
  if (object == nullptr) return false;
  handle = object;
  return true;
}

// A new handle for `object`, which the registry owns from now on.
template <typename T>
T* Register(T* object) {
  return static_cast<T*>(const_cast<void*>(Handles().Add(object, kKind<T>)));
}

// Frees a live handle's object; anything else (NULL, closed, foreign) is ignored.
template <typename T>
void Close(T* handle) {
  T* object = handle == nullptr ? nullptr : static_cast<T*>(Handles().Remove(handle, kKind<T>));
  if (object == nullptr) return;
  try {
    delete object;
  } catch (...) {
    // Closing must not throw across the ABI; a failed close leaks nothing more than the handle.
  }
}

inline int Fail(const absl::Status& status) {
  last_error = std::string(status.message());
  return -static_cast<int>(status.code());
}

inline int Fail(absl::StatusCode code, std::string message) {
  return Fail(absl::Status(code, message));
}

// Runs `body` with the error state cleared, turning exceptions into VEIL_ERR_INTERNAL.
template <typename Body>
int Guarded(Body&& body) {
  last_error.clear();
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(absl::StatusCode::kResourceExhausted, "out of memory");
  } catch (const std::exception& e) {
    return Fail(absl::StatusCode::kInternal, absl::StrCat("internal error: ", e.what()));
  } catch (...) {
    return Fail(absl::StatusCode::kInternal, "internal error");
  }
}

// Checks that `options` is there and was compiled with this library's struct (struct_size).
template <typename Options>
int CheckStructSize(const Options* options, const char* name) {
  if (options == nullptr) {
    return Fail(absl::StatusCode::kInvalidArgument, absl::StrCat(name, " is NULL"));
  }
  if (options->struct_size != sizeof(Options)) {
    return Fail(absl::StatusCode::kInvalidArgument,
                absl::StrCat(name, ".struct_size is ", options->struct_size, "; this library (ABI ",
                             VEIL_ABI_VERSION, ") takes ", sizeof(Options), ": set it to sizeof(",
                             name, ") and build with this veil.h"));
  }
  return VEIL_OK;
}

// The body of the *_last_call_stats functions: the client's last_call() into out_stats.
template <typename Handle>
int LastCallStats(const Handle* client, veil_call_stats* out_stats) {
  return Guarded([&]() -> int {
    if (!Resolve(client) || out_stats == nullptr) {
      return Fail(absl::StatusCode::kInvalidArgument, "a live client and out_stats are required");
    }
    const veil::client::CallStats s = client->client->last_call();
    out_stats->bytes_up = s.bytes_up;
    out_stats->bytes_down = s.bytes_down;
    out_stats->latency_ms = s.latency_ms;
    out_stats->lookups = s.lookups;
    out_stats->keys = s.keys;
    return VEIL_OK;
  });
}

// Checks that out_len holds `count` items of `per_item` elements each.
inline int CheckOut(size_t out_len, size_t count, size_t per_item, const char* what) {
  if (per_item != 0 && count > SIZE_MAX / per_item) {
    return Fail(absl::StatusCode::kInvalidArgument, absl::StrCat("count ", count, " is too large"));
  }
  const size_t needed = count * per_item;
  if (out_len < needed) {
    return Fail(
        absl::StatusCode::kInvalidArgument,
        absl::StrCat("output buffer holds ", out_len, " ", what, "; ", needed, " are needed"));
  }
  return VEIL_OK;
}

}  // namespace veil_c_support

#endif  // VEIL_MOBILE_CLIENT_VEIL_C_SUPPORT_H_
