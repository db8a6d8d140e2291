// On a device: the CUDA modular product against the host-run of the same phases (checked against
// GMP in CI by modular_product_host_run_test), on edge and Paillier sizes. The product mod N is
// unique, so any reduction tree gives the same words. No GMP: the GPU machine has none. Skips
// without a device.
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gpu/backend.h"
#include "gpu/modular_product.h"
#include "gtest/gtest.h"
#include "tests/gpu/test_support.h"

namespace veil::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// A random odd modulus of `limbs` words and rows x columns residues below it (top word smaller
// than the modulus's), the first being 0, 1 and N - 1.
void MakeInput(size_t limbs, uint64_t rows, uint64_t columns, std::mt19937_64& rng,
               std::vector<uint32_t>& modulus, std::vector<uint32_t>& residues) {
  modulus.resize(limbs);
  for (uint32_t& w : modulus) w = static_cast<uint32_t>(rng());
  modulus[0] |= 1;
  modulus.back() |= 0x80000000u;
  residues.resize(rows * columns * limbs);
  for (size_t i = 0; i < rows * columns; ++i) {
    uint32_t* x = &residues[i * limbs];
    for (size_t j = 0; j < limbs; ++j) x[j] = static_cast<uint32_t>(rng());
    x[limbs - 1] %= modulus.back();
    if (i < 3) std::fill(x, x + limbs, 0u);
    if (i == 1) x[0] = 1;
    if (i == 2) {
      std::copy(modulus.begin(), modulus.end(), x);
      x[0] -= 1;
    }
  }
}

TEST(ModularProductGpu, EqualsTheHostRunOnEdgeAndPaillierSizes) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(testing::TestSeed("gpu_modular_product_test"));
  for (size_t limbs : {1, 17, 64, 128, 192}) {
    for (uint64_t rows : {1, 2, 17, 1000}) {
      for (uint64_t columns : {1, 7}) {
        std::vector<uint32_t> modulus, residues;
        MakeInput(limbs, rows, columns, rng, modulus, residues);
        const ModularProductInput input{modulus, residues, rows, columns};
        std::vector<uint32_t> host(columns * limbs), device(columns * limbs);
        ASSERT_TRUE(HostRunModularProduct(input, absl::MakeSpan(host)).ok());
        auto timing = GpuModularProduct(0, input, absl::MakeSpan(device));
        ASSERT_TRUE(timing.ok()) << timing.status();
        EXPECT_EQ(device, host) << limbs << " limbs, " << rows << " x " << columns;
      }
    }
  }
}

TEST(ModularProductGpu, ALargeAggregationEqualsTheHostRun) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(testing::TestSeed("gpu_modular_product_test") + 1);
  std::vector<uint32_t> modulus, residues;
  MakeInput(128, 50000, 1, rng, modulus, residues);
  const ModularProductInput input{modulus, residues, 50000, 1};
  std::vector<uint32_t> host(128), device(128);
  ASSERT_TRUE(HostRunModularProduct(input, absl::MakeSpan(host)).ok());
  auto timing = GpuModularProduct(0, input, absl::MakeSpan(device));
  ASSERT_TRUE(timing.ok()) << timing.status();
  EXPECT_EQ(device, host);
  std::printf("50000 x 4096-bit residues: upload %.3f ms, compute %.3f ms, download %.3f ms\n",
              timing->upload_s * 1e3, timing->compute_s * 1e3, timing->download_s * 1e3);
}

TEST(ModularProductGpu, RejectsBadInputBeforeTouchingTheDevice) {
  const std::vector<uint32_t> modulus = {7, 1}, residues = {7, 1};
  std::vector<uint32_t> out(2);
  auto r = GpuModularProduct(0, {modulus, residues, 1, 1}, absl::MakeSpan(out));
  if (GpuDeviceCount() == 0) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  } else {
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("residue 0 is not below"));
  }
}

}  // namespace
}  // namespace veil::gpu
