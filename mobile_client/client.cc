#include "mobile_client/client.h"

#include <sodium.h>

#include <utility>

#include "absl/random/bit_gen_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "embedding/layout_table.h"
#include "mobile_client/share_exchange.h"
#include "pir/batch/bags.h"
#include "pir/batch/layout_fetch.h"
#include "pir/batch/random.h"
#include "pir/two_server/query.h"

namespace veil::client {
namespace {

// Dequantizes `count` fetched rows.
absl::StatusOr<std::vector<float>> DecodeRows(const TableInfo& t,
                                              const std::vector<uint32_t>& words, size_t count) {
  std::vector<float> values(count * t.dim);
  for (size_t i = 0; i < count; ++i) {
    absl::Status s =
        embedding::DecodeRow(t.format, t.frac_bits, t.dim,
                             absl::MakeConstSpan(words.data() + i * t.row_words, t.row_words),
                             absl::MakeSpan(values.data() + i * t.dim, t.dim));
    if (!s.ok()) return s;
  }
  return values;
}

// Keys for row indices[i] of ranges[i] (or of the whole table of `rows` rows, without ranges).
absl::StatusOr<std::vector<pir::QueryKeys>> MakeQueries(absl::Span<const uint64_t> indices,
                                                        absl::Span<const RowRange> ranges,
                                                        uint64_t rows, const ClientOptions& o) {
  std::vector<pir::QueryKeys> queries;
  queries.reserve(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const uint64_t domain_rows = ranges.empty() ? rows : ranges[i].rows;
    if (indices[i] >= domain_rows) {
      return absl::InvalidArgumentError(
          ranges.empty()
              ? absl::StrCat("row ", indices[i], " is outside the table (", rows, " rows)")
              : absl::StrCat("index ", indices[i], " is outside range ", i, " (", domain_rows,
                             " rows)"));
    }
    auto q = pir::MakeQuery(domain_rows, indices[i], 1, o.prg, o.output);
    if (!q.ok()) return q.status();
    queries.push_back(*std::move(q));
  }
  return queries;
}

// Checks the tag of every reconstructed row (row i is physical row physical(i) of the version the
// answers came from) and returns the data words without the tags. DATA_LOSS for a row whose tag
// does not match: one of the servers serves a corrupted, tampered or relabelled table, or answered
// wrongly; its row is never returned.
template <typename PhysicalIndex>
absl::StatusOr<std::vector<uint32_t>> CheckTags(const ShareExchange& exchange,
                                                ShareExchange::Answers answers, size_t count,
                                                PhysicalIndex physical) {
  const TableInfo& t = exchange.table();
  const uint32_t share_words = exchange.share_words();
  std::vector<uint32_t>& shares = answers.words;
  if (share_words == t.row_words) return std::move(shares);
  const WipeAtExit<uint32_t> wipe(shares);
  const embedding::RowShape shape{t.format, static_cast<uint8_t>(t.frac_bits), t.dim};
  std::vector<uint32_t> rows(count * t.row_words);
  for (size_t i = 0; i < count; ++i) {
    const absl::Span<const uint32_t> share =
        absl::MakeConstSpan(shares).subspan(i * share_words, share_words);
    if (!embedding::RowTagMatches(t.row_tag, *exchange.row_key(), answers.epoch, physical(i), shape,
                                  share.first(t.row_words), share.subspan(t.row_words))) {
      sodium_memzero(rows.data(), rows.size() * sizeof(uint32_t));  // the rows checked so far
      return exchange.latch().Trip(absl::DataLossError(absl::StrCat(
          "row ", physical(i), " fails its authentication tag: the answers of ",
          exchange.ServerPair(), " do not add up to the row of the table's epoch ", answers.epoch,
          " (a corrupted, tampered or relabelled table, or a wrong answer); not returning it")));
    }
    std::copy(share.begin(), share.begin() + t.row_words, rows.begin() + i * t.row_words);
  }
  return rows;
}

}  // namespace

Client::Client(std::unique_ptr<ShareExchange> exchange) : exchange_(std::move(exchange)) {}
Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (sodium_init() < 0) return absl::InternalError("libsodium failed to initialise");
  if (absl::Status s = FailureLatch(options.failure_latch_file).Check(); !s.ok()) return s;
  auto exchange = ShareExchange::Connect(options);
  if (!exchange.ok()) return exchange.status();
  return std::make_unique<Client>(*std::move(exchange));
}

TableInfo Client::table() const { return exchange_->table(); }

absl::StatusOr<std::vector<uint32_t>> Client::LookupWords(absl::Span<const uint64_t> indices) {
  if (indices.empty()) return absl::InvalidArgumentError("no rows requested");
  auto queries = MakeQueries(indices, {}, table().rows, exchange_->options());
  if (!queries.ok()) return queries.status();
  auto shares = exchange_->Exchange(*queries, {}, {}, exchange_->options().output,
                                    static_cast<uint32_t>(indices.size()), "lookup");
  if (!shares.ok()) return shares.status();
  return CheckTags(*exchange_, *std::move(shares), indices.size(),
                   [&](size_t i) { return indices[i]; });
}

absl::StatusOr<std::vector<uint32_t>> Client::LookupWordsInRanges(
    absl::Span<const uint64_t> indices, absl::Span<const RowRange> ranges) {
  const TableInfo& t = table();
  if (indices.empty()) return absl::InvalidArgumentError("no rows requested");
  if (ranges.size() != indices.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ranges.size(), " row ranges for ", indices.size(), " indices"));
  }
  if (!t.range_queries) {
    return absl::FailedPreconditionError(
        "the servers do not answer range queries (an older server version); use Lookup");
  }
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (absl::Status s = pir::CheckRange(ranges[i], t.rows); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("range ", i, ": ", s.message()));
    }
  }
  auto queries = MakeQueries(indices, ranges, t.rows, exchange_->options());
  if (!queries.ok()) return queries.status();
  auto shares = exchange_->Exchange(*queries, {}, ranges, exchange_->options().output,
                                    static_cast<uint32_t>(indices.size()), "range lookup");
  if (!shares.ok()) return shares.status();
  return CheckTags(*exchange_, *std::move(shares), indices.size(),
                   [&](size_t i) { return ranges[i].first_row + indices[i]; });
}

absl::StatusOr<std::vector<float>> Client::Lookup(absl::Span<const uint64_t> indices) {
  auto words = LookupWords(indices);
  if (!words.ok()) return words.status();
  const WipeAtExit<uint32_t> wipe(*words);
  return DecodeRows(table(), *words, indices.size());
}

absl::StatusOr<std::vector<float>> Client::LookupInRanges(absl::Span<const uint64_t> indices,
                                                          absl::Span<const RowRange> ranges) {
  auto words = LookupWordsInRanges(indices, ranges);
  if (!words.ok()) return words.status();
  const WipeAtExit<uint32_t> wipe(*words);
  return DecodeRows(table(), *words, indices.size());
}

absl::StatusOr<std::vector<uint32_t>> Client::LookupPooledWords(
    absl::Span<const uint64_t> indices, absl::Span<const uint32_t> bag_sizes,
    absl::Span<const int32_t> weights) {
  const TableInfo& t = table();
  if (t.format != embedding::RowFormat::kFixed32) {
    return absl::FailedPreconditionError(
        absl::StrCat("pooled lookups need a fixed-point table; this one is ",
                     embedding::RowFormatName(t.format), " (build it with --format=fixed)"));
  }
  if (bag_sizes.empty()) return absl::InvalidArgumentError("no bags requested");
  batch::CryptoRandom random;
  auto bags = batch::PadBags(indices, bag_sizes, weights, t.rows, exchange_->options().pad_bags_to,
                             absl::BitGenRef(random));
  if (!bags.ok()) return bags.status();
  // Which rows (and padding rows) the bags hold, and their weights.
  const WipeAtExit<uint64_t> wipe_indices(bags->indices);
  const WipeAtExit<uint32_t> wipe_weights(bags->weights);
  if (t.row_tag != embedding::RowTag::kNone) {
    // A sum of tags proves nothing about a sum of rows, and no tag that adds up with the rows
    // mod 2^32 can be checked well (an error of 2^31 in one word passes such a tag with
    // probability 1/2). So the servers answer every key's row, each checked by its tag, and the
    // bags are summed here with the same arithmetic (mod 2^32). The servers see the same keys
    // (padding included) without the bags' boundaries; the download is one row per key.
    auto queries = MakeQueries(bags->indices, {}, t.rows, exchange_->options());
    if (!queries.ok()) return queries.status();
    auto answers = exchange_->Exchange(*queries, {}, {}, exchange_->options().output,
                                       static_cast<uint32_t>(bag_sizes.size()), "pooled lookup");
    if (!answers.ok()) return answers.status();
    auto rows = CheckTags(*exchange_, *std::move(answers), bags->indices.size(),
                          [&](size_t i) { return bags->indices[i]; });
    if (!rows.ok()) return rows.status();
    const WipeAtExit<uint32_t> wipe_rows(*rows);
    std::vector<uint32_t> out(bag_sizes.size() * t.row_words, 0);
    size_t next = 0;
    for (size_t b = 0; b < bags->bag_sizes.size(); ++b) {
      uint32_t* sum = out.data() + b * t.row_words;
      for (uint32_t k = 0; k < bags->bag_sizes[b]; ++k, ++next) {
        const uint32_t* row = rows->data() + next * t.row_words;
        for (uint32_t w = 0; w < t.row_words; ++w) sum[w] += bags->weights[next] * row[w];
      }
    }
    return out;
  }
  std::vector<pir::QueryKeys> queries;
  queries.reserve(bags->indices.size());
  for (size_t i = 0; i < bags->indices.size(); ++i) {
    // Padding keys select a random row with weight 0: they add nothing to the sum.
    auto q = pir::MakeQuery(t.rows, bags->indices[i], bags->weights[i], exchange_->options().prg,
                            dpf::OutputType::kAdditive);
    if (!q.ok()) return q.status();
    queries.push_back(*std::move(q));
  }
  auto answers = exchange_->Exchange(queries, bags->bag_sizes, {}, dpf::OutputType::kAdditive,
                                     static_cast<uint32_t>(bag_sizes.size()), "pooled lookup");
  if (!answers.ok()) return answers.status();
  const WipeAtExit<uint32_t> wipe(answers->words);
  const uint32_t share_words = exchange_->share_words();
  std::vector<uint32_t> out(bag_sizes.size() * t.row_words);
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    std::copy_n(answers->words.begin() + b * share_words, t.row_words,
                out.begin() + b * t.row_words);
  }
  return out;
}

absl::StatusOr<std::vector<float>> Client::LookupPooled(absl::Span<const uint64_t> indices,
                                                        absl::Span<const uint32_t> bag_sizes,
                                                        absl::Span<const int32_t> weights,
                                                        PoolingMode mode) {
  auto divisors = BagDivisors(indices.size(), bag_sizes, weights, mode);
  if (!divisors.ok()) return divisors.status();
  auto sums = LookupPooledWords(indices, bag_sizes, weights);
  if (!sums.ok()) return sums.status();
  const WipeAtExit<uint32_t> wipe(*sums);
  const TableInfo& t = table();
  std::vector<float> values(bag_sizes.size() * t.dim);
  for (size_t b = 0; b < bag_sizes.size(); ++b) {
    absl::Status s = embedding::DecodePooledFixed(
        t.frac_bits, absl::MakeConstSpan(sums->data() + b * t.row_words, t.row_words),
        (*divisors)[b], absl::MakeSpan(values.data() + b * t.dim, t.dim));
    if (!s.ok()) return s;
  }
  return values;
}

absl::StatusOr<LayoutLookup> Client::LookupLayout(const embedding::Layout& layout,
                                                  absl::Span<const int32_t> rows) {
  const TableInfo& t = table();
  if (t.rows != static_cast<uint64_t>(embedding::PhysicalRows(layout)) ||
      t.dim != static_cast<uint64_t>(layout.entry_words())) {
    return absl::FailedPreconditionError(
        absl::StrCat("the servers' table (", t.rows, " rows x ", t.dim,
                     " values) is not the layout's physical "
                     "table (",
                     embedding::PhysicalRows(layout), " x ", layout.entry_words(), ")"));
  }
  batch::CryptoRandom random;
  auto plan = batch::PlanFetch(layout, rows, absl::BitGenRef(random));
  if (!plan.ok()) return plan.status();
  LayoutLookup out;
  std::vector<float> entries;
  const WipeAtExit<float> wipe(entries);
  // Every key of the plan, dummies included, goes to the servers: their count is the layout's
  // constant, whatever is wanted.
  if (!plan->fetches.empty()) {
    batch::RangeLookups lookups = batch::LookupsOf(layout, *plan);
    const WipeAtExit<uint64_t> wipe_indices(lookups.indices);  // which slots are fetched
    auto fetched = LookupInRanges(lookups.indices, lookups.ranges);
    if (!fetched.ok()) return fetched.status();
    entries = *std::move(fetched);
    out.call = last_call();
  }
  auto unpacked = batch::UnpackEntries(layout, *plan, rows, entries, layout.params().row_words);
  if (!unpacked.ok()) return unpacked.status();
  out.rows = std::move(unpacked->rows);
  out.values = std::move(unpacked->values);
  out.missing = std::move(unpacked->missing);
  out.plan = *std::move(plan);
  return out;
}

absl::StatusOr<rpc::StatsSnapshot> Client::ServerStats(int party) {
  return exchange_->Stats(party);
}

CallStats Client::last_call() const { return exchange_->last_call(); }

CallStats Client::totals() const { return exchange_->totals(); }

}  // namespace veil::client
