#include "embedding/layout.h"

#include <sodium.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::embedding {

std::array<uint8_t, 16> LayoutSeedFromU64(uint64_t state) {
  std::array<uint8_t, 16> seed;
  for (int half = 0; half < 2; ++half) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    for (int i = 0; i < 8; ++i) seed[8 * half + i] = static_cast<uint8_t>(z >> (8 * i));
  }
  return seed;
}
namespace {

constexpr char kMagic[8] = {'V', 'E', 'I', 'L', 'L', 'A', 'Y', 'T'};
constexpr uint32_t kVersion = 1;
constexpr size_t kDigestBytes = 32;
// magic, version, 7 parameters, seed, hot row count.
constexpr size_t kHeaderBytes = sizeof(kMagic) + 4 + 7 * 4 + 16 + 4;
static_assert(kHeaderBytes == 60, "the version-1 header is 60 bytes");
static_assert(crypto_shorthash_siphash24_KEYBYTES == 16, "the layout seed is a SipHash key");

void PutU32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint32_t GetU32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}

// SipHash-2-4 of (table, row) under the public seed: the sort key of the placement permutation.
uint64_t PlacementKey(const std::array<uint8_t, 16>& seed, int table, int32_t row) {
  uint8_t message[8];
  for (int i = 0; i < 4; ++i) {
    message[i] = static_cast<uint8_t>(static_cast<uint32_t>(table) >> (8 * i));
    message[4 + i] = static_cast<uint8_t>(static_cast<uint32_t>(row) >> (8 * i));
  }
  uint8_t hash[8];
  crypto_shorthash_siphash24(hash, message, sizeof(message), seed.data());
  uint64_t key = 0;
  for (int i = 0; i < 8; ++i) key |= uint64_t{hash[i]} << (8 * i);
  return key;
}

absl::Status CheckShape(const char* name, const TableShape& shape, int64_t rows) {
  if (shape.bins < 0 || shape.rounds < 0 || shape.rounds > kMaxRounds) {
    return absl::InvalidArgumentError(absl::StrCat("layout: ", name, " table has ", shape.bins,
                                                   " bins and ", shape.rounds, " rounds"));
  }
  if (rows == 0 && (shape.bins != 0 || shape.rounds != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: the ", name, " table is empty but has bins or rounds"));
  }
  if (rows > 0 && (shape.bins == 0 || shape.bins > rows)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: the ", name, " table has ", rows, " rows and ", shape.bins, " bins"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Layout> Layout::Create(const LayoutParams& params, std::vector<int32_t> hot_rows,
                                      const std::vector<std::vector<int32_t>>& companions) {
  if (params.num_rows <= 0 || params.num_rows > kMaxLayoutRows) {
    return absl::InvalidArgumentError(absl::StrCat("layout: ", params.num_rows, " rows"));
  }
  if (params.row_words <= 0 || params.row_words > kMaxRowWords) {
    return absl::InvalidArgumentError(absl::StrCat("layout: ", params.row_words, " words per row"));
  }
  if (params.colocation < 0 || params.colocation > kMaxColocation) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout: co-location factor ", params.colocation, " not in [0, 16]"));
  }
  if (!companions.empty() && companions.size() != static_cast<size_t>(params.num_rows)) {
    return absl::InvalidArgumentError(absl::StrCat("layout: companions for ", companions.size(),
                                                   " rows, the table has ", params.num_rows));
  }
  std::sort(hot_rows.begin(), hot_rows.end());
  if (std::adjacent_find(hot_rows.begin(), hot_rows.end()) != hot_rows.end()) {
    return absl::InvalidArgumentError("layout: a hot row is listed twice");
  }
  if (!hot_rows.empty() && (hot_rows.front() < 0 || hot_rows.back() >= params.num_rows)) {
    return absl::InvalidArgumentError("layout: a hot row is out of range");
  }
  const int64_t hot_count = static_cast<int64_t>(hot_rows.size());
  if (auto s = CheckShape("hot", params.hot, hot_count); !s.ok()) return s;
  if (auto s = CheckShape("cold", params.cold, params.num_rows - hot_count); !s.ok()) return s;

  Layout layout;
  layout.params_ = params;
  const int c = params.colocation;
  layout.companions_.assign(static_cast<size_t>(params.num_rows) * c, -1);
  for (size_t row = 0; row < companions.size(); ++row) {
    const auto& list = companions[row];
    if (list.size() > static_cast<size_t>(c)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layout: row ", row, " has ", list.size(), " companions, c = ", c));
    }
    for (size_t i = 0; i < list.size(); ++i) {
      const int32_t companion = list[i];
      if (companion < 0 || companion >= params.num_rows || companion == static_cast<int32_t>(row) ||
          std::find(list.begin(), list.begin() + i, companion) != list.begin() + i) {
        return absl::InvalidArgumentError(
            absl::StrCat("layout: companion ", companion, " of row ", row, " is invalid"));
      }
      layout.companions_[row * c + i] = companion;
    }
  }

  // Rows of each table, then the keyed permutation.
  std::array<std::vector<int32_t>, kNumLayoutTables> members;
  for (int32_t row = 0, h = 0; row < params.num_rows; ++row) {
    const bool hot = h < hot_count && hot_rows[h] == row;
    members[hot ? kHotTable : kColdTable].push_back(row);
    h += hot;
  }
  layout.locations_.resize(params.num_rows);
  for (int t = 0; t < kNumLayoutTables; ++t) {
    std::vector<int32_t>& rows = members[t];
    std::vector<std::pair<uint64_t, int32_t>> keyed;
    keyed.reserve(rows.size());
    for (int32_t row : rows) keyed.emplace_back(PlacementKey(params.seed, t, row), row);
    std::sort(keyed.begin(), keyed.end());
    TableBins& bins = layout.tables_[t];
    bins.num_rows = static_cast<int32_t>(rows.size());
    const int32_t num_bins = layout.shape(t).bins;
    if (num_bins == 0) continue;
    bins.slots_per_bin = (bins.num_rows + num_bins - 1) / num_bins;
    bins.entries.assign(static_cast<size_t>(num_bins) * bins.slots_per_bin * (1 + c), -1);
    for (size_t p = 0; p < keyed.size(); ++p) {
      const int32_t row = keyed[p].second;
      const SlotRef ref{t, static_cast<int32_t>(p % num_bins), static_cast<int32_t>(p / num_bins)};
      layout.locations_[row] = ref;
      int32_t* entry =
          &bins.entries[(static_cast<size_t>(ref.bin) * bins.slots_per_bin + ref.slot) * (1 + c)];
      entry[0] = row;
      // data() + offset, not operator[]: with c = 0 the companion array is empty.
      std::copy_n(layout.companions_.data() + static_cast<size_t>(row) * c, c, entry + 1);
    }
  }
  layout.hot_rows_ = std::move(hot_rows);
  return layout;
}

absl::Span<const int32_t> Layout::Entry(const SlotRef& slot) const {
  const TableBins& bins = tables_[slot.table];
  const size_t width = entry_rows();
  return absl::MakeConstSpan(
      &bins.entries[(static_cast<size_t>(slot.bin) * bins.slots_per_bin + slot.slot) * width],
      width);
}

int Layout::LogBinDomain(int table) const {
  int n = 1;
  while ((int64_t{1} << n) < slots_per_bin(table)) ++n;
  return n;
}

std::vector<uint8_t> Layout::Serialize() const {
  std::vector<uint8_t> out(std::begin(kMagic), std::end(kMagic));
  PutU32(out, kVersion);
  for (int32_t v : {params_.num_rows, params_.row_words, params_.colocation, params_.hot.bins,
                    params_.hot.rounds, params_.cold.bins, params_.cold.rounds}) {
    PutU32(out, static_cast<uint32_t>(v));
  }
  out.insert(out.end(), params_.seed.begin(), params_.seed.end());
  PutU32(out, static_cast<uint32_t>(hot_rows_.size()));
  for (int32_t row : hot_rows_) PutU32(out, static_cast<uint32_t>(row));
  for (int32_t row : companions_) PutU32(out, static_cast<uint32_t>(row));
  uint8_t digest[kDigestBytes];
  crypto_generichash(digest, sizeof(digest), out.data(), out.size(), nullptr, 0);
  out.insert(out.end(), digest, digest + kDigestBytes);
  return out;
}

uint64_t Layout::PeakMemoryBytes(const LayoutParams& params) {
  const uint64_t rows = params.num_rows > 0 ? static_cast<uint64_t>(params.num_rows) : 0;
  const uint64_t c = params.colocation > 0 ? static_cast<uint64_t>(params.colocation) : 0;
  // Per row: its table's member list (4), the keyed sort (16), its location (12), its entry and
  // companions (4 (1 + c)), the companion array (4c) and, from Parse, a companion vector (24 + 4c);
  // bins may pad the entries by up to one slot per bin.
  const uint64_t per_row = 4 + 16 + 12 + 4 * (1 + c) + 4 * c + (c > 0 ? 24 + 4 * c : 0);
  const uint64_t padding = 4 * (1 + c) *
                           (static_cast<uint64_t>(std::max(0, params.hot.bins)) +
                            static_cast<uint64_t>(std::max(0, params.cold.bins)));
  return rows * per_row + padding;
}

absl::StatusOr<Layout> Layout::Parse(absl::Span<const uint8_t> bytes, uint64_t max_memory_bytes) {
  if (bytes.size() < kHeaderBytes + kDigestBytes ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError("layout file: not a veil layout (bad magic or too short)");
  }
  const uint8_t* p = bytes.data() + sizeof(kMagic);
  const uint32_t version = GetU32(p);
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout file: version ", version, ", this build reads version ", kVersion));
  }
  int32_t fields[7];
  for (int i = 0; i < 7; ++i) fields[i] = static_cast<int32_t>(GetU32(p + 4 + 4 * i));
  LayoutParams params;
  params.num_rows = fields[0];
  params.row_words = fields[1];
  params.colocation = fields[2];
  params.hot = {fields[3], fields[4]};
  params.cold = {fields[5], fields[6]};
  std::memcpy(params.seed.data(), p + 32, 16);
  const uint32_t hot_count = GetU32(p + 48);
  if (params.num_rows <= 0 || params.num_rows > kMaxLayoutRows || params.colocation < 0 ||
      params.colocation > kMaxColocation || hot_count > static_cast<uint32_t>(params.num_rows)) {
    return absl::InvalidArgumentError("layout file: sizes out of range");
  }
  const uint64_t expected =
      kHeaderBytes + 4 * (uint64_t{hot_count} + uint64_t(params.num_rows) * params.colocation) +
      kDigestBytes;
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout file: ", bytes.size(), " bytes, its header implies ", expected));
  }
  if (const uint64_t need = PeakMemoryBytes(params); need > max_memory_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "layout file: its ", params.num_rows, " rows would need ~", need >> 20,
        " MiB of memory, above the limit of ", max_memory_bytes >> 20, " MiB"));
  }
  uint8_t digest[kDigestBytes];
  crypto_generichash(digest, sizeof(digest), bytes.data(), bytes.size() - kDigestBytes, nullptr, 0);
  if (sodium_memcmp(digest, bytes.data() + bytes.size() - kDigestBytes, kDigestBytes) != 0) {
    return absl::InvalidArgumentError("layout file: digest mismatch (corrupt file)");
  }
  const uint8_t* q = bytes.data() + kHeaderBytes;
  std::vector<int32_t> hot_rows(hot_count);
  for (auto& row : hot_rows) {
    row = static_cast<int32_t>(GetU32(q));
    q += 4;
  }
  const int c = params.colocation;
  std::vector<std::vector<int32_t>> companions(c > 0 ? params.num_rows : 0);
  for (auto& list : companions) {
    for (int i = 0; i < c; ++i, q += 4) {
      const int32_t row = static_cast<int32_t>(GetU32(q));
      if (row != -1) list.push_back(row);
    }
  }
  auto layout = Create(params, std::move(hot_rows), companions);
  if (!layout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("layout file: ", layout.status().message()));
  }
  return layout;
}

absl::Status Layout::WriteFile(const std::string& path) const {
  const std::vector<uint8_t> bytes = Serialize();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

absl::StatusOr<Layout> Layout::ReadFile(const std::string& path, uint64_t max_memory_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open layout file ", path));
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  auto layout = Parse(bytes, max_memory_bytes);
  if (!layout.ok()) {
    return absl::Status(layout.status().code(), absl::StrCat(path, ": ", layout.status().message()));
  }
  return layout;
}

}  // namespace veil::embedding
