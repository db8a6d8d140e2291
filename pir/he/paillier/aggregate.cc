#include "pir/he/paillier/aggregate.h"

#include <algorithm>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace veil::he {
namespace {

// Element (row, column) of the rows x columns grid being reduced over rows.
using Element = std::function<const Mpz&(size_t row, size_t column)>;

// Runs fn(0..count-1) on up to `count` threads.
void ParallelFor(size_t count, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  for (size_t i = 1; i < count; ++i) threads.emplace_back(fn, i);
  if (count > 0) fn(0);
  for (std::thread& t : threads) t.join();
}

// Products over rows [row_begin, row_end) for columns [column_begin, column_end) into out.
void ReduceBlock(const PublicKey& key, const Element& at, size_t row_begin, size_t row_end,
                 size_t column_begin, size_t column_end, std::vector<Mpz>& out) {
  Mpz scratch;
  for (size_t c = column_begin; c < column_end; ++c) out[c] = at(row_begin, c);
  for (size_t r = row_begin + 1; r < row_end; ++r) {
    for (size_t c = column_begin; c < column_end; ++c) MulModInto(key, out[c], at(r, c), scratch);
  }
}

std::vector<Mpz> ReduceThreaded(const PublicKey& key, const Element& at, size_t rows,
                                size_t columns, int threads) {
  // Row chunks first (independent running products); spare threads split the columns.
  const size_t row_chunks = std::min<size_t>(threads, rows);
  const size_t column_chunks = std::min<size_t>(std::max<size_t>(1, threads / row_chunks), columns);
  std::vector<std::vector<Mpz>> partial(row_chunks, std::vector<Mpz>(columns));
  ParallelFor(row_chunks * column_chunks, [&](size_t task) {
    const size_t rc = task / column_chunks, cc = task % column_chunks;
    ReduceBlock(key, at, rows * rc / row_chunks, rows * (rc + 1) / row_chunks,
                columns * cc / column_chunks, columns * (cc + 1) / column_chunks, partial[rc]);
  });
  // Pairwise tree over the chunks' partial products.
  for (size_t step = 1; step < row_chunks; step *= 2) {
    const size_t pairs = (row_chunks - step + 2 * step - 1) / (2 * step);
    ParallelFor(pairs, [&](size_t pair) {
      const size_t left = pair * 2 * step;
      Mpz scratch;
      for (size_t c = 0; c < columns; ++c) {
        MulModInto(key, partial[left][c], partial[left + step][c], scratch);
      }
    });
  }
  return std::move(partial[0]);
}

std::vector<Mpz> ReduceSequential(const PublicKey& key, const Element& at, size_t rows,
                                  size_t columns) {
  std::vector<Mpz> out(columns);
  ReduceBlock(key, at, 0, rows, 0, columns, out);
  return out;
}

absl::Status CheckThreads(int threads) {
  return threads < 1 ? absl::InvalidArgumentError("aggregate: threads must be >= 1")
                     : absl::OkStatus();
}

absl::Status CheckBatches(const PublicKey& key, absl::Span<const CiphertextBatch> batches) {
  if (batches.empty()) return absl::InvalidArgumentError("aggregate: no batches");
  const CiphertextBatch& first = batches[0];
  uint64_t summands = 0;
  for (size_t i = 0; i < batches.size(); ++i) {
    const CiphertextBatch& b = batches[i];
    if (b.key_id != key.id()) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregate: batch ", i, " was encrypted under another key"));
    }
    if (!(b.packing == first.packing) || b.values != first.values ||
        b.ciphertexts.size() != first.ciphertexts.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("aggregate: batch ", i, " has another packing or size than batch 0"));
    }
    if (b.ciphertexts.empty()) return absl::InvalidArgumentError("aggregate: empty batch");
    summands += b.summands;
  }
  if (first.packing.value_bits != 0) {
    auto packer = Packer::Create(key, first.packing);
    if (!packer.ok()) return packer.status();
    if (auto s = packer->CheckSummands(summands); !s.ok()) return s;
  }
  return absl::OkStatus();
}

using Reducer = std::function<std::vector<Mpz>(const Element&, size_t, size_t)>;

absl::StatusOr<Ciphertext> AggregateWith(absl::Span<const Ciphertext> ciphertexts, int threads,
                                         const Reducer& reduce) {
  if (auto s = CheckThreads(threads); !s.ok()) return s;
  if (ciphertexts.empty()) return absl::InvalidArgumentError("aggregate: no ciphertexts");
  std::vector<Mpz> sum =
      reduce([&](size_t row, size_t) -> const Mpz& { return ciphertexts[row].value; },
             ciphertexts.size(), 1);
  return Ciphertext{std::move(sum[0])};
}

absl::StatusOr<CiphertextBatch> AggregateBatchesWith(const PublicKey& key,
                                                     absl::Span<const CiphertextBatch> batches,
                                                     int threads, const Reducer& reduce) {
  if (auto s = CheckThreads(threads); !s.ok()) return s;
  if (auto s = CheckBatches(key, batches); !s.ok()) return s;
  CiphertextBatch out{key.id(), batches[0].packing, batches[0].values, 0, {}};
  for (const CiphertextBatch& b : batches) out.summands += b.summands;
  std::vector<Mpz> sums =
      reduce([&](size_t row,
                 size_t column) -> const Mpz& { return batches[row].ciphertexts[column].value; },
             batches.size(), batches[0].ciphertexts.size());
  out.ciphertexts.reserve(sums.size());
  for (Mpz& s : sums) out.ciphertexts.push_back(Ciphertext{std::move(s)});
  return out;
}

}  // namespace

absl::StatusOr<Ciphertext> Aggregate(const PublicKey& key, absl::Span<const Ciphertext> ciphertexts,
                                     int threads) {
  return AggregateWith(ciphertexts, threads, [&](const Element& at, size_t r, size_t c) {
    return ReduceThreaded(key, at, r, c, threads);
  });
}

absl::StatusOr<Ciphertext> AggregateSequential(const PublicKey& key,
                                               absl::Span<const Ciphertext> ciphertexts,
                                               int threads) {
  return AggregateWith(ciphertexts, threads, [&](const Element& at, size_t r, size_t c) {
    return ReduceSequential(key, at, r, c);
  });
}

absl::StatusOr<CiphertextBatch> AggregateBatches(const PublicKey& key,
                                                 absl::Span<const CiphertextBatch> batches,
                                                 int threads) {
  return AggregateBatchesWith(key, batches, threads, [&](const Element& at, size_t r, size_t c) {
    return ReduceThreaded(key, at, r, c, threads);
  });
}

absl::StatusOr<CiphertextBatch> AggregateBatchesSequential(
    const PublicKey& key, absl::Span<const CiphertextBatch> batches, int threads) {
  return AggregateBatchesWith(key, batches, threads, [&](const Element& at, size_t r, size_t c) {
    return ReduceSequential(key, at, r, c);
  });
}

}  // namespace veil::he
