// DeferredPacking (deferred_packing.h), the CPU engine's packing sums: they decrypt to every LWE
// phase on awkward shapes, their noise is the model's (lower than the full expansion's), and
// bad keys and arguments are refused.
#include "pir/lattice/deferred_packing.h"

#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/packed.h"
#include "tests/pir/lattice/lwe_batch.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::lattice {
namespace {

using ::testing::HasSubstr;
using testing::LweBatch;

uint64_t Seed(int salt) { return testing::TestSeed("pir_lattice_test") + 900 + salt; }

struct Session {
  Session(const RingContext& ctx, uint32_t lwe_n)
      : key(he::GenerateSecretKey(*ctx.expansion())),
        z(RlweSecret::FromKey(ctx, key)),
        keys(*ParseExpansionKeys(ctx, lwe_n, *MakeExpansionKeys(ctx, key, lwe_n))) {}
  he::SecretKey key;
  RlweSecret z;
  he::GaloisKeys keys;
};

// The batch's phases through an engine deferring `levels` levels (0: the full expansion).
std::vector<uint32_t> PackAndUnpack(const RingContext& ctx, const LweBatch& lwe, uint64_t rows,
                                    uint32_t lwe_n, uint32_t levels, int threads) {
  const Session session(ctx, lwe_n);
  const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, lwe.secret);
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, rows, lwe_n);
  const CpuPackingEngine engine(ctx, matrix, levels, threads);
  EXPECT_EQ(engine.deferred_levels(), std::min(levels, ExpansionLevels(lwe_n)));
  if (threads > 1) {
    // Prepared from two threads at once (as a server's start and a first lookup could): once.
    std::thread other([&engine] { engine.Prepare(); });
    engine.Prepare();
    other.join();
  }  // else the first Sums prepares
  std::vector<uint64_t> sums(PackingSumWords(ctx, matrix));
  const absl::Status s = engine.Sums(BorrowKeys(session.keys), ct, threads, absl::MakeSpan(sums));
  EXPECT_TRUE(s.ok()) << s;
  const std::vector<RlweCiphertext> packed = *PackedCiphertexts(ctx, matrix, sums, lwe.b);
  return *UnpackPhases(ctx, session.z, *engine.Switch(packed, 1), rows);
}

TEST(DeferredPackingTest, AwkwardShapesDecryptEveryPhase) {
  const RingContext ctx = *RingContext::Create(RingParams::Default());
  struct Case {
    uint32_t lwe_n, levels;
    uint64_t rows;
    int threads;
  };
  // More levels than the expansion has (n = 3: two, no top expansion); n = 300, whose deferred
  // subtrees lack leaves past n; one to three levels (the keys' products serve any depth up to
  // kDeferredLevels) and four; several groups with a partial last one, on one to three threads.
  for (const Case c : {Case{3, 3, 10, 1}, Case{300, 3, 4096 + 77, 2}, Case{300, 1, 2 * 4096, 3},
                       Case{300, 4, 4096 + 5, 1}, Case{1024, 2, 500, 2}, Case{1024, 3, 100, 2},
                       Case{1024, 4, 4096 + 300, 2}}) {
    const LweBatch lwe(c.rows, c.lwe_n, Seed(static_cast<int>(c.lwe_n + c.levels)));
    const std::vector<uint32_t> phases =
        PackAndUnpack(ctx, lwe, c.rows, c.lwe_n, c.levels, c.threads);
    const testing::PhaseNoise noise = testing::MeasurePhaseNoise(lwe, phases);
    EXPECT_EQ(noise.wrong_share, 0) << "n = " << c.lwe_n << ", " << c.levels << " levels";
    // Few rows make a poor estimate of sigma (10 at n = 3): the largest error against 8 sigma
    // of the model (the noise's measure is NoiseIsTheModelsAndBelowTheFullExpansions').
    EXPECT_LT(noise.largest, 8 * ExpPackNoiseBound(ctx, c.lwe_n, c.levels).sigma)
        << "n = " << c.lwe_n << ", " << c.levels << " levels";
  }
}

TEST(DeferredPackingTest, NoiseIsTheModelsAndBelowTheFullExpansions) {
  // At the defaults the switch to q' dominates either way; with Q = three 23-bit primes and
  // P = 40,961 (ExpPackTest.TooLittleModulusFailsAsPredicted) the key switches do: the model
  // follows them (the deferred levels' switches were the least amplified, so the gain is small).
  for (const bool small : {false, true}) {
    const RingContext ctx =
        small ? *RingContext::Create(*RingParams::Create(12, {8380417, 8273921, 8257537}, 40961))
              : *RingContext::Create(RingParams::Default());
    const uint64_t rows = ctx.n() + 77;
    const LweBatch lwe(rows, kLweDimension, Seed(small ? 1 : 2));
    const std::vector<uint32_t> phases =
        PackAndUnpack(ctx, lwe, rows, kLweDimension, kDeferredLevels, 2);
    const testing::PhaseNoise noise = testing::MeasurePhaseNoise(lwe, phases);
    const PackingNoise model = ExpPackNoiseBound(ctx, kLweDimension, kDeferredLevels);
    const PackingNoise full = ExpPackNoiseBound(ctx, kLweDimension);
    std::printf("deferred packing%s: sigma %.4g (model %.4g; full expansion's model %.4g)\n",
                small ? " at small Q and P" : "", noise.sigma, model.sigma, full.sigma);
    EXPECT_GT(noise.sigma, 0.85 * model.sigma);
    EXPECT_LT(noise.sigma, 1.15 * model.sigma);
    EXPECT_LT(model.sigma, full.sigma);
    if (!small) {
      EXPECT_EQ(noise.wrong_share, 0);
    }
  }
}

TEST(DeferredPackingTest, RefusesMissingKeysAndBadArguments) {
  const RingContext ctx = *RingContext::Create(RingParams::Default());
  const uint32_t lwe_n = 512;
  const LweBatch lwe(20, lwe_n, Seed(3));
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, 20, lwe_n);
  const Session session(ctx, lwe_n);
  const std::vector<uint8_t> ct = *EncryptLweSecret(ctx, session.z, lwe.secret);
  const DeferredPacking deferred = *DeferredPacking::Create(ctx, matrix, 3, 1);
  EXPECT_EQ(deferred.levels(), 3u);
  EXPECT_EQ(deferred.bytes(), matrix.bytes());  // 8 virtual groups of 64 roots: n polynomials
  std::vector<uint64_t> sums(PackingSumWords(ctx, matrix));
  EXPECT_TRUE(deferred.Sums(session.keys, ct, 2, absl::MakeSpan(sums)).ok());
  const auto expect_invalid = [](const absl::Status& s, const std::string& message) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(message));
  };
  // The product of the two lowest levels' elements (65 x 33 mod 8192 at n = 512: levels 6 to 8).
  const uint32_t product = DeferredElement(ctx, lwe_n, 3, 0b011);
  EXPECT_EQ(product, (65u * 33u) % 8192u);
  he::GaloisKeys missing = session.keys;
  missing.keys.erase(product);
  expect_invalid(deferred.Sums(missing, ct, 1, absl::MakeSpan(sums)),
                 "lack the Galois key of element " + std::to_string(product));
  expect_invalid(deferred.Sums(session.keys, ct, 0, absl::MakeSpan(sums)), "at least one thread");
  expect_invalid(deferred.Sums(session.keys, ct, 1, absl::MakeSpan(sums).first(10)),
                 "packing sums: 10");
  expect_invalid(
      deferred.Sums(session.keys, absl::MakeConstSpan(ct).first(40), 1, absl::MakeSpan(sums)),
      "the secret's ciphertext is 49184 bytes, got 40");
  expect_invalid(DeferredPacking::Create(ctx, matrix, 0, 1).status(), "deferred packing of 0");
  expect_invalid(DeferredPacking::Create(ctx, matrix, 3, 0).status(), "on 0 threads");
  expect_invalid(DeferredPacking::Create(ctx, matrix, 5, 1).status(), "1 to 4: the session keys'");
  // The folded matrix in PackingMatrix's layout: its 8 virtual groups of 64 roots, the same
  // checks.
  const absl::StatusOr<PackingMatrix> folded = DeferredPacking::FoldedMatrix(ctx, matrix, 3, 2);
  ASSERT_TRUE(folded.ok()) << folded.status();
  EXPECT_EQ(folded->groups(), 8u);
  EXPECT_EQ(folded->lwe_n(), 64u);
  EXPECT_EQ(folded->bytes(), matrix.bytes());
  expect_invalid(DeferredPacking::FoldedMatrix(ctx, matrix, 0, 1).status(),
                 "deferred packing of 0");
  expect_invalid(DeferredPacking::FoldedMatrix(ctx, matrix, 3, 0).status(), "on 0 threads");
  // Engines defer at most kDeferredLevels and L, none for n above N.
  EXPECT_EQ(EngineDeferredLevels(ctx, lwe_n, 9), 4u);
  EXPECT_EQ(EngineDeferredLevels(ctx, 4, 9), 2u);
  EXPECT_EQ(EngineDeferredLevels(ctx, lwe_n, 0), 0u);
  EXPECT_EQ(EngineDeferredLevels(ctx, 4097, 4), 0u);
}

// A batch's sums equal each query's alone, bit for bit, over two chunks of the folded matrix's
// pass, with bad queries failing alone; the engine's SumsBatch the same.
TEST(DeferredPackingTest, ABatchSumsAsEachQueryAlone) {
  const RingContext ctx = *RingContext::Create(testing::SmallRing());
  const uint32_t lwe_n = 100;
  const LweBatch lwe(2 * 1024 + 9, lwe_n, Seed(5));
  const PackingMatrix matrix = *PackingMatrix::Create(ctx, lwe.a, 2 * 1024 + 9, lwe_n);
  const DeferredPacking deferred = *DeferredPacking::Create(ctx, matrix, 3, 2);
  const Session one(ctx, lwe_n), two(ctx, lwe_n), small(ctx, 4);
  const size_t count = DeferredPacking::kBatchChunk + 3;
  std::vector<std::vector<uint8_t>> cts;
  std::vector<const he::GaloisKeys*> keys;
  for (size_t q = 0; q < count; ++q) {
    const Session& s = q % 2 == 0 ? one : two;
    std::vector<uint32_t> secret(lwe_n);
    for (uint32_t& w : secret) w = static_cast<uint32_t>(q * 7919 + (&w - secret.data()));
    cts.push_back(*EncryptLweSecret(ctx, s.z, secret));
    keys.push_back(&s.keys);
  }
  // Query 3 lacks a deferred element's key, query 5 has no keys, query 9's ciphertext is cut.
  keys[3] = &small.keys;
  keys[5] = nullptr;
  cts[9].resize(cts[9].size() - 1);
  std::vector<std::vector<uint64_t>> got(count,
                                         std::vector<uint64_t>(PackingSumWords(ctx, matrix)));
  std::vector<absl::Span<const uint8_t>> ct_spans;
  std::vector<absl::Span<uint64_t>> sum_spans;
  for (size_t q = 0; q < count; ++q) {
    ct_spans.push_back(cts[q]);
    sum_spans.push_back(absl::MakeSpan(got[q]));
  }
  const std::vector<absl::Status> status = deferred.SumsBatch(keys, ct_spans, sum_spans, 2);
  ASSERT_EQ(status.size(), count);
  for (size_t q = 0; q < count; ++q) {
    if (q == 3 || q == 5 || q == 9) {
      EXPECT_EQ(status[q].code(), absl::StatusCode::kInvalidArgument) << q << ": " << status[q];
      continue;
    }
    ASSERT_TRUE(status[q].ok()) << q << ": " << status[q];
    std::vector<uint64_t> alone(got[q].size());
    ASSERT_TRUE(deferred.Sums(*keys[q], cts[q], 1, absl::MakeSpan(alone)).ok());
    EXPECT_TRUE(got[q] == alone) << "query " << q;
  }
  EXPECT_THAT(status[3].message(), HasSubstr("lack the Galois key"));
  EXPECT_THAT(status[9].message(), HasSubstr("ciphertext"));
  // Spans of different lengths fail the whole batch.
  const std::vector<absl::Status> uneven =
      deferred.SumsBatch(keys, absl::MakeConstSpan(ct_spans).first(2), sum_spans, 2);
  ASSERT_EQ(uneven.size(), count);
  EXPECT_FALSE(uneven[0].ok());

  // Through the engine (its default SumsBatch for the full expansion): the same sums.
  const CpuPackingEngine engine(ctx, matrix, 3, 2), full(ctx, matrix, 0, 2);
  const std::vector<std::shared_ptr<const he::GaloisKeys>> owned = {BorrowKeys(one.keys),
                                                                    BorrowKeys(two.keys)};
  std::vector<std::vector<uint64_t>> by_engine(2, std::vector<uint64_t>(got[0].size()));
  std::vector<std::vector<uint64_t>> by_full = by_engine;
  const std::vector<absl::Span<const uint8_t>> first_two = {cts[0], cts[1]};
  const std::vector<absl::Span<uint64_t>> engine_sums = {absl::MakeSpan(by_engine[0]),
                                                         absl::MakeSpan(by_engine[1])};
  const std::vector<absl::Span<uint64_t>> full_sums = {absl::MakeSpan(by_full[0]),
                                                       absl::MakeSpan(by_full[1])};
  for (const absl::Status& s : engine.SumsBatch(owned, first_two, engine_sums, 2)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  for (const absl::Status& s : full.SumsBatch(owned, first_two, full_sums, 2)) {
    EXPECT_TRUE(s.ok()) << s;
  }
  for (size_t q = 0; q < 2; ++q) {
    EXPECT_TRUE(by_engine[q] == got[q]) << q;
    std::vector<uint64_t> alone(got[q].size());
    ASSERT_TRUE(full.Sums(owned[q], cts[q], 1, absl::MakeSpan(alone)).ok());
    EXPECT_TRUE(by_full[q] == alone) << q;
  }
}

// The engine's choice per table: the fewest NTTs, 20 (2^(L-D) - 1) + G (12 (2^D - 1) + 8).
TEST(DeferredPackingTest, BestLevelsHaveTheFewestTransforms) {
  // 20 NTTs per top switch, 12 per deferred one and 8 per group (its one ModDown).
  EXPECT_EQ(BestDeferredLevels(1024, 1), 4u);   // 1,448 against 2,632 (D = 3)
  EXPECT_EQ(BestDeferredLevels(1024, 6), 4u);   // 2,388 against 3,092 (2^24 x 64 B)
  EXPECT_EQ(BestDeferredLevels(1024, 8), 4u);   // 2,764 against 3,276
  EXPECT_EQ(BestDeferredLevels(1024, 20), 3u);  // 4,380 against 5,020 (D = 4)
  EXPECT_EQ(BestDeferredLevels(1024, 40), 3u);  // 6,220 against 6,860 (D = 2)
  EXPECT_EQ(BestDeferredLevels(1024, 80), 2u);  // 8,620 against 9,900 (D = 3)
  EXPECT_EQ(BestDeferredLevels(3, 1), 1u);      // L = 2: 40 against 44
  EXPECT_EQ(BestDeferredLevels(2, 5), 1u);      // L = 1: one level only
  EXPECT_EQ(BestDeferredLevels(1, 1), 0u);      // no expansion
}

}  // namespace
}  // namespace veil::lattice
