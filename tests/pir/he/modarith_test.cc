// Modular arithmetic (Barrett, Montgomery, Shoup), prime generation and RNS (CRT composition and
// base conversion), against plain 128-bit and multi-word arithmetic on random inputs.
#include "pir/he/modarith.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/multiword.h"
#include "pir/he/rns.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::Rng;

// Moduli of every size the library accepts, odd, prime or not.
std::vector<uint64_t> SomeModuli(std::mt19937_64& rng) {
  std::vector<uint64_t> moduli = {
      3, 17, 113, 4194353, 0xffffee001, 0xffffffffffc0001, (uint64_t{1} << 62) - 57};
  for (int bits = 2; bits <= kMaxModulusBits; ++bits) {
    moduli.push_back(((rng() >> (64 - bits)) | (uint64_t{1} << (bits - 1)) | 1));
  }
  return moduli;
}

TEST(Modulus, RejectsBadModuli) {
  for (uint64_t q : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{1000}, uint64_t{1} << 62,
                     (uint64_t{1} << 62) + 1, ~uint64_t{0}}) {
    absl::StatusOr<Modulus> m = Modulus::Create(q);
    ASSERT_FALSE(m.ok()) << q;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("must be odd, at least 3 and below 2^62"),
              std::string::npos);
  }
}

TEST(Modulus, ReductionsMatchPlainArithmetic) {
  std::mt19937_64 rng = Rng(1);
  for (uint64_t qv : SomeModuli(rng)) {
    const Modulus q = *Modulus::Create(qv);
    for (int i = 0; i < 2000; ++i) {
      const uint64_t a = rng(), b = rng();
      const uint128_t wide = (static_cast<uint128_t>(rng()) << 64) | rng();
      ASSERT_EQ(q.Reduce(a), a % qv) << qv;
      ASSERT_EQ(q.Reduce(wide), static_cast<uint64_t>(wide % qv)) << qv;
      ASSERT_EQ(q.Mul(a, b), static_cast<uint64_t>(static_cast<uint128_t>(a) * b % qv));
      const uint64_t x = a % qv, y = b % qv;
      const uint64_t product = static_cast<uint64_t>(static_cast<uint128_t>(x) * y % qv);
      // Montgomery: to, multiply, from.
      ASSERT_EQ(q.FromMontgomery(q.MontgomeryMul(q.ToMontgomery(x), q.ToMontgomery(y))), product);
      // Shoup: exact and lazy (any 64-bit a).
      ASSERT_EQ(MulShoup(y, x, q.ShoupOf(x), qv), product);
      const uint64_t lazy = MulShoupLazy(a, x, q.ShoupOf(x), qv);
      ASSERT_LT(lazy, 2 * qv);
      ASSERT_EQ(lazy % qv, static_cast<uint64_t>(static_cast<uint128_t>(a) * x % qv));
      ASSERT_EQ(q.Add(x, y), static_cast<uint64_t>((static_cast<uint128_t>(x) + y) % qv));
      ASSERT_EQ(q.Sub(x, y), (x + qv - y) % qv);
      ASSERT_EQ(q.Centered(x) < 0 ? q.FromSigned(q.Centered(x)) : x, x);
    }
    // Edges: the largest residues and the largest 128-bit value.
    ASSERT_EQ(q.Mul(qv - 1, qv - 1), 1 % qv);
    ASSERT_EQ(q.Reduce(~static_cast<uint128_t>(0)),
              static_cast<uint64_t>(~static_cast<uint128_t>(0) % qv));
  }
}

// ShoupRoundedQuotient (BFV's rounding of (Q mod t) m / t) against 128-bit division: random and
// extreme multiplicands and multipliers, half = (q + 1) / 2 as BFV uses it, 0 and q - 1.
TEST(Modulus, ShoupRoundedQuotientMatchesPlainDivision) {
  std::mt19937_64 rng = Rng(5);
  for (uint64_t qv : SomeModuli(rng)) {
    std::vector<uint64_t> as = {0, 1, qv - 1, qv, ~uint64_t{0}}, ws = {0, 1, qv / 2, qv - 1};
    for (int i = 0; i < 100; ++i) {
      as.push_back(rng());
      as.push_back(rng() % qv);
      ws.push_back(rng() % qv);
    }
    for (const uint64_t w : ws) {
      const uint64_t w_shoup = ShoupPrecompute(w, qv);
      for (const uint64_t half : {uint64_t{0}, (qv + 1) / 2, qv - 1}) {
        for (const uint64_t a : as) {
          const uint128_t x = static_cast<uint128_t>(a) * w + half;
          ASSERT_EQ(ShoupRoundedQuotient(a, w, w_shoup, qv, half), static_cast<uint64_t>(x / qv))
              << qv << " " << a << " " << w << " " << half;
        }
      }
    }
  }
}

TEST(Modulus, InverseAndPow) {
  const Modulus q = *Modulus::Create(0xffffffffffc0001);
  std::mt19937_64 rng = Rng(2);
  for (int i = 0; i < 100; ++i) {
    const uint64_t a = rng() % (q.value() - 1) + 1;
    ASSERT_EQ(q.Mul(a, *q.Inverse(a)), 1u);
    ASSERT_EQ(q.Pow(a, q.value() - 1), 1u);  // Fermat
  }
  const Modulus fifteen = *Modulus::Create(15);
  absl::StatusOr<uint64_t> none = fifteen.Inverse(5);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(), "5 has no inverse modulo 15");
  EXPECT_EQ(*fifteen.Inverse(7), 13u);
}

TEST(Primes, MillerRabinIsDeterministic) {
  // Against trial division below 2^17, and on strong pseudoprimes to small bases.
  for (uint64_t n = 0; n < (1 << 17); ++n) {
    bool prime = n >= 2;
    for (uint64_t d = 2; d * d <= n && prime; ++d) prime = n % d != 0;
    ASSERT_EQ(IsPrime(n), prime) << n;
  }
  for (uint64_t composite : {uint64_t{561}, uint64_t{3215031751}, uint64_t{2152302898747},
                             uint64_t{3474749660383}, uint64_t{341550071728321},
                             uint64_t{3825123056546413051}, uint64_t{2147483647} * 2147483647}) {
    EXPECT_FALSE(IsPrime(composite)) << composite;
  }
  for (uint64_t prime : {uint64_t{2305843009213693951}, uint64_t{0xffffffffffc0001},
                         uint64_t{18446744073709551557u}}) {
    EXPECT_TRUE(IsPrime(prime)) << prime;
  }
}

TEST(Primes, NttPrimesAreTheLargestOfTheirForm) {
  // NOTES.md: the three largest NTT-friendly primes below 2^29 for N = 4096.
  EXPECT_EQ(*GenerateNttPrimes(29, 8192, 3),
            (std::vector<uint64_t>{536813569, 536690689, 536641537}));
  EXPECT_EQ(*GenerateNttPrimes(29, 8192, 2, {536813569}),
            (std::vector<uint64_t>{536690689, 536641537}));
  for (int bits : {20, 36, 44, 50, 60, 62}) {
    const std::vector<uint64_t> primes = *GenerateNttPrimes(bits, 1 << 14, 3);
    for (size_t i = 0; i < primes.size(); ++i) {
      EXPECT_TRUE(IsPrime(primes[i]));
      EXPECT_EQ(primes[i] % (1 << 14), 1u);
      EXPECT_EQ(64 - __builtin_clzll(primes[i]), bits);
      if (i > 0) {
        EXPECT_LT(primes[i], primes[i - 1]);
      }
    }
  }
  EXPECT_EQ(GenerateNttPrimes(63, 8, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GenerateNttPrimes(30, 12, 1).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::vector<uint64_t>> few = GenerateNttPrimes(10, 256, 5);
  EXPECT_EQ(few.status().code(), absl::StatusCode::kNotFound);
}

TEST(Primes, MinimalPrimitiveRoot) {
  // psi of the NTT known answers: q = 113, 2N = 8 and q = 17, 2N = 16: the smallest x with
  // x^N = -1 (mod 113: 18, 44, 69, 95; mod 17: the generators 3, 5, 6, ...).
  EXPECT_EQ(*MinimalPrimitiveRoot(8, *Modulus::Create(113)), 18u);
  EXPECT_EQ(*MinimalPrimitiveRoot(16, *Modulus::Create(17)), 3u);
  EXPECT_EQ(MinimalPrimitiveRoot(32, *Modulus::Create(113)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A random x below Q (of bit length up to that of Q, less one), as base.size() words.
std::vector<uint64_t> RandomBelow(const RnsBase& base, std::mt19937_64& rng) {
  std::vector<uint64_t> x(base.size(), 0);
  const int bits = base.product_bits() - 1;
  for (int i = 0; i < bits; i += 64) {
    x[i / 64] = bits - i >= 64 ? rng() : rng() >> (64 - (bits - i));
  }
  return x;
}

TEST(Rns, ComposeDecomposeRoundTrip) {
  std::mt19937_64 rng = Rng(3);
  const RnsBase base =
      *RnsBase::Create({0x7fffffd8001, 0x7fffffc8001, 0xfffffffc001, 0xffffff6c001, 0xfffffebc001});
  EXPECT_EQ(base.product_bits(), 218);  // SEAL's N = 8192 set: 43 + 43 + 44 + 44 + 44
  std::vector<uint64_t> residues(base.size()), back(base.size());
  for (int i = 0; i < 500; ++i) {
    const std::vector<uint64_t> x = RandomBelow(base, rng);
    base.Decompose(x, residues.data(), 1);
    base.Compose(residues.data(), 1, absl::MakeSpan(back));
    ASSERT_EQ(back, x);
  }
  const RnsBase small = *RnsBase::Create({0xffffee001, 0xffffc4001, 0x1ffffe0001});
  for (int i = 0; i < 500; ++i) {
    const std::vector<uint64_t> x = RandomBelow(small, rng);
    small.Decompose(x, residues.data(), 1);
    const uint128_t v = *small.ComposeU128(residues.data(), 1);
    ASSERT_EQ(static_cast<uint64_t>(v), x[0]);
    ASSERT_EQ(static_cast<uint64_t>(v >> 64), x[1]);
  }
  EXPECT_EQ(base.ComposeU128(residues.data(), 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Rns, RejectsBadBases) {
  absl::StatusOr<RnsBase> shared = RnsBase::Create({15, 21});
  ASSERT_FALSE(shared.ok());
  EXPECT_EQ(shared.status().message(), "RNS moduli 15 and 21 are not coprime");
  EXPECT_EQ(RnsBase::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RnsBase::Create({17, 4}).status().code(), absl::StatusCode::kInvalidArgument);
  const RnsBase a = *RnsBase::Create({17, 97});
  const RnsBase b = *RnsBase::Create({97, 193});
  EXPECT_EQ(BaseConverter::Create(a, b).status().message(),
            "base conversion between bases that share the modulus 97");
}

TEST(Rns, BaseConversion) {
  std::mt19937_64 rng = Rng(4);
  const RnsBase from = *RnsBase::Create({0xffffee001, 0xffffc4001, 0x1ffffe0001});
  const RnsBase to = *RnsBase::Create(*GenerateNttPrimes(61, 8192, 4));
  const BaseConverter conv = *BaseConverter::Create(from, to);
  constexpr size_t kN = 256;
  std::vector<uint64_t> in(from.size() * kN), fast(to.size() * kN), exact(to.size() * kN);
  std::vector<std::vector<uint64_t>> xs;
  for (size_t c = 0; c < kN; ++c) {
    xs.push_back(RandomBelow(from, rng));
    from.Decompose(xs.back(), in.data() + c, kN);
  }
  conv.FastConvert(in.data(), kN, fast.data());
  conv.ExactConvert(in.data(), kN, exact.data());
  for (size_t c = 0; c < kN; ++c) {
    // Centered: x - Q when x > Q/2.
    std::vector<uint64_t> half(from.product().begin(), from.product().end());
    multiword::DivWordInPlace(absl::MakeSpan(half), 2);
    const bool negative = multiword::Compare(xs[c], half) > 0;
    // Fast: x + a*Q for one a in [0, 3) shared by every target prime.
    int a_found = -1;
    for (int a = 0; a < 3 && a_found < 0; ++a) {
      bool all = true;
      for (size_t j = 0; j < to.size(); ++j) {
        const Modulus& p = to[j];
        const uint64_t expect = p.Add(multiword::ModWord(xs[c], p.value()),
                                      p.Mul(a, multiword::ModWord(from.product(), p.value())));
        all = all && fast[j * kN + c] == expect;
      }
      if (all) a_found = a;
    }
    ASSERT_GE(a_found, 0) << "coefficient " << c;
    for (size_t j = 0; j < to.size(); ++j) {
      const Modulus& p = to[j];
      uint64_t expect = multiword::ModWord(xs[c], p.value());
      if (negative) expect = p.Sub(expect, multiword::ModWord(from.product(), p.value()));
      ASSERT_EQ(exact[j * kN + c], expect) << "coefficient " << c << " prime " << j;
    }
  }
}

}  // namespace
}  // namespace veil::he
