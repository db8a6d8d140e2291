#include "pir/he/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>

namespace veil::he::internal {
namespace {

size_t Rounded(size_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

}  // namespace

void* AllocateHugePages(size_t bytes) {
  if (!kMapsHugePages || bytes < kHugePageBytes) return ::operator new(bytes);
  // Map one huge page more than needed and trim the ends, so that the buffer starts on a 2 MiB
  // boundary (the kernel backs only whole aligned 2 MiB ranges with a huge page).
  const size_t size = Rounded(bytes);
  void* mapping = mmap(nullptr, size + kHugePageBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) throw std::bad_alloc();
  const uintptr_t start = reinterpret_cast<uintptr_t>(mapping);
  const uintptr_t aligned = Rounded(start);
  if (aligned > start) munmap(mapping, aligned - start);
  const uintptr_t end = start + size + kHugePageBytes;
  if (end > aligned + size) munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  void* p = reinterpret_cast<void*>(aligned);
  madvise(p, size, MADV_HUGEPAGE);  // advice only: without huge pages the buffer still works
  return p;
}

void FreeHugePages(void* p, size_t bytes) {
  if (p == nullptr) return;
  if (!kMapsHugePages || bytes < kHugePageBytes) {
    ::operator delete(p);
    return;
  }
  munmap(p, Rounded(bytes));
}

}  // namespace veil::he::internal
