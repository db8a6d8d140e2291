// libFuzzer target for table files: whatever the bytes, Table::Open returns a table or an error,
// and an opened table verifies and decodes every row without touching memory outside the file.
//
// Built only by Clang. For coverage of the library itself configure with
//   CC=clang CXX=clang++ cmake ... -DCMAKE_CXX_FLAGS=-fsanitize=fuzzer-no-link,address
// and seed the corpus with a few files from `veil-table build` (the digest and the header
// checks are hard to reach from random bytes).
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "embedding/table.h"

namespace {

// One scratch file, rewritten for every input (Table::Open reads from a path).
const std::string& ScratchPath() {
  static const std::string* path = [] {
    const char* dir = getenv("TMPDIR");
    std::string pattern = std::string(dir != nullptr ? dir : "/tmp") + "/veil_table_fuzz_XXXXXX";
    const int fd = mkstemp(pattern.data());
    if (fd < 0) abort();
    close(fd);
    return new std::string(pattern);
  }();
  return *path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = ScratchPath();
  const int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0 || write(fd, data, size) != static_cast<ssize_t>(size)) abort();
  close(fd);
  absl::StatusOr<std::unique_ptr<veil::embedding::Table>> table =
      veil::embedding::Table::Open(path);
  if (!table.ok()) return 0;
  (void)(*table)->Verify();
  std::vector<float> values((*table)->dim());
  for (uint64_t i = 0; i < (*table)->rows(); ++i) {
    if (!(*table)->DecodeRow(i, absl::MakeSpan(values)).ok()) abort();
  }
  return 0;
}
