// The baby-step giant-step matrix-vector product: the IFMA, AVX2 and AVX2 + FMA dot-product and
// row kernels against their references bit for bit, plans (rotation counts g + b instead of g b;
// every row's windows tiling its lane), and decrypt(M x) = M x for random matrices of several
// shapes (square, wide, tall, one row, one column, odd sizes, several input blocks) on random
// vectors.
#include "pir/he/matvec.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "pir/he/dot_product.h"
#include "pir/he/encoder.h"
#include "tests/pir/he/test_support.h"

namespace veil::he {
namespace {

using testing::RandomResidues;
using testing::Rng;

// MultiplyRows' products (the AVX2 + FMA kernel where this CPU has it, for primes up to 50 bits)
// against 128-bit arithmetic: random residues and the largest, every length's tail, in place.
TEST(RowProduct, EqualsPlainArithmetic) {
  std::mt19937_64 rng = Rng(33);
  for (int bits : {2, 17, 29, 30, 36, 43, 44, 49, 50, 51, 60}) {
    const uint64_t two_n = uint64_t{1} << std::min(bits - 1, 14);
    const Modulus q = *Modulus::Create((*GenerateNttPrimes(bits, two_n, 1))[0]);
    SCOPED_TRACE(::testing::Message() << q.value() << " (" << bits << " bits), AVX2 + FMA "
                                      << internal::RowProductUsesAvx2F64(q));
    for (size_t n : {size_t{1}, size_t{4}, size_t{7}, size_t{64}, size_t{8192}}) {
      std::vector<uint64_t> a = RandomResidues(n, q.value(), rng);
      std::vector<uint64_t> b = RandomResidues(n, q.value(), rng);
      a[0] = b[0] = q.value() - 1;
      a[n - 1] = q.value() - 1;
      b[n / 2] = 0;
      std::vector<uint64_t> want(n), got = a;  // in place: out is a
      for (size_t c = 0; c < n; ++c) {
        want[c] = static_cast<uint64_t>(static_cast<uint128_t>(a[c]) * b[c] % q.value());
      }
      const size_t done = internal::RowProductUsesAvx2F64(q)
                              ? internal::RowProductAvx2F64(q, n, got.data(), b.data(), got.data())
                              : 0;
      EXPECT_EQ(done, internal::RowProductUsesAvx2F64(q) ? n / 4 * 4 : 0);
      for (size_t c = done; c < n; ++c) got[c] = q.Mul(a[c], b[c]);
      ASSERT_EQ(got, want) << n;
      // And accumulated onto a row of residues (MultiplyAccumulateRows' kernel).
      const std::vector<uint64_t> base = RandomResidues(n, q.value(), rng);
      std::vector<uint64_t> acc = base;
      acc[0] = q.value() - 1;
      const size_t added = internal::RowProductUsesAvx2F64(q)
                               ? internal::RowMultiplyAddAvx2F64(q, n, a.data(), b.data(), acc.data())
                               : 0;
      EXPECT_EQ(added, done);
      for (size_t c = 0; c < n; ++c) {
        const uint64_t start = c == 0 ? q.value() - 1 : base[c];
        if (c >= added) acc[c] = q.Reduce(static_cast<uint128_t>(a[c]) * b[c] + start);
        ASSERT_EQ(acc[c], (want[c] + start) % q.value()) << n << " slot " << c;
      }
    }
  }
}

// The mixed-radix steps on FMA lanes (the serialization's conversions) against 128-bit
// arithmetic: digits y from a prime of another size (below, equal, above q's), the extremes
// among them, w and x at q - 1.
TEST(RowProduct, MixedRadixStepsEqualPlainArithmetic) {
  std::mt19937_64 rng = Rng(34);
  for (int bits : {17, 30, 43, 44, 50}) {
    const Modulus q = *Modulus::Create((*GenerateNttPrimes(bits, 64, 1))[0]);
    if (!internal::RowProductUsesAvx2F64(q)) GTEST_SKIP() << "no AVX2 + FMA on this CPU";
    for (int y_bits : {20, bits, 50}) {
      SCOPED_TRACE(::testing::Message() << bits << "-bit q, " << y_bits << "-bit digits");
      const uint64_t y_max = (uint64_t{1} << y_bits) - 1;
      const size_t n = 1028;
      std::vector<uint64_t> x = RandomResidues(n, q.value(), rng);
      std::vector<uint64_t> y = RandomResidues(n, y_max + 1, rng);
      x[0] = q.value() - 1;
      y[0] = y_max;
      y[1] = 0;
      y[2] = q.value() <= y_max ? q.value() : y_max;
      for (const uint64_t w : {uint64_t{1}, q.value() - 1, rng() % q.value()}) {
        std::vector<uint64_t> sub = x, add = x;
        ASSERT_EQ(internal::SubReducedMulAvx2F64(q, w, n, sub.data(), y.data(), sub.data()), n);
        ASSERT_EQ(internal::MulAddReducedAvx2F64(q, w, n, add.data(), y.data(), add.data()), n);
        for (size_t c = 0; c < n; ++c) {
          const uint128_t yq = y[c] % q.value();
          const uint128_t d = (x[c] + q.value() - yq) % q.value();
          ASSERT_EQ(sub[c], static_cast<uint64_t>(d * w % q.value())) << c;
          ASSERT_EQ(add[c], static_cast<uint64_t>((uint128_t{x[c]} * w + yq) % q.value())) << c;
        }
      }
    }
  }
}

TEST(DotProduct, FastPathMatchesReference) {
  std::mt19937_64 rng = Rng(30);
  for (int bits : {16, 20, 29, 30, 32, 36, 44, 49, 50, 60}) {
    const Modulus q = *Modulus::Create((*GenerateNttPrimes(bits, 64, 1))[0]);
    for (size_t terms : {size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{2050}}) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{64}, size_t{300}}) {
        std::vector<std::vector<uint64_t>> data;
        for (size_t i = 0; i < 3 * terms; ++i) {
          data.push_back(i < 3 ? std::vector<uint64_t>(n, q.value() - 1)
                               : RandomResidues(n, q.value(), rng));
        }
        std::vector<const uint64_t*> p, a, b;
        for (size_t i = 0; i < terms; ++i) {
          p.push_back(data[3 * i].data());
          a.push_back(data[3 * i + 1].data());
          b.push_back(data[3 * i + 2].data());
        }
        std::vector<uint64_t> r0(n), r1(n), f0(n), f1(n), naive(n, 0), naive1(n, 0);
        internal::PlainDotProductReference(
            {&q, terms, n, p.data(), a.data(), b.data(), r0.data(), r1.data()});
        internal::PlainDotProduct(
            {&q, terms, n, p.data(), a.data(), b.data(), f0.data(), f1.data()});
        for (size_t c = 0; c < n; ++c) {
          for (size_t i = 0; i < terms; ++i) {
            naive[c] = q.Add(naive[c], q.Mul(p[i][c], a[i][c]));
            naive1[c] = q.Add(naive1[c], q.Mul(p[i][c], b[i][c]));
          }
        }
        ASSERT_EQ(r0, naive) << bits << " bits, " << terms << " terms";
        ASSERT_EQ(r1, naive1) << bits << " bits, " << terms << " terms";
        ASSERT_EQ(f0, r0) << bits << " bits, " << terms << " terms, n " << n;
        ASSERT_EQ(f1, r1) << bits << " bits, " << terms << " terms, n " << n;
        // accumulate: out += the sums, from values below q, through `kernel`.
        const auto check_accumulate = [&](auto kernel, const char* what) {
          std::vector<uint64_t> acc0 = RandomResidues(n, q.value(), rng), acc1 = acc0;
          std::vector<uint64_t> want0 = acc0, want1 = acc1;
          for (size_t c = 0; c < n; ++c) {
            want0[c] = q.Add(want0[c], r0[c]);
            want1[c] = q.Add(want1[c], r1[c]);
          }
          kernel(internal::DotProductArgs{&q, terms, n, p.data(), a.data(), b.data(), acc0.data(),
                                          acc1.data(), true});
          ASSERT_EQ(acc0, want0) << bits << " bits, " << terms << " terms, n " << n << ", " << what;
          ASSERT_EQ(acc1, want1) << bits << " bits, " << terms << " terms, n " << n << ", " << what;
        };
        check_accumulate([](const internal::DotProductArgs& x) { internal::PlainDotProduct(x); },
                         "+=");
        // The AVX2 kernel serves where no IFMA one does and the sums fit 64 bits (q <= 2^32);
        // where it could serve, it is run directly too, so that an IFMA CPU checks it as well.
        const uint128_t largest_sum =
            static_cast<uint128_t>(q.value() - 1) * (q.value() - 1) * terms;
        const bool avx2_fits = bits <= 32 && largest_sum <= ~uint64_t{0};
        const bool avx2 = __builtin_cpu_supports("avx2");
        EXPECT_EQ(internal::PlainDotProductUsesAvx2(q, terms),
                  !internal::PlainDotProductUsesIfma(q) && avx2_fits && avx2)
            << bits << " bits, " << terms << " terms";
        if (avx2_fits && avx2) {
          std::vector<uint64_t> v0(n), v1(n);
          internal::PlainDotProductAvx2(
              {&q, terms, n, p.data(), a.data(), b.data(), v0.data(), v1.data()});
          ASSERT_EQ(v0, r0) << bits << " bits, " << terms << " terms, n " << n << ", AVX2";
          ASSERT_EQ(v1, r1) << bits << " bits, " << terms << " terms, n " << n << ", AVX2";
          check_accumulate(
              [](const internal::DotProductArgs& x) { internal::PlainDotProductAvx2(x); },
              "AVX2 +=");
        }
        // The AVX2 + FMA kernel serves primes up to 50 bits where neither serves (many terms, or
        // q above 2^32); run directly wherever it could, so that an AVX-512 CPU checks it too.
        const bool f64 = avx2 && __builtin_cpu_supports("fma") && bits <= 50;
        EXPECT_EQ(internal::PlainDotProductUsesAvx2F64(q, terms),
                  f64 && !internal::PlainDotProductUsesIfma(q) &&
                      !internal::PlainDotProductUsesAvx2(q, terms))
            << bits << " bits, " << terms << " terms";
        if (f64) {
          std::vector<uint64_t> v0(n), v1(n);
          internal::PlainDotProductAvx2F64(
              {&q, terms, n, p.data(), a.data(), b.data(), v0.data(), v1.data()});
          ASSERT_EQ(v0, r0) << bits << " bits, " << terms << " terms, n " << n << ", AVX2 FMA";
          ASSERT_EQ(v1, r1) << bits << " bits, " << terms << " terms, n " << n << ", AVX2 FMA";
          check_accumulate(
              [](const internal::DotProductArgs& x) { internal::PlainDotProductAvx2F64(x); },
              "AVX2 FMA +=");
        }
        if (bits > 32) continue;
        // The same plaintexts stored as 32-bit residues, through both kernels.
        std::vector<std::vector<uint32_t>> narrow;
        std::vector<const uint32_t*> p32;
        for (size_t i = 0; i < terms; ++i) narrow.emplace_back(p[i], p[i] + n);
        for (const std::vector<uint32_t>& row : narrow) p32.push_back(row.data());
        std::vector<uint64_t> g0(n), g1(n), h0(n), h1(n);
        internal::PlainDotProduct(internal::DotProductArgs32{&q, terms, n, p32.data(), a.data(),
                                                             b.data(), g0.data(), g1.data()});
        internal::PlainDotProductReference(internal::DotProductArgs32{
            &q, terms, n, p32.data(), a.data(), b.data(), h0.data(), h1.data()});
        ASSERT_EQ(g0, r0) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit";
        ASSERT_EQ(g1, r1) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit";
        ASSERT_EQ(h0, r0) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit";
        ASSERT_EQ(h1, r1) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit";
        if (avx2_fits && avx2) {
          internal::PlainDotProductAvx2(internal::DotProductArgs32{
              &q, terms, n, p32.data(), a.data(), b.data(), h0.data(), h1.data()});
          ASSERT_EQ(h0, r0) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit AVX2";
          ASSERT_EQ(h1, r1) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit AVX2";
        }
        // The ciphertext halves as 32-bit residues (narrowed keys), the plaintexts 64-bit.
        std::vector<std::vector<uint32_t>> a_narrow, b_narrow;
        std::vector<const uint32_t*> a32, b32;
        for (size_t i = 0; i < terms; ++i) {
          a_narrow.emplace_back(a[i], a[i] + n);
          b_narrow.emplace_back(b[i], b[i] + n);
        }
        for (size_t i = 0; i < terms; ++i) {
          a32.push_back(a_narrow[i].data());
          b32.push_back(b_narrow[i].data());
        }
        const internal::DotProductArgsNarrowKeys keys32{
            &q, terms, n, p.data(), a32.data(), b32.data(), g0.data(), g1.data()};
        internal::PlainDotProduct(keys32);
        ASSERT_EQ(g0, r0) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit keys";
        ASSERT_EQ(g1, r1) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit keys";
        internal::PlainDotProductReference(
            {&q, terms, n, p.data(), a32.data(), b32.data(), h0.data(), h1.data()});
        ASSERT_EQ(h0, r0) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit keys";
        ASSERT_EQ(h1, r1) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit keys";
        if (avx2_fits && avx2) {
          std::fill(h0.begin(), h0.end(), 0);
          internal::PlainDotProductAvx2(
              {&q, terms, n, p.data(), a32.data(), b32.data(), h0.data(), h1.data()});
          ASSERT_EQ(h0, r0) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit keys";
          ASSERT_EQ(h1, r1) << bits << " bits, " << terms << " terms, n " << n << ", 32-bit keys";
        }
      }
    }
  }
}

// The tiled sums of the deferred packing (deferred_packing.h): the IFMA and AVX2 kernels equal
// the reference and a naive sum, on both sides of the IFMA limits (q of 21 to 31 bits, 2^11
// terms), with every input q - 1 (the largest sums) and runs of tiles that are not multiples of
// four (the AVX2 kernel's streams take a quarter each, the last ones fewer); the outputs' stride
// leaves the words between them alone, whether they are 32-byte aligned (the AVX2 kernel streams
// them past the caches) or not.
TEST(TileDotProduct, FastPathMatchesReference) {
  std::mt19937_64 rng = Rng(33);
  // The outputs at `offset` words into a buffer whose start is 64-byte aligned.
  struct Out {
    Out(size_t words, size_t offset) : storage(words + offset + 8, 7) {
      const uintptr_t start = reinterpret_cast<uintptr_t>(storage.data());
      const size_t skip = ((64 - start % 64) % 64) / 8;
      begin = storage.begin() + static_cast<ptrdiff_t>(skip + offset);
      end = begin + static_cast<ptrdiff_t>(words);
    }
    std::vector<uint64_t> Words() const { return {begin, end}; }
    std::vector<uint64_t> storage;
    std::vector<uint64_t>::iterator begin, end;
  };
  for (int bits : {16, 21, 29, 31, 32}) {
    const Modulus q = *Modulus::Create((*GenerateNttPrimes(bits, 64, 1))[0]);
    for (size_t terms : {size_t{1}, size_t{16}, size_t{128}, size_t{2048}, size_t{2049}}) {
      for (size_t tiles : {size_t{1}, size_t{5}, size_t{6}, size_t{9}}) {
        for (bool largest : {false, true}) {
          std::vector<uint64_t> wide = RandomResidues(tiles * terms * 8, q.value(), rng);
          std::vector<uint64_t> keys = RandomResidues(terms * 16, q.value(), rng);
          if (largest) {
            std::fill(wide.begin(), wide.end(), q.value() - 1);
            std::fill(keys.begin(), keys.end(), q.value() - 1);
          }
          const std::vector<uint32_t> plain(wide.begin(), wide.end());
          // 8 written at 0 and at 11 of every 27 words from one word past alignment (some rows
          // 32-byte aligned, some not); or at 0 and 16 of every 32, all aligned.
          for (const bool aligned : {false, true}) {
            const size_t half = aligned ? 16 : 11, stride = aligned ? 32 : 27;
            Out fast(tiles * stride, aligned ? 0 : 1);
            std::vector<uint64_t> reference(tiles * stride, 7), naive = reference;
            const internal::TileDotProductArgs args{&q,          terms,        tiles,  plain.data(),
                                                    keys.data(), &*fast.begin, stride, half};
            internal::TileDotProduct(args);
            internal::TileDotProductArgs ref = args;
            ref.out = reference.data();
            internal::TileDotProductReference(ref);
            for (size_t t = 0; t < tiles; ++t) {
              for (size_t h = 0; h < 2; ++h) {
                for (size_t l = 0; l < 8; ++l) {
                  uint64_t sum = 0;
                  for (size_t r = 0; r < terms; ++r) {
                    sum = q.Add(sum,
                                q.Mul(plain[(t * terms + r) * 8 + l], keys[(r * 2 + h) * 8 + l]));
                  }
                  naive[t * stride + h * half + l] = sum;
                }
              }
            }
            const std::string what = std::to_string(bits) + " bits, " + std::to_string(terms) +
                                     " terms, " + std::to_string(tiles) + " tiles" +
                                     (largest ? ", largest" : "") +
                                     (aligned ? ", aligned" : ", mixed alignment");
            ASSERT_EQ(reference, naive) << what;
            ASSERT_EQ(fast.Words(), reference) << what;
            if (bits == 29 && terms <= 2048) {
              EXPECT_EQ(internal::TileDotProductUsesIfma(args),
                        internal::PlainDotProductUsesIfma(q));
            }
            if (bits == 16 || bits == 32 || terms > 2048) {
              EXPECT_FALSE(internal::TileDotProductUsesIfma(args)) << what;
            }
            // Where no IFMA kernel serves, every modulus here (<= 32 bits) takes the AVX2 one;
            // it is run directly too, so that an IFMA CPU checks it as well.
            if (!internal::TileDotProductUsesIfma(args)) {
              EXPECT_EQ(internal::TileDotProductUsesAvx2(args),
                        static_cast<bool>(__builtin_cpu_supports("avx2")))
                  << what;
            }
            if (__builtin_cpu_supports("avx2")) {
              Out avx2(tiles * stride, aligned ? 0 : 1);
              internal::TileDotProductArgs direct = args;
              direct.out = &*avx2.begin;
              internal::TileDotProductAvx2(direct);
              ASSERT_EQ(avx2.Words(), naive) << what << ", AVX2";
            }
          }
        }
      }
    }
  }
}

// The row kernel of ModDown and the expansion, (x - y) w mod q, per-coefficient and constant w,
// on both sides of the IFMA limit (q < 2^50) and the AVX2 one (q <= 2^32), with the extremes and
// a tail past the vectors.
TEST(SubMulShoup, FastPathMatchesReference) {
  std::mt19937_64 rng = Rng(32);
  for (int bits : {16, 22, 29, 30, 31, 32, 33, 44, 50, 60}) {
    const Modulus q = *Modulus::Create((*GenerateNttPrimes(bits, 64, 1))[0]);
    for (size_t n : {size_t{1}, size_t{8}, size_t{9}, size_t{4099}}) {
      std::vector<uint64_t> x = RandomResidues(n, q.value(), rng);
      std::vector<uint64_t> y = RandomResidues(n, q.value(), rng);
      std::vector<uint64_t> w = RandomResidues(n, q.value(), rng);
      x[0] = 0;
      y[0] = q.value() - 1;
      w[0] = q.value() - 1;
      std::vector<uint64_t> w_shoup(n);
      for (size_t c = 0; c < n; ++c) w_shoup[c] = q.ShoupOf(w[c]);
      for (size_t step : {size_t{0}, size_t{1}}) {
        std::vector<uint64_t> fast(n), reference(n), naive(n);
        internal::SubMulShoup(q, n, x.data(), y.data(), w.data(), w_shoup.data(), step,
                              fast.data());
        internal::SubMulShoupReference(q, n, x.data(), y.data(), w.data(), w_shoup.data(), step,
                                       reference.data());
        for (size_t c = 0; c < n; ++c) naive[c] = q.Mul(q.Sub(x[c], y[c]), w[c * step]);
        ASSERT_EQ(reference, naive) << bits << " bits, n " << n << ", step " << step;
        ASSERT_EQ(fast, reference) << bits << " bits, n " << n << ", step " << step;
        if (bits <= 32 && __builtin_cpu_supports("avx2")) {  // the AVX2 kernel, on any such CPU
          std::vector<uint64_t> avx2(n);
          internal::SubMulShoupAvx2(q, n, x.data(), y.data(), w.data(), w_shoup.data(), step,
                                    avx2.data());
          ASSERT_EQ(avx2, reference) << bits << " bits, n " << n << ", step " << step << ", AVX2";
        }
        std::vector<uint64_t> in_place = x;  // out aliasing x, then y
        internal::SubMulShoup(q, n, in_place.data(), y.data(), w.data(), w_shoup.data(), step,
                              in_place.data());
        ASSERT_EQ(in_place, reference);
        in_place = y;
        internal::SubMulShoup(q, n, x.data(), in_place.data(), w.data(), w_shoup.data(), step,
                              in_place.data());
        ASSERT_EQ(in_place, reference);
      }
    }
  }
}

TEST(MatVecPlan, BabyStepGiantStepCounts) {
  const auto ctx = *BfvContext::Create(*BfvParams::Standard(13, 30));
  // 4096 x 4096 at N = 8192: two lanes of 2048 columns, 2048 diagonals = b x g.
  const MatVecPlan square = *MatVecPlan::Create(*ctx, 4096, 4096);
  EXPECT_EQ(square.blocks(), 1u);
  EXPECT_EQ(square.lane_cols(), 2048u);
  EXPECT_EQ(square.window(), 2048u);
  EXPECT_EQ(square.diagonals(), 2048u);
  EXPECT_EQ(square.rotations(), square.baby() - 1 + square.giant() - 1);
  EXPECT_LE(square.rotations(), 100u);                           // instead of 2047
  EXPECT_EQ(square.RotationSteps().size(), square.rotations());  // distinct steps
  // 64 x 4096 (a bag over 4096 rows of dimension 64): 64 diagonals, no fold.
  const MatVecPlan wide = *MatVecPlan::Create(*ctx, 64, 4096);
  EXPECT_EQ(wide.window(), 64u);
  EXPECT_EQ(wide.diagonals(), 64u);
  EXPECT_EQ(wide.rotations(), wide.baby() - 1 + wide.giant() - 1);
  // 18 x 65536 (16 values and 2 tag words per row over 8 blocks): windows of 18 and 19 columns,
  // 19 diagonals rounded to b g = 20, not the 32 of the next power of two.
  const MatVecPlan tagged = *MatVecPlan::Create(*ctx, 18, 65536);
  EXPECT_EQ(tagged.blocks(), 8u);
  EXPECT_EQ(tagged.window(), 19u);
  EXPECT_EQ(tagged.diagonals(), 20u);
  EXPECT_EQ(tagged.rotations(), 8 * (tagged.baby() - 1) + tagged.giant() - 1);
  // More columns than two lanes hold: blocks.
  EXPECT_EQ(MatVecPlan::Create(*ctx, 64, 20000)->blocks(), 3u);
  EXPECT_EQ(MatVecPlan::Create(*ctx, 4097, 10).status().message(),
            "a 4097 x 10 matrix needs 1 to N/2 = 4096 rows and at least one column");
}

// Every row's windows tile its lane exactly once: each column of the lane is summed once per row.
TEST(MatVecPlan, EachRowsWindowsTileTheLane) {
  const auto ctx = *BfvContext::Create(*BfvParams::Standard(12, 20));
  for (size_t rows : {1, 2, 3, 5, 17, 18, 100, 1000, 1024, 1500, 2047, 2048}) {
    for (size_t cols : {1, 7, 64, 300, 4096, 5000}) {
      SCOPED_TRACE(::testing::Message() << rows << " x " << cols);
      const MatVecPlan plan = *MatVecPlan::Create(*ctx, rows, cols);
      const size_t lane_cols = plan.lane_cols();
      std::vector<std::vector<int>> covered(rows, std::vector<int>(lane_cols, 0));
      for (size_t s = 0; s < plan.slots_per_lane(); ++s) {
        if (plan.slot_row(s) < 0) continue;
        ASSERT_LT(static_cast<size_t>(plan.slot_row(s)), rows);
        ASSERT_LE(plan.slot_window(s), plan.window());
        for (size_t i = 0; i < plan.slot_window(s); ++i) {
          ++covered[plan.slot_row(s)][(s + i) % lane_cols];
        }
      }
      for (size_t r = 0; r < rows; ++r) {
        ASSERT_EQ(covered[r], std::vector<int>(lane_cols, 1)) << "row " << r;
      }
      EXPECT_GE(plan.diagonals(), plan.window());
      // No more diagonals than the next power of two would take.
      size_t pow2 = 1;
      while (pow2 < rows) pow2 *= 2;
      EXPECT_LE(plan.window(), std::min(pow2, lane_cols));
    }
  }
}

struct Shape {
  size_t rows, cols;
};

// A random rows x cols matrix encoded, times an encrypted random vector: the product decrypts to
// the plain product, with noise budget left.
void ExpectThePlainProduct(const std::shared_ptr<const BfvContext>& ctx, const SecretKey& sk,
                           const Shape& s, std::mt19937_64& rng) {
  SCOPED_TRACE(::testing::Message() << s.rows << " x " << s.cols);
  const uint64_t t = ctx->params().t;
  const MatVecPlan plan = *MatVecPlan::Create(*ctx, s.rows, s.cols);
  const std::vector<uint64_t> matrix = RandomResidues(s.rows * s.cols, t, rng);
  const std::vector<uint64_t> x = RandomResidues(s.cols, t, rng);
  const EncodedMatrix encoded = *EncodedMatrix::Create(ctx, plan, matrix, 2);
  const GaloisKeys gk = *GenerateGaloisKeys(*ctx, sk, plan.GaloisElements());
  std::vector<Ciphertext> inputs;
  const std::vector<std::vector<uint64_t>> packed = *plan.PackInput(x);
  for (const std::vector<uint64_t>& slots : packed) {
    inputs.push_back(*EncryptSymmetric(*ctx, sk, *EncodeSlots(*ctx, slots)));
  }
  const Ciphertext y = *encoded.Multiply(inputs, gk, 2);
  EXPECT_GT(*NoiseBudget(*ctx, sk, y), 0);
  EXPECT_EQ(plan.UnpackOutput(*DecodeSlots(*ctx, *Decrypt(*ctx, sk, y))),
            MatVecPlain(ctx->plain_modulus(), s.rows, s.cols, matrix, x));
}

TEST(MatVec, EqualsThePlainProduct) {
  const auto ctx = *BfvContext::Create(*BfvParams::Standard(12, 20));
  const SecretKey sk = GenerateSecretKey(*ctx);
  std::mt19937_64 rng = Rng(31);
  for (const Shape& s :
       {Shape{64, 64}, Shape{16, 1000}, Shape{1000, 16}, Shape{1, 300}, Shape{300, 1},
        Shape{37, 53}, Shape{5, 5000}, Shape{18, 9000}, Shape{100, 4096}, Shape{2048, 4096}}) {
    ExpectThePlainProduct(ctx, sk, s, rng);
  }
}

// Rings smaller than the encoded matrix's 64-slot tiles (N = 16 and 32: tiles of N slots), with
// several blocks and baby steps.
TEST(MatVec, EqualsThePlainProductOnSmallRings) {
  std::mt19937_64 rng = Rng(32);
  for (const int log_n : {4, 5}) {
    SCOPED_TRACE(::testing::Message() << "N = " << (1 << log_n));
    const uint64_t two_n = uint64_t{2} << log_n;
    const std::vector<uint64_t> q = *GenerateNttPrimes(50, two_n, 3);
    const uint64_t t = (*GenerateNttPrimes(20, two_n, 1))[0];
    const auto ctx = *BfvContext::Create(*BfvParams::Create(log_n, {q[0], q[1]}, q[2], t));
    const SecretKey sk = GenerateSecretKey(*ctx);
    for (const Shape& s : {Shape{3, 40}, Shape{8, 8}, Shape{1, 100}}) {
      ExpectThePlainProduct(ctx, sk, s, rng);
    }
  }
}

TEST(MatVec, RejectsBadInputs) {
  const auto ctx = *BfvContext::Create(*BfvParams::Standard(12, 20));
  const SecretKey sk = GenerateSecretKey(*ctx);
  const MatVecPlan plan = *MatVecPlan::Create(*ctx, 4, 8);
  const std::vector<uint64_t> matrix(32, 1);
  EXPECT_EQ(EncodedMatrix::Create(ctx, plan, std::vector<uint64_t>(31, 1)).status().message(),
            "the matrix has 31 entries, expected 4 x 8");
  const EncodedMatrix encoded = *EncodedMatrix::Create(ctx, plan, matrix);
  const GaloisKeys none = *GenerateGaloisKeys(*ctx, sk, {});
  const Ciphertext ct = *EncryptSymmetric(
      *ctx, sk, *EncodeSlots(*ctx, (*plan.PackInput(std::vector<uint64_t>(8, 1)))[0]));
  EXPECT_EQ(encoded.Multiply({ct, ct}, none).status().message(),
            "the product takes 1 input ciphertexts, got 2");
  EXPECT_EQ(encoded.Multiply({ct}, none).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(plan.PackInput(std::vector<uint64_t>(7, 1)).status().message(),
            "the vector has 7 entries, the matrix 8 columns");
}

}  // namespace
}  // namespace veil::he
