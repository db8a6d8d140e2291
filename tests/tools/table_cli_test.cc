// `veil table` (tools/table_cli.h), run as a user runs it.
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/embedding/test_util.h"

namespace veil::tools {
namespace {

using embedding::testing::ReadBytes;
using embedding::testing::ScratchDir;
using embedding::testing::WriteBytes;
using ::testing::HasSubstr;

// How the CSV tables below (three fp32 values a row) are read: what their tags bind.
const embedding::RowShape kFp32Dim3{embedding::RowFormat::kFp32, 0, 3};

struct CliResult {
  int code;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `veil table ARGS...` (arguments single-quoted for the shell).
CliResult RunCli(const std::vector<std::string>& args) {
  ScratchDir dir;
  std::string command = std::string(VEIL_CLI_BINARY) + " table";
  for (const std::string& arg : args) command += " '" + arg + "'";
  command += " >" + dir.File("out") + " 2>" + dir.File("err");
  const int status = std::system(command.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(dir.File("out")),
          ReadFile(dir.File("err"))};
}

TEST(TableCliTest, BuildInspectVerify) {
  ScratchDir dir;
  WriteBytes(dir.File("in.csv"), "id0,id1,id2\n1,2,3\n-1,0.5,0.25\n");
  const std::string table = dir.File("t.veil");
  CliResult build = RunCli({"build", "--csv=" + dir.File("in.csv"), "--dim=3", "--format=fixed",
                            "--frac-bits=8", "--epoch=7", "--out=" + table});
  ASSERT_EQ(build.code, 0) << build.err;
  EXPECT_THAT(build.out, HasSubstr("2 rows, dim 3, fixed, digest "));

  CliResult inspect = RunCli({"inspect", table, "--rows=5"});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_THAT(inspect.out, HasSubstr("rows:         2\n"));
  EXPECT_THAT(inspect.out, HasSubstr("format:       fixed\n"));
  EXPECT_THAT(inspect.out, HasSubstr("frac_bits:    8\n"));
  EXPECT_THAT(inspect.out, HasSubstr("epoch:        7\n"));
  EXPECT_THAT(inspect.out, HasSubstr("row_tags:     siphash64 (epoch, index, shape, data)\n"));
  EXPECT_THAT(inspect.out, HasSubstr("row 1: -1 0.5 0.25\n"));

  CliResult verify = RunCli({"verify", table});
  EXPECT_EQ(verify.code, 0) << verify.err;
  EXPECT_THAT(verify.out, HasSubstr(": OK, digest "));

  std::string bytes = ReadBytes(table);
  bytes.back() ^= 0x40;  // padding of the last row, still covered by the digest
  WriteBytes(table, bytes);
  verify = RunCli({"verify", table});
  EXPECT_EQ(verify.code, 1);
  EXPECT_THAT(verify.err, HasSubstr("digest mismatch"));
}

TEST(TableCliTest, BuildFromF32AndInspectLongRows) {
  ScratchDir dir;
  std::vector<float> values(2 * 10);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  WriteBytes(dir.File("in.f32"),
             std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4));
  CliResult build = RunCli({"build", "--f32=" + dir.File("in.f32"), "--dim=10", "--format=fp16",
                            "--out=" + dir.File("t")});
  ASSERT_EQ(build.code, 0) << build.err;
  CliResult inspect = RunCli({"inspect", dir.File("t")});
  ASSERT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_THAT(inspect.out, HasSubstr("row 1: 10 11 12 13 14 15 16 17 ...\n"));
}

TEST(TableCliTest, UsageErrorsExitTwo) {
  const std::vector<std::vector<std::string>> cases = {
      {},
      {"frobnicate"},
      {"build", "--format=fp32", "--out=x"},
      {"build", "--csv=a", "--f32=b", "--format=fp32", "--out=x"},
      {"build", "--f32=a", "--format=fp32", "--out=x"},
      {"build", "--csv=a", "--format=bf16", "--out=x"},
      {"build", "--csv=a", "--format=fp32", "--out=x", "--server0=h:1"},
      {"build", "--csv", "--format=fp32", "--out=x"},  // --csv takes "--format=fp32" as its file
      {"inspect"},
      {"inspect", "t.veil", "--rows=many"},
      {"verify", "a", "b"},
  };
  for (const auto& args : cases) {
    CliResult result = RunCli(args);
    EXPECT_EQ(result.code, 2) << ::testing::PrintToString(args);
    EXPECT_THAT(result.err, HasSubstr("usage:"));
  }
}

TEST(TableCliTest, FlagsThatDoNotParseExitOneNamingTheFlag) {
  // The flag parser (Abseil) refuses these before the command runs.
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"build", "--csv=a", "--format=fp32", "--out=x", "--dim=three"}, "dim"},
      {{"build", "--csv=a", "--format=fp32", "--out=x", "--colour=red"}, "colour"},
  };
  for (const auto& [args, flag] : cases) {
    CliResult result = RunCli(args);
    EXPECT_EQ(result.code, 1) << ::testing::PrintToString(args);
    EXPECT_THAT(result.err, HasSubstr("'" + flag + "'")) << result.err;
  }
}

TEST(TableCliTest, RowsAreTaggedByDefaultWithAKeyForClients) {
  ScratchDir dir;
  WriteBytes(dir.File("in.csv"), "1,2,3\n4,5,6\n");
  CliResult build = RunCli(
      {"build", "--csv=" + dir.File("in.csv"), "--format=fp32", "--out=" + dir.File("t.veil")});
  ASSERT_EQ(build.code, 0) << build.err;
  EXPECT_THAT(build.out, HasSubstr("row tags: on; their key is " + dir.File("t.veil.rowkey")));
  auto key = embedding::ReadRowKeyFile(dir.File("t.veil.rowkey"));
  ASSERT_TRUE(key.ok()) << key.status();
  auto table = embedding::Table::Open(dir.File("t.veil"));
  ASSERT_TRUE(table.ok());
  EXPECT_EQ((*table)->row_tag(), embedding::RowTag::kSipHash64Shape);
  auto row = (*table)->row(1);
  EXPECT_TRUE(embedding::RowTagMatches(embedding::RowTag::kSipHash64Shape, *key, 0, 1, kFp32Dim3,
                                       row.first(3), row.subspan(3)));

  build = RunCli({"build", "--csv=" + dir.File("in.csv"), "--format=fp32", "--row-tags=false",
                  "--out=" + dir.File("plain.veil")});
  ASSERT_EQ(build.code, 0) << build.err;
  EXPECT_EQ((*embedding::Table::Open(dir.File("plain.veil")))->row_tag(), embedding::RowTag::kNone);
  EXPECT_EQ(RunCli({"build", "--csv=" + dir.File("in.csv"), "--format=fp32", "--row-tags=false",
                    "--row-key=k", "--out=" + dir.File("x.veil")})
                .code,
            2);
}

TEST(TableCliTest, ANewVersionReusesTheRowKeyItsClientsHold) {
  ScratchDir dir;
  WriteBytes(dir.File("v1.csv"), "1,2,3\n4,5,6\n");
  WriteBytes(dir.File("v2.csv"), "7,8,9\n1,1,1\n");
  ASSERT_EQ(RunCli({"build", "--csv=" + dir.File("v1.csv"), "--format=fp32", "--epoch=1",
                    "--out=" + dir.File("v1.veil")})
                .code,
            0);
  CliResult build =
      RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fp32", "--epoch=2",
              "--reuse-row-key=" + dir.File("v1.veil.rowkey"), "--out=" + dir.File("v2.veil")});
  ASSERT_EQ(build.code, 0) << build.err;
  EXPECT_THAT(build.out, HasSubstr("under the existing key " + dir.File("v1.veil.rowkey")));
  EXPECT_FALSE(embedding::ReadRowKeyFile(dir.File("v2.veil.rowkey")).ok()) << "no new key";
  auto key = embedding::ReadRowKeyFile(dir.File("v1.veil.rowkey"));
  auto table = embedding::Table::Open(dir.File("v2.veil"));
  ASSERT_TRUE(key.ok() && table.ok());
  EXPECT_EQ((*table)->epoch(), 2u);
  auto row = (*table)->row(0);
  // Tagged for its own epoch: version 1's tags do not carry over.
  EXPECT_TRUE(embedding::RowTagMatches(embedding::RowTag::kSipHash64Shape, *key, 2, 0, kFp32Dim3,
                                       row.first(3), row.subspan(3)));
  EXPECT_FALSE(embedding::RowTagMatches(embedding::RowTag::kSipHash64Shape, *key, 1, 0, kFp32Dim3,
                                        row.first(3), row.subspan(3)));

  // A deployment serving kind-2 tables rolls on with kind 2 (a roll keeps the kind).
  build = RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fp32", "--epoch=3",
                  "--row-tag-kind=2", "--reuse-row-key=" + dir.File("v1.veil.rowkey"),
                  "--out=" + dir.File("v3.veil")});
  ASSERT_EQ(build.code, 0) << build.err;
  auto v3 = embedding::Table::Open(dir.File("v3.veil"));
  ASSERT_TRUE(v3.ok());
  EXPECT_EQ((*v3)->row_tag(), embedding::RowTag::kSipHash64Epoch);
  auto v3_row = (*v3)->row(0);
  EXPECT_TRUE(embedding::RowTagMatches(embedding::RowTag::kSipHash64Epoch, *key, 3, 0, kFp32Dim3,
                                       v3_row.first(3), v3_row.subspan(3)));
  EXPECT_EQ(RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fp32", "--row-tag-kind=1",
                    "--out=" + dir.File("bad.veil")})
                .code,
            2);

  // Kind 4 (a linear MAC): each epoch once per key. A new key starts the list next to it; an
  // epoch already built under a reused key is refused, a new one is built and listed.
  auto mac_build = [&](const std::string& epoch, const std::string& key_flag,
                       const std::string& out) {
    return RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fixed", "--row-tag-kind=4",
                   "--epoch=" + epoch, key_flag, "--out=" + dir.File(out)});
  };
  ASSERT_EQ(mac_build("5", "--row-key=" + dir.File("mac.rowkey"), "m5.veil").code, 0);
  const std::string reuse_mac = "--reuse-row-key=" + dir.File("mac.rowkey");
  CliResult again = mac_build("5", reuse_mac, "m5b.veil");
  EXPECT_EQ(again.code, 1);
  EXPECT_THAT(again.err, HasSubstr("epoch 5 was already built under this key"));
  EXPECT_FALSE(embedding::Table::Open(dir.File("m5b.veil")).ok()) << "nothing written";
  ASSERT_EQ(mac_build("6", reuse_mac, "m6.veil").code, 0);
  EXPECT_EQ(mac_build("6", reuse_mac, "m6b.veil").code, 1);
  std::ifstream listed(dir.File("mac.rowkey.epochs"));
  std::string epochs((std::istreambuf_iterator<char>(listed)), std::istreambuf_iterator<char>());
  EXPECT_EQ(epochs, "5\n6\n");
  auto m6 = embedding::Table::Open(dir.File("m6.veil"));
  ASSERT_TRUE(m6.ok());
  EXPECT_EQ((*m6)->row_tag(), embedding::RowTag::kLinearMac61);

  const std::string reuse = "--reuse-row-key=" + dir.File("v1.veil.rowkey");
  EXPECT_EQ(RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fp32", reuse,
                    "--row-key=" + dir.File("k"), "--out=" + dir.File("x.veil")})
                .code,
            2);
  EXPECT_EQ(RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fp32", reuse,
                    "--row-tags=false", "--out=" + dir.File("x.veil")})
                .code,
            2);
  CliResult missing =
      RunCli({"build", "--csv=" + dir.File("v2.csv"), "--format=fp32",
              "--reuse-row-key=" + dir.File("none"), "--out=" + dir.File("x.veil")});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("--reuse-row-key"));
}

TEST(TableCliTest, FailuresExitOne) {
  ScratchDir dir;
  WriteBytes(dir.File("bad.csv"), "1,2\n3\n");
  CliResult build =
      RunCli({"build", "--csv=" + dir.File("bad.csv"), "--format=fp32", "--out=" + dir.File("t")});
  EXPECT_EQ(build.code, 1);
  EXPECT_THAT(build.err, HasSubstr("bad.csv:2: expected 2 values, got 1"));
  WriteBytes(dir.File("junk"), "not a table");
  EXPECT_EQ(RunCli({"inspect", dir.File("junk")}).code, 1);
  CliResult verify = RunCli({"verify", dir.File("junk")});
  EXPECT_EQ(verify.code, 1);
  EXPECT_THAT(verify.err, HasSubstr("truncated"));
}

}  // namespace
}  // namespace veil::tools
