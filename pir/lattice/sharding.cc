#include "pir/lattice/sharding.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pir/he/parallel.h"
#include "pir/lattice/deferred_packing.h"

namespace veil::lattice {
namespace {

// INVALID_ARGUMENT unless `ranges` cover [0, total) in order, none empty.
template <class Shard, class RangeOf>
absl::Status CheckCover(const std::vector<Shard>& shards, uint64_t total, RangeOf range_of,
                        const char* what) {
  uint64_t next = 0;
  for (const Shard& s : shards) {
    const RowRange& r = range_of(s);
    if (r.first != next || r.count == 0) {
      return absl::InvalidArgumentError(absl::StrCat("shards of ", total, " ", what,
                                                     ": a shard starts at ", r.first, " with ",
                                                     r.count, ", expected one at ", next));
    }
    next += r.count;
  }
  if (next != total || shards.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shards of ", total, " ", what, " cover ", next));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<RowRange> SplitRows(uint64_t rows, uint64_t parts, uint64_t align) {
  std::vector<RowRange> out;
  const uint64_t blocks = (rows + align - 1) / align;
  const uint64_t used = std::min(parts, blocks);
  uint64_t first = 0;
  for (uint64_t p = 0; p < used; ++p) {
    // The first blocks % used ranges take one block more.
    const uint64_t take = blocks / used + (p < blocks % used ? 1 : 0);
    const uint64_t count = std::min(rows - first, take * align);
    out.push_back({first, count});
    first += count;
  }
  return out;
}

ByteMatrixView RowsOf(const ByteMatrixView& db, const RowRange& range) {
  return ByteMatrixView{db.row(range.first), range.count, db.cols, db.stride};
}

absl::StatusOr<std::unique_ptr<RowShardedProduct>> RowShardedProduct::Create(
    uint64_t rows, std::vector<Shard> shards) {
  if (absl::Status s = CheckCover(
          shards, rows, [](const Shard& s) -> const RowRange& { return s.range; }, "rows");
      !s.ok()) {
    return s;
  }
  for (const Shard& s : shards) {
    if (s.product == nullptr) return absl::InvalidArgumentError("a shard without a product");
  }
  return std::unique_ptr<RowShardedProduct>(new RowShardedProduct(rows, std::move(shards)));
}

std::string RowShardedProduct::name() const {
  return absl::StrCat(shards_[0].product->name(), " x ", shards_.size());
}

bool RowShardedProduct::on_host() const {
  for (const Shard& shard : shards_) {
    if (shard.product->on_host()) return true;
  }
  return false;
}

absl::Status RowShardedProduct::Multiply(absl::Span<const uint32_t> queries, int batch,
                                         absl::Span<uint32_t> out) const {
  if (batch < 1 || out.size() != static_cast<uint64_t>(batch) * rows_ ||
      queries.size() % static_cast<uint64_t>(batch) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharded product: ", queries.size(), " query words and ", out.size(),
                     " answer words for a batch of ", batch, " over ", rows_, " rows"));
  }
  std::vector<absl::Status> status(shards_.size());
  he::internal::ParallelFor(static_cast<int>(shards_.size()), shards_.size(), [&](size_t i) {
    const Shard& s = shards_[i];
    std::vector<uint32_t> part(static_cast<uint64_t>(batch) * s.range.count);
    status[i] = s.product->Multiply(queries, batch, absl::MakeSpan(part));
    if (!status[i].ok()) return;
    for (int b = 0; b < batch; ++b) {
      std::copy_n(part.begin() + b * s.range.count, s.range.count,
                  out.begin() + b * rows_ + s.range.first);
    }
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<GroupShardedPackingEngine>> GroupShardedPackingEngine::Create(
    const RingContext& ctx, uint64_t groups, std::vector<Shard> shards) {
  if (absl::Status s = CheckCover(
          shards, groups, [](const Shard& s) -> const RowRange& { return s.groups; }, "groups");
      !s.ok()) {
    return s;
  }
  for (const Shard& s : shards) {
    if (s.engine == nullptr) return absl::InvalidArgumentError("a shard without an engine");
  }
  return std::unique_ptr<GroupShardedPackingEngine>(
      new GroupShardedPackingEngine(2 * ctx.k() * ctx.n(), groups, std::move(shards)));
}

std::string GroupShardedPackingEngine::name() const {
  return absl::StrCat(shards_[0].engine->name(), " x ", shards_.size());
}

absl::Status GroupShardedPackingEngine::CheckSize(absl::Span<const uint64_t> sums) const {
  if (sums.size() != groups_ * group_words_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharded packing sums: ", sums.size(), " sums (expected ", groups_ * group_words_, ")"));
  }
  return absl::OkStatus();
}

absl::Status GroupShardedPackingEngine::Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                                             absl::Span<const uint8_t> ciphertext, int threads,
                                             absl::Span<uint64_t> sums) const {
  if (absl::Status s = CheckSize(sums); !s.ok()) return s;
  const int each = std::max(1, threads / static_cast<int>(shards_.size()));
  std::vector<absl::Status> status(shards_.size());
  he::internal::ParallelFor(static_cast<int>(shards_.size()), shards_.size(), [&](size_t i) {
    const Shard& s = shards_[i];
    status[i] =
        s.engine->Sums(keys, ciphertext, each,
                       sums.subspan(s.groups.first * group_words_, s.groups.count * group_words_));
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<absl::Status> GroupShardedPackingEngine::SumsBatch(
    absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts,
    absl::Span<const absl::Span<uint64_t>> sums, int threads) const {
  const size_t count = keys.size();
  if (absl::Status s = internal::CheckSumsBatch(count, ciphertexts.size(), sums.size(), threads);
      !s.ok()) {
    return std::vector<absl::Status>(count, s);
  }
  std::vector<absl::Status> out(count);
  std::vector<size_t> sized;  // the queries whose sums have the right size
  std::vector<std::shared_ptr<const he::GaloisKeys>> sized_keys;
  std::vector<absl::Span<const uint8_t>> sized_ciphertexts;
  for (size_t q = 0; q < count; ++q) {
    out[q] = CheckSize(sums[q]);
    if (!out[q].ok()) continue;
    sized.push_back(q);
    sized_keys.push_back(keys[q]);
    sized_ciphertexts.push_back(ciphertexts[q]);
  }
  if (sized.empty()) return out;
  const int each = std::max(1, threads / static_cast<int>(shards_.size()));
  std::vector<std::vector<absl::Status>> status(shards_.size());
  he::internal::ParallelFor(static_cast<int>(shards_.size()), shards_.size(), [&](size_t i) {
    const Shard& s = shards_[i];
    std::vector<absl::Span<uint64_t>> parts;
    for (size_t q : sized) {
      parts.push_back(
          sums[q].subspan(s.groups.first * group_words_, s.groups.count * group_words_));
    }
    status[i] = s.engine->SumsBatch(sized_keys, sized_ciphertexts, parts, each);
  });
  for (const std::vector<absl::Status>& shard : status) {
    for (size_t j = 0; j < sized.size(); ++j) {
      if (out[sized[j]].ok()) out[sized[j]] = shard[j];
    }
  }
  return out;
}

absl::StatusOr<std::vector<SwitchedCiphertext>> GroupShardedPackingEngine::Switch(
    absl::Span<const RlweCiphertext> packed, int threads) const {
  if (packed.empty()) return std::vector<SwitchedCiphertext>();
  const int each = std::max(1, threads / static_cast<int>(shards_.size()));
  const std::vector<RowRange> parts = SplitRows(packed.size(), shards_.size(), 1);
  std::vector<absl::StatusOr<std::vector<SwitchedCiphertext>>> done(parts.size());
  he::internal::ParallelFor(static_cast<int>(parts.size()), parts.size(), [&](size_t i) {
    done[i] = shards_[i].engine->Switch(packed.subspan(parts[i].first, parts[i].count), each);
  });
  std::vector<SwitchedCiphertext> out;
  out.reserve(packed.size());
  for (auto& part : done) {
    if (!part.ok()) return part.status();
    for (SwitchedCiphertext& ct : *part) out.push_back(std::move(ct));
  }
  return out;
}

bool GroupShardedPackingEngine::host_switching() const {
  for (const Shard& shard : shards_) {
    if (shard.engine->host_switching()) return true;
  }
  return false;
}

}  // namespace veil::lattice
