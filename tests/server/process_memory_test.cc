// veil-server's allocator policy (server::KeepFreedMemoryForReuse), in a process of its own: with
// glibc's defaults a query-sized block is a mapping of its own, unmapped when freed; with the
// policy it comes from the heap and stays there, faulted in, for the next query.
#include "server/process_memory.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "gtest/gtest.h"

namespace veil::server {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Above glibc's largest dynamic mmap threshold (32 MiB on 64-bit), below the policy's 64 MiB.
constexpr size_t kBlock = size_t{48} << 20;

// A block of kBlock bytes, every page written (so that it is resident), then freed; returns
// mallinfo2() while it was held.
struct mallinfo2 HoldAndFree() {
  auto* block = static_cast<unsigned char*>(std::malloc(kBlock));
  EXPECT_NE(block, nullptr);
  std::memset(block, 0x5a, kBlock);
  asm volatile("" : : "r"(block) : "memory");  // the compiler may not elide the block
  const struct mallinfo2 held = mallinfo2();
  std::free(block);
  return held;
}

TEST(ProcessMemory, ResidentKbReadsThisProcessAndRefusesNoProcess) {
  EXPECT_GT(ResidentKb(getpid()), 0u);
  EXPECT_EQ(ResidentKb(-1), 0u);
}

// The defaults, then the policy, in this (child) process: the policy cannot be undone.
void CheckDefaultsThenPolicy() {
  // glibc's defaults: the block is a mapping of its own, gone (with its pages) once freed.
  const struct mallinfo2 before = mallinfo2();
  const struct mallinfo2 held = HoldAndFree();
  EXPECT_GE(held.hblkhd, before.hblkhd + kBlock);
  EXPECT_LT(mallinfo2().hblkhd, before.hblkhd + kBlock);

  KeepFreedMemoryForReuse();
  const uint64_t rss_before = ResidentKb(getpid());
  const struct mallinfo2 policy_before = mallinfo2();
  const struct mallinfo2 policy_held = HoldAndFree();
  // From the heap (in use there, not a mapping of its own)...
  EXPECT_LT(policy_held.hblkhd, policy_before.hblkhd + kBlock);
  EXPECT_GE(policy_held.uordblks, policy_before.uordblks + kBlock);
  // ...kept free in the heap once freed, its pages still resident...
  EXPECT_GE(mallinfo2().fordblks, kBlock);
  EXPECT_GE(ResidentKb(getpid()), rss_before + (kBlock >> 10) * 3 / 4);
  // ...and reused by the next block of that size: the heap does not grow again.
  const struct mallinfo2 again = HoldAndFree();
  EXPECT_EQ(again.arena, policy_held.arena);
  EXPECT_LT(again.hblkhd, policy_before.hblkhd + kBlock);
}

TEST(ProcessMemory, FreedQueryBlocksStayInTheHeapResident) {
  if (kSanitized) GTEST_SKIP() << "AddressSanitizer replaces malloc";
  for (const char* tuned : {"GLIBC_TUNABLES", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"}) {
    if (std::getenv(tuned) != nullptr) GTEST_SKIP() << tuned << " changes glibc's defaults";
  }
  // In a child process, so that the policy (process-wide, for good) meets glibc's defaults
  // whatever ran before and however often the test repeats. Failures print there.
  EXPECT_EXIT(
      {
        CheckDefaultsThenPolicy();
        std::_Exit(::testing::Test::HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace veil::server
