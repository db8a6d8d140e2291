#include "pir/lattice/hint.h"

#include <sodium.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kN = kLweDimension;
constexpr char kSeedDomain[] = "veil lwe seed v1";

uint64_t ServerBytes(const Shape& shape) {
  return shape.protocol == Protocol::kDoublePir ? kDigitsPerWord * kN * shape.d1 : 0;
}

// result (db.rows x n, row-major) = db * A, A's first db.cols rows, 1,024 of them at a time:
// each chunk of A's rows is expanded straight into the layout MultiplyBytesByMatrix reads.
absl::Status MultiplyByPublicMatrix(const ByteMatrixView& db, const PublicMatrix& a, int threads,
                                    std::vector<uint32_t>& result) {
  constexpr uint64_t kChunk = 1024;  // a multiple of kRowAlign: every chunk starts aligned
  std::vector<uint32_t> a_rows(std::min(kChunk, AlignedStride(db.cols)) * kN);
  std::vector<uint32_t> sum(kN * db.rows);  // sum[k * rows + r]
  std::vector<uint32_t> partial(db.cols > kChunk ? sum.size() : 0);
  for (uint64_t c0 = 0; c0 < db.cols; c0 += kChunk) {
    const uint64_t cols = std::min(kChunk, db.cols - c0);
    const uint64_t width = AlignedStride(cols);
    a.ExpandRows(c0, cols, absl::MakeSpan(a_rows).first(cols * kN));
    std::fill(a_rows.begin() + cols * kN, a_rows.begin() + width * kN, 0u);
    const ByteMatrixView slice{db.data + c0, db.rows, cols, db.stride};
    // The first chunk writes the sums, later ones add to them.
    if (absl::Status s =
            MultiplyBytesByMatrix(slice, absl::MakeConstSpan(a_rows).first(width * kN), kN,
                                  absl::MakeSpan(c0 == 0 ? sum : partial), db.rows, threads);
        !s.ok()) {
      return s;
    }
    if (c0 != 0) {
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += partial[i];
    }
  }
  result.resize(db.rows * kN);
  for (uint64_t r = 0; r < db.rows; ++r) {
    for (uint64_t k = 0; k < kN; ++k) result[r * kN + k] = sum[k * db.rows + r];
  }
  return absl::OkStatus();
}

template <size_t N>
bool AllZero(const uint8_t (&bytes)[N]) {
  return std::all_of(std::begin(bytes), std::end(bytes), [](uint8_t b) { return b == 0; });
}

absl::Status Stale(const std::string& what) {
  return absl::FailedPreconditionError(absl::StrCat("stale hint: ", what));
}

// Everything but the payload digests: format first (INVALID_ARGUMENT), then whether the hint is
// for these parameters, this shape, seed and table (FAILED_PRECONDITION), then the sizes.
absl::Status CheckHeader(const HintHeader& h, const Shape& shape, const Seed& seed,
                         const embedding::TableDigestBytes& table_digest) {
  if (std::memcmp(h.magic, kHintMagic.data(), kHintMagic.size()) != 0) {
    return absl::InvalidArgumentError("not a veil LWE hint (bad magic)");
  }
  if (h.version != kHintVersion) {
    return absl::InvalidArgumentError(absl::StrCat("unsupported hint version ", h.version,
                                                   " (this build reads ", kHintVersion, ")"));
  }
  if (h.header_bytes != sizeof(HintHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hint header size ", h.header_bytes, ", expected ", sizeof(HintHeader)));
  }
  if (!AllZero(h.reserved0) || !AllZero(h.reserved1)) {
    return absl::InvalidArgumentError("hint header: reserved bytes are not zero");
  }
  if (h.protocol != static_cast<uint8_t>(shape.protocol)) {
    return Stale(
        absl::StrCat("protocol ", h.protocol, ", expected ", static_cast<int>(shape.protocol)));
  }
  if (h.lwe_n != kN || h.log_q != kLogModulus || h.plaintext_modulus != shape.plaintext_modulus ||
      h.sigma_micro != kSigmaMicro) {
    return Stale(absl::StrCat("LWE parameters n = ", h.lwe_n, ", log q = ", h.log_q,
                              ", p = ", h.plaintext_modulus, ", sigma = ", h.sigma_micro / 1e6));
  }
  if (h.rows != shape.rows || h.record_bytes != shape.record_bytes ||
      h.records_per_column != shape.records_per_column || h.d0 != shape.d0 || h.d1 != shape.d1) {
    return Stale(absl::StrCat("shape ", h.rows, " records x ", h.record_bytes, " B in a ", h.d1,
                              " x ", h.d0, " matrix, expected ", shape.rows, " x ",
                              shape.record_bytes, " B in ", shape.d1, " x ", shape.d0));
  }
  if (std::memcmp(h.table_digest, table_digest.data(), table_digest.size()) != 0) {
    return Stale(absl::StrCat(
        "computed for table digest ",
        absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(h.table_digest),
                                                 sizeof(h.table_digest))),
        ", the table's is ",
        absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(table_digest.data()),
                                                 table_digest.size()))));
  }
  if (std::memcmp(h.seed, seed.data(), seed.size()) != 0) {
    return Stale("the seed of A differs");
  }
  if (h.client_bytes != 4 * shape.hint_words() || h.server_bytes != ServerBytes(shape)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hint sizes ", h.client_bytes, " + ", h.server_bytes, " bytes, expected ",
                     4 * shape.hint_words(), " + ", ServerBytes(shape)));
  }
  return absl::OkStatus();
}

absl::Status CheckDigest(absl::Span<const uint8_t> bytes, const uint8_t (&expected)[32],
                         const char* part) {
  const Digest d = Blake2b256(bytes);
  if (std::memcmp(d.data(), expected, d.size()) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the ", part, " does not match its digest"));
  }
  return absl::OkStatus();
}

absl::Status ErrnoStatus(const std::string& what, const std::string& path) {
  const int e = errno;
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  switch (e) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

Digest Blake2b256(absl::Span<const uint8_t> bytes) {
  Digest d;
  crypto_generichash(d.data(), d.size(), bytes.data(), bytes.size(), nullptr, 0);
  return d;
}

Seed DeriveSeed(const Shape& shape, const embedding::TableDigestBytes& table_digest) {
  crypto_generichash_state state;
  crypto_generichash_init(&state, nullptr, 0, 32);
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(kSeedDomain),
                            sizeof(kSeedDomain));
  const uint64_t fields[] = {static_cast<uint64_t>(shape.protocol),
                             shape.rows,
                             shape.record_bytes,
                             shape.records_per_column,
                             shape.d0,
                             shape.d1,
                             shape.plaintext_modulus};
  crypto_generichash_update(&state, reinterpret_cast<const uint8_t*>(fields), sizeof(fields));
  crypto_generichash_update(&state, table_digest.data(), table_digest.size());
  Seed seed;
  crypto_generichash_final(&state, seed.data(), seed.size());
  return seed;
}

absl::StatusOr<Hint> ComputeHint(const Shape& shape, const Seed& seed, const ByteMatrixView& db,
                                 int threads) {
  if (db.rows != shape.d1 || db.cols != shape.d0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a ", db.rows, " x ", db.cols, " matrix, the shape is ", shape.d1, " x ", shape.d0));
  }
  Hint hint;
  const PublicMatrix a1(seed, MatrixDomain::kA1, shape.d0);
  if (shape.protocol == Protocol::kSimplePir) {
    if (absl::Status s = MultiplyByPublicMatrix(db, a1, threads, hint.client); !s.ok()) return s;
    return hint;
  }
  std::vector<uint32_t> h1;
  if (absl::Status s = MultiplyByPublicMatrix(db, a1, threads, h1); !s.ok()) return s;
  // DoublePIR: M1[4c + p][i] = byte p of H1[i][c] (a Z_256 element), then H2 = M1 * A2.
  const uint64_t stride = AlignedStride(shape.d1);
  hint.server_digits.assign(kDigitsPerWord * kN * stride, 0);
  for (uint64_t i = 0; i < shape.d1; ++i) {
    for (uint64_t c = 0; c < kN; ++c) {
      for (uint32_t p = 0; p < kDigitsPerWord; ++p) {
        hint.server_digits[(kDigitsPerWord * c + p) * stride + i] =
            static_cast<int8_t>(h1[i * kN + c] >> (8 * p));
      }
    }
  }
  const ByteMatrixView m1{hint.server_digits.data(), kDigitsPerWord * kN, shape.d1, stride};
  const PublicMatrix a2(seed, MatrixDomain::kA2, shape.d1);
  if (absl::Status s = MultiplyByPublicMatrix(m1, a2, threads, hint.client); !s.ok()) return s;
  return hint;
}

HintHeader MakeHintHeader(const Shape& shape, const Seed& seed,
                          const embedding::TableDigestBytes& table_digest, const Hint& hint) {
  HintHeader h;
  std::memset(&h, 0, sizeof(h));
  std::memcpy(h.magic, kHintMagic.data(), kHintMagic.size());
  h.version = kHintVersion;
  h.header_bytes = sizeof(HintHeader);
  h.rows = shape.rows;
  h.records_per_column = shape.records_per_column;
  h.d0 = shape.d0;
  h.d1 = shape.d1;
  h.client_bytes = 4 * hint.client.size();
  h.lwe_n = kN;
  h.log_q = kLogModulus;
  h.plaintext_modulus = shape.plaintext_modulus;
  h.sigma_micro = kSigmaMicro;
  h.record_bytes = shape.record_bytes;
  h.protocol = static_cast<uint8_t>(shape.protocol);
  std::memcpy(h.seed, seed.data(), seed.size());
  std::memcpy(h.table_digest, table_digest.data(), table_digest.size());
  const Digest client = Blake2b256(absl::MakeConstSpan(
      reinterpret_cast<const uint8_t*>(hint.client.data()), 4 * hint.client.size()));
  std::memcpy(h.client_digest, client.data(), client.size());
  if (!hint.server_digits.empty()) {
    // The file stores M1's rows unpadded (D1 bytes each).
    std::vector<uint8_t> packed(ServerBytes(shape));
    const uint64_t stride = AlignedStride(shape.d1);
    for (uint64_t r = 0; r < kDigitsPerWord * kN; ++r) {
      std::memcpy(packed.data() + r * shape.d1, hint.server_digits.data() + r * stride, shape.d1);
    }
    h.server_bytes = packed.size();
    const Digest server = Blake2b256(packed);
    std::memcpy(h.server_digest, server.data(), server.size());
  }
  return h;
}

std::vector<uint8_t> SerializeClientHint(const HintHeader& header, const Hint& hint) {
  std::vector<uint8_t> blob(sizeof(HintHeader) + 4 * hint.client.size());
  std::memcpy(blob.data(), &header, sizeof(HintHeader));
  std::memcpy(blob.data() + sizeof(HintHeader), hint.client.data(), 4 * hint.client.size());
  return blob;
}

absl::StatusOr<std::vector<uint32_t>> ParseClientHint(
    absl::Span<const uint8_t> blob, const Shape& shape, const Seed& seed,
    const embedding::TableDigestBytes& table_digest) {
  if (blob.size() < sizeof(HintHeader)) {
    return absl::InvalidArgumentError(
        absl::StrCat("hint blob of ", blob.size(), " bytes is shorter than its header"));
  }
  HintHeader h;
  std::memcpy(&h, blob.data(), sizeof(h));
  if (absl::Status s = CheckHeader(h, shape, seed, table_digest); !s.ok()) return s;
  if (blob.size() != sizeof(HintHeader) + h.client_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hint blob of ", blob.size(), " bytes, expected ", sizeof(HintHeader) + h.client_bytes));
  }
  const absl::Span<const uint8_t> payload = blob.subspan(sizeof(HintHeader));
  if (absl::Status s = CheckDigest(payload, h.client_digest, "client hint"); !s.ok()) return s;
  std::vector<uint32_t> words(payload.size() / 4);
  std::memcpy(words.data(), payload.data(), payload.size());
  return words;
}

std::string HintPathFor(const std::string& table_path, Protocol protocol) {
  return absl::StrCat(table_path, ".lwe-", std::string(ProtocolName(protocol)), ".hint");
}

absl::Status WriteHintFile(const std::string& path, const HintHeader& header, const Hint& hint) {
  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return ErrnoStatus("cannot create", tmp);
    out.write(reinterpret_cast<const char*>(&header), sizeof(header));
    out.write(reinterpret_cast<const char*>(hint.client.data()),
              static_cast<std::streamsize>(4 * hint.client.size()));
    if (header.server_bytes != 0) {
      const uint64_t rows = kDigitsPerWord * kN, cols = header.server_bytes / rows;
      const uint64_t stride = AlignedStride(cols);
      for (uint64_t r = 0; r < rows; ++r) {
        out.write(reinterpret_cast<const char*>(hint.server_digits.data() + r * stride),
                  static_cast<std::streamsize>(cols));
      }
    }
    if (!out.flush()) {
      std::remove(tmp.c_str());
      return ErrnoStatus("cannot write", tmp);
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status s = ErrnoStatus("cannot rename into", path);
    std::remove(tmp.c_str());
    return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<Hint> ReadHintFile(const std::string& path, const Shape& shape, const Seed& seed,
                                  const embedding::TableDigestBytes& table_digest) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ErrnoStatus("cannot open", path);
  HintHeader h;
  if (!in.read(reinterpret_cast<char*>(&h), sizeof(h))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": truncated hint header"));
  }
  if (absl::Status s = CheckHeader(h, shape, seed, table_digest); !s.ok()) return s;
  Hint hint;
  hint.client.resize(h.client_bytes / 4);
  std::vector<uint8_t> packed(h.server_bytes);
  in.read(reinterpret_cast<char*>(hint.client.data()),
          static_cast<std::streamsize>(h.client_bytes));
  in.read(reinterpret_cast<char*>(packed.data()), static_cast<std::streamsize>(packed.size()));
  if (!in || in.peek() != std::ifstream::traits_type::eof()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the hint file is not ", sizeof(h) + h.client_bytes + h.server_bytes, " bytes"));
  }
  if (absl::Status s = CheckDigest(
          absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(hint.client.data()), h.client_bytes),
          h.client_digest, "client hint");
      !s.ok()) {
    return s;
  }
  if (h.server_bytes != 0) {
    if (absl::Status s = CheckDigest(packed, h.server_digest, "server part of the hint"); !s.ok()) {
      return s;
    }
    const uint64_t stride = AlignedStride(shape.d1);
    hint.server_digits.assign(kDigitsPerWord * kN * stride, 0);
    for (uint64_t r = 0; r < kDigitsPerWord * kN; ++r) {
      std::memcpy(hint.server_digits.data() + r * stride, packed.data() + r * shape.d1, shape.d1);
    }
  }
  return hint;
}

absl::StatusOr<Hint> LoadOrComputeHint(const std::string& path, const Shape& shape,
                                       const Seed& seed,
                                       const embedding::TableDigestBytes& table_digest,
                                       const ByteMatrixView& db, int threads, std::string* reason) {
  absl::StatusOr<Hint> read = ReadHintFile(path, shape, seed, table_digest);
  if (read.ok()) {
    if (reason != nullptr) reason->clear();
    return read;
  }
  if (reason != nullptr) *reason = std::string(read.status().message());
  absl::StatusOr<Hint> hint = ComputeHint(shape, seed, db, threads);
  if (!hint.ok()) return hint.status();
  if (absl::Status s = WriteHintFile(path, MakeHintHeader(shape, seed, table_digest, *hint), *hint);
      !s.ok()) {
    return s;
  }
  return hint;
}

}  // namespace veil::lattice
