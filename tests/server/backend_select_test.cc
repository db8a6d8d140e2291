// Backend selection: the --gpus list and the backend names (no GPU needed).
#include "server/backend_select.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseGpuList, AllAndLists) {
  EXPECT_THAT(*ParseGpuList("all", 3), ElementsAre(0, 1, 2));
  EXPECT_THAT(*ParseGpuList("1", 2), ElementsAre(1));
  EXPECT_THAT(*ParseGpuList("2,0", 4), ElementsAre(2, 0));
}

TEST(ParseGpuList, Errors) {
  for (const char* bad : {"", "x", "0,", "-1", "0,,1", "1.5"}) {
    absl::StatusOr<std::vector<int>> r = ParseGpuList(bad, 4);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("not a device number")) << bad;
  }
  absl::StatusOr<std::vector<int>> twice = ParseGpuList("1,1", 4);
  EXPECT_EQ(twice.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(twice.status().message(), HasSubstr("named twice"));
  absl::StatusOr<std::vector<int>> missing = ParseGpuList("0,3", 2);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(missing.status().message(), HasSubstr("no CUDA device 3 (2 present)"));
}

TEST(CreateBackend, NamesAndTheCpuFallback) {
  std::vector<uint32_t> words(8, 1);
  const dpf::TableView table{words.data(), 4, 2, 0};
  EXPECT_EQ(CreateBackend("tpu", table, 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto cpu = CreateBackend("cpu", table, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_EQ((*cpu)->name(), "cpu");
  // auto: the GPU backend where one answers, else the CPU backend; never an error here.
  auto any = CreateBackend("auto", table, 1);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_TRUE((*any)->name() == "cpu" || (*any)->name() == "gpu");
}

}  // namespace
}  // namespace veil::server
