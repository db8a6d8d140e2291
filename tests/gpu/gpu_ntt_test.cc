// The GPU NTT on a device against pir/he's NTT, bit for bit (N = 4096 and smaller, moduli of 30
// to 62 bits, batches of 1 to 1000). Skips where no GPU is present.
#include <cstdint>
#include <random>
#include <vector>

#include "gpu/ntt.h"
#include "gtest/gtest.h"
#include "pir/he/ntt.h"
#include "tests/gpu/test_support.h"

namespace veil::gpu {
namespace {

he::NttTables Tables(int log_n, int bits) {
  return *he::NttTables::Create(
      log_n, *he::Modulus::Create((*he::GenerateNttPrimes(bits, 2 << log_n, 1))[0]));
}

TEST(GpuNtt, MatchesTheCpuNtt) {
  const absl::StatusOr<std::unique_ptr<GpuNtt>> probe = GpuNtt::Create(Tables(12, 60));
  if (probe.status().code() == absl::StatusCode::kUnavailable) GTEST_SKIP() << probe.status();
  ASSERT_TRUE(probe.ok()) << probe.status();
  std::mt19937_64 rng(testing::TestSeed("gpu_ntt_test"));
  for (int log_n : {1, 5, 10, 12}) {
    for (int bits : {30, 50, 60, 62}) {
      const he::NttTables t = Tables(log_n, bits);
      const std::unique_ptr<GpuNtt> gpu = *GpuNtt::Create(t);
      for (size_t batch : {size_t{1}, size_t{7}, size_t{1000}}) {
        std::vector<uint64_t> polys(batch * t.n());
        for (uint64_t& v : polys) v = rng() % t.modulus().value();
        for (bool inverse : {false, true}) {
          std::vector<uint64_t> expect = polys, got = polys;
          for (size_t p = 0; p < batch; ++p) {
            inverse ? t.Inverse(expect.data() + p * t.n()) : t.Forward(expect.data() + p * t.n());
          }
          const absl::Status s =
              inverse ? gpu->Inverse(absl::MakeSpan(got)) : gpu->Forward(absl::MakeSpan(got));
          ASSERT_TRUE(s.ok()) << s;
          ASSERT_EQ(got, expect) << "N = " << t.n() << ", " << bits << " bits, batch " << batch;
        }
      }
    }
  }
}

TEST(GpuNtt, ThroughputIsMeasured) {
  absl::StatusOr<std::unique_ptr<GpuNtt>> gpu = GpuNtt::Create(Tables(12, 60));
  if (gpu.status().code() == absl::StatusCode::kUnavailable) GTEST_SKIP() << gpu.status();
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const absl::StatusOr<GpuNtt::Throughput> t = (*gpu)->Measure(256, 2, false);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_GT(t->transforms_per_s, 0);
  EXPECT_GT(t->mul_add_per_s, 0);
  EXPECT_EQ(t->butterflies_per_transform, 2048.0 * 12);
}

TEST(GpuNtt, UnavailableWithoutDevice) {
  const absl::StatusOr<std::unique_ptr<GpuNtt>> gpu = GpuNtt::Create(Tables(12, 60), 1000);
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace veil::gpu
