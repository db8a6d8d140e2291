#include "pir/lattice/client.h"

#include <sodium.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kN = kLweDimension;

// Signed distance of `noisy` from the multiple of Delta it rounds to.
int32_t SignedNoise(uint32_t noisy) {
  return static_cast<int32_t>(noisy - (static_cast<uint32_t>(RoundToByte(noisy)) << 24));
}

// |SignedNoise| (branch-free absolute value).
uint32_t NoiseOf(uint32_t noisy) {
  const uint32_t off = static_cast<uint32_t>(SignedNoise(noisy));
  const uint32_t sign = 0u - (off >> 31);
  return (off ^ sign) - sign;
}

void AddFirstLevel(uint32_t noisy, DecodeNoise& noise) {
  const double n = SignedNoise(noisy);
  noise.first_level = std::max(noise.first_level, NoiseOf(noisy));
  noise.first_level_sum_squares += n * n;
  ++noise.first_level_samples;
}

}  // namespace

PendingLookup::~PendingLookup() {
  if (!secrets_.empty()) sodium_memzero(secrets_.data(), secrets_.size() * sizeof(uint32_t));
}

PendingLookup& PendingLookup::operator=(PendingLookup&& other) noexcept {
  if (this != &other) {
    if (!secrets_.empty()) sodium_memzero(secrets_.data(), secrets_.size() * sizeof(uint32_t));
    row_ = other.row_;
    secrets_ = std::move(other.secrets_);
  }
  return *this;
}

LweClient::LweClient(const LweConfig& config, std::vector<uint32_t> hint)
    : config_(config), hint_(std::move(hint)) {}

absl::StatusOr<std::unique_ptr<LweClient>> LweClient::Create(const LweConfig& config,
                                                             absl::Span<const uint8_t> hint_blob) {
  if (absl::Status s = ValidateConfig(config); !s.ok()) return s;
  if (hint_blob.size() != config.hint_bytes || Blake2b256(hint_blob) != config.hint_digest) {
    return absl::InvalidArgumentError(absl::StrCat("the hint (", hint_blob.size(),
                                                   " bytes) is not the one the config names (",
                                                   config.hint_bytes, " bytes and its digest)"));
  }
  absl::StatusOr<std::vector<uint32_t>> hint =
      ParseClientHint(hint_blob, config.shape, config.seed, config.table_digest);
  if (!hint.ok()) return hint.status();
  return std::unique_ptr<LweClient>(new LweClient(config, *std::move(hint)));
}

absl::StatusOr<PendingLookup> LweClient::MakeQuery(uint64_t row, absl::Span<uint32_t> query,
                                                   RandomSource& rng) const {
  absl::StatusOr<std::vector<PendingLookup>> lookups = MakeQueries({row}, query, rng);
  if (!lookups.ok()) return lookups.status();
  return std::move(lookups->front());
}

absl::StatusOr<std::vector<PendingLookup>> LweClient::MakeQueries(absl::Span<const uint64_t> rows,
                                                                  absl::Span<uint32_t> queries,
                                                                  RandomSource& rng) const {
  const Shape& s = config_.shape;
  for (uint64_t row : rows) {
    if (row >= s.rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", row, " is outside the table (", s.rows, " rows)"));
    }
  }
  const uint64_t count = rows.size(), qw = s.query_words();
  if (queries.size() != count * qw) {
    return absl::InvalidArgumentError(
        absl::StrCat("the queries hold ", queries.size(), " words, expected ", count, " x ", qw));
  }
  return Encrypt(rows, count, queries, rng);
}

std::vector<PendingLookup> LweClient::Encrypt(absl::Span<const uint64_t> rows, uint64_t count,
                                              absl::Span<uint32_t> queries,
                                              RandomSource& rng) const {
  const Shape& s = config_.shape;
  const uint64_t qw = s.query_words();
  if (count == 0) return {};  // not even A's expansion
  std::vector<uint64_t> columns(count);
  for (uint64_t i = 0; i < count; ++i) {
    columns[i] = rows.empty() ? kNoHot : s.column_of(rows[i]);
  }
  // First level: the record's column (SimplePIR writes the queries in place).
  std::vector<uint32_t> s1(count * kN);
  std::vector<uint32_t> q1(s.protocol == Protocol::kSimplePir ? 0 : count * s.d0);
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA1, s.d0), columns, rng,
                          absl::MakeSpan(s1),
                          s.protocol == Protocol::kSimplePir ? queries : absl::MakeSpan(q1));
  std::vector<PendingLookup> lookups(count);
  for (uint64_t i = 0; i < count; ++i) {
    lookups[i].row_ = rows.empty() ? 0 : rows[i];
    lookups[i].secrets_.assign(s1.begin() + i * kN, s1.begin() + (i + 1) * kN);
  }
  sodium_memzero(s1.data(), s1.size() * sizeof(uint32_t));
  if (s.protocol == Protocol::kSimplePir) return lookups;
  // DoublePIR, second level: each of the record's R matrix rows, one query and secret per byte.
  const uint64_t r_bytes = s.record_bytes;
  std::vector<uint64_t> hots(count * r_bytes);
  for (uint64_t i = 0; i < count; ++i) {
    for (uint64_t j = 0; j < r_bytes; ++j) {
      hots[i * r_bytes + j] = rows.empty() ? kNoHot : s.slot_of(rows[i]) * r_bytes + j;
    }
  }
  std::vector<uint32_t> s2(hots.size() * kN), q2(hots.size() * s.d1);
  EncryptFreshUnitVectors(PublicMatrix(config_.seed, MatrixDomain::kA2, s.d1), hots, rng,
                          absl::MakeSpan(s2), absl::MakeSpan(q2));
  for (uint64_t i = 0; i < count; ++i) {
    std::copy_n(q1.begin() + i * s.d0, s.d0, queries.begin() + i * qw);
    std::copy_n(q2.begin() + i * r_bytes * s.d1, r_bytes * s.d1, queries.begin() + i * qw + s.d0);
    lookups[i].secrets_.insert(lookups[i].secrets_.end(), s2.begin() + i * r_bytes * kN,
                               s2.begin() + (i + 1) * r_bytes * kN);
  }
  sodium_memzero(s2.data(), s2.size() * sizeof(uint32_t));
  return lookups;
}

std::vector<PreparedLookup> LweClient::PrepareLookups(uint64_t count, RandomSource& rng) const {
  const uint64_t qw = config_.shape.query_words();
  std::vector<uint32_t> queries(count * qw);
  std::vector<PendingLookup> lookups = Encrypt({}, count, absl::MakeSpan(queries), rng);
  std::vector<PreparedLookup> out(count);
  for (uint64_t i = 0; i < count; ++i) {
    out[i].owner_ = id_;
    out[i].query_.assign(queries.begin() + i * qw, queries.begin() + (i + 1) * qw);
    out[i].lookup_ = std::move(lookups[i]);
  }
  return out;
}

absl::StatusOr<PendingLookup> LweClient::FinishQuery(uint64_t row, PreparedLookup prepared,
                                                     absl::Span<uint32_t> query) const {
  const Shape& s = config_.shape;
  if (row >= s.rows || query.size() != s.query_words()) {
    return absl::InvalidArgumentError(absl::StrCat("row ", row, " of ", s.rows, ", a query of ",
                                                   query.size(), " words (expected ",
                                                   s.query_words(), ")"));
  }
  if (prepared.owner_ != id_ || prepared.query_.size() != query.size()) {
    return absl::InvalidArgumentError(
        "a prepared lookup of another client (or moved from): prepare it with this client");
  }
  std::copy(prepared.query_.begin(), prepared.query_.end(), query.begin());
  for (const UnitVector& v : QueryUnitVectors(s, row)) {
    AddUnitVector(v.index, query.subspan(v.begin, v.length));
  }
  PendingLookup lookup = std::move(prepared.lookup_);
  lookup.row_ = row;
  return lookup;
}

absl::Status LweClient::Decode(const PendingLookup& lookup, absl::Span<const uint32_t> answer,
                               absl::Span<uint8_t> record, DecodeNoise* noise) const {
  const Shape& s = config_.shape;
  if (answer.size() != s.answer_words() || record.size() != s.record_bytes ||
      lookup.secrets_.size() !=
          (s.protocol == Protocol::kSimplePir ? 1 : 1 + s.record_bytes) * kN) {
    return absl::InvalidArgumentError(absl::StrCat(
        "decode: answer of ", answer.size(), " words (expected ", s.answer_words(), "), record of ",
        record.size(), " bytes (expected ", s.record_bytes, "), or a lookup of another client"));
  }
  DecodeNoise measured;
  if (s.protocol == Protocol::kDoublePir) {
    if (absl::Status st = DecodeDouble(lookup, answer, record, measured); !st.ok()) return st;
  } else {
    // Every row of the column is decrypted and the record's rows selected with masks: which
    // slot the client wanted is secret, so it picks no hint row by address.
    const uint64_t slot = s.slot_of(lookup.row_);
    std::vector<uint32_t> mask(s.d1);  // H * s
    MultiplyWords(hint_.data(), s.d1, kN, lookup.secrets_.data(), 1, mask.data(), s.d1);
    std::fill(record.begin(), record.end(), 0);
    for (uint64_t i = 0; i < s.d1; ++i) {
      const uint32_t noisy = answer[i] - mask[i];
      AddFirstLevel(noisy, measured);
      record[i % s.record_bytes] |= RoundToByte(noisy) & ByteMask(i / s.record_bytes, slot);
    }
  }
  if (noise != nullptr) *noise = measured;
  return absl::OkStatus();
}

// The second level recovers the 4n digits of the record rows' hint rows H1[i] and the 4 digits of
// their answer words a1[i] (against H2 and the online h1); the first level then decrypts
// a1[i] - H1[i] . s1.
absl::Status LweClient::DecodeDouble(const PendingLookup& lookup, absl::Span<const uint32_t> answer,
                                     absl::Span<uint8_t> record, DecodeNoise& noise) const {
  const Shape& s = config_.shape;
  const uint64_t digit_rows = kDigitsPerWord * kN, r_bytes = s.record_bytes;
  const uint32_t* a2 = answer.data();
  const uint32_t* h2 = a2 + r_bytes * digit_rows;
  // h1 arrives k-major (word k of row p at 4k + p): its 4 rows, contiguous.
  std::vector<uint32_t> h1(kDigitsPerWord * kN);
  for (uint64_t k = 0; k < kN; ++k) {
    for (uint32_t p = 0; p < kDigitsPerWord; ++p)
      h1[p * kN + k] = h2[r_bytes * kDigitsPerWord + k * kDigitsPerWord + p];
  }
  const uint32_t* s1 = lookup.secrets_.data();
  const uint32_t* s2 = s1 + kN;
  // The second-level masks of every query: H2 * s2_j (4n words) and h1 * s2_j (4 words).
  std::vector<uint32_t> hint_mask(r_bytes * digit_rows), h1_mask(r_bytes * kDigitsPerWord);
  MultiplyWords(hint_.data(), digit_rows, kN, s2, r_bytes, hint_mask.data(), digit_rows);
  MultiplyWords(h1.data(), kDigitsPerWord, kN, s2, r_bytes, h1_mask.data(), kDigitsPerWord);
  std::vector<uint32_t> h1_row(kN);
  for (uint64_t j = 0; j < r_bytes; ++j) {
    std::fill(h1_row.begin(), h1_row.end(), 0);
    for (uint64_t rho = 0; rho < digit_rows; ++rho) {
      const uint32_t noisy = a2[j * digit_rows + rho] - hint_mask[j * digit_rows + rho];
      noise.second_level = std::max(noise.second_level, NoiseOf(noisy));
      h1_row[rho / kDigitsPerWord] |= uint32_t{RoundToByte(noisy)} << (8 * (rho % kDigitsPerWord));
    }
    uint32_t a1 = 0;
    for (uint32_t p = 0; p < kDigitsPerWord; ++p) {
      const uint32_t noisy = h2[j * kDigitsPerWord + p] - h1_mask[j * kDigitsPerWord + p];
      noise.second_level = std::max(noise.second_level, NoiseOf(noisy));
      a1 |= uint32_t{RoundToByte(noisy)} << (8 * p);
    }
    uint32_t first_mask = 0;
    MultiplyWords(h1_row.data(), 1, kN, s1, 1, &first_mask, 1);
    const uint32_t noisy = a1 - first_mask;
    AddFirstLevel(noisy, noise);
    record[j] = RoundToByte(noisy);
  }
  sodium_memzero(h1_row.data(), h1_row.size() * sizeof(uint32_t));
  return absl::OkStatus();
}

}  // namespace veil::lattice
