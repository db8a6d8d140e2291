#include "pir/he/scratch.h"

#include <array>

#include "pir/he/huge_pages.h"

namespace veil::he::internal {

uint64_t* GetScratch(Scratch use, size_t words) {
  // The packing sums' buffers (tens of MB, rows written far apart) on huge pages.
  thread_local std::array<HugePageVector<uint64_t>, static_cast<size_t>(Scratch::kCount)> buffers;
  HugePageVector<uint64_t>& b = buffers[static_cast<size_t>(use)];
  if (b.size() < words) b.resize(words);
  return b.data();
}

}  // namespace veil::he::internal
