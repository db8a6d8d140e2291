// libFuzzer target: arbitrary bytes as the parameters of an answerPooled call, read with the
// server's bounds and validated as the server does (server/request.h). Must never crash, whatever
// the bytes.
#include <capnp/serialize.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<capnp::word> words(size / sizeof(capnp::word) + 1);
  std::memcpy(words.data(), data, size);
  veil::server::ServerLimits limits;
  capnp::ReaderOptions options;
  options.traversalLimitInWords = limits.HardMessageWords();
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()), options);
    auto params = reader.getRoot<veil::rpc::PirServer::AnswerPooledParams>();
    auto ranges = veil::server::ParseRanges(params.getRanges(), params.getKeys().size(), 1000);
    if (!ranges.ok()) return 0;
    auto keys = veil::server::ParseKeys(params.getKeys(), params.totalSize().wordCount * 8,
                                        {0, 1000, true}, limits, *ranges);
    if (keys.ok()) (void)veil::server::ParseBagSizes(params.getBagSizes(), keys->size());
  } catch (const kj::Exception&) {
    // A malformed message: capnp reports it as an exception, which the RPC layer turns into an
    // error reply or a closed connection.
  }
  return 0;
}
