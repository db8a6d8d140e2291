// Table suites:
//   table-load  a table of --rows rows of --row-bytes bytes, loaded the way veil-server loads it
//               (Table::Load: into memory of its own, the digest verified while reading), against
//               reading the same file once, both cold (the file evicted from the page cache with
//               posix_fadvise) and warm. ratio = read seconds / load seconds (1: verifying is
//               free).
//   row-tags    what a row's authentication tag costs a client: SipHash-2-4 over one row of
//               --row-bytes bytes (microseconds per row), and the bytes it adds to a row.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/suite.h"
#include "embedding/row_tag.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"

namespace veil::bench {
namespace {

double Seconds(const std::function<absl::Status()>& run, absl::Status& status) {
  const auto start = std::chrono::steady_clock::now();
  status = run();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

absl::Status Evict(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return absl::OkStatus();
}

absl::Status ReadOnce(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::ErrnoToStatus(errno, "open " + path);
  std::vector<char> buffer(8 << 20);
  while (read(fd, buffer.data(), buffer.size()) > 0) {
  }
  close(fd);
  return absl::OkStatus();
}

#define RETURN_IF_BENCH_ERROR(expr)         \
  do {                                      \
    if (absl::Status s = (expr); !s.ok()) { \
      std::filesystem::remove(path);        \
      return s;                             \
    }                                       \
  } while (0)

absl::Status TableLoad(const Flags& flags) {
  const uint64_t rows = flags.Int("rows", uint64_t{1} << 24);
  const uint32_t dim = static_cast<uint32_t>(flags.Int("row-bytes", 64) / 4);
  const int threads = static_cast<int>(flags.Int("threads", 0));
  const std::string dir = flags.Str("dir", "/tmp");
  if (rows == 0 || dim == 0) return absl::InvalidArgumentError("--rows and --row-bytes > 0");
  const std::string path = absl::StrCat(dir, "/veil-table-load-", getpid(), ".veil");
  std::cerr << "table-load: writing " << rows << " rows of " << dim * 4 << " B to " << path << "\n";
  {
    std::vector<float> values(rows * dim);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 4099) - 2048;
    if (absl::Status s = embedding::WriteTable(path, embedding::RowFormat::kFp32, dim, values, {});
        !s.ok()) {
      return s;
    }
  }
  const double gb = std::filesystem::file_size(path) / 1e9;
  absl::Status status;
  JsonLine line("table-load");
  line.Add("rows", rows).Add("row_bytes", int64_t{dim} * 4).Add("gb", gb);
  for (const bool cold : {true, false}) {
    if (cold) RETURN_IF_BENCH_ERROR(Evict(path));
    const double read_s = Seconds([&] { return ReadOnce(path); }, status);
    RETURN_IF_BENCH_ERROR(status);
    if (cold) RETURN_IF_BENCH_ERROR(Evict(path));
    const double load_s = Seconds(
        [&] { return embedding::Table::Load(path, {.verify = true, .threads = threads}).status(); },
        status);
    RETURN_IF_BENCH_ERROR(status);
    const std::string prefix = cold ? "cold_" : "warm_";
    line.Add(prefix + "read_s", read_s)
        .Add(prefix + "read_gbps", gb / read_s)
        .Add(prefix + "load_s", load_s)
        .Add(prefix + "load_s_per_gb", load_s / gb)
        .Add(prefix + "ratio", read_s / load_s);
  }
  std::filesystem::remove(path);
  line.Emit();
  return absl::OkStatus();
}

absl::Status RowTags(const Flags& flags) {
  const uint32_t words = static_cast<uint32_t>(flags.Int("row-bytes", 64) / 4);
  const int reps = static_cast<int>(flags.Int("reps", 200000));
  std::vector<uint32_t> row(words, 0x12345678u);
  const embedding::RowKey key = embedding::NewRowKey();
  uint64_t sink = 0;
  const double s = MedianSeconds([&] {
    for (int i = 0; i < reps; ++i)
      sink += embedding::ComputeRowTag(embedding::RowTag::kSipHash64Shape, key, 7, i,
                                       {embedding::RowFormat::kFp32, 0, words}, row)[0];
  });
  JsonLine("row-tags")
      .Add("row_bytes", int64_t{words} * 4)
      .Add("tag_bytes", int64_t{8})
      .Add("us_per_row", s / reps * 1e6)
      .Add("sink", static_cast<int64_t>(sink & 1))
      .Emit();
  return absl::OkStatus();
}

SuiteRegistration table_load(
    "table-load",
    "--rows --row-bytes [--threads=0 --dir=/tmp]: load a table as veil-server does (digest "
    "verified while read) against reading it once, cold and warm; seconds, s per GB, and "
    "ratio = read seconds / load seconds",
    TableLoad);
SuiteRegistration row_tags("row-tags",
                           "--row-bytes [--reps]: microseconds a client spends checking one "
                           "row's authentication tag, and the bytes a tag adds",
                           RowTags);

}  // namespace
}  // namespace veil::bench
