// Fuzz target for row key files (embedding/row_tag.h, ReadRowKeyFile): any file either is refused
// with INVALID_ARGUMENT or holds, after surrounding whitespace, exactly 32 hex digits that spell
// the key returned; a key written by WriteRowKeyFile reads back equal.
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "embedding/row_tag.h"
#include "tests/fuzz/fuzz.h"

namespace veil::fuzz {

std::vector<std::vector<uint8_t>> Seeds() {
  auto text = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  return {text("000102030405060708090a0b0c0d0e0f\n"), text("  FFEEDDCCBBAA99887766554433221100"),
          text("0123456789abcdef0123456789ABCDEF\r\n\t")};
}

}  // namespace veil::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using veil::fuzz::Check;
  const std::string& path = veil::fuzz::WriteScratchFile(absl::MakeConstSpan(data, size));
  auto key = veil::embedding::ReadRowKeyFile(path);
  if (!key.ok()) {
    Check(key.status().code() == absl::StatusCode::kInvalidArgument,
          "ReadRowKeyFile: not INVALID_ARGUMENT");
    return 0;
  }
  // The file's first 64 bytes are what the reader looks at.
  const std::string text(reinterpret_cast<const char*>(data), std::min<size_t>(size, 64));
  const std::string hex(absl::StripAsciiWhitespace(text));
  Check(hex.size() == 32, "a key was read from other than 32 characters");
  for (char c : hex) Check(std::isxdigit(static_cast<unsigned char>(c)) != 0, "non-hex key text");
  const std::string bytes = absl::HexStringToBytes(hex);
  Check(bytes.size() == key->size() && std::memcmp(key->data(), bytes.data(), bytes.size()) == 0,
        "the key differs from its hex");
  Check(veil::embedding::WriteRowKeyFile(path, *key).ok(), "WriteRowKeyFile failed");
  auto again = veil::embedding::ReadRowKeyFile(path);
  Check(again.ok() && *again == *key, "a written key reads back different");
  return 0;
}
