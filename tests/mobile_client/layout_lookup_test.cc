// Layout lookups three ways against two real servers of a layout's physical table: the client
// library (Client::LookupLayout), the C ABI (veil_lookup_layout) and PrivateEmbeddingBag. All three
// must give the same rows and missing masks, and every row that is not missing must equal the
// plaintext table.
#include <cstdio>
#include <random>
#include <vector>

#include "embedding/layout_table.h"
#include "embedding/table_builder.h"
#include "gtest/gtest.h"
#include "mobile_client/client.h"
#include "mobile_client/private_embedding_bag.h"
#include "mobile_client/veil.h"
#include "tests/server/two_servers.h"

namespace veil::client {
namespace {

constexpr int32_t kRows = 900;
constexpr int32_t kDim = 4;

struct Fixture {
  std::shared_ptr<const embedding::Layout> layout;
  std::vector<float> rows;  // the plaintext table, kRows x kDim
  std::string layout_path;
  testing::TwoServers servers;
};

Fixture Serve() {
  Fixture f;
  embedding::LayoutParams params;
  params.num_rows = kRows;
  params.row_words = kDim;
  params.colocation = 1;
  params.hot = {4, 2};
  params.cold = {12, 1};
  params.seed[0] = 5;
  std::vector<int32_t> hot;
  for (int32_t r = 0; r < 90; ++r) hot.push_back(r * 10);
  std::vector<std::vector<int32_t>> companions(kRows);
  for (int32_t r = 0; r < kRows; ++r) companions[r] = {(r + 3) % kRows};
  f.layout = std::make_shared<const embedding::Layout>(
      *embedding::Layout::Create(params, hot, companions));
  f.rows.resize(kRows * kDim);
  for (size_t i = 0; i < f.rows.size(); ++i) f.rows[i] = static_cast<float>(i) * 0.25f - 7;
  const std::string table = testing::TempPath("layout_table.veil");
  auto physical = embedding::ArrangeRows(*f.layout, f.rows);
  EXPECT_TRUE(physical.ok());
  embedding::TableOptions options;
  EXPECT_TRUE(embedding::WriteTable(table, embedding::RowFormat::kFp32,
                                    static_cast<uint32_t>(f.layout->entry_words()), *physical,
                                    options)
                  .ok());
  f.layout_path = testing::TempPath("test.veillayout");
  EXPECT_TRUE(f.layout->WriteFile(f.layout_path).ok());
  auto servers = testing::StartTwoServers(table, table);
  EXPECT_TRUE(servers.ok()) << servers.status();
  f.servers = *std::move(servers);
  return f;
}

TEST(LayoutLookupTest, ClientCAbiAndPrivateEmbeddingBagAgree) {
  Fixture f = Serve();
  ClientOptions options;
  options.server0 = f.servers.address(0);
  options.server1 = f.servers.address(1);
  auto connected = Client::Connect(options);
  ASSERT_TRUE(connected.ok()) << connected.status();
  std::shared_ptr<Client> client = std::move(*connected);

  veil_client_options c_options = {};
  c_options.struct_size = sizeof(c_options);
  std::string s0 = f.servers.address(0), s1 = f.servers.address(1);
  c_options.server0 = s0.c_str();
  c_options.server1 = s1.c_str();
  veil_client* c_client = nullptr;
  ASSERT_EQ(veil_client_connect(&c_options, &c_client), VEIL_OK) << veil_last_error();
  veil_layout* c_layout = nullptr;
  ASSERT_EQ(veil_layout_open(f.layout_path.c_str(), &c_layout), VEIL_OK) << veil_last_error();
  veil_layout_info info;
  ASSERT_EQ(veil_layout_get_info(c_layout, &info), VEIL_OK);
  EXPECT_EQ(info.rows, static_cast<uint32_t>(kRows));
  EXPECT_EQ(info.row_values, static_cast<uint32_t>(kDim));
  EXPECT_EQ(info.keys, 4u * 2 + 12u * 1);

  PrivateEmbeddingBag bag(PrivateEmbeddingBagOptions(kRows, kDim), client, f.layout,
                          torch::full({kDim}, 99.0f));

  const uint64_t seed = std::random_device{}();
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 random(seed);
  int missing_seen = 0, served_seen = 0;
  for (int request = 0; request < 12; ++request) {
    std::vector<int32_t> wanted;
    const int n = std::uniform_int_distribution<int>(1, 40)(random);
    for (int i = 0; i < n; ++i)
      wanted.push_back(std::uniform_int_distribution<int32_t>(0, kRows - 1)(random));

    auto library = client->LookupLayout(*f.layout, wanted);
    ASSERT_TRUE(library.ok()) << library.status();
    EXPECT_EQ(library->call.keys, info.keys) << "constant keys per inference";

    std::vector<float> c_values(wanted.size() * kDim);
    std::vector<uint8_t> c_missing(wanted.size());
    ASSERT_EQ(veil_lookup_layout(c_client, c_layout, wanted.data(), wanted.size(), c_values.data(),
                                 c_values.size(), c_missing.data(), c_missing.size()),
              VEIL_OK)
        << veil_last_error();

    std::vector<int64_t> wanted64(wanted.begin(), wanted.end());
    auto fetched = bag->Fetch(wanted64);
    ASSERT_TRUE(fetched.ok()) << fetched.status();
    ASSERT_EQ(fetched->rows.size(), library->rows.size());

    for (size_t i = 0; i < wanted.size(); ++i) {
      const auto it = std::lower_bound(library->rows.begin(), library->rows.end(), wanted[i]);
      ASSERT_TRUE(it != library->rows.end() && *it == wanted[i]);
      const size_t index = it - library->rows.begin();
      const bool missing = library->missing[index] != 0;
      ASSERT_EQ(c_missing[i] != 0, missing) << "row " << wanted[i];
      ASSERT_EQ(fetched->missing[index] != 0, missing) << "row " << wanted[i];
      const float* bag_row = fetched->weight.data_ptr<float>() + index * kDim;
      for (int32_t j = 0; j < kDim; ++j) {
        const float truth = f.rows[wanted[i] * kDim + j];
        const float library_value = library->values[index * kDim + j];
        EXPECT_EQ(c_values[i * kDim + j], library_value);
        EXPECT_EQ(library_value, missing ? 0.0f : truth);
        EXPECT_EQ(bag_row[j], missing ? 99.0f : truth);
      }
      missing ? ++missing_seen : ++served_seen;
    }
  }
  EXPECT_GT(served_seen, 0);
  EXPECT_GT(missing_seen, 0) << "the layout is small enough that some requests collide";
  veil_layout_close(c_layout);
  veil_client_close(c_client);
}

}  // namespace
}  // namespace veil::client
