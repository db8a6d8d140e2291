// How errors cross the wire. A failed call is a Cap'n Proto exception whose description starts
// with the absl status code name: "INVALID_ARGUMENT: key 3: ...". Both ends use these two
// functions, so the client reports the server's status code and message, not a transport error.
#ifndef VEIL_RPC_STATUS_H_
#define VEIL_RPC_STATUS_H_

#include <kj/exception.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace veil::rpc {

// An exception carrying `status` (which must not be OK). UNAVAILABLE travels as DISCONNECTED and
// RESOURCE_EXHAUSTED as OVERLOADED, so generic capnp code treats them as retryable.
kj::Exception StatusToException(const absl::Status& status);

// The status an exception stands for, its message prefixed with `context` (e.g. "server 1
// (127.0.0.1:4000)"). A description without a status code name maps by the exception type:
// DISCONNECTED → UNAVAILABLE, OVERLOADED → RESOURCE_EXHAUSTED, UNIMPLEMENTED → UNIMPLEMENTED,
// anything else → INTERNAL.
absl::Status ExceptionToStatus(const kj::Exception& exception, absl::string_view context);

}  // namespace veil::rpc

#endif  // VEIL_RPC_STATUS_H_
