// Several devices serving one LWE table (issue 15's row shards): the database product split by
// rows, each shard's rows computed by its own product (one per GPU: server/backend_select.h,
// --gpus), and a packed server's sums split by groups of N rows, each shard's groups summed by its
// own engine over its part of the packing matrix. The products' outputs are disjoint rows and the
// engines' disjoint groups, so nothing is added up: each shard writes its own part of the result
// (each device copies its rows back over its own link, concurrently, instead of gathering them on
// one device first). Generic over the products and engines, so CI checks the splitting with CPU
// ones; no CUDA here.
#ifndef VEIL_PIR_LATTICE_SHARDING_H_
#define VEIL_PIR_LATTICE_SHARDING_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/packed.h"
#include "pir/lattice/server.h"

namespace veil::lattice {

struct RowRange {
  uint64_t first = 0;
  uint64_t count = 0;
  bool operator==(const RowRange&) const = default;
};

// `rows` split into at most `parts` contiguous ranges as even as possible, every boundary a
// multiple of `align` (the ring's N, so that a shard's rows fill whole packed ciphertexts);
// fewer ranges when the aligned blocks run out, none empty. Requires parts, align >= 1.
std::vector<RowRange> SplitRows(uint64_t rows, uint64_t parts, uint64_t align);

// The rows [first, first + count) of a matrix.
ByteMatrixView RowsOf(const ByteMatrixView& db, const RowRange& range);

// The CPU's product over a matrix (what LweServer runs by default), on `threads` threads.
std::unique_ptr<DatabaseProduct> MakeCpuProduct(const ByteMatrixView& db, int threads);

class RowShardedProduct final : public DatabaseProduct {
 public:
  struct Shard {
    RowRange range;
    std::unique_ptr<DatabaseProduct> product;  // over those rows only
  };
  // Returns INVALID_ARGUMENT unless the shards' ranges cover [0, rows) in order, none empty.
  static absl::StatusOr<std::unique_ptr<RowShardedProduct>> Create(uint64_t rows,
                                                                   std::vector<Shard> shards);

  // The shards' product name and their count: "gpu x 2".
  std::string name() const override;
  // Any shard's.
  bool on_host() const override;
  // Every shard's rows for the whole batch, the shards concurrently (one thread each), written
  // into out[b * rows + r]. Returns INVALID_ARGUMENT for spans of the wrong size, else the first
  // failing shard's error.
  absl::Status Multiply(absl::Span<const uint32_t> queries, int batch,
                        absl::Span<uint32_t> out) const override;
  size_t shards() const { return shards_.size(); }

 private:
  RowShardedProduct(uint64_t rows, std::vector<Shard> shards)
      : rows_(rows), shards_(std::move(shards)) {}
  uint64_t rows_;
  std::vector<Shard> shards_;
};

class GroupShardedPackingEngine final : public PackingEngine {
 public:
  struct Shard {
    RowRange groups;                        // of the packing matrix
    std::unique_ptr<PackingEngine> engine;  // over PackingMatrix::Groups of those
  };
  // Returns INVALID_ARGUMENT unless the shards' ranges cover [0, groups) in order, none empty.
  static absl::StatusOr<std::unique_ptr<GroupShardedPackingEngine>> Create(
      const RingContext& ctx, uint64_t groups, std::vector<Shard> shards);

  std::string name() const override;
  uint64_t host_bytes() const override {
    uint64_t bytes = 0;
    for (const Shard& shard : shards_) bytes += shard.engine->host_bytes();
    return bytes;
  }
  // Every shard's sums (each expands the ciphertext itself), concurrently, into its groups' part
  // of `sums`. Returns INVALID_ARGUMENT for sums of the wrong size, else the first failing
  // shard's error.
  absl::Status Sums(const std::shared_ptr<const he::GaloisKeys>& keys,
                    absl::Span<const uint8_t> ciphertext, int threads,
                    absl::Span<uint64_t> sums) const override;
  // Every shard's SumsBatch over the whole batch (a device's batches its passes over its
  // groups), concurrently, each into its groups' part of every query's sums. A query fails with
  // INVALID_ARGUMENT for sums of the wrong size, else with the first shard's error for it;
  // CheckSumsBatch's error for all when the spans disagree.
  std::vector<absl::Status> SumsBatch(absl::Span<const std::shared_ptr<const he::GaloisKeys>> keys,
                                      absl::Span<const absl::Span<const uint8_t>> ciphertexts,
                                      absl::Span<const absl::Span<uint64_t>> sums,
                                      int threads) const override;
  // The ciphertexts split evenly among the shards (the switch needs no matrix), concurrently.
  // Returns the first failing shard's error.
  absl::StatusOr<std::vector<SwitchedCiphertext>> Switch(absl::Span<const RlweCiphertext> packed,
                                                         int threads) const override;
  // Any shard's.
  bool host_switching() const override;

 private:
  GroupShardedPackingEngine(uint64_t group_words, uint64_t groups, std::vector<Shard> shards)
      : group_words_(group_words), groups_(groups), shards_(std::move(shards)) {}
  absl::Status CheckSize(absl::Span<const uint64_t> sums) const;
  uint64_t group_words_;  // 2 k N
  uint64_t groups_;
  std::vector<Shard> shards_;
};

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_SHARDING_H_
