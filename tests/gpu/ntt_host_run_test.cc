// The GPU NTT kernel's phases run on the host (CI) against pir/he's NTT, bit for bit: every N up
// to 2^12, moduli of 20 to 62 bits, random inputs (printed seed) and edge inputs, forward and
// inverse, single polynomials and batches; and the 32-bit lanes for primes below 2^32. Also the
// host order that every host-run test runs in twice (gpu/internal/runners.h).
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "gpu/internal/ntt_phases.h"
#include "gpu/internal/ntt_tables.h"
#include "gpu/internal/runners.h"
#include "gpu/ntt.h"
#include "gtest/gtest.h"
#include "pir/he/ntt.h"
#include "tests/gpu/test_support.h"

namespace veil::gpu {
namespace {

TEST(GpuNttHostRun, MatchesTheCpuNtt) {
  std::mt19937_64 rng(testing::TestSeed("gpu_ntt_host_run_test"));
  for (int log_n = 1; log_n <= 12; ++log_n) {
    for (int bits : {20, 30, 50, 60, 62}) {
      absl::StatusOr<std::vector<uint64_t>> primes = he::GenerateNttPrimes(bits, 2 << log_n, 1);
      if (!primes.ok()) continue;
      const he::NttTables t = *he::NttTables::Create(log_n, *he::Modulus::Create((*primes)[0]));
      const uint64_t q = t.modulus().value();
      const size_t batch = log_n == 12 ? 3 : 5;
      std::vector<uint64_t> polys(batch * t.n());
      for (uint64_t& v : polys) v = rng() % q;
      std::fill(polys.begin(), polys.begin() + t.n(), q - 1);  // an edge polynomial
      for (bool inverse : {false, true}) {
        std::vector<uint64_t> expect = polys, got = polys;
        for (size_t p = 0; p < batch; ++p) {
          inverse ? t.Inverse(expect.data() + p * t.n()) : t.Forward(expect.data() + p * t.n());
        }
        ASSERT_TRUE(HostRunNtt(t, inverse, absl::MakeSpan(got)).ok());
        ASSERT_EQ(got, expect) << "N = " << t.n() << ", q = " << q << (inverse ? " inverse" : "");
      }
    }
  }
}

// The 32-bit lanes (Ntt32Block, the expansion's transforms) for primes up to just below 2^32,
// where a sum of two residues carries out of 32 bits.
TEST(GpuNttHostRun, ThirtyTwoBitLanesMatchTheCpuNtt) {
  std::mt19937_64 rng(testing::TestSeed("gpu_ntt_host_run_test") + 1);
  int tested = 0;
  for (int log_n = 1; log_n <= 12; ++log_n) {
    for (int bits : {20, 30, 31, 32}) {
      absl::StatusOr<std::vector<uint64_t>> primes = he::GenerateNttPrimes(bits, 2 << log_n, 1);
      if (!primes.ok()) continue;
      const he::NttTables t = *he::NttTables::Create(log_n, *he::Modulus::Create((*primes)[0]));
      const uint64_t q = t.modulus().value();
      ASSERT_LT(q, uint64_t{1} << 32);
      const internal::MontgomeryNttTables m = *internal::MakeMontgomeryNttTables(t);
      ASSERT_EQ(m.roots32.size(), t.n());
      std::vector<uint32_t> shared(t.n());
      internal::SequentialRunner run;
      for (int edge = 0; edge < 2; ++edge) {
        std::vector<uint64_t> poly(t.n());
        for (uint64_t& v : poly) v = edge ? q - 1 - rng() % 2 : rng() % q;
        for (bool inverse : {false, true}) {
          std::vector<uint64_t> expect = poly, got = poly;
          inverse ? t.Inverse(expect.data()) : t.Forward(expect.data());
          internal::PoisonShared(shared);
          internal::Ntt32Block(run, m.Args32(inverse), log_n, inverse, got.data(), shared.data());
          ASSERT_EQ(got, expect) << "N = " << t.n() << ", q = " << q << (inverse ? " inverse" : "");
        }
      }
      tested += bits == 32;
    }
  }
  EXPECT_GE(tested, 10);  // primes above 2^31 were among them
  // Above 2^32 there are no 32-bit tables.
  const he::NttTables wide =
      *he::NttTables::Create(4, *he::Modulus::Create((*he::GenerateNttPrimes(40, 32, 1))[0]));
  EXPECT_TRUE(internal::MakeMontgomeryNttTables(wide)->roots32.empty());
}

TEST(GpuNttHostRun, RejectsBadInput) {
  const he::NttTables big =
      *he::NttTables::Create(13, *he::Modulus::Create((*he::GenerateNttPrimes(50, 1 << 14, 1))[0]));
  std::vector<uint64_t> polys(8192, 0);
  EXPECT_EQ(HostRunNtt(big, false, absl::MakeSpan(polys)).message(),
            "the GPU NTT handles N up to 2^12, not 2^13");
  const he::NttTables t = *he::NttTables::Create(4, *he::Modulus::Create(97));
  std::vector<uint64_t> odd(17, 0);
  EXPECT_EQ(HostRunNtt(t, false, absl::MakeSpan(odd)).message(),
            "17 residues are not whole polynomials of N = 16");
  std::vector<uint64_t> high(16, 97);
  EXPECT_EQ(HostRunNtt(t, false, absl::MakeSpan(high)).message(), "residue 97 is not below q = 97");
}

// The host runner visits items in the order the environment names (the .reverse tests set it).
TEST(HostRunOrder, FollowsTheEnvironment) {
  const char* value = std::getenv("VEIL_HOST_RUN_ORDER");
  const bool reverse = value != nullptr && std::string(value) == "reverse";
  EXPECT_EQ(internal::HostRunOrder(),
            reverse ? internal::HostOrder::kReverse : internal::HostOrder::kForward);
  std::vector<uint32_t> seen;
  internal::SequentialRunner run;
  run.Phase(4, [&](uint32_t i) { seen.push_back(i); });
  internal::HostLoop(2, [&](uint64_t i) { seen.push_back(10 + static_cast<uint32_t>(i)); });
  EXPECT_EQ(seen, reverse ? std::vector<uint32_t>({3, 2, 1, 0, 11, 10})
                          : std::vector<uint32_t>({0, 1, 2, 3, 10, 11}));
}

// What running both orders catches: a phase whose item reads what another item of the same phase
// writes (an in-place shift without a barrier between its read and its write) ends differently in
// the two orders; the same shift into another array (disjoint writes) ends alike.
TEST(HostRunOrder, TheTwoOrdersTellARacyPhaseFromASoundOne) {
  const std::vector<uint32_t> start = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  auto shift_in_place = [&](internal::HostOrder order) {
    std::vector<uint32_t> x = start;
    internal::SequentialRunner run{order};
    run.Phase(8, [&](uint32_t i) { x[i] = x[i + 1]; });
    return x;
  };
  auto shift_out = [&](internal::HostOrder order) {
    std::vector<uint32_t> out(8);
    internal::SequentialRunner run{order};
    run.Phase(8, [&](uint32_t i) { out[i] = start[i + 1]; });
    return out;
  };
  EXPECT_NE(shift_in_place(internal::HostOrder::kForward),
            shift_in_place(internal::HostOrder::kReverse));
  EXPECT_EQ(shift_out(internal::HostOrder::kForward), shift_out(internal::HostOrder::kReverse));
}

// A host run's shared memory before each block holds the poison byte, not zeros or the previous
// block's values, so a phase reading what its block never wrote reads garbage as on a device.
TEST(HostRunOrder, SharedMemoryIsPoisonedNotZeroed) {
  std::vector<uint32_t> shared(64, 7);
  internal::PoisonShared(shared);
  for (uint32_t word : shared) EXPECT_EQ(word, 0xa5a5a5a5u);
  std::vector<uint64_t> wide(3, 0);
  internal::PoisonShared(wide);
  for (uint64_t word : wide) EXPECT_EQ(word, 0xa5a5a5a5a5a5a5a5u);
}

}  // namespace
}  // namespace veil::gpu
