// The LWE product on a device against the CPU's, bit for bit, for both methods and batches that
// take one or several passes; and an LWE server answering through it. Skips without a GPU.
#include <random>
#include <vector>

#include "gpu/backend.h"
#include "gpu/lwe.h"
#include "gtest/gtest.h"
#include "pir/lattice/client.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/server.h"
#include "tests/pir/lattice/test_support.h"

namespace veil::gpu {
namespace {

#define SKIP_WITHOUT_GPU() \
  if (GpuDeviceCount() == 0) GTEST_SKIP() << "no CUDA device"

void ExpectGpuEqualsCpu(uint64_t rows, uint64_t cols, const std::vector<int>& batches,
                        std::mt19937_64& gen) {
  const lattice::testing::RandomByteMatrix m(rows, cols, gen);
  const lattice::ByteMatrixView& db = m.view;
  auto gpu = LweGpuProduct::Create(db, {});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  for (int batch : batches) {
    std::vector<uint32_t> q(batch * cols);
    for (uint32_t& w : q) w = static_cast<uint32_t>(gen());
    std::vector<uint32_t> expected(batch * rows);
    ASSERT_TRUE(lattice::MultiplyBytes(db, q, batch, absl::MakeSpan(expected), rows, 2).ok());
    for (LweGpuMethod method : {LweGpuMethod::kCudaCores, LweGpuMethod::kTensorCores}) {
      std::vector<uint32_t> got(batch * rows);
      ASSERT_TRUE((*gpu)->MultiplyWith(method, q, batch, absl::MakeSpan(got)).ok());
      EXPECT_EQ(got, expected) << LweGpuMethodName(method) << " " << rows << " x " << cols
                               << ", batch " << batch;
    }
  }
}

TEST(LweGpu, EqualsTheCpuProduct) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_lwe_test"));
  ExpectGpuEqualsCpu(1, 1, {1, 2}, gen);
  ExpectGpuEqualsCpu(17, 1025, {1, 3, 17}, gen);
  ExpectGpuEqualsCpu(5760, 11651, {1, 32, 100}, gen);  // 2^20 x 64 B as SimplePIR shapes it
  ExpectGpuEqualsCpu(1 + gen() % 3000, 1 + gen() % 20000, {1 + static_cast<int>(gen() % 64)}, gen);
}

TEST(LweGpu, SmallCaseForSanitizers) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 gen(5);
  ExpectGpuEqualsCpu(70, 1500, {1, 5}, gen);
}

TEST(LweGpu, ServerAnswersThroughTheDevice) {
  SKIP_WITHOUT_GPU();
  std::mt19937_64 gen(lattice::testing::TestSeed("gpu_lwe_test"));
  for (lattice::Protocol protocol :
       {lattice::Protocol::kSimplePir, lattice::Protocol::kDoublePir}) {
    const uint64_t rows = 5000;
    const uint32_t record_bytes = 8;
    std::vector<uint8_t> records(rows * record_bytes);
    for (uint8_t& b : records) b = static_cast<uint8_t>(gen());
    lattice::LweServerOptions options;
    options.protocol = protocol;
    auto server = lattice::LweServer::FromRecords(records, rows, record_bytes, {}, options);
    ASSERT_TRUE(server.ok()) << server.status();
    auto gpu = LweGpuProduct::Create((*server)->database().view(), {});
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    (*server)->SetDatabaseProduct(*std::move(gpu));
    auto client = lattice::LweClient::Create((*server)->config(), (*server)->hint_blob());
    ASSERT_TRUE(client.ok());
    const lattice::Shape& s = (*server)->shape();
    const std::vector<uint64_t> wanted = {0, rows - 1, gen() % rows, gen() % rows};
    std::vector<uint32_t> queries(wanted.size() * s.query_words());
    std::vector<uint32_t> answers(wanted.size() * s.answer_words());
    auto pending = (*client)->MakeQueries(wanted, absl::MakeSpan(queries));
    ASSERT_TRUE(pending.ok());
    ASSERT_TRUE((*server)->Answer(queries, wanted.size(), absl::MakeSpan(answers)).ok());
    std::vector<uint8_t> record(record_bytes);
    for (size_t i = 0; i < wanted.size(); ++i) {
      ASSERT_TRUE(
          (*client)
              ->Decode((*pending)[i],
                       absl::MakeConstSpan(answers).subspan(i * s.answer_words(), s.answer_words()),
                       absl::MakeSpan(record))
              .ok());
      EXPECT_TRUE(
          std::equal(record.begin(), record.end(), records.begin() + wanted[i] * record_bytes))
          << lattice::ProtocolName(protocol) << " row " << wanted[i];
    }
  }
}

}  // namespace
}  // namespace veil::gpu
