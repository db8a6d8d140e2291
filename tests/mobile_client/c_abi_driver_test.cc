// Starts servers (two dpf2, one bfv-bag, one lwe-simple) on a known fixed-point table and runs the
// C checks of c_abi_test.c.
#include <algorithm>
#include <vector>

#include "embedding/layout_table.h"
#include "embedding/table_builder.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "tests/server/two_servers.h"

extern "C" int veil_c_abi_checks(const char* server0, const char* server1, uint64_t rows,
                                 uint32_t dim);
extern "C" int veil_c_abi_tls_checks(const char* server0, const char* server1,
                                     const char* trusted_certs, const char* other_certs,
                                     uint64_t rows, uint32_t dim);
extern "C" int veil_c_abi_bag_checks(const char* bag_server, const char* dpf_server, uint64_t rows,
                                     uint32_t dim);
extern "C" int veil_c_abi_lwe_checks(const char* lwe_server, const char* hint_cache_dir,
                                     uint64_t rows, uint32_t dim);

extern "C" int veil_c_abi_layout_checks(const char* server0, const char* server1,
                                        const char* layout_path, const char* not_a_layout,
                                        const int32_t* rows, size_t count, const float* expected,
                                        const uint8_t* expected_missing);

namespace veil {
namespace {

constexpr uint64_t kRows = 200;
constexpr uint32_t kDim = 6;

// The table c_abi_test.c expects: row r, column j holds (7r + j) / 4, fixed-point.
std::string WriteKnownTable() {
  std::vector<float> values(kRows * kDim);
  for (uint64_t r = 0; r < kRows; ++r) {
    for (uint32_t j = 0; j < kDim; ++j) values[r * kDim + j] = static_cast<float>(r * 7 + j) / 4;
  }
  std::string path = testing::TempPath("c_abi.veil");
  embedding::TableOptions options;
  options.epoch = 1;
  options.frac_bits = 16;
  EXPECT_TRUE(
      embedding::WriteTable(path, embedding::RowFormat::kFixed32, kDim, values, options).ok());
  return path;
}

TEST(CAbiTest, CProgramChecksPass) {
  const std::string path = WriteKnownTable();
  auto servers = testing::StartTwoServers(path, path);
  ASSERT_TRUE(servers.ok()) << servers.status();
  EXPECT_EQ(
      veil_c_abi_checks(servers->address(0).c_str(), servers->address(1).c_str(), kRows, kDim), 0);
}

TEST(CAbiTest, CProgramConnectsOverTls) {
  const std::string path = WriteKnownTable();
  auto cert = testing::MakeCertificate();
  auto other = testing::MakeCertificate();
  ASSERT_TRUE(cert.ok() && other.ok());
  auto servers = testing::StartTwoServers(path, path, {}, &*cert);
  ASSERT_TRUE(servers.ok()) << servers.status();
  EXPECT_EQ(veil_c_abi_tls_checks(servers->address(0).c_str(), servers->address(1).c_str(),
                                  cert->cert_path.c_str(), other->cert_path.c_str(), kRows, kDim),
            0);
}

TEST(CAbiTest, CProgramDoesLayoutLookups) {
  // A layout of 300 rows of 3 values, one key per bin: the 20 wanted rows collide in places.
  embedding::LayoutParams params;
  params.num_rows = 300;
  params.row_words = 3;
  params.hot = {2, 1};
  params.cold = {6, 1};
  std::vector<int32_t> hot = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto layout = embedding::Layout::Create(params, hot, {});
  ASSERT_TRUE(layout.ok());
  std::vector<float> rows(300 * 3);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i) / 8;
  const std::string table = testing::TempPath("layout_c.veil");
  ASSERT_TRUE(embedding::WriteTable(
                  table, embedding::RowFormat::kFp32, static_cast<uint32_t>(layout->entry_words()),
                  *embedding::ArrangeRows(*layout, rows), embedding::TableOptions())
                  .ok());
  const std::string layout_path = testing::TempPath("c.veillayout");
  ASSERT_TRUE(layout->WriteFile(layout_path).ok());
  auto servers = testing::StartTwoServers(table, table);
  ASSERT_TRUE(servers.ok()) << servers.status();

  const std::vector<int32_t> wanted = {3,  250, 17, 3,  99, 100, 101, 299, 0, 5,
                                       42, 43,  44, 45, 46, 200, 201, 202, 7, 150};
  client::ClientOptions options;
  options.server0 = servers->address(0);
  options.server1 = servers->address(1);
  auto client = client::Client::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  auto looked_up = (*client)->LookupLayout(*layout, wanted);
  ASSERT_TRUE(looked_up.ok()) << looked_up.status();
  std::vector<float> expected;
  std::vector<uint8_t> expected_missing;
  for (int32_t row : wanted) {
    const size_t index = std::lower_bound(looked_up->rows.begin(), looked_up->rows.end(), row) -
                         looked_up->rows.begin();
    expected_missing.push_back(looked_up->missing[index]);
    for (int j = 0; j < 3; ++j) expected.push_back(looked_up->values[index * 3 + j]);
  }
  EXPECT_EQ(veil_c_abi_layout_checks(servers->address(0).c_str(), servers->address(1).c_str(),
                                     layout_path.c_str(), table.c_str(), wanted.data(),
                                     wanted.size(), expected.data(), expected_missing.data()),
            0);
}

TEST(CAbiTest, CProgramUsesABagServer) {
  const std::string path = WriteKnownTable();
  auto bag_server = testing::StartBagServer(path);
  ASSERT_TRUE(bag_server.ok()) << bag_server.status();
  auto dpf_servers = testing::StartTwoServers(path, path);
  ASSERT_TRUE(dpf_servers.ok()) << dpf_servers.status();
  EXPECT_EQ(veil_c_abi_bag_checks((*bag_server)->address().c_str(), dpf_servers->address(0).c_str(),
                                  kRows, kDim),
            0);
}

TEST(CAbiTest, CProgramUsesAnLweServer) {
  const std::string path = WriteKnownTable();
  auto server = testing::StartLweServer(path, "lwe-simple");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(veil_c_abi_lwe_checks((*server)->address().c_str(),
                                  testing::TempPath("c_abi_hints").c_str(), kRows, kDim),
            0);
}

}  // namespace
}  // namespace veil
