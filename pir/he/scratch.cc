#include "pir/he/scratch.h"

#include <array>
#include <vector>

namespace veil::he::internal {

uint64_t* GetScratch(Scratch use, size_t words) {
  thread_local std::array<std::vector<uint64_t>, static_cast<size_t>(Scratch::kCount)> buffers;
  std::vector<uint64_t>& b = buffers[static_cast<size_t>(use)];
  if (b.size() < words) b.resize(words);
  return b.data();
}

}  // namespace veil::he::internal
