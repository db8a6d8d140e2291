// Fuzz target for table files (embedding/table.h). The first byte chooses whether the target first
// rewrites the header's digest to match the file (odd) or leaves the bytes as they are (even), so
// that mutations reach both the header and row checks and the digest check. The rest is the file.
// Invariants: Open and Load fail with a documented code (INVALID_ARGUMENT; DATA_LOSS only for a
// file that shrinks, which this one never does) and agree: Open succeeds exactly when an
// unverified Load does, Verify succeeds exactly when a verifying Load does (always, with the
// digest rewritten), both give the same header and rows, and every row decodes.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <vector>

#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {
namespace {

using embedding::RowFormat;
using embedding::Table;

std::vector<uint8_t> Seed(RowFormat format, uint32_t dim, int rows, bool tagged, uint8_t mode) {
  std::vector<float> values(static_cast<size_t>(rows) * dim);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 13) * 0.25f - 1.f;
  embedding::TableOptions options;
  options.epoch = 3;
  if (tagged) options.row_key = embedding::RowKey{1, 2, 3};
  const std::string& path = WriteScratchFile({});
  Check(embedding::WriteTable(path, format, dim, values, options).ok(), "WriteTable failed");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes = {mode};
  bytes.insert(bytes.end(), std::istreambuf_iterator<char>(in), {});
  return bytes;
}

bool Expected(const absl::Status& status) {
  return status.ok() || status.code() == absl::StatusCode::kInvalidArgument;
}

}  // namespace

std::vector<std::vector<uint8_t>> Seeds() {
  return {Seed(RowFormat::kFp32, 3, 4, false, 1), Seed(RowFormat::kFp16, 5, 2, true, 1),
          Seed(RowFormat::kInt8RowWise, 6, 3, false, 1), Seed(RowFormat::kFixed32, 2, 5, true, 1),
          Seed(RowFormat::kFp32, 1, 1, true, 0)};
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using veil::embedding::Table;
  using veil::embedding::TableHeader;
  using veil::fuzz::Check;
  using veil::fuzz::Expected;
  if (size < 1) return 0;
  std::vector<uint8_t> bytes(data + 1, data + size);
  const bool fix_digest = (data[0] & 1) != 0;
  if (fix_digest && bytes.size() >= sizeof(TableHeader)) {
    TableHeader header;
    std::memcpy(&header, bytes.data(), sizeof(header));
    const auto digest =
        veil::embedding::DigestTable(header, absl::MakeConstSpan(bytes).subspan(sizeof(header)), 1);
    std::memcpy(bytes.data() + offsetof(TableHeader, digest), digest.data(), digest.size());
  }
  const std::string& path = veil::fuzz::WriteScratchFile(bytes);
  auto opened = Table::Open(path);
  auto loaded = Table::Load(path, {.verify = false, .threads = 1});
  Check(Expected(opened.status()) && Expected(loaded.status()), "Open or Load: undocumented code");
  Check(opened.ok() == loaded.ok(), "Open and an unverified Load disagree");
  if (!opened.ok()) return 0;
  const Table& a = **opened;
  const Table& b = **loaded;
  const absl::Status verified = a.Verify();
  Check(Expected(verified), "Verify: undocumented code");
  Check(verified.ok() || !fix_digest, "Verify refused a table whose digest was rewritten");
  auto verified_load = Table::Load(path, {.verify = true, .threads = 1});
  Check(verified_load.ok() == verified.ok(), "Verify and a verifying Load disagree");
  Check(std::memcmp(&a.header(), &b.header(), sizeof(TableHeader)) == 0, "headers differ");
  std::vector<float> va(a.dim()), vb(b.dim());
  for (uint64_t i = 0; i < a.rows(); ++i) {
    Check(std::equal(a.row(i).begin(), a.row(i).end(), b.row(i).begin()), "rows differ");
    Check(a.DecodeRow(i, absl::MakeSpan(va)).ok(), "DecodeRow failed on an opened table");
    Check(b.DecodeRow(i, absl::MakeSpan(vb)).ok(), "DecodeRow failed on a loaded table");
    Check(std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0, "decoded rows differ");
  }
  return 0;
}
