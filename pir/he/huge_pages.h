// Large buffers on 2 MiB pages where the kernel allows them (MADV_HUGEPAGE; Linux's default
// transparent-huge-page mode, "madvise", gives them only to buffers that ask). The hot paths that
// stream hundreds of megabytes (the deferred packing's folded matrix, the LWE database, the
// roofline's read) or write far-apart rows (the packing sums) pay a TLB miss per 4 KiB page
// otherwise: the tiled packing sums streamed 12 GB/s on one Zen 2 core from 4 KiB pages and
// 16 to 17 from 2 MiB pages.
#ifndef VEIL_PIR_HE_HUGE_PAGES_H_
#define VEIL_PIR_HE_HUGE_PAGES_H_

#include <cstddef>
#include <vector>

namespace veil::he {
namespace internal {
// Buffers of at least kHugePageBytes come from their own mapping, aligned to 2 MiB and advised
// MADV_HUGEPAGE; smaller ones from operator new. Throws std::bad_alloc when out of memory. Under
// AddressSanitizer every buffer comes from operator new, so that its checks (redzones, use after
// free) cover the large ones too.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kMapsHugePages = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kMapsHugePages = false;
#else
inline constexpr bool kMapsHugePages = true;
#endif
#else
inline constexpr bool kMapsHugePages = true;
#endif
void* AllocateHugePages(size_t bytes);
void FreeHugePages(void* p, size_t bytes);
}  // namespace internal

// A std::allocator whose large allocations ask for huge pages (zero-filled, as std::vector's
// value-initialization makes them anyway).
template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}  // NOLINT: rebinding, as std::allocator
  T* allocate(size_t n) { return static_cast<T*>(internal::AllocateHugePages(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { internal::FreeHugePages(p, n * sizeof(T)); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using HugePageVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace veil::he

#endif  // VEIL_PIR_HE_HUGE_PAGES_H_
