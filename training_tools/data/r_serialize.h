// A minimal reader of R's XDR serialization and of R lazy-load databases (.rdb/.rdx), enough to
// read data frames shipped in R packages (dslabs' `movielens`) without installing R.
//
// Format (R Internals, "Serialization Formats"; src/main/serialize.c):
//   - A stream starts with "X\n" (XDR, big-endian), the format version (2 or 3), the writer's and
//     the minimal reader's R versions and, for version 3, the native encoding as a length-prefixed
//     string.
//   - Each item starts with a 32-bit flags word: bits 0–7 the SEXP type, bit 8 "is object",
//     bit 9 "has attributes", bit 10 "has tag"; REFSXP items keep a reference index in the bits
//     above 8.
//   - Supported types: NULL, symbols (added to the reference table, so later REFSXP items resolve
//     to them), pairlists (attributes are pairlists of tag/value), CHARSXP (length -1 = NA),
//     logical, integer, double, STRSXP, VECSXP (lists, data frames) and the ALTREP forms R writes
//     for compact integer/real sequences and wrapped vectors. Environments, closures, bytecode and
//     S4 objects are rejected with UNIMPLEMENTED: data sets do not need them.
//   - A lazy-load database: the .rdx file is a gzip'd serialized list(variables = list(name =
//     c(offset, length)), references, compressed); each .rdb entry at that offset is a 4-byte
//     big-endian uncompressed length followed by a zlib stream of one serialized object.
#ifndef VEIL_TRAINING_TOOLS_DATA_R_SERIALIZE_H_
#define VEIL_TRAINING_TOOLS_DATA_R_SERIALIZE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace veil::training {

// R's SEXP type codes used by this reader.
enum class RType : int {
  kNull = 0,
  kSymbol = 1,
  kPairList = 2,
  kChar = 9,
  kLogical = 10,
  kInteger = 13,
  kReal = 14,
  kString = 16,
  kList = 19,
};

// R's NA for integers and logicals.
inline constexpr int32_t kRNaInteger = INT32_MIN;

// One unserialized R value. Which member holds the payload depends on `type`: `ints` for logical
// and integer vectors, `reals` for doubles, `strings` for STRSXP (nullopt = NA), `elements` for
// lists and pairlists (with `tags` for pairlists), `name` for symbols and CHARSXP.
struct RObject {
  RType type = RType::kNull;
  std::vector<int32_t> ints;
  std::vector<double> reals;
  std::vector<std::optional<std::string>> strings;
  std::vector<RObject> elements;
  std::vector<std::string> tags;
  std::string name;
  std::vector<std::pair<std::string, RObject>> attributes;

  // Returns the attribute `key`, or nullptr.
  const RObject* Attribute(const std::string& key) const;
  // For a named list (data frame): the element called `key`, or nullptr.
  const RObject* Element(const std::string& key) const;
  // Number of elements of a vector of any type.
  size_t Length() const;
};

// Unserializes one R object from an XDR stream. Returns INVALID_ARGUMENT for a truncated or
// malformed stream, UNIMPLEMENTED for valid R types this reader does not support.
absl::StatusOr<RObject> UnserializeR(absl::Span<const uint8_t> bytes);

// Reads the object called `name` from the lazy-load database `<base>.rdx`/`<base>.rdb`.
// Returns NOT_FOUND if either file is missing or the database has no such object,
// INVALID_ARGUMENT if a file is corrupt.
absl::StatusOr<RObject> ReadLazyLoadObject(const std::string& base, const std::string& name);

// Reads a whole file. Returns NOT_FOUND if it cannot be opened.
absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path);

// Inflates a zlib (or, with `gzip` set, gzip) stream. `expected_size` bounds the output when
// known (0 = unknown). Returns INVALID_ARGUMENT if the stream is corrupt.
absl::StatusOr<std::vector<uint8_t>> Inflate(absl::Span<const uint8_t> compressed, bool gzip,
                                             size_t expected_size);

}  // namespace veil::training

#endif  // VEIL_TRAINING_TOOLS_DATA_R_SERIALIZE_H_
