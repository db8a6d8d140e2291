#include "server/request.h"

#include <capnp/message.h>

#include "absl/strings/str_cat.h"
#include "dpf/key.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pir/two_server/query.h"

namespace veil::server {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kRows = 1000;

class ParseKeysTest : public ::testing::Test {
 protected:
  // Sets the call's keys and returns ParseKeys' verdict on them.
  absl::StatusOr<std::vector<dpf::DpfKey>> Parse(const std::vector<std::vector<uint8_t>>& keys,
                                                 KeyRules rules = {0, kRows, false}) {
    capnp::MallocMessageBuilder message;
    auto params = message.initRoot<rpc::PirServer::AnswerParams>();
    auto list = params.initKeys(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
    }
    auto reader = params.asReader();
    return ParseKeys(reader.getKeys(), reader.totalSize().wordCount * 8, rules, limits_);
  }

  std::vector<uint8_t> Key(int party, uint64_t rows = kRows,
                           dpf::OutputType output = dpf::OutputType::kAdditive,
                           dpf::Prg prg = dpf::Prg::kAes128) {
    return pir::MakeQuery(rows, 3, 1, prg, output)->key[party].Serialize();
  }

  ServerLimits limits_;
};

TEST_F(ParseKeysTest, GoodKeysParse) {
  auto keys = Parse({Key(0), Key(0, kRows, dpf::OutputType::kXor)});
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[1].params().output, dpf::OutputType::kXor);
}

TEST_F(ParseKeysTest, EachCheckNamesTheProblem) {
  EXPECT_THAT(Parse({}).status().message(), HasSubstr("no keys"));
  EXPECT_THAT(Parse({Key(0), {}}).status().message(), HasSubstr("key 1: "));
  EXPECT_THAT(Parse({Key(1)}).status().message(),
              HasSubstr("key 0 is for party 1 but this server is party 0"));
  EXPECT_THAT(Parse({Key(0, kRows * 2)}).status().message(), HasSubstr("key 0: "));
  EXPECT_THAT(Parse({Key(0, kRows, dpf::OutputType::kXor)}, {0, kRows, true}).status().message(),
              HasSubstr("pooled answers need additive keys"));
  limits_.max_keys_per_call = 2;
  EXPECT_THAT(Parse({Key(0), Key(0), Key(0)}).status().message(),
              HasSubstr("3 keys exceed the limit of 2 keys per call"));
  limits_.max_message_bytes = 128;
  EXPECT_THAT(Parse({Key(0)}).status().message(), HasSubstr("exceeds the limit of 128 bytes"));
}

TEST_F(ParseKeysTest, AdditiveKeysOfNarrowLeavesAreRefused) {
  // One-word leaves cost ~16 times a key's evaluation (35 times with ChaCha20, measured on a
  // server) while counting as one key in every limit.
  dpf::DpfParameters params;
  params.log_domain = dpf::LogDomainForRows(kRows);
  for (int log_width = 0; log_width < dpf::kMaxLeafWordsLog2; ++log_width) {
    params.leaf_words_log2 = log_width;
    auto keys = dpf::GenerateKeys(params, 3, 1);
    ASSERT_TRUE(keys.ok()) << keys.status();
    auto refused = Parse({Key(0), keys->first.Serialize()});
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << log_width;
    EXPECT_THAT(
        refused.status().message(),
        HasSubstr(absl::StrCat("key 1: additive keys of ", 1 << log_width, "-word leaves")));
  }
}

TEST_F(ParseKeysTest, SipHashKeysOnlyWhereTheServerAcceptsThem) {
  const auto siphash = Key(0, kRows, dpf::OutputType::kAdditive, dpf::Prg::kSipHash);
  const auto chacha = Key(0, kRows, dpf::OutputType::kAdditive, dpf::Prg::kChaCha12);
  EXPECT_TRUE(Parse({chacha}).ok());
  auto refused = Parse({chacha, siphash});
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_THAT(refused.status().message(), HasSubstr("key 1: this server does not accept siphash"));
  const dpf::Prg with_siphash[] = {dpf::Prg::kAes128, dpf::Prg::kSipHash};
  EXPECT_TRUE(Parse({siphash, Key(0)}, {0, kRows, false, with_siphash}).ok());
  EXPECT_FALSE(Parse({chacha}, {0, kRows, false, with_siphash}).ok());
}

TEST(ParseBagSizesTest, SizesMustCoverTheKeys) {
  capnp::MallocMessageBuilder message;
  auto list = message.initRoot<rpc::PirServer::AnswerPooledParams>().initBagSizes(3);
  list.set(0, 2);
  list.set(1, 1);
  list.set(2, 4);
  auto sizes = list.asReader();
  EXPECT_EQ(*ParseBagSizes(sizes, 7), (std::vector<uint32_t>{2, 1, 4}));
  EXPECT_THAT(ParseBagSizes(sizes, 8).status().message(),
              HasSubstr("bag sizes add up to 7 but the call holds 8 keys"));
  EXPECT_THAT(ParseBagSizes(sizes, 5).status().message(), HasSubstr("more than the 5 keys"));
  list.set(1, 0);
  EXPECT_THAT(ParseBagSizes(list.asReader(), 6).status().message(), HasSubstr("bag 1 is empty"));
}

TEST(ParseRangesTest, RangesAreOnePerKeyInsideTheTableAndKeysMustFitTheirRange) {
  auto parse = [](const std::vector<std::pair<uint64_t, uint64_t>>& ranges, size_t keys) {
    capnp::MallocMessageBuilder message;
    auto params = message.initRoot<rpc::PirServer::AnswerParams>();
    auto list = params.initRanges(ranges.size());
    for (size_t i = 0; i < ranges.size(); ++i) {
      list[i].setFirstRow(ranges[i].first);
      list[i].setRows(ranges[i].second);
    }
    return ParseRanges(params.asReader().getRanges(), keys, kRows);
  };
  auto none = parse({}, 3);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  auto good = parse({{0, 32}, {968, 32}, {0, kRows}, {999, 1}}, 4);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ((*good)[1], (pir::RowRange{968, 32}));
  EXPECT_THAT(parse({{0, 32}}, 2).status().message(), HasSubstr("1 row ranges for 2 keys"));
  EXPECT_THAT(parse({{0, 32}, {5, 0}}, 2).status().message(),
              HasSubstr("range 1: the row range is empty"));
  EXPECT_THAT(parse({{kRows, 1}}, 1).status().message(), HasSubstr("range 0: "));
  EXPECT_THAT(parse({{969, 32}}, 1).status().message(), HasSubstr("outside the table"));
  EXPECT_THAT(parse({{~uint64_t{0}, 2}}, 1).status().message(), HasSubstr("outside the table"));

  // Keys are checked against their range's rows.
  capnp::MallocMessageBuilder message;
  auto params = message.initRoot<rpc::PirServer::AnswerParams>();
  std::vector<std::vector<uint8_t>> keys = {pir::MakeQuery(32, 3, 1)->key[0].Serialize(),
                                            pir::MakeQuery(kRows, 3, 1)->key[0].Serialize()};
  auto list = params.initKeys(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    list.set(i, capnp::Data::Reader(keys[i].data(), keys[i].size()));
  }
  auto reader = params.asReader();
  const std::vector<pir::RowRange> fit = {{64, 32}, {0, kRows}};
  EXPECT_TRUE(ParseKeys(reader.getKeys(), reader.totalSize().wordCount * 8, {0, kRows, false},
                        ServerLimits(), fit)
                  .ok());
  const std::vector<pir::RowRange> misfit = {{64, 32}, {64, 32}};
  EXPECT_THAT(ParseKeys(reader.getKeys(), reader.totalSize().wordCount * 8, {0, kRows, false},
                        ServerLimits(), misfit)
                  .status()
                  .message(),
              HasSubstr("key 1: "));
}

}  // namespace
}  // namespace veil::server
