#include "rpc/status.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace veil::rpc {
namespace {

constexpr absl::string_view kRemotePrefix = "remote exception: ";

}  // namespace

kj::Exception StatusToException(const absl::Status& status) {
  kj::Exception::Type type = kj::Exception::Type::FAILED;
  if (absl::IsUnavailable(status)) type = kj::Exception::Type::DISCONNECTED;
  if (absl::IsResourceExhausted(status)) type = kj::Exception::Type::OVERLOADED;
  std::string text = absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  return kj::Exception(type, __FILE__, __LINE__, kj::heapString(text.data(), text.size()));
}

absl::Status ExceptionToStatus(const kj::Exception& exception, absl::string_view context) {
  absl::string_view text(exception.getDescription().cStr(), exception.getDescription().size());
  if (absl::StartsWith(text, kRemotePrefix)) text.remove_prefix(kRemotePrefix.size());
  for (int c = 1; c <= 16; ++c) {
    auto code = static_cast<absl::StatusCode>(c);
    std::string name = absl::StrCat(absl::StatusCodeToString(code), ": ");
    if (absl::StartsWith(text, name)) {
      text.remove_prefix(name.size());
      return absl::Status(code, absl::StrCat(context, ": ", text));
    }
  }
  absl::StatusCode code = absl::StatusCode::kInternal;
  switch (exception.getType()) {
    case kj::Exception::Type::DISCONNECTED:
      code = absl::StatusCode::kUnavailable;
      break;
    case kj::Exception::Type::OVERLOADED:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case kj::Exception::Type::UNIMPLEMENTED:
      code = absl::StatusCode::kUnimplemented;
      break;
    default:
      break;
  }
  return absl::Status(code, absl::StrCat(context, ": ", text));
}

}  // namespace veil::rpc
