// Fuzz target for the parameters of the dpf2 calls (server/request.h): arbitrary bytes read as an
// answer (first byte even) or answerPooled (odd) call's parameters, with the server's bounds, and
// validated as the server does. Must never crash, whatever the bytes; a malformed message is a
// kj::Exception (the RPC layer turns it into an error reply), a bad call INVALID_ARGUMENT, and the
// keys of an accepted call obey every rule ParseKeys promises.
#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "dpf/key.h"
#include "server/request.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

constexpr uint64_t kTableRows = 1000;

// One call's parameters: keys for party 0 (of the given domains), optional ranges, bag sizes.
std::vector<uint8_t> Call(bool pooled, const std::vector<int>& log_domains,
                          const std::vector<pir::RowRange>& ranges,
                          const std::vector<uint32_t>& bags, dpf::OutputType output) {
  capnp::MallocMessageBuilder message;
  auto params = message.initRoot<rpc::PirServer::AnswerPooledParams>();
  auto keys = params.initKeys(static_cast<unsigned>(log_domains.size()));
  for (size_t i = 0; i < log_domains.size(); ++i) {
    dpf::DpfParameters p{log_domains[i], dpf::Prg::kAes128, output,
                         output == dpf::OutputType::kXor ? 0 : 4};
    auto pair = dpf::GenerateKeys(p, 0, 1);
    Check(pair.ok(), "GenerateKeys failed");
    const std::vector<uint8_t> key = pair->first.Serialize();
    keys.set(static_cast<unsigned>(i), kj::arrayPtr(key.data(), key.size()));
  }
  auto list = params.initRanges(static_cast<unsigned>(ranges.size()));
  for (size_t i = 0; i < ranges.size(); ++i) {
    list[static_cast<unsigned>(i)].setFirstRow(ranges[i].first_row);
    list[static_cast<unsigned>(i)].setRows(ranges[i].rows);
  }
  auto sizes = params.initBagSizes(static_cast<unsigned>(bags.size()));
  for (size_t i = 0; i < bags.size(); ++i) sizes.set(static_cast<unsigned>(i), bags[i]);
  const kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  std::vector<uint8_t> bytes = {static_cast<uint8_t>(pooled ? 1 : 0)};
  bytes.insert(bytes.end(), words.asBytes().begin(), words.asBytes().end());
  return bytes;
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  using dpf::OutputType;
  return {Call(false, {10, 10}, {}, {}, OutputType::kAdditive),
          Call(false, {12}, {}, {}, OutputType::kXor),
          Call(false, {4, 1}, {{16, 10}, {999, 1}}, {}, OutputType::kAdditive),
          Call(true, {10, 10, 10}, {}, {2, 1}, OutputType::kAdditive),
          Call(true, {3, 3}, {{0, 8}, {992, 8}}, {1, 1}, OutputType::kAdditive)};
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using veil::fuzz::Check;
  using veil::fuzz::kTableRows;
  if (size < 1) return 0;
  const bool pooled = (data[0] & 1) != 0;
  std::vector<capnp::word> words((size - 1) / sizeof(capnp::word) + 1);
  std::memcpy(words.data(), data + 1, size - 1);
  veil::server::ServerLimits limits;
  capnp::ReaderOptions options;
  options.traversalLimitInWords = limits.HardMessageWords();
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()), options);
    // answer's parameters are answerPooled's without bagSizes: the same reader serves both.
    auto params = reader.getRoot<veil::rpc::PirServer::AnswerPooledParams>();
    auto ranges =
        veil::server::ParseRanges(params.getRanges(), params.getKeys().size(), kTableRows);
    if (!ranges.ok()) {
      Check(ranges.status().code() == absl::StatusCode::kInvalidArgument, "ParseRanges: code");
      return 0;
    }
    auto keys = veil::server::ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                                        {0, kTableRows, pooled}, limits, *ranges);
    if (!keys.ok()) {
      Check(keys.status().code() == absl::StatusCode::kInvalidArgument, "ParseKeys: code");
      return 0;
    }
    Check(!keys->empty() && keys->size() <= limits.max_keys_per_call, "key count out of bounds");
    for (size_t i = 0; i < keys->size(); ++i) {
      const veil::dpf::DpfKey& key = (*keys)[i];
      const uint64_t rows = ranges->empty() ? kTableRows : (*ranges)[i].rows;
      Check(key.party() == 0, "a key of the other party was accepted");
      Check(key.params().log_domain == veil::dpf::LogDomainForRows(rows),
            "a key of another domain was accepted");
      Check(!pooled || key.params().output == veil::dpf::OutputType::kAdditive,
            "a pooled call accepted a non-additive key");
      if (!ranges->empty()) {
        Check((*ranges)[i].rows >= 1 && (*ranges)[i].first_row + (*ranges)[i].rows <= kTableRows,
              "a range outside the table was accepted");
      }
    }
    if (pooled) {
      auto bags = veil::server::ParseBagSizes(params.getBagSizes(), keys->size());
      if (bags.ok()) {
        uint64_t total = 0;
        for (uint32_t b : *bags) {
          Check(b >= 1, "an empty bag was accepted");
          total += b;
        }
        Check(total == keys->size(), "bag sizes that do not add up were accepted");
      } else {
        Check(bags.status().code() == absl::StatusCode::kInvalidArgument, "ParseBagSizes: code");
      }
    }
  } catch (const kj::Exception&) {
    // A malformed message: capnp reports it as an exception, which the RPC layer turns into an
    // error reply or a closed connection.
  }
  return 0;
}
