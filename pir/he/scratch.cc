#include "pir/he/scratch.h"

#include <sodium.h>

#include <array>

#include "pir/he/huge_pages.h"

namespace veil::he::internal {

namespace {

HugePageVector<uint64_t>& Buffer(Scratch use) {
  // The packing sums' buffers (tens of MB, rows written far apart) on huge pages.
  thread_local std::array<HugePageVector<uint64_t>, static_cast<size_t>(Scratch::kCount)> buffers;
  return buffers[static_cast<size_t>(use)];
}

}  // namespace

uint64_t* GetScratch(Scratch use, size_t words) {
  HugePageVector<uint64_t>& b = Buffer(use);
  if (b.size() < words) b.resize(words);
  return b.data();
}

void WipeScratch(Scratch use) {
  HugePageVector<uint64_t>& b = Buffer(use);
  sodium_memzero(b.data(), b.size() * sizeof(uint64_t));
}

}  // namespace veil::he::internal
