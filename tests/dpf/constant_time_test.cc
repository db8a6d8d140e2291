// Key generation is constant time in alpha, beta and the root seeds, checked with memcheck in the
// way of Langley's ctgrind: the secrets are marked undefined (VALGRIND_MAKE_MEM_UNDEFINED), and
// memcheck then reports every conditional branch and every memory address computed from them,
// while plain arithmetic, masks and cmov on secrets pass silently. Each case counts the reports
// its own code caused (VALGRIND_COUNT_ERRORS). The deliberately leaky variants at the end show the
// check sees a secret branch and a secret index. Runs under valgrind only (ctest
// dpf_constant_time_test); a plain run skips.
#include <valgrind/memcheck.h>

#include <functional>

#include "dpf/internal/key_generation.h"
#include "dpf/key.h"
#include "dpf/params.h"
#include "gtest/gtest.h"

namespace veil::dpf {
namespace {

template <typename T>
void MarkSecret(T& value) {
  VALGRIND_MAKE_MEM_UNDEFINED(&value, sizeof(value));
}

// Memcheck reports caused by `run` (branches and addresses that depend on marked secrets).
unsigned SecretDependentReports(const std::function<void()>& run) {
  const unsigned before = VALGRIND_COUNT_ERRORS;
  run();
  return VALGRIND_COUNT_ERRORS - before;
}

class ConstantTimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!RUNNING_ON_VALGRIND) GTEST_SKIP() << "needs valgrind: run ctest -R dpf_constant_time";
  }
};

// alpha's bits inside the domain are secret; the bits above it are public zeros (the range check
// reads only those).
uint64_t SecretAlpha(uint64_t alpha, const DpfParameters& params) {
  MarkSecret(alpha);
  return alpha & (params.domain_size() - 1);
}

TEST_F(ConstantTimeTest, KeyGenerationFromRootsTouchesNoSecretBranchOrAddress) {
  for (Prg prg : {Prg::kAes128, Prg::kChaCha8, Prg::kChaCha12, Prg::kChaCha20, Prg::kSipHash}) {
    for (const char* output : {"add1", "add4", "add16", "xor"}) {
      for (int log_domain : {1, 4, 9, 20}) {
        const DpfParameters params = *ParseOutput(output, {log_domain, prg});
        const uint64_t alpha = SecretAlpha(0x5a5a5a5a5a5a5a5aull, params);
        uint32_t beta = 0x9e3779b9u;
        if (params.output == OutputType::kXor) {
          beta = 1;  // public: XOR keys always encode the indicator
        } else {
          MarkSecret(beta);
        }
        Block roots[2] = {{0x0123456789abcdefull, 0xfedcba9876543210ull}, {7, 11}};
        MarkSecret(roots);
        bool ok = false;
        const unsigned reports = SecretDependentReports([&] {
          ok = internal::GenerateKeysFromRoots(params, alpha, beta, roots).ok();
        });
        EXPECT_TRUE(ok);
        EXPECT_EQ(reports, 0u) << PrgName(prg) << " " << output << " log domain " << log_domain
                               << ": see memcheck's reports above";
      }
    }
  }
}

TEST_F(ConstantTimeTest, ProductionKeyGenerationTouchesNoSecretBranchOrAddress) {
  const DpfParameters params{16, Prg::kAes128};
  const uint64_t alpha = SecretAlpha(12345, params);
  uint32_t beta = 3;
  MarkSecret(beta);
  (void)GenerateKeys(params, 0, 1);  // sodium_init and the RNG's first use, outside the count
  const unsigned reports = SecretDependentReports([&] {
    EXPECT_TRUE(GenerateKeys(params, alpha, beta).ok());
  });
  EXPECT_EQ(reports, 0u);
}

// Deliberately leaky variants of the two secret-dependent steps of key generation: choosing the
// child on alpha's path, and placing beta at alpha's offset in the leaf block.
[[gnu::noinline]] Block ChildByBranch(bool bit, const Block& left, const Block& right) {
  if (bit) {
    asm volatile("");  // keeps the branch: the compiler may not turn it into a cmov
    return right;
  }
  return left;
}

[[gnu::noinline]] void PlaceBetaByIndex(uint64_t offset, uint32_t beta, uint32_t* words) {
  words[offset] = beta;
}

TEST_F(ConstantTimeTest, SeesASecretBranch) {
  bool bit = true;
  MarkSecret(bit);
  const Block left{1, 2}, right{3, 4};
  Block child;
  EXPECT_GT(SecretDependentReports([&] { child = ChildByBranch(bit, left, right); }), 0u);
}

TEST_F(ConstantTimeTest, SeesASecretIndex) {
  uint64_t offset = 5;
  MarkSecret(offset);
  offset &= 15;
  uint32_t words[16] = {};
  EXPECT_GT(SecretDependentReports([&] { PlaceBetaByIndex(offset, 1, words); }), 0u);
}

}  // namespace
}  // namespace veil::dpf
