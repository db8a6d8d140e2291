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

uint32_t TagWords(RowTag tag) {
  return tag == RowTag::kSipHash64 || tag == RowTag::kSipHash64Epoch ||
                 tag == RowTag::kSipHash64Shape
             ? 2
             : 0;
}

bool IsKnownRowTag(uint8_t tag) {
  return tag == static_cast<uint8_t>(RowTag::kNone) ||
         tag == static_cast<uint8_t>(RowTag::kSipHash64) ||
         tag == static_cast<uint8_t>(RowTag::kSipHash64Epoch) ||
         tag == static_cast<uint8_t>(RowTag::kSipHash64Shape);
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
  }
  return "unknown";
}

std::array<uint32_t, 2> ComputeRowTag(RowTag kind, const RowKey& key, uint64_t epoch,
                                      uint64_t index, const RowShape& shape,
                                      absl::Span<const uint32_t> data) {
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
