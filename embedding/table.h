// The embedding table file served by PIR: a fixed 128-byte header, then `rows` rows of
// `row_words` 32-bit words, each row padded to `stride_words` (a multiple of 16 words) so that
// every row of the memory-mapped file starts 64-byte aligned.
//
// All integers are little-endian. The digest names the table version, so two servers that report
// the same digest serve the same bytes under the same interpretation. It is a two-level BLAKE2b-256
// (version 2): the row region (padding included) is cut into chunks of kDigestChunkBytes, each
// chunk is hashed, and the digest is the hash of the header (digest field zeroed) followed by the
// chunk hashes in order. The chunks hash in parallel, so verifying a table at load runs at the
// speed of reading it.
//
// Rows may carry authentication tags (embedding/row_tag.h) after their data words: row_words =
// RowWords(format, dim) + TagWords(row_tag).
#ifndef VEIL_EMBEDDING_TABLE_H_
#define VEIL_EMBEDDING_TABLE_H_

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "dpf/eval.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"

namespace veil::embedding {

static_assert(std::endian::native == std::endian::little,
              "table files are little-endian and mapped in place");

inline constexpr std::array<char, 8> kTableMagic = {'V', 'E', 'I', 'L', 'T', 'B', 'L', '\0'};
inline constexpr uint32_t kTableVersion = 2;
inline constexpr uint64_t kDigestChunkBytes = uint64_t{1} << 20;
inline constexpr size_t kTableDigestBytes = 32;

struct TableHeader {
  char magic[8];
  uint32_t version;
  // sizeof(TableHeader); the rows start right after it.
  uint32_t header_bytes;
  uint64_t rows;
  // rows * stride_words * 4: stated so that a size mismatch is reported as such, not as a wrong
  // row count.
  uint64_t data_bytes;
  // Bumped by the operator on every content change; clients see it next to the digest.
  uint64_t epoch;
  uint32_t dim;
  uint32_t row_words;
  uint32_t stride_words;
  uint8_t format;  // a RowFormat
  // Fractional bits of kFixed32 (value = q / 2^frac_bits); 0 for every other format, whose scale
  // is either implicit (fp32, fp16) or stored in each row (int8).
  uint8_t frac_bits;
  uint8_t row_tag;       // an embedding::RowTag
  uint8_t reserved[41];  // zero
  uint8_t digest[kTableDigestBytes];
};

static_assert(sizeof(TableHeader) == 128, "the header is part of the file format");
static_assert(sizeof(TableHeader) % 64 == 0, "rows must start 64-byte aligned");
static_assert(offsetof(TableHeader, version) == 8);
static_assert(offsetof(TableHeader, header_bytes) == 12);
static_assert(offsetof(TableHeader, rows) == 16);
static_assert(offsetof(TableHeader, data_bytes) == 24);
static_assert(offsetof(TableHeader, epoch) == 32);
static_assert(offsetof(TableHeader, dim) == 40);
static_assert(offsetof(TableHeader, row_words) == 44);
static_assert(offsetof(TableHeader, stride_words) == 48);
static_assert(offsetof(TableHeader, format) == 52);
static_assert(offsetof(TableHeader, frac_bits) == 53);
static_assert(offsetof(TableHeader, row_tag) == 54);
static_assert(offsetof(TableHeader, reserved) == 55);
static_assert(offsetof(TableHeader, digest) == 96);

using TableDigestBytes = std::array<uint8_t, kTableDigestBytes>;

// Incremental table digest for a writer that streams the row region in order.
class TableDigest {
 public:
  // Starts the digest with `header`, its digest field taken as zero.
  explicit TableDigest(const TableHeader& header);
  ~TableDigest();
  TableDigest(const TableDigest&) = delete;
  TableDigest& operator=(const TableDigest&) = delete;

  void Update(absl::Span<const uint8_t> bytes);
  TableDigestBytes Finish();

 private:
  struct State;  // libsodium's BLAKE2b states, kept out of this header
  std::unique_ptr<State> state_;
};

// The digest of `header` and its row region `rows`, the chunks hashed on `threads` threads (0: the
// machine's). Equal to what TableDigest gives for the same bytes.
TableDigestBytes DigestTable(const TableHeader& header, absl::Span<const uint8_t> rows,
                             int threads = 0);

// A table file, mapped read-only (Open) or loaded into memory the process owns (Load). Both
// validate the header against the file size, so every row() and view() stays inside the rows.
class Table {
 public:
  // Maps the table at `path`; the contents are checked against the digest only by Verify(). For
  // tools that read a table once; a server uses Load (a mapped file that is replaced, changed or
  // truncated under a reader changes its rows or kills it with SIGBUS).
  // Returns the errno-derived status (NOT_FOUND, PERMISSION_DENIED, ...) if the file cannot be
  // opened or mapped, INVALID_ARGUMENT if it is not a regular file (a FIFO or a device is refused
  // without blocking), and INVALID_ARGUMENT naming the field if the file is truncated, has the
  // wrong magic, version or header size, an unknown format or row tag, a dim / row_words /
  // stride_words / frac_bits / rows / data_bytes that are out of range or inconsistent, nonzero
  // reserved bytes, or a size other than header + data_bytes.
  static absl::StatusOr<std::unique_ptr<Table>> Open(const std::string& path);

  struct LoadOptions {
    bool verify = true;  // recompute the digest while reading, and refuse a mismatch
    int threads = 0;     // hashing threads; 0: the machine's
  };
  // Reads the table at `path` into memory of its own (what later happens to the file does not
  // change or fault the loaded rows), verifying the digest as it reads. Returns what Open returns,
  // INVALID_ARGUMENT ("digest mismatch ...") if the contents do not hash to the header's digest,
  // and DATA_LOSS if the file shrinks while it is read.
  static absl::StatusOr<std::unique_ptr<Table>> Load(const std::string& path,
                                                     const LoadOptions& options);

  ~Table();
  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const TableHeader& header() const { return header_; }
  uint64_t rows() const { return header_.rows; }
  uint32_t dim() const { return header_.dim; }
  // Words a share carries per row: the data words, then the tag words.
  uint32_t row_words() const { return header_.row_words; }
  uint32_t data_words() const { return header_.row_words - TagWords(row_tag()); }
  RowTag row_tag() const { return static_cast<RowTag>(header_.row_tag); }
  uint64_t stride_words() const { return header_.stride_words; }
  RowFormat format() const { return static_cast<RowFormat>(header_.format); }
  int frac_bits() const { return header_.frac_bits; }
  uint64_t epoch() const { return header_.epoch; }
  TableDigestBytes digest() const;
  std::string DigestHex() const;

  // The rows as the PIR backends read them (stride = stride_words), valid while this Table lives.
  dpf::TableView view() const;

  // Row i's row_words words (tag included, padding excluded). Requires i < rows().
  absl::Span<const uint32_t> row(uint64_t i) const;

  // Dequantizes row i into values (values.size() == dim()).
  // Returns INVALID_ARGUMENT if i >= rows() or values has the wrong size.
  absl::Status DecodeRow(uint64_t i, absl::Span<float> values) const;

  // Recomputes the digest over the whole file.
  // Returns INVALID_ARGUMENT ("digest mismatch ...") if it differs from the header's.
  absl::Status Verify() const;

 private:
  Table(const void* mapping, size_t mapping_bytes, const TableHeader& header);

  const void* mapping_;
  size_t mapping_bytes_;
  TableHeader header_;
  const uint32_t* words_;
};

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_TABLE_H_
