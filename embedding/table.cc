#include "embedding/table.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace veil::embedding {
namespace {

static_assert(sizeof(crypto_generichash_state) <= 384 && alignof(crypto_generichash_state) <= 64,
              "TableDigest::state_ must hold libsodium's BLAKE2b state");

crypto_generichash_state* State(unsigned char* storage) {
  return reinterpret_cast<crypto_generichash_state*>(storage);
}

// Checks every header field against the others and against the file size, in the order of the
// header, so that the first inconsistent field is the one named.
absl::Status ValidateHeader(const TableHeader& header, uint64_t file_bytes) {
  if (!std::equal(kTableMagic.begin(), kTableMagic.end(), header.magic)) {
    return absl::InvalidArgumentError("bad magic: not a veil table file");
  }
  if (header.version != kTableVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unsupported version ", header.version, " (this build reads version ", kTableVersion, ")"));
  }
  if (header.header_bytes != sizeof(TableHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("header_bytes is ", header.header_bytes, ", expected ", sizeof(TableHeader)));
  }
  const RowFormat format = static_cast<RowFormat>(header.format);
  if (!IsKnownRowFormat(format)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown row format ", static_cast<int>(header.format)));
  }
  if (header.dim == 0 || header.dim > kMaxDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("dim ", header.dim, " is outside [1, ", kMaxDim, "]"));
  }
  if (header.row_words != RowWords(format, header.dim)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row_words ", header.row_words, " does not match format ", RowFormatName(format),
        " with dim ", header.dim, " (expected ", RowWords(format, header.dim), ")"));
  }
  if (header.stride_words != RowStrideWords(header.row_words)) {
    return absl::InvalidArgumentError(
        absl::StrCat("stride_words ", header.stride_words, " is not row_words rounded up to ",
                     kRowAlignWords, " (expected ", RowStrideWords(header.row_words), ")"));
  }
  const int max_frac_bits = format == RowFormat::kFixed32 ? kMaxFracBits : 0;
  if (header.frac_bits > max_frac_bits) {
    return absl::InvalidArgumentError(absl::StrCat("frac_bits ", header.frac_bits,
                                                   " is outside [0, ", max_frac_bits,
                                                   "] for format ", RowFormatName(format)));
  }
  const uint64_t stride_bytes = uint64_t{header.stride_words} * sizeof(uint32_t);
  const uint64_t max_rows =
      (std::numeric_limits<uint64_t>::max() - sizeof(TableHeader)) / stride_bytes;
  if (header.rows == 0 || header.rows > max_rows) {
    return absl::InvalidArgumentError(
        absl::StrCat("rows ", header.rows, " is outside [1, ", max_rows, "]"));
  }
  if (header.data_bytes != header.rows * stride_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_bytes ", header.data_bytes,
                     " is not rows * stride_words * 4 = ", header.rows * stride_bytes));
  }
  if (std::any_of(std::begin(header.reserved), std::end(header.reserved),
                  [](uint8_t byte) { return byte != 0; })) {
    return absl::InvalidArgumentError("reserved header bytes are not zero");
  }
  if (file_bytes != sizeof(TableHeader) + header.data_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("size mismatch: the file has ", file_bytes,
                                                   " bytes, the header implies ",
                                                   sizeof(TableHeader) + header.data_bytes));
  }
  return absl::OkStatus();
}

// Closes the descriptor on every return path of Open.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  int fd_;
};

}  // namespace

TableDigest::TableDigest(const TableHeader& header) {
  // sodium_init only picks the fastest BLAKE2b implementation here (the portable one otherwise);
  // hashing needs no entropy, so its result does not matter.
  [[maybe_unused]] const int sodium_ready = sodium_init();
  crypto_generichash_init(State(state_), nullptr, 0, kTableDigestBytes);
  TableHeader zeroed = header;
  std::fill(std::begin(zeroed.digest), std::end(zeroed.digest), 0);
  Update(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(&zeroed), sizeof(zeroed)));
}

void TableDigest::Update(absl::Span<const uint8_t> bytes) {
  crypto_generichash_update(State(state_), bytes.data(), bytes.size());
}

TableDigestBytes TableDigest::Finish() {
  TableDigestBytes digest;
  crypto_generichash_final(State(state_), digest.data(), digest.size());
  return digest;
}

absl::StatusOr<std::unique_ptr<Table>> Table::Open(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open table ", path));
  FdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  const uint64_t file_bytes = static_cast<uint64_t>(st.st_size);
  if (file_bytes < sizeof(TableHeader)) {
    return absl::InvalidArgumentError(absl::StrCat("truncated file ", path, ": ", file_bytes,
                                                   " bytes, the header alone is ",
                                                   sizeof(TableHeader)));
  }
  // Read with pread, not through the mapping: the size check must come before the mapping is
  // trusted to cover the rows.
  TableHeader header;
  const ssize_t read_bytes = pread(fd, &header, sizeof(header), 0);
  if (read_bytes < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot read the header of ", path));
  }
  if (read_bytes != static_cast<ssize_t>(sizeof(header))) {
    return absl::InvalidArgumentError(absl::StrCat("truncated file ", path, " while reading"));
  }
  if (absl::Status status = ValidateHeader(header, file_bytes); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", status.message()));
  }
  void* mapping = mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapping == MAP_FAILED) return absl::ErrnoToStatus(errno, absl::StrCat("cannot map ", path));
  return std::unique_ptr<Table>(new Table(mapping, file_bytes, header));
}

Table::Table(const void* mapping, size_t mapping_bytes, const TableHeader& header)
    : mapping_(mapping),
      mapping_bytes_(mapping_bytes),
      header_(header),
      words_(reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(mapping) +
                                               sizeof(TableHeader))) {}

Table::~Table() { munmap(const_cast<void*>(mapping_), mapping_bytes_); }

TableDigestBytes Table::digest() const {
  TableDigestBytes digest;
  std::copy(std::begin(header_.digest), std::end(header_.digest), digest.begin());
  return digest;
}

std::string Table::DigestHex() const {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(header_.digest), kTableDigestBytes));
}

dpf::TableView Table::view() const {
  return dpf::TableView{.words = words_,
                        .rows = header_.rows,
                        .row_words = header_.row_words,
                        .stride_words = header_.stride_words};
}

absl::Span<const uint32_t> Table::row(uint64_t i) const {
  return absl::MakeConstSpan(words_ + i * header_.stride_words, header_.row_words);
}

absl::Status Table::DecodeRow(uint64_t i, absl::Span<float> values) const {
  if (i >= rows()) {
    return absl::InvalidArgumentError(absl::StrCat("row ", i, " is outside [0, ", rows(), ")"));
  }
  return embedding::DecodeRow(format(), frac_bits(), dim(), row(i), values);
}

absl::Status Table::Verify() const {
  TableDigest digest(header_);
  digest.Update(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(words_), header_.data_bytes));
  const TableDigestBytes actual = digest.Finish();
  if (actual != this->digest()) {
    return absl::InvalidArgumentError(
        absl::StrCat("digest mismatch: the header says ", DigestHex(), ", the contents hash to ",
                     absl::BytesToHexString(absl::string_view(
                         reinterpret_cast<const char*>(actual.data()), actual.size()))));
  }
  return absl::OkStatus();
}

}  // namespace veil::embedding
