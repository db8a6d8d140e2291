#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/str_format.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

// Writes Seeds() to $VEIL_FUZZ_WRITE_SEEDS and exits, if it is set.
void MaybeWriteSeeds() {
  const char* dir = getenv("VEIL_FUZZ_WRITE_SEEDS");
  if (dir == nullptr) return;
  const std::vector<std::vector<uint8_t>> seeds = Seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    const std::string path = absl::StrFormat("%s/seed-%02d", dir, i);
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(seeds[i].data()),
              static_cast<std::streamsize>(seeds[i].size()));
    Check(out.good(), "cannot write a seed file");
  }
  fprintf(stderr, "wrote %zu seeds to %s\n", seeds.size(), dir);
  exit(0);
}

}  // namespace

const std::string& WriteScratchFile(absl::Span<const uint8_t> bytes) {
  static const std::string* path = [] {
    // tmpfs where there is one: on ext4, truncating and rewriting a file flushes it to disk on
    // close, which made file targets a hundred times slower.
    const char* dir = getenv("TMPDIR");
    if (access("/dev/shm", W_OK) == 0) dir = "/dev/shm";
    std::string pattern = std::string(dir != nullptr ? dir : "/tmp") + "/veil_fuzz_XXXXXX";
    const int fd = mkstemp(pattern.data());
    Check(fd >= 0, "mkstemp failed");
    close(fd);
    static const std::string* made = new std::string(pattern);
    atexit([] { unlink(made->c_str()); });
    return made;
  }();
  const int fd = open(path->c_str(), O_WRONLY | O_TRUNC);
  Check(fd >= 0, "cannot open the scratch file");
  Check(
      bytes.empty() || write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()),
      "cannot write the scratch file");
  close(fd);
  return *path;
}

void Check(bool ok, const char* what) {
  if (ok) return;
  fprintf(stderr, "fuzz invariant broken: %s\n", what);
  abort();
}

}  // namespace veil::fuzz

// libFuzzer calls it once before fuzzing; the replay driver calls it too.
extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  veil::fuzz::MaybeWriteSeeds();
  return 0;
}
