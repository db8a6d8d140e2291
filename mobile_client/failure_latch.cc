#include "mobile_client/failure_latch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace veil::client {
namespace {

constexpr char kFirstLine[] = "veil: lookups stopped after an answer failed its check";

std::string ErrnoText(int error) { return std::strerror(error); }

// Paths shared by the process's threads.
struct PathSet {
  absl::Mutex mu;
  absl::flat_hash_set<std::string> paths ABSL_GUARDED_BY(mu);
};
// Latches this process tripped but could not write: they stay stopped until the process ends.
PathSet& UnrecordedLatches() {
  static PathSet* unrecorded = new PathSet;
  return *unrecorded;
}

std::string Folder(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// 0 if a file can be made in `folder`, else an errno: an unnamed file (O_TMPFILE, nothing left
// behind), or where the file system has none a named one, removed at once. Folders found
// writable are remembered for the process, so lookups do not each make a file.
int ProbeFolder(const std::string& folder) {
  static PathSet* const writable = new PathSet;
  {
    absl::MutexLock lock(&writable->mu);
    if (writable->paths.contains(folder)) return 0;
  }
  int fd = open(folder.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR)) {
    std::string probe = folder + "/.veil-latch-probe-XXXXXX";
    fd = mkostemp(probe.data(), O_CLOEXEC);
    if (fd >= 0) unlink(probe.c_str());
  }
  if (fd < 0) return errno;
  close(fd);
  absl::MutexLock lock(&writable->mu);
  writable->paths.insert(folder);
  return 0;
}

// Writes all of `text` to fd, through short writes and interruptions; 0 or an errno.
int WriteAll(int fd, const std::string& text) {
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

absl::Status Stopped(const std::string& path, const std::string& recorded) {
  return absl::FailedPreconditionError(absl::StrCat(
      "lookups are stopped by the failure latch ", path, " (", recorded,
      "): a server can make an answer fail because of what was asked, so no lookup is made "
      "while the file exists; report the failure, and remove the file once the deployment is "
      "fixed"));
}

}  // namespace

absl::Status FailureLatch::Check() const {
  if (path_.empty()) return absl::OkStatus();
  {
    PathSet& u = UnrecordedLatches();
    absl::MutexLock lock(&u.mu);
    if (u.paths.contains(path_)) {
      return Stopped(path_, "an answer failed in this process and the file could not be written");
    }
  }
  // Not following a link, and not waiting on a FIFO: whatever is at the path holds a failure.
  const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0 && errno == ENOENT) {
    // A latch that could never be written would stop nothing after a restart: its folder must
    // exist and take new files.
    const std::string folder = Folder(path_);
    struct stat info;
    if (stat(folder.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("the failure latch ", path_, " is in no folder that exists"));
    }
    if (const int error = ProbeFolder(folder); error != 0) {
      return absl::InvalidArgumentError(absl::StrCat("the failure latch ", path_,
                                                     " could not be written in its folder (",
                                                     ErrnoText(error), ")"));
    }
    return absl::OkStatus();
  }
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
  return Stopped(path_, recorded);
}

absl::Status FailureLatch::Trip(const absl::Status& failure) const {
  if (path_.empty()) return failure;
  // O_EXCL creates only where nothing is, a dangling link included.
  const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == EEXIST) {
    return absl::Status(failure.code(), absl::StrCat(failure.message(), "; lookups stay stopped (",
                                                     path_, " already records a failure)"));
  }
  int error = fd < 0 ? errno : 0;
  if (fd >= 0) {
    const std::string text = absl::StrCat(
        kFirstLine, "\n", absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone()),
        " ", failure.ToString(), "\n");
    error = WriteAll(fd, text);
    if (error == 0 && fsync(fd) != 0) error = errno;
    close(fd);
    // The new file's name is durable once its folder is.
    const int folder = open(Folder(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder >= 0) {
      fsync(folder);
      close(folder);
    }
  }
  if (error != 0) {
    PathSet& u = UnrecordedLatches();
    absl::MutexLock lock(&u.mu);
    u.paths.insert(path_);
    return absl::Status(
        failure.code(),
        absl::StrCat(failure.message(), "; the failure latch ", path_, " could not be written (",
                     ErrnoText(error), "): lookups stop in this process only"));
  }
  return absl::Status(failure.code(), absl::StrCat(failure.message(), "; lookups stop until ",
                                                   path_, " is removed (the failure latch)"));
}

}  // namespace veil::client
