// Row authentication tags: "never a wrong row" against a server that answers with a wrong share.
//
// A DPF share reveals nothing, so a client cannot tell a wrong share from a right one: one flipped
// bit in a server's copy of the table, or a server that adds anything to its share, changes every
// row the client reconstructs. So a table may carry, in each row, a tag = SipHash-2-4 (64 bits)
// under a key the servers never see, over the table's epoch, the row's physical index and its data
// words. The tag words are part of the row the servers answer with; the client holds the key,
// recomputes the tag of every reconstructed row for the epoch the servers say they answered from,
// and refuses a row whose tag differs. Tags of kind 3 also cover how the words are read (format,
// fractional bits, dim): otherwise a single server (the LWE protocols) could relabel a fixed32
// table's fractional bits, or fp32 as fixed32, and the client would return other values for rows
// whose words and tags are right. Forging a tag for another row, other contents or another
// epoch without the key succeeds with probability 2^-64 per attempt, and every failed attempt is
// reported. Binding the epoch means that a server cannot pass an older version's rows off as a
// newer version's (what a client's min_epoch relies on): a new epoch's table is built with the
// same key and new tags. Sums of rows add their SipHash tags too, which proves nothing: a dpf2
// client holding a key fetches a pooled bag's rows one by one (mobile_client/client.h).
//
// Tags of kind 4 are a linear MAC instead, so that a pooled sum over the integers (bfv-bag's
// sum_r w_r T[r]) carries a checkable tag: T = (sum_j k_j x_j + s_index) mod p with p = 2^61 - 1,
// x_j the data words read as int32, k_j and s_index pseudorandom mod p (SipHash-2-4 under the key
// of the kind's domain byte, the epoch, the shape and j or the index), stored as two words
// T mod 2^31 and T >> 31 (each < 2^31, so they sum with the data as integers). The pads s hide
// k from whoever sees the table. A sum of rows with weights w is accepted iff its tag columns
// (L, H) satisfy L + 2^31 H = sum_j k_j S_j + sum_r w_r s_r (mod p). Any change of the sums S by
// a nonzero vector smaller than p in every entry (bfv-bag's sums are below 2^57, a single row's
// words differ by less than 2^32) passes with probability 1/p = 2^-61 per attempt, whatever the
// server adds to the tag columns; a wrong epoch, row or shape changes the pads and fails the same
// way. The same kind checks single rows (dpf2, LWE) like kind 3. Build each epoch once: two
// different tables of one epoch under one key would reveal sums of the k_j (veil table build
// keeps a list, tools/table_cli.cc).
#ifndef VEIL_EMBEDDING_ROW_TAG_H_
#define VEIL_EMBEDDING_ROW_TAG_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/row_format.h"

namespace veil::embedding {

// How a table's rows are tagged (the header's row_tag byte).
enum class RowTag : uint8_t {
  kNone = 0,
  // Two words after the data words: SipHash-2-4(key, le64(index) || data). Tables built before
  // epochs were bound; still read and checked, without the epoch.
  kSipHash64 = 1,
  // Two words after the data words: SipHash-2-4(key, le64(epoch) || le64(index) || data). What
  // veil table build wrote before kind 3; still read and checked.
  kSipHash64Epoch = 2,
  // Two words after the data words: SipHash-2-4(key, le64(epoch) || le64(index) || u8(format) ||
  // u8(frac_bits) || le32(dim) || data). What veil table build writes.
  kSipHash64Shape = 3,
  // Two words after the data words: the linear MAC above, over (epoch, index, shape, data).
  // What veil table build --row-tag-kind=4 writes, for tables served pooled by bfv-bag.
  kLinearMac61 = 4,
};

// How a row's data words are read: what kSipHash64Shape binds besides the words.
struct RowShape {
  RowFormat format = RowFormat::kFp32;
  uint8_t frac_bits = 0;
  uint32_t dim = 0;
};

using RowKey = std::array<uint8_t, 16>;

// Words a tag adds to each row: 0 or 2. Unknown kinds have none (the header check refuses them).
uint32_t TagWords(RowTag tag);
bool IsKnownRowTag(uint8_t tag);
// "none", "siphash64 (index, data)", "siphash64 (epoch, index, data)",
// "siphash64 (epoch, index, shape, data)", "linear mac61 (epoch, index, shape, data)"; "unknown"
// otherwise.
const char* RowTagName(RowTag tag);

// The tag words of kind `kind` (not kNone) of physical row `index` of the table version `epoch`
// whose data words, read as `shape` says, are `data`. kSipHash64 ignores the epoch, and kinds 1
// and 2 the shape.
std::array<uint32_t, 2> ComputeRowTag(RowTag kind, const RowKey& key, uint64_t epoch,
                                      uint64_t index, const RowShape& shape,
                                      absl::Span<const uint32_t> data);

// Whether `tag` is the tag of kind `kind` of (epoch, index, shape, data); compares in constant
// time.
bool RowTagMatches(RowTag kind, const RowKey& key, uint64_t epoch, uint64_t index,
                   const RowShape& shape, absl::Span<const uint32_t> data,
                   absl::Span<const uint32_t> tag);

// Whether `sums` is a pooled row of a kLinearMac61 table of version `epoch`: the integer sums
// sum_r weights[i] * row(indices[i]) of every column, its data words (read as int32) and then its
// two tag words (data words + 2 entries; rows may repeat). False for sums of another length or
// indices and weights of different lengths. Compares in constant time; the sums and weights are
// not used in branches or addresses.
bool PooledRowTagMatches(const RowKey& key, uint64_t epoch, const RowShape& shape,
                         absl::Span<const uint64_t> indices, absl::Span<const int64_t> weights,
                         absl::Span<const int64_t> sums);

// A fresh key from libsodium's CSPRNG.
RowKey NewRowKey();

// Key files: the 16 key bytes as 32 hex digits and a newline. WriteRowKeyFile creates the file
// with mode 0600 (replacing an older one). ReadRowKeyFile returns the file's errno-derived status
// (NOT_FOUND, PERMISSION_DENIED, ...) or INVALID_ARGUMENT if it does not hold a key.
absl::Status WriteRowKeyFile(const std::string& path, const RowKey& key);
absl::StatusOr<RowKey> ReadRowKeyFile(const std::string& path);

}  // namespace veil::embedding

#endif  // VEIL_EMBEDDING_ROW_TAG_H_
