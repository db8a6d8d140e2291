// Starts servers (two dpf2, one bfv-bag) on a known fixed-point table and runs the C checks of
// c_abi_test.c.
#include <vector>

#include "embedding/table_builder.h"
#include "gtest/gtest.h"
#include "tests/server/two_servers.h"

extern "C" int veil_c_abi_checks(const char* server0, const char* server1, uint64_t rows,
                                 uint32_t dim);
extern "C" int veil_c_abi_tls_checks(const char* server0, const char* server1,
                                     const char* trusted_certs, const char* other_certs,
                                     uint64_t rows, uint32_t dim);
extern "C" int veil_c_abi_bag_checks(const char* bag_server, const char* dpf_server, uint64_t rows,
                                     uint32_t dim);

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

}  // namespace
}  // namespace veil
