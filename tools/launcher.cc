#include "tools/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/process_memory.h"

namespace veil::tools {
namespace {

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return absl::StrCat("wait status ", status);
}

}  // namespace

std::string ServerBinaryNextToSelf() {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return "veil-server";
  std::string self(path, static_cast<size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "veil-server";
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const ServerProcessOptions& options) {
  std::vector<std::string> args = {
      options.binary,
      absl::StrCat("--protocol=", options.protocol),
      absl::StrCat("--table=", options.table_path),
      absl::StrCat("--listen=", options.listen),
      absl::StrCat("--backend=", options.backend),
      absl::StrCat("--threads=", options.threads),
  };
  if (options.protocol == "dpf2") args.push_back(absl::StrCat("--party=", options.party));
  if (!options.tls_cert_path.empty() || !options.tls_key_path.empty()) {
    args.push_back(absl::StrCat("--tls-cert=", options.tls_cert_path));
    args.push_back(absl::StrCat("--tls-key=", options.tls_key_path));
  }
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  int log_fd = -1;
  if (!options.log_path.empty()) {
    log_fd = open(options.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
      close(out[0]);
      close(out[1]);
      return absl::InternalError(
          absl::StrCat("cannot open ", options.log_path, ": ", std::strerror(errno)));
    }
  }
  const pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(out[0]);
    close(out[1]);
    if (log_fd >= 0) close(log_fd);
    return absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec. Dies with the launching thread (and if the
    // launcher is already gone).
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(127);
    dup2(out[1], STDOUT_FILENO);
    if (log_fd >= 0) dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  if (log_fd >= 0) close(log_fd);
  auto process = std::unique_ptr<ServerProcess>(new ServerProcess(pid, 0));

  // Read the port line.
  std::string line;
  absl::Time deadline = absl::Now() + options.start_timeout;
  while (line.find('\n') == std::string::npos) {
    int timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (timeout_ms <= 0) break;
    pollfd p{out[0], POLLIN, 0};
    int r = poll(&p, 1, timeout_ms);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    char buf[64];
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the server closed stdout: it exited
    line.append(buf, static_cast<size_t>(n));
  }
  close(out[0]);
  int port = 0;
  if (line.find('\n') == std::string::npos ||
      !absl::SimpleAtoi(line.substr(0, line.find('\n')), &port) || port <= 0) {
    int status = process->WaitFor(absl::Milliseconds(200));
    std::string why = status == -1 ? "did not print its port in time" : DescribeWaitStatus(status);
    if (status == -1) process->Kill();
    return absl::UnavailableError(absl::StrCat(
        "veil-server (", options.binary, ", ", options.protocol,
        options.protocol == "dpf2" ? absl::StrCat(" party ", options.party) : "", ") ", why));
  }
  process->port_ = port;
  return process;
}

ServerProcess::~ServerProcess() {
  if (!reaped_) Stop().IgnoreError();
}

std::string ServerProcess::address() const { return absl::StrCat("127.0.0.1:", port_); }

int ServerProcess::WaitFor(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      reaped_ = true;
      return status;
    }
    if (r < 0 && errno != EINTR) {
      reaped_ = true;
      return 0;
    }
    if (absl::Now() >= deadline) return -1;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

uint64_t ServerProcess::ResidentKb() const { return server::ResidentKb(pid_); }

absl::Status ServerProcess::Stop(absl::Duration timeout) {
  if (reaped_) return absl::OkStatus();
  kill(pid_, SIGTERM);
  int status = WaitFor(timeout);
  if (status == -1) {
    Kill();
    return absl::InternalError(absl::StrCat("veil-server pid ", pid_, " ignored SIGTERM for ",
                                            absl::FormatDuration(timeout), "; killed"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat("veil-server pid ", pid_, " ", DescribeWaitStatus(status)));
  }
  return absl::OkStatus();
}

absl::Status ServerProcess::RollTable(const std::string& served_path,
                                      const std::string& next_table) {
  if (reaped_) {
    return absl::FailedPreconditionError(absl::StrCat("veil-server pid ", pid_, " has exited"));
  }
  const std::string staged = served_path + ".rolling";
  std::error_code error;
  std::filesystem::copy_file(next_table, staged, std::filesystem::copy_options::overwrite_existing,
                             error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot copy ", next_table, " to ", staged, ": ", error.message()));
  }
  std::filesystem::rename(staged, served_path, error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot rename ", staged, " to ", served_path, ": ", error.message()));
  }
  kill(pid_, SIGHUP);
  return absl::OkStatus();
}

void ServerProcess::Kill() {
  if (reaped_) return;
  kill(pid_, SIGKILL);
  WaitFor(absl::Seconds(10));
}

}  // namespace veil::tools
