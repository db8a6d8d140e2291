#include "embedding/row_tag.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace veil::embedding {

static_assert(crypto_shorthash_siphash24_KEYBYTES == sizeof(RowKey));
static_assert(crypto_shorthash_siphash24_BYTES == 8);

namespace {

// The linear MAC's field: p = 2^61 - 1.
constexpr uint64_t kP = (uint64_t{1} << 61) - 1;

// x mod p for x < 2^124, without branches (2^61 = 1 mod p).
uint64_t Reduce(unsigned __int128 x) {
  uint64_t r = static_cast<uint64_t>(x & kP) + static_cast<uint64_t>(x >> 61);  // < 2^64
  r = (r & kP) + (r >> 61);                                                     // < 2p
  const uint64_t over = static_cast<uint64_t>(-static_cast<int64_t>(r >= kP));
  return r - (kP & over);
}

// v mod p for any int64 v (8p > 2^63 makes the sum nonnegative).
uint64_t ModP(int64_t v) { return Reduce(static_cast<__int128>(v) + (__int128{kP} << 3)); }

// The MAC's pseudorandom values: SipHash-2-4 under the key of (domain, epoch, shape, n), mod p.
// Domain 1: k_n, the weight of data word n; domain 2: s_n, the pad of row n.
uint64_t MacValue(const RowKey& key, uint8_t domain, uint64_t epoch, const RowShape& shape,
                  uint64_t n) {
  uint8_t message[23];
  size_t at = 0;
  const auto put = [&](uint64_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) message[at++] = static_cast<uint8_t>(v >> (8 * b));
  };
  put(domain, 1);
  put(epoch, 8);
  put(static_cast<uint8_t>(shape.format), 1);
  put(shape.frac_bits, 1);
  put(shape.dim, 4);
  put(n, 8);
  uint8_t out[8];
  crypto_shorthash_siphash24(out, message, sizeof(message), key.data());
  sodium_memzero(message, sizeof(message));  // a client's row index
  uint64_t v = 0;
  for (int b = 7; b >= 0; --b) v = (v << 8) | out[b];
  sodium_memzero(out, sizeof(out));
  return Reduce(v);
}

// sum_j k_j v_j mod p over the data words' values (mod p).
template <typename ValueModP>
uint64_t MacOfData(const RowKey& key, uint64_t epoch, const RowShape& shape, size_t words,
                   ValueModP value) {
  uint64_t acc = 0;
  for (size_t j = 0; j < words; ++j) {
    acc =
        Reduce(acc + static_cast<unsigned __int128>(MacValue(key, 1, epoch, shape, j)) * value(j));
  }
  return acc;
}

}  // namespace

uint32_t TagWords(RowTag tag) {
  return tag == RowTag::kSipHash64 || tag == RowTag::kSipHash64Epoch ||
                 tag == RowTag::kSipHash64Shape || tag == RowTag::kLinearMac61
             ? 2
             : 0;
}

bool IsKnownRowTag(uint8_t tag) {
  return tag == static_cast<uint8_t>(RowTag::kNone) ||
         tag == static_cast<uint8_t>(RowTag::kSipHash64) ||
         tag == static_cast<uint8_t>(RowTag::kSipHash64Epoch) ||
         tag == static_cast<uint8_t>(RowTag::kSipHash64Shape) ||
         tag == static_cast<uint8_t>(RowTag::kLinearMac61);
}

const char* RowTagName(RowTag tag) {
  switch (tag) {
    case RowTag::kNone:
      return "none";
    case RowTag::kSipHash64:
      return "siphash64 (index, data)";
    case RowTag::kSipHash64Epoch:
      return "siphash64 (epoch, index, data)";
    case RowTag::kSipHash64Shape:
      return "siphash64 (epoch, index, shape, data)";
    case RowTag::kLinearMac61:
      return "linear mac61 (epoch, index, shape, data)";
  }
  return "unknown";
}

std::array<uint32_t, 2> ComputeRowTag(RowTag kind, const RowKey& key, uint64_t epoch,
                                      uint64_t index, const RowShape& shape,
                                      absl::Span<const uint32_t> data) {
  if (kind == RowTag::kLinearMac61) {
    const uint64_t mac =
        Reduce(MacOfData(key, epoch, shape, data.size(),
                         [&](size_t j) { return ModP(static_cast<int32_t>(data[j])); }) +
               uint64_t{MacValue(key, 2, epoch, shape, index)});
    return {static_cast<uint32_t>(mac & 0x7fffffff), static_cast<uint32_t>(mac >> 31)};
  }
  const bool with_epoch = kind == RowTag::kSipHash64Epoch || kind == RowTag::kSipHash64Shape;
  const bool with_shape = kind == RowTag::kSipHash64Shape;
  const size_t prefix = (with_epoch ? 16 : 8) + (with_shape ? 6 : 0);
  std::vector<uint8_t> message(prefix + data.size() * sizeof(uint32_t));
  size_t at = 0;
  const auto put = [&](uint64_t v, int bytes) {
    for (int b = 0; b < bytes; ++b) message[at++] = static_cast<uint8_t>(v >> (8 * b));
  };
  if (with_epoch) put(epoch, 8);
  put(index, 8);
  if (with_shape) {
    put(static_cast<uint8_t>(shape.format), 1);
    put(shape.frac_bits, 1);
    put(shape.dim, 4);
  }
  std::memcpy(message.data() + prefix, data.data(), data.size() * sizeof(uint32_t));
  uint8_t out[8];
  crypto_shorthash_siphash24(out, message.data(), message.size(), key.data());
  sodium_memzero(message.data(), message.size());  // a client's reconstructed row
  std::array<uint32_t, 2> tag;
  std::memcpy(tag.data(), out, sizeof(out));
  return tag;
}

bool RowTagMatches(RowTag kind, const RowKey& key, uint64_t epoch, uint64_t index,
                   const RowShape& shape, absl::Span<const uint32_t> data,
                   absl::Span<const uint32_t> tag) {
  if (tag.size() != 2 || TagWords(kind) != 2) return false;
  const std::array<uint32_t, 2> expected = ComputeRowTag(kind, key, epoch, index, shape, data);
  return sodium_memcmp(expected.data(), tag.data(), sizeof(expected)) == 0;
}

bool PooledRowTagMatches(const RowKey& key, uint64_t epoch, const RowShape& shape,
                         absl::Span<const uint64_t> indices, absl::Span<const int64_t> weights,
                         absl::Span<const int64_t> sums) {
  const size_t words = RowWords(shape.format, shape.dim);
  if (sums.size() != words + 2 || indices.size() != weights.size()) return false;
  uint64_t expected = MacOfData(key, epoch, shape, words, [&](size_t j) { return ModP(sums[j]); });
  for (size_t i = 0; i < indices.size(); ++i) {
    expected = Reduce(expected + static_cast<unsigned __int128>(ModP(weights[i])) *
                                     MacValue(key, 2, epoch, shape, indices[i]));
  }
  const uint64_t got =
      Reduce(ModP(sums[words]) + (static_cast<unsigned __int128>(ModP(sums[words + 1])) << 31));
  return sodium_memcmp(&expected, &got, sizeof(got)) == 0;
}

RowKey NewRowKey() {
  RowKey key;
  randombytes_buf(key.data(), key.size());
  return key;
}

absl::Status WriteRowKeyFile(const std::string& path, const RowKey& key) {
  std::string text = absl::BytesToHexString(
                         absl::string_view(reinterpret_cast<const char*>(key.data()), key.size())) +
                     "\n";
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  // An older file keeps its mode through O_CREAT: set it before writing the key.
  const bool written = fchmod(fd, 0600) == 0 &&
                       write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int saved = errno;
  sodium_memzero(text.data(), text.size());
  if (close(fd) != 0 || !written) {
    return absl::ErrnoToStatus(written ? errno : saved, absl::StrCat("cannot write ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<RowKey> ReadRowKeyFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open row key ", path));
  char text[64];
  const ssize_t n = read(fd, text, sizeof(text));
  close(fd);
  std::string hex(text, n > 0 ? static_cast<size_t>(n) : 0);
  sodium_memzero(text, sizeof(text));
  absl::string_view trimmed = absl::StripAsciiWhitespace(hex);
  RowKey key;
  const bool ok = trimmed.size() == 2 * key.size() &&
                  sodium_hex2bin(key.data(), key.size(), trimmed.data(), trimmed.size(), nullptr,
                                 nullptr, nullptr) == 0;
  sodium_memzero(hex.data(), hex.size());
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " does not hold a row key (32 hex digits, from veil table build)"));
  }
  return key;
}

}  // namespace veil::embedding
