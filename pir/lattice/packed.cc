#include "pir/lattice/packed.h"

#include <sodium.h>

#include <utility>

#include "pir/lattice/expansion.h"

namespace veil::lattice {

PackedQuery& PackedQuery::operator=(PackedQuery&& other) noexcept {
  if (this != &other) {
    if (!secrets_.empty()) sodium_memzero(secrets_.data(), secrets_.size() * sizeof(uint32_t));
    query = std::move(other.query);
    ciphertext = std::move(other.ciphertext);
    selection = std::move(other.selection);
    row_ = other.row_;
    secrets_ = std::move(other.secrets_);
  }
  return *this;
}

PackedQuery::~PackedQuery() {
  if (!secrets_.empty()) sodium_memzero(secrets_.data(), secrets_.size() * sizeof(uint32_t));
}

absl::StatusOr<he::GaloisKeys> PackedServer::ParseKeys(absl::Span<const uint8_t> bytes) const {
  return ParseExpansionKeys(ring(), kLweDimension, bytes);
}

absl::StatusOr<std::vector<uint8_t>> PackedServer::Answer(
    absl::Span<const uint32_t> query, absl::Span<const uint8_t> ciphertext,
    const he::GaloisKeys& keys, absl::Span<const uint8_t> selection) const {
  const PackedRequest request{query, ciphertext, &keys, selection};
  return std::move(AnswerBatch({&request, 1})[0]);
}

}  // namespace veil::lattice
