// `veil lookup` and `veil table` as a user runs them.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
