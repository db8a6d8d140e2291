// The packed servers' GPU engine with its kernels' phases run on the host (gpu/exppack.h's
// HostRunPackingEngine): its sums equal lattice::CpuPackingEngine's bit for bit, expanding fully or
// with levels deferred, alone, in batches or as group shards (several devices); a packed server
// using it answers byte for byte as on the CPU and every record decodes; each session's keys are
// made once while they live (the device's key cache), never confused with other keys at the same
// address, and bounded; bad input.
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <random>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gpu/exppack.h"
#include "gpu/internal/key_cache.h"
#include "gtest/gtest.h"
#include "pir/he/keyswitch.h"
#include "pir/lattice/double_pack.h"
#include "pir/lattice/pack_simple.h"
#include "pir/lattice/sharding.h"
#include "tests/gpu/expansion_test_support.h"
#include "tests/gpu/packing_test_support.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::gpu {
namespace {

using ::testing::HasSubstr;

std::vector<uint64_t> SumsOf(const lattice::PackingEngine& engine, const lattice::RingContext& ctx,
                             const lattice::PackingMatrix& matrix,
                             const std::shared_ptr<const he::GaloisKeys>& keys,
                             absl::Span<const uint8_t> ct) {
  std::vector<uint64_t> sums(lattice::PackingSumWords(ctx, matrix), 7);
  const absl::Status s = engine.Sums(keys, ct, 2, absl::MakeSpan(sums));
  EXPECT_TRUE(s.ok()) << engine.name() << ": " << s;
  return sums;
}

std::vector<uint8_t> SecretCiphertext(const lattice::RingContext& ctx, const testing::Session& s,
                                      uint32_t lwe_n, std::mt19937_64& gen) {
  std::vector<uint32_t> secret(lwe_n);
  for (uint32_t& w : secret) w = static_cast<uint32_t>(gen());
  return *lattice::EncryptLweSecret(ctx, s.z, secret);
}

TEST(ExpPackHostRun, SumsEqualTheCpuEngine) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test"));
  // The default ring with n = 21 (the tree's last level partly empty) and three groups; the
  // N = 1,024 test ring with n = 100 and with n = 8 (all three levels deferred: one root).
  struct Case {
    lattice::RingParams params;
    uint32_t lwe_n;
    uint64_t rows;
  };
  for (const Case& c : {Case{lattice::RingParams::Default(), 21, 2 * 4096 + 5},
                        Case{lattice::testing::SmallRing(), 100, 1000},
                        Case{lattice::testing::SmallRing(), 8, 1500}}) {
    const lattice::RingContext ctx = *lattice::RingContext::Create(c.params);
    const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, c.rows, c.lwe_n, gen);
    const auto session = std::make_shared<const testing::Session>(ctx, c.lwe_n);
    const std::shared_ptr<const he::GaloisKeys> keys(session, &session->keys);
    const std::vector<uint8_t> ct = SecretCiphertext(ctx, *session, c.lwe_n, gen);
    // The full expansion and one to four levels deferred (three at most for n = 8).
    for (const uint32_t levels : {0u, 1u, 2u, lattice::kDeferredLevels}) {
      const lattice::CpuPackingEngine cpu(ctx, matrix, levels);
      auto host = HostRunPackingEngine::Create(ctx, matrix, 64, levels);
      ASSERT_TRUE(host.ok()) << host.status();
      EXPECT_EQ((*host)->deferred_levels(), cpu.deferred_levels());
      EXPECT_EQ(SumsOf(**host, ctx, matrix, keys, ct), SumsOf(cpu, ctx, matrix, keys, ct))
          << "N = " << ctx.n() << ", n = " << c.lwe_n << ", " << levels << " levels deferred";
    }
  }
}

// A batch (SumsBatch: chunks of up to 8 queries, one pass over the matrix each): every query's
// sums equal the CPU engine's for it alone, sessions repeating within a chunk; bad queries fail
// alone; spans that disagree fail all.
TEST(ExpPackHostRun, ABatchSumsEachQueryAsTheCpuEngine) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test") + 7);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  const uint32_t n = 20;
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 2 * 1024 - 3, n, gen);
  std::vector<std::shared_ptr<const he::GaloisKeys>> sessions;
  std::vector<std::shared_ptr<const testing::Session>> owners;
  for (int s = 0; s < 3; ++s) {
    owners.push_back(std::make_shared<const testing::Session>(ctx, n));
    sessions.emplace_back(owners.back(), &owners.back()->keys);
  }
  // Ten queries: two chunks (8 and 2). Query 3 has a truncated ciphertext, query 6 no keys.
  const size_t count = 10;
  std::vector<std::shared_ptr<const he::GaloisKeys>> keys(count);
  std::vector<std::vector<uint8_t>> cts(count);
  std::vector<absl::Span<const uint8_t>> ct_spans(count);
  for (size_t q = 0; q < count; ++q) {
    const size_t s = (q * 7) % sessions.size();
    keys[q] = sessions[s];
    cts[q] = SecretCiphertext(ctx, *owners[s], n, gen);
    ct_spans[q] = cts[q];
  }
  ct_spans[3] = absl::MakeConstSpan(cts[3]).first(cts[3].size() - 1);
  keys[6] = nullptr;
  const size_t sum_words = lattice::PackingSumWords(ctx, matrix);
  for (const uint32_t levels : {0u, 3u}) {
    const lattice::CpuPackingEngine cpu(ctx, matrix, levels);
    auto host = HostRunPackingEngine::Create(ctx, matrix, 64, levels);
    ASSERT_TRUE(host.ok()) << host.status();
    std::vector<std::vector<uint64_t>> sums(count, std::vector<uint64_t>(sum_words, 9));
    std::vector<absl::Span<uint64_t>> sum_spans;
    for (std::vector<uint64_t>& v : sums) sum_spans.push_back(absl::MakeSpan(v));
    const std::vector<absl::Status> status = (*host)->SumsBatch(keys, ct_spans, sum_spans, 1);
    ASSERT_EQ(status.size(), count);
    for (size_t q = 0; q < count; ++q) {
      if (q == 3) {
        EXPECT_THAT(status[q].message(), HasSubstr("ciphertext")) << status[q];
      } else if (q == 6) {
        EXPECT_THAT(status[q].message(), HasSubstr("no keys")) << status[q];
      } else {
        ASSERT_TRUE(status[q].ok()) << "query " << q << ": " << status[q];
        EXPECT_EQ(sums[q], SumsOf(cpu, ctx, matrix, keys[q], ct_spans[q]))
            << "query " << q << ", " << levels << " levels deferred";
      }
    }
    EXPECT_EQ((*host)->key_uploads(), sessions.size());  // each session's keys made once
    for (const absl::Status& st :
         (*host)->SumsBatch(keys, ct_spans, absl::MakeSpan(sum_spans).first(count - 1), 1)) {
      EXPECT_THAT(st.message(), HasSubstr("a batch of 10 keys, 10 ciphertexts and 9 sums"));
    }
  }
}

// Several devices (server/backend_select.cc): each engine over its groups, with the whole
// matrix's levels deferred, together the CPU engine's sums on the whole matrix.
TEST(ExpPackHostRun, GroupShardsDeferAsTheWholeMatrix) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test") + 5);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  const uint32_t n = 100;
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 3 * 1024 - 10, n, gen);
  const uint32_t levels = lattice::BestDeferredLevels(n, matrix.groups());
  std::vector<lattice::PackingMatrix> parts;  // the engines keep references to them
  std::vector<lattice::GroupShardedPackingEngine::Shard> shards;
  const std::vector<lattice::RowRange> ranges = lattice::SplitRows(matrix.groups(), 2, 1);
  ASSERT_EQ(ranges.size(), 2u);
  parts.reserve(ranges.size());
  for (const lattice::RowRange& r : ranges) parts.push_back(*matrix.Groups(ctx, r.first, r.count));
  for (size_t i = 0; i < ranges.size(); ++i) {
    auto part = HostRunPackingEngine::Create(ctx, parts[i], 64, levels);
    ASSERT_TRUE(part.ok()) << part.status();
    EXPECT_EQ((*part)->deferred_levels(), levels);
    shards.push_back({ranges[i], *std::move(part)});
  }
  auto sharded =
      lattice::GroupShardedPackingEngine::Create(ctx, matrix.groups(), std::move(shards));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  const lattice::CpuPackingEngine cpu(ctx, matrix, levels);
  const auto session = std::make_shared<const testing::Session>(ctx, n);
  const std::shared_ptr<const he::GaloisKeys> keys(session, &session->keys);
  const std::vector<uint8_t> ct = SecretCiphertext(ctx, *session, n, gen);
  const std::vector<uint64_t> want = SumsOf(cpu, ctx, matrix, keys, ct);
  EXPECT_EQ(SumsOf(**sharded, ctx, matrix, keys, ct), want);
  // A batch (each shard's SumsBatch): three queries, the second's sums one word short, the
  // third's ciphertext truncated; the first as alone.
  const size_t words = want.size();
  std::vector<uint64_t> first(words), second(words - 1), third(words);
  const std::vector<std::shared_ptr<const he::GaloisKeys>> batch_keys(3, keys);
  const std::vector<absl::Span<const uint8_t>> cts{ct, ct,
                                                   absl::MakeConstSpan(ct).first(ct.size() - 1)};
  const std::vector<absl::Span<uint64_t>> sums{absl::MakeSpan(first), absl::MakeSpan(second),
                                               absl::MakeSpan(third)};
  const std::vector<absl::Status> status = (*sharded)->SumsBatch(batch_keys, cts, sums, 2);
  ASSERT_EQ(status.size(), 3u);
  EXPECT_TRUE(status[0].ok()) << status[0];
  EXPECT_EQ(first, want);
  EXPECT_THAT(status[1].message(), HasSubstr("sharded packing sums"));
  EXPECT_THAT(status[2].message(), HasSubstr("ciphertext"));
  EXPECT_THAT((*sharded)->SumsBatch(batch_keys, cts, absl::MakeSpan(sums).first(2), 2)[0].message(),
              HasSubstr("a batch of 3 keys"));
  // Device shards alone never switch on the CPU; one CPU shard among them does.
  EXPECT_FALSE((*sharded)->host_switching());
  std::vector<lattice::GroupShardedPackingEngine::Shard> mixed;
  mixed.push_back({ranges[0], std::make_unique<lattice::CpuPackingEngine>(ctx, parts[0], levels)});
  mixed.push_back({ranges[1], *HostRunPackingEngine::Create(ctx, parts[1], 64, levels)});
  auto both = lattice::GroupShardedPackingEngine::Create(ctx, matrix.groups(), std::move(mixed));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE((*both)->host_switching());
}

TEST(ExpPackHostRun, DeferredSwitchesRefuseBadArguments) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test") + 4);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  EXPECT_THAT(internal::MakeDeferredPlan(ctx, 100, 0, 1).status().message(),
              HasSubstr("deferred switches of 0 levels"));
  EXPECT_THAT(internal::MakeDeferredPlan(ctx, 8, 4, 1).status().message(),
              HasSubstr("1 to 3 for n = 8"));
  EXPECT_FALSE(internal::MakeDeferredPlan(ctx, 100, 2, 0).ok());
  EXPECT_FALSE(internal::MakeDeferredPlan(ctx, 0, 2, 1).ok());
  // A grid's x holds 2^31 - 1 blocks: the digits of 8 queries x 3 switches x k (k + 1) per group.
  const uint64_t most = 0x7fffffffull / (8 * 3 * ctx.k() * (ctx.k() + 1));
  EXPECT_THAT(internal::MakeDeferredPlan(ctx, 100, 2, most + 1).status().message(),
              HasSubstr("blocks in a stage of a batch (at most 2^31 - 1)"));
  EXPECT_TRUE(internal::MakeDeferredPlan(ctx, 100, 2, most).ok());
  const absl::StatusOr<internal::DeferredPlan> plan = internal::MakeDeferredPlan(ctx, 100, 2, 2);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->elements, 4u);
  EXPECT_EQ(plan->perms.size(), 3 * ctx.n());
  // Keys for n = 2 lack the second deferred level's element.
  const testing::Session small(ctx, 2), session(ctx, 100);
  EXPECT_THAT(internal::MakeDeferredKeyArrays(ctx, *plan, small.keys).status().message(),
              HasSubstr("lack the Galois key"));
  const absl::StatusOr<internal::ExpansionKeyArrays> keys =
      internal::MakeDeferredKeyArrays(ctx, *plan, session.keys);
  ASSERT_TRUE(keys.ok()) << keys.status();
  const uint64_t words = ctx.k() * ctx.n();
  std::vector<uint64_t> virtual_sums(2 * 4 * 2 * words), sums(2 * 2 * words);
  EXPECT_TRUE(
      internal::HostRunDeferredSwitches(*plan, *keys, virtual_sums, absl::MakeSpan(sums)).ok());
  EXPECT_THAT(
      internal::HostRunDeferredSwitches(
          *plan, *keys, absl::MakeConstSpan(virtual_sums).first(words), absl::MakeSpan(sums))
          .message(),
      HasSubstr("virtual sums"));
  std::vector<uint64_t> short_sums(sums.size() - 1);
  EXPECT_FALSE(
      internal::HostRunDeferredSwitches(*plan, *keys, virtual_sums, absl::MakeSpan(short_sums))
          .ok());
  const internal::ExpansionKeyArrays empty;
  EXPECT_FALSE(
      internal::HostRunDeferredSwitches(*plan, empty, virtual_sums, absl::MakeSpan(sums)).ok());
  // Side by side: a query with sums one word short fails alone, the others as alone.
  std::vector<uint64_t> other_virtual(virtual_sums.size());
  for (size_t r = 0; r < other_virtual.size(); ++r) {
    other_virtual[r] = gen() % ctx.base()[(r % words) / ctx.n()].value();
  }
  std::vector<uint64_t> alone(sums.size()), first(sums.size()), third(sums.size());
  ASSERT_TRUE(
      internal::HostRunDeferredSwitches(*plan, *keys, other_virtual, absl::MakeSpan(alone)).ok());
  const std::vector<const internal::ExpansionKeyArrays*> three(3, &*keys);
  const std::vector<absl::Span<const uint64_t>> virtuals{virtual_sums, virtual_sums, other_virtual};
  const std::vector<absl::Span<uint64_t>> outs{absl::MakeSpan(first), absl::MakeSpan(short_sums),
                                               absl::MakeSpan(third)};
  const std::vector<absl::Status> status =
      internal::HostRunDeferredSwitchesBatch(*plan, three, virtuals, outs);
  ASSERT_EQ(status.size(), 3u);
  EXPECT_TRUE(status[0].ok() && status[2].ok());
  EXPECT_THAT(status[1].message(), HasSubstr("virtual sums"));
  EXPECT_EQ(first, sums);
  EXPECT_EQ(third, alone);
  EXPECT_NE(third, first);
  for (const absl::Status& st : internal::HostRunDeferredSwitchesBatch(
           *plan, three, absl::MakeConstSpan(virtuals).first(2), outs)) {
    EXPECT_THAT(st.message(), HasSubstr("1 to 8 of each"));
  }
}

// A packed server of `rows` records of `record_bytes` on the test ring, on the CPU and with the
// host-run engine, and clients: the same bytes out, the right records in.
TEST(ExpPackHostRun, PackedServersAnswerAsOnTheCpu) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test") + 1);
  const uint64_t rows = 700;
  const uint32_t record_bytes = 7;
  const std::vector<uint8_t> records = lattice::testing::RandomRecords(rows, record_bytes, gen);
  const auto make_lwe = [&] {
    return *lattice::LweServer::FromRecords(records, rows, record_bytes,
                                            lattice::testing::DigestOf(40), {});
  };
  const lattice::RingParams ring = lattice::testing::SmallRing();
  auto cpu = lattice::PackedSimpleServer::Create(make_lwe(), ring);
  auto gpu = lattice::PackedSimpleServer::Create(make_lwe(), ring);
  ASSERT_TRUE(cpu.ok() && gpu.ok());
  // The device engine defers as many levels as the server's own CPU engine.
  const uint32_t levels =
      lattice::BestDeferredLevels(lattice::kLweDimension, (*gpu)->matrix().groups());
  auto engine = HostRunPackingEngine::Create((*gpu)->ring(), (*gpu)->matrix(), 64, levels);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const HostRunPackingEngine* host = engine->get();
  (*gpu)->set_packing_engine(*std::move(engine));
  EXPECT_EQ((*gpu)->packing_engine().name(), "gpu-host-run");
  EXPECT_EQ((*cpu)->packing_engine().name(), "cpu");
  auto client = lattice::PackedSimpleClient::Create((*cpu)->config(), ring);
  ASSERT_TRUE(client.ok()) << client.status();
  const auto keys =
      std::make_shared<const he::GaloisKeys>(*(*gpu)->ParseKeys((*client)->expansion_keys()));
  // The device reads the keys' 64-bit words alone: the server parses them without the 32-bit
  // copies the CPU's key switching may read, which the CPU's server makes where this CPU reads
  // them (the CPU server below answers from the keys without them all the same).
  EXPECT_FALSE((*gpu)->host_switching());
  EXPECT_TRUE((*cpu)->host_switching());
  const he::GaloisKeys host_keys = *(*cpu)->ParseKeys((*client)->expansion_keys());
  ASSERT_EQ(host_keys.keys.size(), keys->keys.size());
  for (const auto& [element, key] : keys->keys) {
    EXPECT_TRUE(key.b32.empty() && key.a32.empty()) << element;
    he::KeySwitchKey narrowed = key;
    he::internal::NarrowKeySwitchKey(*(*cpu)->ring().expansion(), narrowed);
    EXPECT_EQ(host_keys.keys.at(element).b32, narrowed.b32) << element;
    EXPECT_EQ(host_keys.keys.at(element).a32, narrowed.a32) << element;
  }
  std::vector<lattice::PackedQuery> queries;
  std::vector<lattice::PackedRequest> requests;
  for (const uint64_t row : {uint64_t{0}, rows - 1, gen() % rows}) {
    queries.push_back(*(*client)->MakeQuery(row));
  }
  for (const lattice::PackedQuery& q : queries) {
    requests.push_back({q.query, q.ciphertext, keys, {}});
  }
  const auto want = (*cpu)->AnswerBatch(requests);
  const auto got = (*gpu)->AnswerBatch(requests);
  for (size_t i = 0; i < queries.size(); ++i) {
    ASSERT_TRUE(got[i].ok()) << got[i].status();
    EXPECT_EQ(*got[i], *want[i]) << "query " << i;
    std::vector<uint8_t> record(record_bytes);
    ASSERT_TRUE((*client)->Decode(queries[i], *got[i], absl::MakeSpan(record)).ok());
    const uint64_t row = queries[i].row();
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + row * record_bytes,
                                           records.begin() + (row + 1) * record_bytes));
  }
  // One session: its keys made once for the three queries.
  EXPECT_EQ(host->key_uploads(), 1u);
  EXPECT_EQ(host->cached_sessions(), 1u);

  // Double packing's first level runs on the engine it is given.
  auto twice = lattice::DoublePackedServer::Create(make_lwe(), ring);
  ASSERT_TRUE(twice.ok()) << twice.status();
  auto second = HostRunPackingEngine::Create((*twice)->ring(), (*twice)->matrix());
  ASSERT_TRUE(second.ok());
  (*twice)->set_packing_engine(*std::move(second));
  EXPECT_EQ((*twice)->packing_engine().name(), "gpu-host-run");
  // Its sums W_t switch on the CPU: the keys keep their copies. So does the hybrid's selection.
  EXPECT_TRUE((*twice)->host_switching());
  auto hybrid =
      lattice::PackedSimpleServer::Create(make_lwe(), ring, lattice::PackedProtocol::kHybrid);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  (*hybrid)->set_packing_engine(
      *HostRunPackingEngine::Create((*hybrid)->ring(), (*hybrid)->matrix()));
  EXPECT_TRUE((*hybrid)->host_switching());
  auto twice_client = lattice::DoublePackedClient::Create((*twice)->config(), ring);
  ASSERT_TRUE(twice_client.ok()) << twice_client.status();
  const auto twice_keys = std::make_shared<const he::GaloisKeys>(
      *(*twice)->ParseKeys((*twice_client)->expansion_keys()));
  for (const auto& [element, key] : twice_keys->keys) {
    EXPECT_EQ(key.b32.size(), host_keys.keys.at(element).b32.size()) << element;
  }
  // Its sums W_t are made beside the device's first level: the CPU server's bytes, a query whose
  // second ciphertext is bad failing alone.
  auto twice_cpu = lattice::DoublePackedServer::Create(make_lwe(), ring);
  ASSERT_TRUE(twice_cpu.ok()) << twice_cpu.status();
  std::vector<lattice::PackedQuery> doubled;
  for (const uint64_t row : {rows / 2, uint64_t{1}, rows - 2}) {
    doubled.push_back(*(*twice_client)->MakeQuery(row));
  }
  std::vector<uint8_t> bad_second = doubled[1].ciphertext;
  const uint64_t ct_bytes = lattice::SecretCiphertextBytes((*twice)->ring());
  std::fill(bad_second.begin() + ct_bytes + 32, bad_second.begin() + ct_bytes + 36, 0xff);
  const std::vector<lattice::PackedRequest> twice_requests{
      {doubled[0].query, doubled[0].ciphertext, twice_keys, {}},
      {doubled[1].query, bad_second, twice_keys, {}},
      {doubled[2].query, doubled[2].ciphertext, twice_keys, {}}};
  const auto twice_want = (*twice_cpu)->AnswerBatch(twice_requests);
  const auto twice_got = (*twice)->AnswerBatch(twice_requests);
  ASSERT_EQ(twice_got.size(), 3u);
  EXPECT_THAT(twice_got[1].status().message(), HasSubstr("is not below its prime"));
  EXPECT_EQ(twice_got[1].status(), twice_want[1].status());
  for (size_t i : {0, 2}) {
    ASSERT_TRUE(twice_got[i].ok()) << twice_got[i].status();
    EXPECT_EQ(*twice_got[i], *twice_want[i]) << "query " << i;
    std::vector<uint8_t> record(record_bytes);
    ASSERT_TRUE((*twice_client)->Decode(doubled[i], *twice_got[i], absl::MakeSpan(record)).ok());
    const uint64_t row = doubled[i].row();
    EXPECT_EQ(record, std::vector<uint8_t>(records.begin() + row * record_bytes,
                                           records.begin() + (row + 1) * record_bytes));
  }
}

TEST(ExpPackHostRun, KeysAreMadeOncePerLiveSessionAndNeverConfused) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test") + 2);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  const uint32_t n = 8;
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 300, n, gen);
  const lattice::CpuPackingEngine cpu(ctx, matrix);
  auto engine = HostRunPackingEngine::Create(ctx, matrix, /*max_sessions=*/2);
  ASSERT_TRUE(engine.ok());
  const HostRunPackingEngine& host = **engine;
  const testing::Session one(ctx, n), two(ctx, n), three(ctx, n);
  const std::vector<uint8_t> ct = SecretCiphertext(ctx, one, n, gen);
  // The same storage under two owners: the second is another session, though at the same
  // address (as keys freed and reallocated would be).
  he::GaloisKeys slot = one.keys;
  auto owner_a = std::make_shared<int>(1);
  const std::shared_ptr<const he::GaloisKeys> a(owner_a, &slot);
  EXPECT_EQ(SumsOf(host, ctx, matrix, a, ct), SumsOf(cpu, ctx, matrix, a, ct));
  EXPECT_EQ(SumsOf(host, ctx, matrix, a, ct), SumsOf(cpu, ctx, matrix, a, ct));
  EXPECT_EQ(host.key_uploads(), 1u);
  slot = two.keys;  // new keys in the same place, under a new owner
  auto owner_b = std::make_shared<int>(2);
  const std::shared_ptr<const he::GaloisKeys> b(owner_b, &slot);
  EXPECT_EQ(SumsOf(host, ctx, matrix, b, ct), SumsOf(cpu, ctx, matrix, b, ct));
  EXPECT_EQ(host.key_uploads(), 2u);
  // A third session pushes out the least recently used (a); once gone it is dropped itself.
  {
    const auto gone = std::make_shared<const he::GaloisKeys>(three.keys);
    EXPECT_EQ(SumsOf(host, ctx, matrix, gone, ct), SumsOf(cpu, ctx, matrix, gone, ct));
    EXPECT_EQ(host.key_uploads(), 3u);
    EXPECT_EQ(host.cached_sessions(), 2u);
  }
  // Borrowed keys are made per call and never cached.
  const auto borrowed = lattice::BorrowKeys(three.keys);
  EXPECT_EQ(SumsOf(host, ctx, matrix, borrowed, ct), SumsOf(cpu, ctx, matrix, borrowed, ct));
  EXPECT_EQ(SumsOf(host, ctx, matrix, borrowed, ct), SumsOf(cpu, ctx, matrix, borrowed, ct));
  EXPECT_EQ(host.key_uploads(), 5u);
  EXPECT_EQ(host.cached_sessions(), 1u);  // b
  EXPECT_EQ(SumsOf(host, ctx, matrix, b, ct), SumsOf(cpu, ctx, matrix, b, ct));
  EXPECT_EQ(host.key_uploads(), 5u);
}

TEST(SessionKeyCache, BoundsItsEntriesAndDropsTheLeastRecentlyUsed) {
  internal::SessionKeyCache<int> cache(2);
  int made = 0;
  const auto make = [&made](const he::GaloisKeys&) -> absl::StatusOr<std::unique_ptr<int>> {
    return std::make_unique<int>(++made);
  };
  const auto a = std::make_shared<const he::GaloisKeys>();
  const auto b = std::make_shared<const he::GaloisKeys>();
  const auto c = std::make_shared<const he::GaloisKeys>();
  EXPECT_EQ(**cache.Get(a, make), 1);
  EXPECT_EQ(**cache.Get(b, make), 2);
  EXPECT_EQ(**cache.Get(a, make), 1);  // a is now the most recent
  EXPECT_EQ(**cache.Get(c, make), 3);  // b goes
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(**cache.Get(a, make), 1);
  EXPECT_EQ(**cache.Get(b, make), 4);
  EXPECT_EQ(cache.hits(), 2u);
  EXPECT_EQ(cache.made(), 4u);
  // A failure is returned and nothing is cached.
  const auto d = std::make_shared<const he::GaloisKeys>();
  const auto fail = [](const he::GaloisKeys&) -> absl::StatusOr<std::unique_ptr<int>> {
    return absl::InvalidArgumentError("bad keys");
  };
  EXPECT_THAT(cache.Get(d, fail).status().message(), HasSubstr("bad keys"));
  EXPECT_EQ(cache.size(), 2u);
}

TEST(SessionKeyCache, OtherSessionsDoNotWaitForAnUpload) {
  internal::SessionKeyCache<int> cache(4);
  const auto a = std::make_shared<const he::GaloisKeys>();
  const auto b = std::make_shared<const he::GaloisKeys>();
  const auto made = [](int v) {
    return [v](const he::GaloisKeys&) -> absl::StatusOr<std::unique_ptr<int>> {
      return std::make_unique<int>(v);
    };
  };
  EXPECT_EQ(**cache.Get(b, made(1)), 1);
  // a's upload is under way (its make blocks) ...
  absl::Notification uploading, finish;
  auto slow = std::async(std::launch::async, [&] {
    return cache.Get(a, [&](const he::GaloisKeys&) -> absl::StatusOr<std::unique_ptr<int>> {
      uploading.Notify();
      finish.WaitForNotification();
      return std::make_unique<int>(2);
    });
  });
  uploading.WaitForNotification();
  // ... b's keys are found meanwhile (before, b waited for a's upload under the cache's lock) ...
  auto hit = std::async(std::launch::async, [&] { return cache.Get(b, made(9)); });
  const bool found_meanwhile = hit.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(found_meanwhile) << "b waited for a's upload";
  if (!found_meanwhile) {
    finish.Notify();
    return;
  }
  EXPECT_EQ(**hit.get(), 1);
  // ... and a second make of a's value meanwhile is cached first: the slow one gets it too.
  EXPECT_EQ(**cache.Get(a, made(3)), 3);
  finish.Notify();
  EXPECT_EQ(**slow.get(), 3);
  EXPECT_EQ(**cache.Get(a, made(4)), 3);
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.made(), 3u);
}

TEST(ExpPackHostRun, RefusesBadInput) {
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_exppack_host_run_test") + 3);
  const lattice::RingContext ctx = *lattice::RingContext::Create(lattice::testing::SmallRing());
  const lattice::PackingMatrix matrix = testing::RandomPackingMatrix(ctx, 50, 4, gen);
  auto host = HostRunPackingEngine::Create(ctx, matrix);
  ASSERT_TRUE(host.ok());
  const testing::Session session(ctx, 4), small(ctx, 2);
  const std::vector<uint8_t> ct = SecretCiphertext(ctx, session, 4, gen);
  std::vector<uint64_t> sums(lattice::PackingSumWords(ctx, matrix));
  EXPECT_THAT((*host)->Sums(nullptr, ct, 1, absl::MakeSpan(sums)).message(), HasSubstr("no keys"));
  const auto keys = lattice::BorrowKeys(session.keys);
  std::vector<uint64_t> short_sums(sums.size() - 1);
  EXPECT_THAT((*host)->Sums(keys, ct, 1, absl::MakeSpan(short_sums)).message(),
              HasSubstr("sums (expected"));
  EXPECT_THAT(
      (*host)
          ->Sums(keys, absl::MakeConstSpan(ct).first(ct.size() - 1), 1, absl::MakeSpan(sums))
          .message(),
      HasSubstr("ciphertext"));
  // Keys for a smaller n lack a level's element.
  EXPECT_THAT((*host)->Sums(lattice::BorrowKeys(small.keys), ct, 1, absl::MakeSpan(sums)).message(),
              HasSubstr("lack the Galois key"));
  // A packed ciphertext of the wrong size is refused by both switches.
  lattice::RlweCiphertext bad;
  bad.c0.assign(ctx.k() * ctx.n(), 1);
  bad.c1.assign(ctx.k() * ctx.n() - 1, 1);
  EXPECT_FALSE((*host)->Switch({&bad, 1}, 1).ok());
  // The CPU engine refuses the same.
  EXPECT_FALSE(lattice::CpuPackingEngine(ctx, matrix, 0).Switch({&bad, 1}, 1).ok());
  const lattice::CpuPackingEngine cpu(ctx, matrix, /*deferred_levels=*/0);
  EXPECT_THAT(cpu.Sums(nullptr, ct, 1, absl::MakeSpan(sums)).message(), HasSubstr("no keys"));
  EXPECT_THAT(cpu.Sums(lattice::BorrowKeys(small.keys), ct, 1, absl::MakeSpan(sums)).message(),
              HasSubstr("lack the Galois key"));
}

}  // namespace
}  // namespace veil::gpu
