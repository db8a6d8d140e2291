// The NTT: SEAL's and HEXL's known answers, the definition at small N, every kernel against the
// reference bit for bit (random inputs with a printed seed, edge inputs, every N from 2 to 2^16,
// moduli of 20 to 62 bits), round trips, and negacyclic products against schoolbook.
#include "pir/he/ntt.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::RandomResidues;
using testing::Rng;

NttTables Tables(int log_n, uint64_t q) { return *NttTables::Create(log_n, *Modulus::Create(q)); }

std::vector<uint64_t> ForwardWith(const NttTables& t, std::vector<uint64_t> a, NttKernel k) {
  t.Forward(a.data(), k);
  return a;
}

std::vector<uint64_t> InverseWith(const NttTables& t, std::vector<uint64_t> a, NttKernel k) {
  t.Inverse(a.data(), k);
  return a;
}

// Known answers from SEAL (tests/seal/util/ntt.cpp) and HEXL (test/test-ntt.cpp), NOTES.md.
TEST(Ntt, KnownAnswers) {
  struct Case {
    int log_n;
    uint64_t q;
    std::vector<uint64_t> in, out;
  };
  const Case cases[] = {
      {1, 0xffffffffffc0001, {1, 1}, {288794978602139553, 864126526004445282}},
      {3,
       4194353,
       {1, 1, 0, 0, 0, 0, 0, 0},
       {132171, 4062184, 2675172, 1519183, 462763, 3731592, 1824324, 2370031}},
      {2, 113, {94, 109, 11, 18}, {82, 2, 81, 98}},
  };
  for (const Case& c : cases) {
    const NttTables t = Tables(c.log_n, c.q);
    EXPECT_EQ(NttByDefinition(t, c.in), c.out) << c.q;
    for (NttKernel k : t.Kernels()) {
      EXPECT_EQ(ForwardWith(t, c.in, k), c.out) << c.q << " " << NttKernelName(k);
      EXPECT_EQ(InverseWith(t, c.out, k), c.in) << c.q << " " << NttKernelName(k);
    }
  }
}

TEST(Ntt, RejectsBadParameters) {
  const Modulus q = *Modulus::Create(0xffffffffffc0001);
  EXPECT_EQ(NttTables::Create(0, q).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NttTables::Create(17, q).status().message(), "log2 N must be in [1, 16], got 17");
  // 4194353 = 1 mod 16 only: N = 16 needs 1 mod 32.
  EXPECT_EQ(NttTables::Create(4, *Modulus::Create(4194353)).status().message(),
            "4194353 is not a prime = 1 mod 32 (2N must be a power of two)");
}

TEST(Ntt, ReferenceFollowsTheDefinition) {
  std::mt19937_64 rng = Rng(10);
  for (int log_n = 1; log_n <= 10; ++log_n) {
    for (int bits : {30, 50, 62}) {
      const NttTables t = Tables(log_n, (*GenerateNttPrimes(bits, 2 << log_n, 1))[0]);
      const std::vector<uint64_t> a = RandomResidues(t.n(), t.modulus().value(), rng);
      ASSERT_EQ(ForwardWith(t, a, NttKernel::kReference), NttByDefinition(t, a))
          << "N = " << t.n() << ", q = " << t.modulus().value();
    }
  }
}

// Moduli covering each kernel's limits: 2^29 .. 2^30 (U32), 2^50 (IFMA), 2^62 (U64).
const int kBits[] = {20, 29, 30, 31, 36, 44, 49, 50, 51, 60, 62};

TEST(Ntt, EveryKernelMatchesTheReference) {
  std::mt19937_64 rng = Rng(11);
  for (int log_n = 1; log_n <= kMaxLogN; ++log_n) {
    for (int bits : kBits) {
      absl::StatusOr<std::vector<uint64_t>> q = GenerateNttPrimes(bits, 2 << log_n, 1);
      if (!q.ok()) continue;  // no 20-bit prime = 1 mod 2^17
      const NttTables t = Tables(log_n, (*q)[0]);
      const uint64_t qv = t.modulus().value();
      std::vector<std::vector<uint64_t>> inputs = {RandomResidues(t.n(), qv, rng),
                                                   std::vector<uint64_t>(t.n(), qv - 1),
                                                   std::vector<uint64_t>(t.n(), 0)};
      for (const std::vector<uint64_t>& a : inputs) {
        const std::vector<uint64_t> forward = ForwardWith(t, a, NttKernel::kReference);
        const std::vector<uint64_t> inverse = InverseWith(t, a, NttKernel::kReference);
        for (NttKernel k : t.Kernels()) {
          ASSERT_EQ(ForwardWith(t, a, k), forward)
              << NttKernelName(k) << " N = " << t.n() << " q = " << qv;
          ASSERT_EQ(InverseWith(t, a, k), inverse)
              << NttKernelName(k) << " N = " << t.n() << " q = " << qv;
        }
        ASSERT_EQ(InverseWith(t, forward, t.best()), a) << "round trip, q = " << qv;
      }
    }
  }
}

TEST(Ntt, MultiplyAddMatchesScalar) {
  std::mt19937_64 rng = Rng(13);
  for (int bits : {29, 49, 60, 62}) {
    const NttTables t = Tables(10, (*GenerateNttPrimes(bits, 2048, 1))[0]);
    const uint64_t q = t.modulus().value();
    for (size_t count : {size_t{1}, size_t{7}, size_t{8}, size_t{17}, size_t{1024}}) {
      const std::vector<uint64_t> b = RandomResidues(count, q, rng);
      const std::vector<uint64_t> acc = RandomResidues(count, q, rng);
      const uint64_t w = rng() % q;
      std::vector<uint64_t> expect = acc;
      for (size_t i = 0; i < count; ++i)
        expect[i] = t.modulus().Add(acc[i], t.modulus().Mul(w, b[i]));
      for (NttKernel k : t.Kernels()) {
        std::vector<uint64_t> got = acc;
        t.MultiplyAdd(w, b.data(), got.data(), count, k);
        ASSERT_EQ(got, expect) << NttKernelName(k) << " " << bits << " bits, " << count;
      }
    }
  }
}

TEST(Ntt, KernelsAvailableOnThisCpu) {
  // Not an assertion on the CPU: a record of what the comparisons above covered.
  const NttTables t = Tables(12, (*GenerateNttPrimes(29, 8192, 1))[0]);
  std::string names;
  for (NttKernel k : t.Kernels()) names += std::string(NttKernelName(k)) + " ";
  std::printf("NTT kernels for a 29-bit prime at N = 4096: %s\n", names.c_str());
  EXPECT_EQ(t.Kernels().front(), NttKernel::kReference);
}

// Schoolbook product in Z_q[X] / (X^N + 1).
std::vector<uint64_t> Schoolbook(const Modulus& q, const std::vector<uint64_t>& a,
                                 const std::vector<uint64_t>& b) {
  const size_t n = a.size();
  std::vector<uint64_t> c(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      const uint64_t p = q.Mul(a[i], b[j]);
      c[(i + j) % n] = i + j < n ? q.Add(c[(i + j) % n], p) : q.Sub(c[(i + j) % n], p);
    }
  }
  return c;
}

TEST(Ntt, NegacyclicProductEqualsSchoolbook) {
  std::mt19937_64 rng = Rng(12);
  for (int log_n : {1, 4, 5, 8, 10}) {
    for (int bits : {29, 49, 62}) {
      const NttTables t = Tables(log_n, (*GenerateNttPrimes(bits, 2 << log_n, 1))[0]);
      const Modulus& q = t.modulus();
      const std::vector<uint64_t> a = RandomResidues(t.n(), q.value(), rng);
      const std::vector<uint64_t> b = RandomResidues(t.n(), q.value(), rng);
      std::vector<uint64_t> fa = ForwardWith(t, a, t.best()), fb = ForwardWith(t, b, t.best());
      for (size_t i = 0; i < t.n(); ++i) fa[i] = q.Mul(fa[i], fb[i]);
      ASSERT_EQ(InverseWith(t, fa, t.best()), Schoolbook(q, a, b))
          << "N = " << t.n() << ", q = " << q.value();
    }
  }
}

}  // namespace
}  // namespace veil::he
