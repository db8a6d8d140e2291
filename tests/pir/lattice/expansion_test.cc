#include "pir/lattice/expansion.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/he/poly.h"
#include "pir/he/sampling.h"
#include "pir/lattice/lwe.h"
#include "tests/pir/lattice/lwe_batch.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;
using testing::LweBatch;

uint64_t Seed(int salt) { return testing::TestSeed("pir_lattice_test") + 300 + salt; }

RingContext DefaultContext() { return *RingContext::Create(RingParams::Default()); }

// A client's keys and RLWE secret.
struct Session {
  explicit Session(const RingContext& ctx, uint32_t lwe_n)
      : key(he::GenerateSecretKey(*ctx.expansion())),
        z(RlweSecret::FromKey(ctx, key)),
        wire(*MakeExpansionKeys(ctx, key, lwe_n)),
        keys(*ParseExpansionKeys(ctx, lwe_n, wire)) {}
  he::SecretKey key;
  RlweSecret z;
  std::vector<uint8_t> wire;
  he::GaloisKeys keys;
};

// Every leaf K_j's phase beta + alpha z modulo the first prime, coefficient form (N residues
// per leaf, leaf-major), and how often each index came.
struct Leaves {
  std::vector<uint64_t> phase;
  std::vector<int> seen;
};

Leaves Expand(const RingContext& ctx, const Session& session, absl::Span<const uint32_t> secret,
              int threads = 1) {
  const uint32_t lwe_n = static_cast<uint32_t>(secret.size());
  const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, secret);
  const size_t n = ctx.n(), stride = ctx.k() * n;
  const auto row0 = ctx.ntt().first(1);
  Leaves leaves{std::vector<uint64_t>(uint64_t{lwe_n} * n), std::vector<int>(lwe_n, 0)};
  std::mutex mu;  // workers' calls overlap
  const absl::Status s = ExpandLweSecret(
      ctx, session.keys, lwe_n, ct, threads,
      [&](int worker, uint32_t count, const uint32_t* index, const uint64_t* beta,
          const uint64_t* alpha) {
        std::lock_guard<std::mutex> lock(mu);
        EXPECT_LT(worker, threads);
        EXPECT_LE(count, kPackKeysPerBlock);
        for (uint32_t i = 0; i < count; ++i) {
          ASSERT_LT(index[i], lwe_n);
          ++leaves.seen[index[i]];
          uint64_t* out = leaves.phase.data() + uint64_t{index[i]} * n;
          he::internal::MultiplyRows(row0, alpha + i * stride, session.z.ntt().data(), out);
          he::internal::AddRows(row0, out, beta + i * stride, out);
          he::internal::InverseNtt(row0, out);
        }
      });
  EXPECT_TRUE(s.ok()) << s;
  return leaves;
}

// Centered residue modulo q.
double Centered(uint64_t x, uint64_t q) {
  return x > q / 2 ? -static_cast<double>(q - x) : static_cast<double>(x);
}

TEST(ExpansionTest, TheRingIsTheBfvContextsAndWithinTheStandard) {
  const RingContext ctx = DefaultContext();
  ASSERT_NE(ctx.expansion(), nullptr);
  EXPECT_EQ(ctx.params().special, 4169729u);
  EXPECT_EQ(ctx.expansion()->q_size(), 3u);
  EXPECT_THAT(ctx.params().SecuritySource(),
              HasSubstr("log2 Q <= 109 (ternary secret, sigma 3.2); here log2 QP = 108.99"));
  // The same NTT form modulo every q_i, so a BFV secret key's rows are the RLWE secret.
  std::vector<uint64_t> poly(ctx.k() * ctx.n()), other;
  he::ExpandUniform(he::RandomSeed(), 0, ctx.base().moduli(), ctx.n(), poly.data());
  other = poly;
  he::internal::ForwardNtt(ctx.ntt(), poly.data());
  he::internal::ForwardNtt(ctx.expansion()->q_ntt(), other.data());
  EXPECT_EQ(poly, other);
  // Without a special prime there is no expansion.
  const RingContext plain =
      *RingContext::Create(*RingParams::Create(12, RingParams::Default().primes));
  EXPECT_EQ(plain.expansion(), nullptr);
  EXPECT_EQ(CheckExpansion(plain, 1024).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(ExpansionTest, LeavesEncryptTheSecretWithTheModelsNoise) {
  const RingContext ctx = DefaultContext();
  const Session session(ctx, kLweDimension);
  std::vector<uint32_t> secret(kLweDimension);
  SeededSource rng(Seed(0));
  SampleSecret(rng, absl::MakeSpan(secret));
  const Leaves leaves = Expand(ctx, session, secret);
  EXPECT_EQ(std::count(leaves.seen.begin(), leaves.seen.end(), 1), kLweDimension);
  const uint64_t q0 = ctx.base()[0].value();
  const size_t n = ctx.n();
  double sum_squares = 0, largest = 0;
  for (uint32_t j = 0; j < kLweDimension; ++j) {
    for (size_t c = 0; c < n; ++c) {
      const uint64_t message = c == 0 ? ctx.EncodeWord(secret[j], 0) : 0;
      const double noise = Centered(ctx.base()[0].Sub(leaves.phase[j * n + c], message), q0);
      sum_squares += noise * noise;
      largest = std::max(largest, std::abs(noise));
    }
  }
  const double measured = sum_squares / (double{kLweDimension} * n);
  const double model = ExpandedKeyVariance(ctx, kLweDimension);
  std::printf("expanded keys' error at n = %u: sigma 2^%.2f (model 2^%.2f), largest 2^%.2f\n",
              kLweDimension, std::log2(measured) / 2, std::log2(model) / 2, std::log2(largest));
  EXPECT_GT(measured, 0.85 * model);
  EXPECT_LT(measured, 1.15 * model);
  EXPECT_LT(largest, q0 / 8.0);  // far from wrapping modulo one prime: the measure is exact
}

// TracePacking's sums decrypt to sum_j a_j s_j in coefficient 0 and to 0 elsewhere, with the
// model's noise (the root's fresh error through T and the a_j, and T's key switches), far below
// what the expanded keys' errors through the a_j would give; at n = 1,024 and 300 (a partial
// last level).
TEST(ExpansionTest, TracePackingSumsTheScalarsTimesTheLeaves) {
  const RingContext ctx = DefaultContext();
  const size_t n = ctx.n(), words = ctx.k() * n;
  const uint64_t q0 = ctx.base()[0].value();
  const auto row0 = ctx.ntt().first(1);
  for (const uint32_t lwe_n : {kLweDimension, 300u}) {
    const Session session(ctx, lwe_n);
    std::vector<uint32_t> secret(lwe_n);
    SeededSource rng(Seed(7) + lwe_n);
    SampleSecret(rng, absl::MakeSpan(secret));
    // Small scalars (|a| <= 64, the most negative among them), so that the noise stays far below
    // one prime and is measured exactly there.
    const uint64_t rows = 32;
    std::vector<uint32_t> scalars(rows * lwe_n);
    double squares = 0;
    for (size_t i = 0; i < scalars.size(); ++i) {
      const int32_t a = static_cast<int32_t>((i * 2654435761u + lwe_n) % 129) - 64;
      scalars[i] = static_cast<uint32_t>(a);
      squares += double{a} * a;
    }
    const TracePacking trace = *TracePacking::Create(ctx, lwe_n, rows, scalars);
    EXPECT_EQ(trace.rows(), rows);
    const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, secret);
    std::vector<uint64_t> sums(rows * 2 * words);
    ASSERT_TRUE(trace.Sums(session.keys, ct, 2, absl::MakeSpan(sums)).ok());
    double sum_squares = 0, largest = 0;
    std::vector<uint64_t> phase(n);
    for (uint64_t t = 0; t < rows; ++t) {
      const uint64_t* beta = sums.data() + t * 2 * words;
      he::internal::MultiplyRows(row0, beta + words, session.z.ntt().data(), phase.data());
      he::internal::AddRows(row0, phase.data(), beta, phase.data());
      he::internal::InverseNtt(row0, phase.data());
      uint64_t message = 0;
      for (uint32_t j = 0; j < lwe_n; ++j) {
        const uint64_t a = ctx.base()[0].FromSigned(static_cast<int32_t>(scalars[t * lwe_n + j]));
        message = ctx.base()[0].Add(message, ctx.base()[0].Mul(a, ctx.EncodeWord(secret[j], 0)));
      }
      for (size_t c = 0; c < n; ++c) {
        const double noise = Centered(ctx.base()[0].Sub(phase[c], c == 0 ? message : 0), q0);
        sum_squares += noise * noise;
        largest = std::max(largest, std::abs(noise));
      }
    }
    const double measured = sum_squares / (double{rows} * n);
    const double mean_square = squares / static_cast<double>(scalars.size());
    const uint32_t levels = ExpansionLevels(lwe_n);
    const double model = lwe_n * mean_square * ExpandedKeyVariance(ctx, lwe_n, levels) +
                         TraceSwitchVariance(ctx, lwe_n);
    std::printf("trace packing at n = %u: sigma 2^%.2f (model 2^%.2f; the expanded keys' 2^%.2f)\n",
                lwe_n, std::log2(measured) / 2, std::log2(model) / 2,
                std::log2(lwe_n * mean_square * ExpandedKeyVariance(ctx, lwe_n)) / 2);
    // Ten runs: 0.92 to 1.13 of the model's variance (a row's top-level switch errors are
    // spread by T over many coefficients: fewer independent samples than coefficients).
    EXPECT_GT(measured, 0.8 * model) << lwe_n;
    EXPECT_LT(measured, 1.25 * model) << lwe_n;
    EXPECT_LT(largest, q0 / 8.0);  // far from wrapping modulo one prime: the measure is exact
    EXPECT_LT(model, lwe_n * mean_square * ExpandedKeyVariance(ctx, lwe_n) / 1000);
  }
}

TEST(ExpansionTest, TracePackingRefusesBadArguments) {
  const RingContext ctx = DefaultContext();
  const uint32_t lwe_n = 16;
  const Session session(ctx, lwe_n);
  const std::vector<uint32_t> scalars(2 * lwe_n, 1);
  const auto expect_invalid = [](const absl::Status& s, const std::string& message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
  };
  expect_invalid(TracePacking::Create(ctx, lwe_n, 0, {}).status(), "for 0 rows");
  expect_invalid(TracePacking::Create(ctx, lwe_n, 3, scalars).status(), "32 scalars for 3 rows");
  expect_invalid(TracePacking::Create(ctx, 4097, 1, std::vector<uint32_t>(4097)).status(),
                 "not 4097");
  const TracePacking trace = *TracePacking::Create(ctx, lwe_n, 2, scalars);
  const std::vector<uint32_t> secret(lwe_n, 3);
  const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, secret);
  std::vector<uint64_t> sums(2 * 2 * ctx.k() * ctx.n());
  EXPECT_TRUE(trace.Sums(session.keys, ct, 1, absl::MakeSpan(sums)).ok());
  expect_invalid(trace.Sums(session.keys, ct, 0, absl::MakeSpan(sums)), "at least one thread");
  expect_invalid(trace.Sums(session.keys, ct, 1, absl::MakeSpan(sums).first(5)), "packing sums: 5");
  expect_invalid(
      trace.Sums(session.keys, absl::MakeConstSpan(ct).first(40), 1, absl::MakeSpan(sums)),
      "the secret's ciphertext is 49184 bytes, got 40");
  he::GaloisKeys missing = session.keys;
  missing.keys.erase(static_cast<uint32_t>(ctx.n() >> 2) + 1);  // level 2's element
  expect_invalid(trace.Sums(missing, ct, 1, absl::MakeSpan(sums)),
                 "lack the Galois key of element 1025");
}

TEST(ExpansionTest, AwkwardCountsExpandEveryIndexOnce) {
  const RingContext ctx = DefaultContext();
  for (const uint32_t lwe_n : {1u, 3u, 300u}) {
    const Session session(ctx, lwe_n);
    // The levels' elements and the deferred levels' products (two of them or more).
    const uint32_t deferred = DeferredLevels(lwe_n);
    EXPECT_EQ(session.keys.keys.size(), ExpansionLevels(lwe_n) + (1u << deferred) - 1 - deferred);
    std::vector<uint32_t> secret(lwe_n);
    SeededSource rng(Seed(1) + lwe_n);
    SampleSecret(rng, absl::MakeSpan(secret));
    // One worker; and three: the top two levels run first, one of their four subtrees has no
    // leaf at n = 3 (at n = 3 the others are leaves already) and the workers share the rest. At
    // n = 300 the last level's nodes past 43 have no right child, so the packing blocks fill
    // unevenly.
    for (const int threads : {1, 3}) {
      const Leaves leaves = Expand(ctx, session, secret, threads);
      EXPECT_EQ(std::count(leaves.seen.begin(), leaves.seen.end(), 1), lwe_n)
          << "n = " << lwe_n << ", " << threads << " threads";
      const uint64_t q0 = ctx.base()[0].value();
      for (uint32_t j = 0; j < lwe_n; ++j) {
        const double noise = Centered(
            ctx.base()[0].Sub(leaves.phase[j * ctx.n()], ctx.EncodeWord(secret[j], 0)), q0);
        ASSERT_LT(std::abs(noise), q0 / 8.0) << "n = " << lwe_n << ", leaf " << j;
      }
    }
  }
}

// ExpPack end to end below the protocol: LWE ciphertexts packed with expanded keys.
// Two workers, each with its accumulator, merged.
std::vector<uint32_t> ExpPackAndUnpack(const RingContext& ctx, const LweBatch& lwe, uint64_t rows,
                                       uint32_t lwe_n) {
  const Session session(ctx, lwe_n);
  const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, lwe.secret);
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, rows, lwe_n);
  std::vector<PackAccumulator> acc;
  acc.emplace_back(ctx, matrix);
  acc.emplace_back(ctx, matrix);
  const absl::Status s = ExpandLweSecret(
      ctx, session.keys, lwe_n, ct, 2,
      [&acc](int worker, uint32_t count, const uint32_t* index, const uint64_t* beta,
             const uint64_t* alpha) { acc[worker].Add(count, index, beta, alpha); });
  EXPECT_TRUE(s.ok()) << s;
  acc[0].Merge(acc[1]);
  return *UnpackPhases(ctx, session.z, SwitchResponse(ctx, *acc[0].Finish(lwe.b)), rows);
}

TEST(ExpPackTest, MeasuredNoiseMatchesTheModelWithinTheRule) {
  const RingContext ctx = DefaultContext();
  const uint64_t rows = ctx.n() + 77;
  const LweBatch lwe(rows, kLweDimension, Seed(2));
  const std::vector<uint32_t> phases = ExpPackAndUnpack(ctx, lwe, rows, kLweDimension);
  const PackingNoise model = ExpPackNoiseBound(ctx, kLweDimension);
  const testing::PhaseNoise noise = testing::MeasurePhaseNoise(lwe, phases);
  EXPECT_EQ(noise.wrong_share, 0);
  const double measured = noise.sigma, largest = noise.largest;
  std::printf("ExpPack noise at n = %u: sigma %.1f (model %.1f), largest %.0f, margin %u\n",
              kLweDimension, measured, model.sigma, largest, kDelta / 2);
  EXPECT_GT(measured, 0.85 * model.sigma);
  EXPECT_LT(measured, 1.15 * model.sigma);
  EXPECT_TRUE(ExpPackNoiseWithinRule(ctx, kLweDimension));
  EXPECT_LT(largest, 8 * model.sigma);
}

TEST(ExpPackTest, TooLittleModulusFailsAsPredicted) {
  // Q = three 23-bit primes (2^69) and P = 40,961 (2^15.3): the key switches' error, N q / P
  // per coefficient, grows 2^16 times larger than at the defaults and the packed noise reaches
  // Delta / 2 = 2^23 (model 2^23.6): about half the bytes decrypt wrongly.
  const RingContext ctx =
      *RingContext::Create(*RingParams::Create(12, {8380417, 8273921, 8257537}, 40961));
  const PackingNoise model = ExpPackNoiseBound(ctx, kLweDimension);
  EXPECT_FALSE(ExpPackNoiseWithinRule(ctx, kLweDimension));
  const uint64_t rows = ctx.n();
  const LweBatch lwe(rows, kLweDimension, Seed(3));
  const std::vector<uint32_t> phases = ExpPackAndUnpack(ctx, lwe, rows, kLweDimension);
  const testing::PhaseNoise noise = testing::MeasurePhaseNoise(lwe, phases);
  const double predicted = std::erfc((kDelta / 2) / (model.sigma * std::sqrt(2.0)));
  const double measured = noise.wrong_share;
  const double sigma = noise.sigma;
  std::printf("small Q and P: sigma %.3g (model %.3g), failures %.3f (predicted %.3f)\n", sigma,
              model.sigma, measured, predicted);
  EXPECT_GT(predicted, 0.3);
  EXPECT_NEAR(measured, predicted, 0.05);  // 4096 rows: the binomial's sd is 0.008
  EXPECT_GT(sigma, 0.85 * model.sigma);
  EXPECT_LT(sigma, 1.15 * model.sigma);
}

TEST(ExpansionTest, ByteSizesEqualTheFormulas) {
  const RingContext ctx = DefaultContext();
  // 32 + 4 k N; the keys: 16 bytes of header and count, then per element 4 + 32 (its seed) and
  // k digits of k + 1 bit-packed rows (3 x 29 + 22 bits per coefficient): 167,460 bytes.
  EXPECT_EQ(SecretCiphertextBytes(ctx), 49184u);
  // Ten levels, and 2^4 - 1 - 4 products of the four deferred ones: 21 elements.
  EXPECT_EQ(ExpansionKeyBytes(ctx, kLweDimension), 16u + 21 * (36 + 3 * 4096 * 109 / 8));
  EXPECT_EQ(ExpansionKeyBytes(ctx, kLweDimension), 3516676u);
  const Session session(ctx, kLweDimension);
  EXPECT_EQ(session.wire.size(), ExpansionKeyBytes(ctx, kLweDimension));
  std::vector<uint32_t> secret(kLweDimension, 5);
  EXPECT_EQ(EncryptLweSecret(ctx, session.z, secret)->size(), SecretCiphertextBytes(ctx));
}

TEST(ExpansionTest, RefusesBadKeysAndCiphertexts) {
  const RingContext ctx = DefaultContext();
  const auto expect_invalid = [](const absl::Status& s, const char* message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
  };
  expect_invalid(CheckExpansion(ctx, 0), "1 to N = 4096 special ciphertexts, not 0");
  expect_invalid(CheckExpansion(ctx, 4097), "not 4097");
  const Session session(ctx, 512);
  expect_invalid(ParseExpansionKeys(ctx, 1024, session.wire).status(),
                 "the 21 elements N / 2^l + 1 (l < 10) and the deferred levels' products; "
                 "these hold 20 other keys");
  expect_invalid(
      ParseExpansionKeys(ctx, 512, absl::MakeConstSpan(session.wire).first(1000)).status(), "");
  std::vector<uint32_t> secret(512, 9);
  const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, secret);
  const auto ignore = [](int, uint32_t, const uint32_t*, const uint64_t*, const uint64_t*) {};
  expect_invalid(ExpandLweSecret(ctx, session.keys, 512, ct, 0, ignore),
                 "expansion needs at least one thread");
  expect_invalid(
      ExpandLweSecret(ctx, session.keys, 512, absl::MakeConstSpan(ct).first(40), 1, ignore),
      "the secret's ciphertext is 49184 bytes, got 40");
  std::vector<uint8_t> too_big = ct;
  const uint32_t prime = 536641537;  // the third prime, in its own row
  std::memcpy(too_big.data() + 32 + 4 * (2 * 4096 + 1), &prime, 4);
  expect_invalid(ExpandLweSecret(ctx, session.keys, 512, too_big, 1, ignore),
                 "residue 8193 is not below its prime 536641537");
  he::GaloisKeys missing = session.keys;
  missing.keys.erase(missing.keys.begin());
  expect_invalid(ExpandLweSecret(ctx, missing, 512, ct, 1, ignore),
                 "the expansion keys lack the Galois key of element 17");
  // A secret longer than the ring is refused before anything is encrypted.
  expect_invalid(EncryptLweSecret(ctx, session.z, std::vector<uint32_t>(4097)).status(),
                 "not 4097");
}

}  // namespace
}  // namespace veil::lattice
