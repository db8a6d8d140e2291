// The packed servers' GPU engine (gpu/exppack.h) on a device: its sums equal the CPU engine's bit
// for bit at n = 1,024 on the default ring for two sessions (each uploaded once), expanding fully
// and with levels deferred, alone and in batches (and a small case for compute-sanitizer), and a
// packed server using it answers byte for byte as on the CPU, every record decoding. Skips without
// a GPU.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpu/backend.h"
#include "gpu/exppack.h"
#include "gtest/gtest.h"
#include "pir/lattice/pack_simple.h"
#include "tests/gpu/expansion_test_support.h"
#include "tests/gpu/packing_test_support.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

// A fresh query's sums under the session's keys: the device engine's equal the CPU engine's.
void ExpectTheCpusSums(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
                       const std::shared_ptr<const testing::Session>& session,
                       const lattice::PackingEngine& cpu, const lattice::PackingEngine& gpu,
                       std::mt19937_64& gen, const std::string& what) {
  const std::shared_ptr<const he::GaloisKeys> keys(session, &session->keys);
  std::vector<uint32_t> secret(matrix.lwe_n());
  for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
  const std::vector<uint8_t> ct = *lattice::EncryptLweSecret(ctx, session->z, secret);
  std::vector<uint64_t> want(lattice::PackingSumWords(ctx, matrix)), got(want.size(), 1);
  ASSERT_TRUE(cpu.Sums(keys, ct, 2, absl::MakeSpan(want)).ok()) << what;
  const absl::Status st = gpu.Sums(keys, ct, 1, absl::MakeSpan(got));
  ASSERT_TRUE(st.ok()) << what << ": " << st;
  EXPECT_TRUE(got == want) << what;
}

// A batch of `count` fresh queries over the sessions (SumsBatch: chunks of up to 8, one pass over
// the matrix each), query 1 with a truncated ciphertext: each good query's sums equal the CPU
// engine's for it alone, the bad one fails alone.
void ExpectABatchAsTheCpu(const lattice::RingContext& ctx, const lattice::PackingMatrix& matrix,
                          const std::vector<std::shared_ptr<const testing::Session>>& sessions,
                          size_t count, const lattice::PackingEngine& cpu,
                          const lattice::PackingEngine& gpu, std::mt19937_64& gen,
                          const std::string& what) {
  std::vector<std::shared_ptr<const he::GaloisKeys>> keys;
  std::vector<std::vector<uint8_t>> cts;
  std::vector<absl::Span<const uint8_t>> ct_spans;
  for (size_t q = 0; q < count; ++q) {
    const std::shared_ptr<const testing::Session>& session = sessions[q % sessions.size()];
    keys.emplace_back(session, &session->keys);
    std::vector<uint32_t> secret(matrix.lwe_n());
    for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
    cts.push_back(*lattice::EncryptLweSecret(ctx, session->z, secret));
  }
  for (const std::vector<uint8_t>& ct : cts) ct_spans.emplace_back(ct);
  ct_spans[1] = ct_spans[1].first(ct_spans[1].size() - 1);
  std::vector<std::vector<uint64_t>> sums(
      count, std::vector<uint64_t>(lattice::PackingSumWords(ctx, matrix), 1));
  std::vector<absl::Span<uint64_t>> sum_spans;
  for (std::vector<uint64_t>& v : sums) sum_spans.push_back(absl::MakeSpan(v));
  const std::vector<absl::Status> status = gpu.SumsBatch(keys, ct_spans, sum_spans, 1);
  ASSERT_EQ(status.size(), count) << what;
  EXPECT_FALSE(status[1].ok()) << what;
  for (size_t q = 0; q < count; ++q) {
    if (q == 1) continue;
    ASSERT_TRUE(status[q].ok()) << what << ", query " << q << ": " << status[q];
    std::vector<uint64_t> want(sums[q].size());
    ASSERT_TRUE(cpu.Sums(keys[q], ct_spans[q], 2, absl::MakeSpan(want)).ok()) << what;
    EXPECT_TRUE(sums[q] == want) << what << ", query " << q;
  }
}

TEST(ExpPackGpu, SumsEqualTheCpuEngine) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 gen(5);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::RingParams::Default());
  const uint32_t n = lattice::kLweDimension;
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 3 * 4096 - 7, n, gen);
  for (const uint32_t levels : {0u, 2u, lattice::kDeferredLevels}) {
    const lattice::CpuPackingEngine cpu(ctx, matrix, levels, 4);
    GpuPackingEngineOptions options;
    options.deferred_levels = levels;
    options.fold_threads = 4;
    auto gpu = GpuPackingEngine::Create(ctx, matrix, options);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_EQ((*gpu)->deferred_levels(), levels);
    std::vector<std::shared_ptr<const testing::Session>> sessions;
    for (int s = 0; s < 2; ++s) {
      sessions.push_back(std::make_shared<const testing::Session>(ctx, n));
      for (int q = 0; q < 2; ++q) {
        ExpectTheCpusSums(ctx, matrix, sessions.back(), cpu, **gpu, gen,
                          absl::StrCat(levels, " levels deferred, session ", s, ", query ", q));
      }
    }
    // Eleven queries of both sessions in one SumsBatch: chunks of eight and three.
    ExpectABatchAsTheCpu(ctx, matrix, sessions, 11, cpu, **gpu, gen,
                         absl::StrCat(levels, " levels deferred, a batch"));
    EXPECT_EQ((*gpu)->cached_sessions(), 2u);
    sessions.erase(sessions.begin());
    ExpectTheCpusSums(ctx, matrix, sessions.back(), cpu, **gpu, gen,
                      absl::StrCat(levels, " levels deferred, the second session again"));
    EXPECT_EQ((*gpu)->cached_sessions(), 1u);  // the first session's keys are gone with it
  }
}

// The deferred switches' and the expansion's kernels on the N = 1,024 test ring at n = 100 (two
// groups, three levels deferred) against the CPU engine: small enough for compute-sanitizer
// (scripts/gpu-check runs it under memcheck, racecheck and synccheck).
TEST(ExpPackGpu, SmallCaseForSanitizers) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 gen(7);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  const uint32_t n = 100;
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 2 * 1024 - 3, n, gen);
  const lattice::CpuPackingEngine cpu(ctx, matrix, 3);
  GpuPackingEngineOptions options;
  options.deferred_levels = 3;
  auto gpu = GpuPackingEngine::Create(ctx, matrix, options);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  const auto session = std::make_shared<const testing::Session>(ctx, n);
  ExpectTheCpusSums(ctx, matrix, session, cpu, **gpu, gen, "the small case");
  ExpectABatchAsTheCpu(ctx, matrix, {session}, 3, cpu, **gpu, gen, "a small batch");
}

TEST(ExpPackGpu, APackedServerAnswersAsOnTheCpu) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 gen(6);
  const uint64_t rows = 5000;
  const uint32_t record_bytes = 64;
  const std::vector<uint8_t> records = lattice::testing::RandomRecords(rows, record_bytes, gen);
  const auto make_lwe = [&] {
    return *lattice::LweServer::FromRecords(records, rows, record_bytes,
                                            lattice::testing::DigestOf(41), {});
  };
  auto cpu = lattice::PackedSimpleServer::Create(make_lwe());
  auto gpu = lattice::PackedSimpleServer::Create(make_lwe());
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  // The device engine defers as many levels as the server's own CPU engine.
  GpuPackingEngineOptions options;
  options.deferred_levels =
      lattice::BestDeferredLevels(lattice::kLweDimension, (*gpu)->matrix().groups());
  auto engine = GpuPackingEngine::Create((*gpu)->ring(), (*gpu)->matrix(), options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  (*gpu)->set_packing_engine(*std::move(engine));
  auto client = lattice::PackedSimpleClient::Create((*cpu)->config());
  ASSERT_TRUE(client.ok());
  const auto keys =
      std::make_shared<const he::GaloisKeys>(*(*gpu)->ParseKeys((*client)->expansion_keys()));
  for (const uint64_t row : {uint64_t{0}, rows - 1, gen() % rows}) {
    const lattice::PackedQuery q = *(*client)->MakeQuery(row);
    const std::vector<lattice::PackedRequest> request = {{q.query, q.ciphertext, keys, {}}};
    const auto want = (*cpu)->AnswerBatch(request);
    const auto got = (*gpu)->AnswerBatch(request);
    ASSERT_TRUE(got[0].ok()) << got[0].status();
    EXPECT_TRUE(*got[0] == *want[0]) << "row " << row;
    std::vector<uint8_t> record(record_bytes);
    ASSERT_TRUE((*client)->Decode(q, *got[0], absl::MakeSpan(record)).ok());
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + row * record_bytes,
                                           records.begin() + (row + 1) * record_bytes));
  }
}

}  // namespace
}  // namespace veil::gpu
