#include "rpc/status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace veil::rpc {
namespace {

using ::testing::HasSubstr;

TEST(RpcStatusTest, StatusSurvivesTheRoundTrip) {
  for (absl::Status status :
       {absl::InvalidArgumentError("key 3: bad magic"), absl::UnavailableError("shutting down"),
        absl::ResourceExhaustedError("queue full"), absl::FailedPreconditionError("x")}) {
    kj::Exception e = StatusToException(status);
    absl::Status back = ExceptionToStatus(e, "server 1 (h:1)");
    EXPECT_EQ(back.code(), status.code());
    EXPECT_EQ(back.message(), absl::StrCat("server 1 (h:1): ", status.message()));
  }
}

TEST(RpcStatusTest, RemotePrefixIsRemoved) {
  kj::Exception e(kj::Exception::Type::FAILED, "f", 1,
                  kj::str("remote exception: INVALID_ARGUMENT: key 0 is for party 1"));
  absl::Status s = ExceptionToStatus(e, "server 0");
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_EQ(s.message(), "server 0: key 0 is for party 1");
}

TEST(RpcStatusTest, PlainExceptionsMapByType) {
  kj::Exception gone(kj::Exception::Type::DISCONNECTED, "f", 1, kj::str("Peer disconnected."));
  EXPECT_TRUE(absl::IsUnavailable(ExceptionToStatus(gone, "s")));
  EXPECT_THAT(ExceptionToStatus(gone, "s").message(), HasSubstr("Peer disconnected"));
  kj::Exception busy(kj::Exception::Type::OVERLOADED, "f", 1, kj::str("busy"));
  EXPECT_TRUE(absl::IsResourceExhausted(ExceptionToStatus(busy, "s")));
  kj::Exception other(kj::Exception::Type::FAILED, "f", 1, kj::str("oops"));
  EXPECT_TRUE(absl::IsInternal(ExceptionToStatus(other, "s")));
}

}  // namespace
}  // namespace veil::rpc
