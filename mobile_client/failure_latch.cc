#include "mobile_client/failure_latch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace veil::client {
namespace {

constexpr char kFirstLine[] = "veil: lookups stopped after an answer failed its check";

std::string ErrnoText(int error) { return std::strerror(error); }

}  // namespace

absl::Status FailureLatch::Check() const {
  if (path_.empty()) return absl::OkStatus();
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return absl::OkStatus();
  std::string recorded;
  if (fd < 0) {
    // Fail closed: a latch that cannot be read may hold a failure.
    recorded = absl::StrCat("it cannot be read: ", ErrnoText(errno));
  } else {
    char buf[2048];
    const ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    std::vector<std::string> lines =
        absl::StrSplit(absl::string_view(buf, n > 0 ? static_cast<size_t>(n) : 0), '\n');
    recorded = lines.size() >= 2 && !lines[1].empty() ? lines[1] : "no failure recorded in it";
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "lookups are stopped by the failure latch ", path_, " (", recorded,
      "): a server can make an answer fail because of what was asked, so no lookup is made "
      "while the file exists; report the failure, and remove the file once the deployment is "
      "fixed"));
}

absl::Status FailureLatch::Trip(const absl::Status& failure) const {
  if (path_.empty()) return failure;
  const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    return absl::Status(failure.code(), absl::StrCat(failure.message(), "; lookups stay stopped (",
                                                     path_, " already records a failure)"));
  }
  std::string error;
  if (fd < 0) {
    error = ErrnoText(errno);
  } else {
    const std::string text = absl::StrCat(
        kFirstLine, "\n", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()),
        " ", failure.ToString(), "\n");
    if (write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size()) ||
        fsync(fd) != 0) {
      error = ErrnoText(errno);
    }
    close(fd);
  }
  if (!error.empty()) {
    return absl::Status(failure.code(), absl::StrCat(failure.message(), "; the failure latch ",
                                                     path_, " could not be written (", error, ")"));
  }
  return absl::Status(failure.code(), absl::StrCat(failure.message(), "; lookups stop until ",
                                                   path_, " is removed (the failure latch)"));
}

}  // namespace veil::client
