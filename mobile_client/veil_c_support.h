// What the C ABI's files (veil_c.cc, veil_c_single_server.cc) share: the live-handle registry,
// the per-thread last error, and the checks every entry point makes. Not part of the ABI.
#ifndef VEIL_MOBILE_CLIENT_VEIL_C_SUPPORT_H_
#define VEIL_MOBILE_CLIENT_VEIL_C_SUPPORT_H_

#include <cstddef>
#include <exception>
#include <new>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "mobile_client/client.h"
#include "mobile_client/veil.h"

namespace veil_c_support {

inline thread_local std::string last_error;

// Every handle given out and not yet closed, with its kind: a closed, foreign or wrong-kind
// pointer is refused before it is dereferenced, and closing twice does nothing. (A handle closed
// by one thread while another uses it is not detected.)
class HandleRegistry {
 public:
  void Add(const void* handle, const char* kind) {
    absl::MutexLock lock(&mu_);
    live_[handle] = kind;
  }
  bool Remove(const void* handle, const char* kind) {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(handle);
    if (it == live_.end() || it->second != kind) return false;
    live_.erase(it);
    return true;
  }
  bool Live(const void* handle, const char* kind) const {
    absl::MutexLock lock(&mu_);
    auto it = live_.find(handle);
    return it != live_.end() && it->second == kind;
  }

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<const void*, const char*> live_ ABSL_GUARDED_BY(mu_);
};

inline HandleRegistry& Handles() {
  static HandleRegistry* registry = new HandleRegistry;
  return *registry;
}

template <typename T>
constexpr const char* kKind = nullptr;

// Whether `handle` is a live handle of its kind (NULL is not).
template <typename T>
bool IsLive(const T* handle) {
  return handle != nullptr && Handles().Live(handle, kKind<T>);
}

template <typename T>
T* Register(T* handle) {
  Handles().Add(handle, kKind<T>);
  return handle;
}

// Frees a live handle; anything else (NULL, closed, foreign) is ignored.
template <typename T>
void Close(T* handle) {
  if (handle == nullptr || !Handles().Remove(handle, kKind<T>)) return;
  try {
    delete handle;
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
    if (!IsLive(client) || out_stats == nullptr) {
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
