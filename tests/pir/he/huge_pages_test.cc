// HugePageVector (huge_pages.h): small buffers from operator new, large ones 2 MiB aligned,
// zero-filled and kept across growth; where the kernel gives huge pages to buffers that ask, the
// large buffer's mapping is eligible for them (not under AddressSanitizer, where operator new
// serves every buffer).
#include "pir/he/huge_pages.h"

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace veil::he {
namespace {

// The THPeligible field of /proc/self/smaps for the mapping holding `p`; -1 where unknown.
int ThpEligible(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream header(line);
    if (header >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= address && address < end;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

// Whether the kernel gives huge pages to buffers that ask ("always" or "madvise").
bool KernelAdvisable() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(f, mode);
  return mode.find("[always]") != std::string::npos || mode.find("[madvise]") != std::string::npos;
}

TEST(HugePageVector, SmallAndLargeBuffersHoldTheirWords) {
  HugePageVector<uint32_t> small(1000, 7);
  EXPECT_EQ(small[999], 7u);

  const size_t words = (internal::kHugePageBytes * 3 / 2) / sizeof(uint64_t) + 3;  // 3 MiB + 24 B
  HugePageVector<uint64_t> large(words);
  // Aligned to a huge page where mapped (not under AddressSanitizer, whose allocator serves all).
  const uintptr_t alignment = internal::kMapsHugePages ? internal::kHugePageBytes : 16;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % alignment, 0u);
  for (size_t i = 0; i < words; ++i) ASSERT_EQ(large[i], 0u) << i;  // zero-filled
  for (size_t i = 0; i < words; ++i) large[i] = i * 0x9e3779b97f4a7c15ull;
  // Growth moves the words to a larger mapping; shrinking and growing again keeps the rest.
  large.resize(3 * words, 5);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(large.data()) % alignment, 0u);
  for (size_t i = 0; i < words; ++i) ASSERT_EQ(large[i], i * 0x9e3779b97f4a7c15ull) << i;
  EXPECT_EQ(large[3 * words - 1], 5u);
  large.resize(10);
  large.shrink_to_fit();  // now below the threshold: from operator new
  EXPECT_EQ(large[9], 9 * 0x9e3779b97f4a7c15ull);

  HugePageVector<uint8_t> bytes(internal::kHugePageBytes * 2, 1);
  const int eligible = ThpEligible(bytes.data());
  if (!internal::kMapsHugePages || eligible < 0 || !KernelAdvisable()) {
    GTEST_SKIP() << "AddressSanitizer, no THPeligible field or transparent huge pages off: "
                    "eligibility not checked";
  }
  EXPECT_EQ(eligible, 1);
}

}  // namespace
}  // namespace veil::he
