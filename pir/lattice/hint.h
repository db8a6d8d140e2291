// The offline part of the LWE protocols: the seed of the public matrices, the hints computed at
// table load, and the hint file kept next to the table.
//
// SimplePIR: the client hint is H = DB * A1 (D1 x n words).
// DoublePIR: the server keeps H1 = DB * A1 as its digit matrix M1 (4n x D1 signed bytes; row
// 4c + p, column i holds byte p of H1[i][c]) and the client hint is H2 = M1 * A2 (4n x n words).
//
// Hint file, version 1 (little-endian), at HintPathFor(table path, protocol):
//   the 256-byte HintHeader below, then the client hint (client_bytes), then (DoublePIR) the
//   digit matrix M1 (server_bytes, rows of D1 bytes). The header names everything the contents
//   depend on: protocol, LWE parameters, shape, seed, the table's digest, and a BLAKE2b-256
//   digest of each part. The header and the client hint alone are the "client hint blob" the
//   server hands to clients.
#ifndef VEIL_PIR_LATTICE_HINT_H_
#define VEIL_PIR_LATTICE_HINT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "embedding/table.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/lwe.h"
#include "pir/lattice/shape.h"

namespace veil::lattice {

using Digest = std::array<uint8_t, 32>;

inline constexpr std::array<char, 8> kHintMagic = {'V', 'E', 'I', 'L', 'L', 'W', 'H', '\0'};
inline constexpr uint32_t kHintVersion = 1;
// sigma as stored in the header: micro-units, so that a changed sigma changes the header.
inline constexpr uint32_t kSigmaMicro = 6400000;

struct HintHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;  // sizeof(HintHeader)
  uint64_t rows;
  uint64_t records_per_column;
  uint64_t d0;
  uint64_t d1;
  uint64_t client_bytes;  // the client hint that follows the header
  uint64_t server_bytes;  // the server part after it (0 for SimplePIR)
  uint32_t lwe_n;
  uint32_t log_q;
  uint32_t plaintext_modulus;
  uint32_t sigma_micro;
  uint32_t record_bytes;
  uint8_t protocol;
  uint8_t reserved0[3];  // zero
  uint8_t seed[32];
  uint8_t table_digest[32];
  uint8_t client_digest[32];  // BLAKE2b-256 of the client hint bytes
  uint8_t server_digest[32];  // BLAKE2b-256 of the server part (zeros when empty)
  uint8_t reserved1[40];      // zero
};
static_assert(sizeof(HintHeader) == 256, "the header is part of the file format");
static_assert(offsetof(HintHeader, rows) == 16);
static_assert(offsetof(HintHeader, lwe_n) == 64);
static_assert(offsetof(HintHeader, protocol) == 84);
static_assert(offsetof(HintHeader, seed) == 88);
static_assert(offsetof(HintHeader, table_digest) == 120);
static_assert(offsetof(HintHeader, client_digest) == 152);
static_assert(offsetof(HintHeader, server_digest) == 184);

// The seed of A1 and A2 for a table: BLAKE2b-256 over a domain string, the protocol, the shape
// and the table's digest. A server cannot choose A (it would need a preimage), and a client
// recomputes the seed from the config to check it.
Seed DeriveSeed(const Shape& shape, const embedding::TableDigestBytes& table_digest);

Digest Blake2b256(absl::Span<const uint8_t> bytes);

// What the server precomputes at table load.
struct Hint {
  std::vector<uint32_t> client;       // SimplePIR H (D1 x n); DoublePIR H2 (4n x n), row-major
  std::vector<int8_t> server_digits;  // DoublePIR M1 (4n rows of D1 bytes); empty for SimplePIR
};

// Computes the hint of `db` (a matrix of `shape`) for the matrices of `seed`, on `threads`
// threads, through MultiplyBytes (A's columns are the "queries"). Returns INVALID_ARGUMENT if
// the matrix does not have the shape's size.
absl::StatusOr<Hint> ComputeHint(const Shape& shape, const Seed& seed, const ByteMatrixView& db,
                                 int threads);

// The header of the hint of `shape` / `seed` / table digest with the digests of `hint`.
HintHeader MakeHintHeader(const Shape& shape, const Seed& seed,
                          const embedding::TableDigestBytes& table_digest, const Hint& hint);

// The client hint blob: the header, then the client hint's little-endian words.
std::vector<uint8_t> SerializeClientHint(const HintHeader& header, const Hint& hint);

// Parses a client hint blob and checks it against what the client expects (the config it got).
// Returns INVALID_ARGUMENT for a truncated or over-long blob, wrong magic, version or header
// size, nonzero reserved bytes, or a client hint whose digest differs; FAILED_PRECONDITION
// ("stale hint: ...") when the blob is well formed but for other parameters, another shape,
// seed or table digest.
absl::StatusOr<std::vector<uint32_t>> ParseClientHint(
    absl::Span<const uint8_t> blob, const Shape& shape, const Seed& seed,
    const embedding::TableDigestBytes& table_digest);

// "<table path>.lwe-simple.hint" or ".lwe-double.hint".
std::string HintPathFor(const std::string& table_path, Protocol protocol);

// Writes the hint file (under a temporary name, renamed into place when complete). Returns the
// errno-derived status if it cannot be written.
absl::Status WriteHintFile(const std::string& path, const HintHeader& header, const Hint& hint);

// Reads and validates a hint file. Returns the errno-derived status (NOT_FOUND, ...) if it
// cannot be read, INVALID_ARGUMENT for a malformed file (as ParseClientHint, or a server part of
// the wrong size or digest), FAILED_PRECONDITION ("stale hint: ...") for a well-formed file
// computed for other parameters, shape, seed or table digest.
absl::StatusOr<Hint> ReadHintFile(const std::string& path, const Shape& shape, const Seed& seed,
                                  const embedding::TableDigestBytes& table_digest);

// The hint for a table: read from `path` when the file is there, valid and current; otherwise
// computed (ComputeHint) and written to `path`. `reason` (if not null) says why it was computed
// ("" when read). Returns ComputeHint's or WriteHintFile's errors.
absl::StatusOr<Hint> LoadOrComputeHint(const std::string& path, const Shape& shape,
                                       const Seed& seed,
                                       const embedding::TableDigestBytes& table_digest,
                                       const ByteMatrixView& db, int threads, std::string* reason);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_HINT_H_
