// `veil lookup` and `veil table` as a user runs them.
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/two_servers.h"

namespace veil {
namespace {

using ::testing::HasSubstr;

// Runs a shell command; returns its exit status and stdout (stderr goes to stdout with 2>&1).
std::pair<int, std::string> RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(VeilCliTest, LookupPrintsTheStoredWords) {
  auto path = testing::WriteRandomTable("cli.veil", embedding::RowFormat::kFp16, 90, 6, 4);
  ASSERT_TRUE(path.ok());
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  auto servers = testing::StartTwoServers(*path, *path);
  ASSERT_TRUE(servers.ok()) << servers.status();
  auto [rc, out] = RunCommand(
      absl::StrCat(VEIL_CLI_BINARY, " lookup --server0=", servers->address(0),
                   " --server1=", servers->address(1), " --rows=4,89 --words 2>/dev/null"));
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out;
  for (int i = 0; i < 2; ++i) {
    uint64_t row = i == 0 ? 4 : 89;
    std::string expected = absl::StrCat("row ", row, ":");
    for (uint32_t w : (*table)->row(row))
      absl::StrAppend(&expected, " ", absl::Hex(w, absl::kZeroPad8));
    EXPECT_EQ(lines[i], expected);
  }
}

TEST(VeilCliTest, TlsCertMakesWhatServersAndLookupsUse) {
  const std::string dir = testing::TempPath("cli_tls");
  auto [rc, out] = RunCommand(
      absl::StrCat(VEIL_CLI_BINARY, " tls-cert --out-dir=", dir, " --hosts=127.0.0.1 2>&1"));
  ASSERT_EQ(rc, 0) << out;
  EXPECT_THAT(out, HasSubstr(absl::StrCat("--tls-cert=", dir, "/server.pem --tls-key=", dir,
                                          "/server.key")));
  auto path = testing::WriteRandomTable("cli_tls.veil", embedding::RowFormat::kFp32, 20, 3, 4);
  ASSERT_TRUE(path.ok());
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  const tools::CertificateFiles files{dir + "/server.pem", dir + "/server.key"};
  auto servers = testing::StartTwoServers(*path, *path, {}, &files);
  ASSERT_TRUE(servers.ok()) << servers.status();
  const std::string lookup =
      absl::StrCat(VEIL_CLI_BINARY, " lookup --server0=", servers->address(0),
                   " --server1=", servers->address(1), " --rows=7 --words --timeout-ms=2000");
  std::tie(rc, out) =
      RunCommand(absl::StrCat(lookup, " --tls-certs=", dir, "/server.pem 2>/dev/null"));
  ASSERT_EQ(rc, 0) << out;
  std::string expected = "row 7:";
  for (uint32_t w : (*table)->row(7))
    absl::StrAppend(&expected, " ", absl::Hex(w, absl::kZeroPad8));
  EXPECT_EQ(out, expected + "\n");
  std::tie(rc, out) = RunCommand(lookup + " 2>&1");  // no --tls-certs: plaintext to TLS servers
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("UNAVAILABLE: server 0"));

  std::tie(rc, out) = RunCommand(
      absl::StrCat(VEIL_CLI_BINARY, " tls-cert --out-dir=", dir, " --hosts=bad_name 2>&1"));
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("\"bad_name\" is neither an IP address nor a DNS name"));
  std::tie(rc, out) = RunCommand(absl::StrCat(VEIL_CLI_BINARY, " tls-cert 2>&1"));
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(out, HasSubstr("--out-dir is required"));
}

// bfv-bag from the command line: rows (bags of one), weighted bags as exact sums, and a tagged
// table's sums checked against the row key.
TEST(VeilCliTest, BagLookupsPrintRowsAndExactWeightedSums) {
  const embedding::RowKey key = embedding::NewRowKey();
  const std::string key_file = testing::TempPath("cli_bag.rowkey");
  ASSERT_TRUE(embedding::WriteRowKeyFile(key_file, key).ok());
  auto path = testing::WriteRandomTable("cli_bag.veil", embedding::RowFormat::kFixed32, 70, 3, 9, 1,
                                        &key, embedding::RowTag::kLinearMac61);
  ASSERT_TRUE(path.ok());
  auto table = embedding::Table::Open(*path);
  ASSERT_TRUE(table.ok());
  auto server = testing::StartBagServer(*path, {});
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string lookup =
      absl::StrCat(VEIL_CLI_BINARY, " lookup --protocol=bfv-bag --server=", (*server)->address(),
                   " --row-key=", key_file);
  // The fixed-point value of row r, column j.
  const auto value = [&](uint64_t r, uint32_t j) {
    return static_cast<int64_t>(static_cast<int32_t>((*table)->row(r)[j]));
  };
  const int frac_bits = (*table)->header().frac_bits;

  auto [rc, out] = RunCommand(absl::StrCat(lookup, " --rows=4,69 2>/dev/null"));
  ASSERT_EQ(rc, 0) << out;
  std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out;
  for (int i = 0; i < 2; ++i) {
    const uint64_t row = i == 0 ? 4 : 69;
    std::string expected = absl::StrCat("row ", row, ":");
    for (uint32_t j = 0; j < 3; ++j) {
      absl::StrAppend(
          &expected, " ",
          static_cast<float>(std::ldexp(static_cast<double>(value(row, j)), -frac_bits)));
    }
    EXPECT_EQ(lines[i], expected);
  }

  std::tie(rc, out) = RunCommand(
      absl::StrCat(lookup, " --rows=1,2,3,3 --bags=3,1 --weights=5,-7,1,-2 --words 2>/dev/null"));
  ASSERT_EQ(rc, 0) << out;
  lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << out;
  std::string bag0 = "bag 0:", bag1 = "bag 1:";
  for (uint32_t j = 0; j < 3; ++j) {
    absl::StrAppend(&bag0, " ", 5 * value(1, j) - 7 * value(2, j) + value(3, j));
    absl::StrAppend(&bag1, " ", -2 * value(3, j));
  }
  EXPECT_EQ(lines[0], bag0);
  EXPECT_EQ(lines[1], bag1);

  // Without the row key a tagged table is refused; bad arguments are usage errors.
  std::tie(rc, out) = RunCommand(
      absl::StrCat(VEIL_CLI_BINARY, " lookup --protocol=bfv-bag --server=", (*server)->address(),
                   " --rows=1 2>&1"));
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("FAILED_PRECONDITION"));
  std::tie(rc, out) = RunCommand(absl::StrCat(lookup, " --rows=1,70 2>&1"));
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("row 70 is outside the table (70 rows)"));
  std::tie(rc, out) = RunCommand(absl::StrCat(lookup, " --rows=1,2 --bags=2 --weights=1 2>&1"));
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(out, HasSubstr("--weights must give one integer per row"));
  std::tie(rc, out) = RunCommand(absl::StrCat(lookup, " --rows=1 --server0=127.0.0.1:1 2>&1"));
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(out, HasSubstr("--server0 is not a flag of this command"));
  // A failure latch that holds a failure stops the lookup before it connects.
  const std::string latch = testing::TempPath("cli.latch");
  std::ofstream(latch) << "veil: lookups stopped\nDATA_LOSS: an earlier row\n";
  std::tie(rc, out) =
      RunCommand(absl::StrCat(lookup, " --rows=1 --failure-latch=", latch, " 2>&1"));
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("lookups are stopped by the failure latch " + latch +
                             " (DATA_LOSS: an earlier row)"));
}

TEST(VeilCliTest, ErrorsAreReportedWithAStatus) {
  auto [rc, out] = RunCommand(absl::StrCat(VEIL_CLI_BINARY,
                                           " lookup --server0=127.0.0.1:1 --server1=127.0.0.1:2 "
                                           "--rows=1 --timeout-ms=2000 2>&1"));
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("UNAVAILABLE: server 0 (127.0.0.1:1) is unreachable"));
  std::tie(rc, out) = RunCommand(absl::StrCat(VEIL_CLI_BINARY, " lookup --rows=1 2>&1"));
  EXPECT_EQ(rc, 2);
  EXPECT_THAT(out, HasSubstr("usage"));
}

TEST(VeilCliTest, TableSubcommandVerifies) {
  auto path = testing::WriteRandomTable("cli2.veil", embedding::RowFormat::kFp32, 10, 3, 4);
  ASSERT_TRUE(path.ok());
  auto [rc, out] = RunCommand(absl::StrCat(VEIL_CLI_BINARY, " table verify ", *path, " 2>&1"));
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace
}  // namespace veil
