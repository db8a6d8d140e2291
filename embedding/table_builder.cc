#include "embedding/table_builder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "embedding/table.h"

namespace veil::embedding {
namespace {

// Rows encoded per write: bounds the staging buffer (at most 4096 * 4 * stride bytes) whatever the
// table size.
constexpr uint64_t kRowsPerChunk = 4096;

// A file built under a temporary name in the destination's directory (so that rename is atomic)
// and removed unless Commit() succeeds.
class AtomicFile {
 public:
  explicit AtomicFile(const std::string& final_path)
      : final_path_(final_path), temp_path_(final_path + ".tmp.XXXXXX") {}
  ~AtomicFile() {
    if (fd_ >= 0) close(fd_);
    if (created_ && !committed_) unlink(temp_path_.c_str());
  }
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  absl::Status Create() {
    fd_ = mkstemp(temp_path_.data());
    if (fd_ < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", temp_path_));
    created_ = true;
    // mkstemp creates 0600; a table is public data that server processes of other users may map.
    if (fchmod(fd_, 0644) != 0) return absl::ErrnoToStatus(errno, "cannot chmod " + temp_path_);
    return absl::OkStatus();
  }

  absl::Status WriteAt(const void* data, size_t bytes, uint64_t offset) {
    const char* next = static_cast<const char*>(data);
    while (bytes > 0) {
      const ssize_t written = pwrite(fd_, next, bytes, static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR) continue;
        return absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", temp_path_));
      }
      next += written;
      bytes -= static_cast<size_t>(written);
      offset += static_cast<uint64_t>(written);
    }
    return absl::OkStatus();
  }

  // Flushes before the rename so that a crash cannot leave a renamed but empty table.
  absl::Status Commit() {
    if (fsync(fd_) != 0) return absl::ErrnoToStatus(errno, "cannot sync " + temp_path_);
    const int fd = fd_;
    fd_ = -1;
    if (close(fd) != 0) return absl::ErrnoToStatus(errno, "cannot close " + temp_path_);
    if (rename(temp_path_.c_str(), final_path_.c_str()) != 0) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("cannot rename ", temp_path_, " to ", final_path_));
    }
    committed_ = true;
    return absl::OkStatus();
  }

 private:
  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;
  bool created_ = false;
  bool committed_ = false;
};

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
  std::string contents;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t got = read(fd, buffer, sizeof(buffer));
    if (got < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("cannot read ", path));
    }
    if (got == 0) break;
    contents.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  return contents;
}

absl::StatusOr<std::vector<float>> ParseCsvRows(const std::string& csv_path,
                                                absl::string_view contents, uint32_t& dim) {
  std::vector<float> values;
  bool first_line = true;
  uint64_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);  // also drops the '\r' of CRLF files
    if (line.empty()) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    std::vector<float> row(fields.size());
    std::vector<bool> parsed(fields.size());
    for (size_t i = 0; i < fields.size(); ++i) parsed[i] = absl::SimpleAtof(fields[i], &row[i]);
    const bool is_header =
        first_line && std::none_of(parsed.begin(), parsed.end(), [](bool ok) { return ok; });
    first_line = false;
    if (is_header) continue;
    const auto bad = std::find(parsed.begin(), parsed.end(), false);
    if (bad != parsed.end()) {
      const size_t field = static_cast<size_t>(bad - parsed.begin());
      return absl::InvalidArgumentError(absl::StrCat(csv_path, ":", line_number, ": field ",
                                                     field + 1, " ('", fields[field],
                                                     "') is not a number"));
    }
    if (fields.size() > kMaxDim) {
      return absl::InvalidArgumentError(absl::StrCat(csv_path, ":", line_number, ": ",
                                                     fields.size(),
                                                     " values exceed the largest dim ", kMaxDim));
    }
    if (dim == 0) dim = static_cast<uint32_t>(fields.size());
    if (fields.size() != dim) {
      return absl::InvalidArgumentError(absl::StrCat(csv_path, ":", line_number, ": expected ", dim,
                                                     " values, got ", fields.size()));
    }
    values.insert(values.end(), row.begin(), row.end());
  }
  if (values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(csv_path, ": no rows"));
  }
  return values;
}

}  // namespace

absl::Status WriteTable(const std::string& out_path, RowFormat format, uint32_t dim,
                        absl::Span<const float> values, const TableOptions& options) {
  if (!IsKnownRowFormat(format)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown row format ", RowFormatName(format)));
  }
  if (dim == 0 || dim > kMaxDim) {
    return absl::InvalidArgumentError(absl::StrCat("dim ", dim, " is outside [1, ", kMaxDim, "]"));
  }
  if (values.empty() || values.size() % dim != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(values.size(), " values do not make a nonzero number of rows of dim ", dim));
  }
  const bool fixed = format == RowFormat::kFixed32;
  if (fixed && (options.frac_bits < 0 || options.frac_bits > kMaxFracBits)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frac_bits ", options.frac_bits, " is outside [0, ", kMaxFracBits, "]"));
  }

  TableHeader header = {};
  std::copy(kTableMagic.begin(), kTableMagic.end(), header.magic);
  header.version = kTableVersion;
  header.header_bytes = sizeof(TableHeader);
  header.rows = values.size() / dim;
  header.dim = dim;
  if (options.row_key && options.row_tag != RowTag::kSipHash64Shape &&
      options.row_tag != RowTag::kLinearMac61 && options.row_tag != RowTag::kSipHash64Epoch) {
    return absl::InvalidArgumentError(
        absl::StrCat("row tag kind ", static_cast<int>(options.row_tag),
                     " cannot be written (3, 4, or 2 for a table served with kind 2)"));
  }
  const RowTag tag = options.row_key ? options.row_tag : RowTag::kNone;
  const uint32_t data_words = RowWords(format, dim);
  header.row_tag = static_cast<uint8_t>(tag);
  header.row_words = data_words + TagWords(tag);
  header.stride_words = static_cast<uint32_t>(RowStrideWords(header.row_words));
  header.data_bytes = header.rows * header.stride_words * sizeof(uint32_t);
  header.epoch = options.epoch;
  header.format = static_cast<uint8_t>(format);
  header.frac_bits = fixed ? static_cast<uint8_t>(options.frac_bits) : 0;

  AtomicFile file(out_path);
  if (absl::Status status = file.Create(); !status.ok()) return status;
  TableDigest digest(header);
  uint64_t offset = sizeof(TableHeader);
  std::vector<uint32_t> chunk;
  for (uint64_t first = 0; first < header.rows; first += kRowsPerChunk) {
    const uint64_t count = std::min(kRowsPerChunk, header.rows - first);
    // Zero-filled so that the padding words are zero (they are part of the digest).
    chunk.assign(count * header.stride_words, 0u);
    for (uint64_t r = 0; r < count; ++r) {
      const uint64_t row = first + r;
      const absl::Span<uint32_t> data =
          absl::MakeSpan(chunk).subspan(r * header.stride_words, data_words);
      absl::Status status =
          EncodeRow(format, header.frac_bits, values.subspan(row * dim, dim), data);
      if (!status.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("row ", row, ": ", status.message()));
      }
      if (options.row_key) {
        const std::array<uint32_t, 2> row_tag =
            ComputeRowTag(tag, *options.row_key, header.epoch, row,
                          RowShape{format, header.frac_bits, dim}, data);
        std::copy(row_tag.begin(), row_tag.end(), data.end());
      }
    }
    const auto bytes = absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(chunk.data()),
                                           chunk.size() * sizeof(uint32_t));
    digest.Update(bytes);
    if (absl::Status status = file.WriteAt(bytes.data(), bytes.size(), offset); !status.ok()) {
      return status;
    }
    offset += bytes.size();
  }
  const TableDigestBytes digest_bytes = digest.Finish();
  std::copy(digest_bytes.begin(), digest_bytes.end(), header.digest);
  if (absl::Status status = file.WriteAt(&header, sizeof(header), 0); !status.ok()) return status;
  return file.Commit();
}

absl::Status WriteTableFromCsv(const std::string& csv_path, const std::string& out_path,
                               RowFormat format, uint32_t dim, const TableOptions& options) {
  absl::StatusOr<std::string> contents = ReadFile(csv_path);
  if (!contents.ok()) return contents.status();
  absl::StatusOr<std::vector<float>> values = ParseCsvRows(csv_path, *contents, dim);
  if (!values.ok()) return values.status();
  return WriteTable(out_path, format, dim, *values, options);
}

absl::Status WriteTableFromF32File(const std::string& f32_path, const std::string& out_path,
                                   RowFormat format, uint32_t dim, const TableOptions& options) {
  if (dim == 0) return absl::InvalidArgumentError("dim must be given for a float32 file");
  absl::StatusOr<std::string> contents = ReadFile(f32_path);
  if (!contents.ok()) return contents.status();
  const uint64_t row_bytes = uint64_t{dim} * sizeof(float);
  if (contents->empty() || contents->size() % row_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(f32_path, ": ", contents->size(),
                                                   " bytes are not a nonzero number of rows of ",
                                                   dim, " float32 values"));
  }
  std::vector<float> values(contents->size() / sizeof(float));
  std::memcpy(values.data(), contents->data(), contents->size());
  return WriteTable(out_path, format, dim, values, options);
}

}  // namespace veil::embedding
