#include "server/protocol.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/bfv_bag.h"
#include "server/dpf2.h"
#include "server/log.h"
#include "server/lwe.h"
#include "server/lwe_pack.h"

namespace veil::server {
namespace {

using Factory = absl::StatusOr<std::unique_ptr<Protocol>> (*)(const ProtocolEnv&);

struct Entry {
  const char* name;
  Factory create;
};

constexpr Entry kProtocols[] = {
    {"dpf2", CreateDpf2Protocol},
    {"bfv-bag", CreateBfvBagProtocol},
    {"lwe-simple", CreateLweSimpleProtocol},
    {"lwe-double", CreateLweDoubleProtocol},
    {"lwe-exppack-s", CreateLwePackProtocol},
    {"lwe-hybrid", CreateLweHybridProtocol},
    {"lwe-exppack-d", CreateLweExpPackDProtocol},
    {"lwe-double-pack", CreateLweDoublePackProtocol},
};

}  // namespace

std::vector<std::string> ProtocolNames() {
  std::vector<std::string> names;
  for (const Entry& e : kProtocols) names.push_back(e.name);
  return names;
}

absl::StatusOr<std::unique_ptr<Protocol>> CreateProtocol(absl::string_view name,
                                                         const ProtocolEnv& env) {
  for (const Entry& e : kProtocols) {
    if (name == e.name) return e.create(env);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown protocol \"", name,
                                                 "\"; this server speaks ",
                                                 absl::StrJoin(ProtocolNames(), ", ")));
}

void Protocol::Roll() {
  Log("roll_unsupported",
      "SIGHUP: this protocol does not roll tables; restart the server to serve a new table");
}

absl::Status CheckCallWords(uint64_t words, const ServerLimits& limits) {
  if (words * 8 <= limits.max_message_bytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("a call of ", words * 8, " bytes; the limit is ",
                                                 limits.max_message_bytes, " bytes"));
}

void FillTableId(const embedding::Table& table, rpc::TableId::Builder table_id) {
  embedding::TableDigestBytes digest = table.digest();
  table_id.setDigest(capnp::Data::Reader(digest.data(), digest.size()));
  table_id.setEpoch(table.epoch());
}

void RejectCall(ServerStats& stats, const absl::Status& status, absl::string_view call) {
  const uint64_t errors = stats.RecordError(call, status.code());
  LogThrottled("rejected",
               absl::StrCat("rejected ", call, " (error #", errors, "): ", status.ToString()));
  kj::throwFatalException(rpc::StatusToException(status));
}

}  // namespace veil::server
