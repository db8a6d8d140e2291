#include "pir/lattice/server.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pir/lattice/sharding.h"

namespace veil::lattice {
namespace {

constexpr uint64_t kN = kLweDimension;

class CpuDatabaseProduct : public DatabaseProduct {
 public:
  CpuDatabaseProduct(const ByteMatrixView& db, int threads) : db_(db), threads_(threads) {}
  std::string name() const override { return "cpu"; }
  absl::Status Multiply(absl::Span<const uint32_t> queries, int batch,
                        absl::Span<uint32_t> out) const override {
    return MultiplyOn(threads_, queries, batch, out);
  }
  absl::Status MultiplyOn(int threads, absl::Span<const uint32_t> queries, int batch,
                          absl::Span<uint32_t> out) const override {
    return MultiplyBytes(db_, queries, batch, out, db_.rows, threads);
  }

 private:
  ByteMatrixView db_;
  int threads_;
};

}  // namespace

std::unique_ptr<DatabaseProduct> MakeCpuProduct(const ByteMatrixView& db, int threads) {
  return std::make_unique<CpuDatabaseProduct>(db, threads);
}

absl::Status ValidateConfig(const LweConfig& config) {
  if (absl::Status s = ValidateShape(config.shape); !s.ok()) return s;
  if (config.seed != DeriveSeed(config.shape, config.table_digest)) {
    return absl::InvalidArgumentError("the seed of A is not the one derived from the table");
  }
  if (config.hint_bytes != sizeof(HintHeader) + 4 * config.shape.hint_words()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a hint of ", config.hint_bytes, " bytes, the shape needs ",
                     sizeof(HintHeader) + 4 * config.shape.hint_words()));
  }
  if (config.hint_chunk_bytes == 0) {
    return absl::InvalidArgumentError("the hint chunk size is zero");
  }
  return absl::OkStatus();
}

LweServer::LweServer(Database database, const LweServerOptions& options)
    : database_(std::move(database)), threads_(std::max(1, options.threads)) {
  product_ = std::make_unique<CpuDatabaseProduct>(database_.view(), threads_);
}

LweServer::~LweServer() = default;

absl::Status LweServer::Finish(const embedding::TableDigestBytes& digest, Hint hint) {
  const Shape& shape = database_.shape();
  config_.shape = shape;
  config_.table_digest = digest;
  config_.seed = DeriveSeed(shape, digest);
  blob_ = SerializeClientHint(MakeHintHeader(shape, config_.seed, digest, hint), hint);
  config_.hint_bytes = blob_.size();
  config_.hint_digest = Blake2b256(blob_);
  server_digits_ = std::move(hint.server_digits);
  if (shape.protocol == Protocol::kDoublePir) {
    // Kept for digits(a1) * A2, in the layout MultiplyBytesByMatrix reads.
    a2_rows_.assign(AlignedStride(shape.d1) * kN, 0);
    PublicMatrix(config_.seed, MatrixDomain::kA2, shape.d1)
        .ExpandRows(0, shape.d1, absl::MakeSpan(a2_rows_).first(shape.d1 * kN));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LweServer>> LweServer::Open(const std::string& table_path,
                                                           const LweServerOptions& options) {
  absl::StatusOr<std::unique_ptr<embedding::Table>> table = embedding::Table::Open(table_path);
  if (!table.ok()) return table.status();
  LweServerOptions with_path = options;
  if (with_path.hint_path.empty()) with_path.hint_path = HintPathFor(table_path, options.protocol);
  return FromTable(**table, with_path);
}

absl::StatusOr<std::unique_ptr<LweServer>> LweServer::FromTable(const embedding::Table& table,
                                                                const LweServerOptions& options) {
  absl::StatusOr<Shape> shape =
      ChooseShape(options.protocol, table.rows(), 4 * table.row_words(), options.shape);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<Database> db = Database::FromTable(*shape, table);
  if (!db.ok()) return db.status();
  std::unique_ptr<LweServer> server(new LweServer(*std::move(db), options));
  const embedding::TableDigestBytes digest = table.digest();
  const Seed seed = DeriveSeed(*shape, digest);
  absl::StatusOr<Hint> hint;
  if (options.hint_path.empty()) {
    hint = ComputeHint(*shape, seed, server->database_.view(), server->threads_);
    server->hint_note_ = "computed in memory (no hint file)";
  } else {
    hint = LoadOrComputeHint(options.hint_path, *shape, seed, digest, server->database_.view(),
                             server->threads_, &server->hint_note_);
  }
  if (!hint.ok()) return hint.status();
  if (absl::Status s = server->Finish(digest, *std::move(hint)); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::unique_ptr<LweServer>> LweServer::FromRecords(
    absl::Span<const uint8_t> records, uint64_t rows, uint32_t record_bytes,
    const embedding::TableDigestBytes& digest, const LweServerOptions& options) {
  absl::StatusOr<Shape> shape = ChooseShape(options.protocol, rows, record_bytes, options.shape);
  if (!shape.ok()) return shape.status();
  absl::StatusOr<Database> db = Database::FromRecords(*shape, records);
  if (!db.ok()) return db.status();
  std::unique_ptr<LweServer> server(new LweServer(*std::move(db), options));
  absl::StatusOr<Hint> hint =
      ComputeHint(*shape, DeriveSeed(*shape, digest), server->database_.view(), server->threads_);
  if (!hint.ok()) return hint.status();
  server->hint_note_ = "computed in memory";
  if (absl::Status s = server->Finish(digest, *std::move(hint)); !s.ok()) return s;
  return server;
}

uint64_t LweServer::hint_chunks() const {
  return (blob_.size() + config_.hint_chunk_bytes - 1) / config_.hint_chunk_bytes;
}

absl::StatusOr<absl::Span<const uint8_t>> LweServer::HintChunk(uint64_t index) const {
  if (index >= hint_chunks()) {
    return absl::OutOfRangeError(absl::StrCat(
        "hint chunk ", index, " is out of range (the hint has ", hint_chunks(), " chunks)"));
  }
  const uint64_t begin = index * config_.hint_chunk_bytes;
  return absl::MakeConstSpan(blob_).subspan(
      begin, std::min<uint64_t>(config_.hint_chunk_bytes, blob_.size() - begin));
}

void LweServer::SetDatabaseProduct(std::unique_ptr<DatabaseProduct> product) {
  product_ = std::move(product);
}

absl::Status LweServer::Answer(absl::Span<const uint32_t> queries, int batch,
                               absl::Span<uint32_t> answers, int threads) const {
  const Shape& shape = config_.shape;
  if (batch < 1) return absl::InvalidArgumentError("the batch is empty");
  if (threads < 1) return absl::InvalidArgumentError("an answer needs at least one thread");
  if (queries.size() != batch * shape.query_words()) {
    return absl::InvalidArgumentError(
        absl::StrCat("queries hold ", queries.size(), " words, expected ", batch, " x ",
                     shape.query_words(), " (", std::string(ProtocolName(shape.protocol)), ")"));
  }
  if (answers.size() != batch * shape.answer_words()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "answers hold ", answers.size(), " words, expected ", batch, " x ", shape.answer_words()));
  }
  if (shape.protocol == Protocol::kSimplePir) {
    return product_->MultiplyOn(threads, queries, batch, answers);
  }
  return AnswerDouble(queries, batch, answers, threads);
}

// DoublePIR. First level, one product for the batch: a1 = DB * q1 (D1 words per query). Then per
// query b: its answer's digit matrix D (4 rows of D1 bytes, row p = byte p of each word), and the
// second fold over [H1 | a1] written straight into the answer: a2_j = M1 * q2_j (4n words) for
// each second-level query j, h2_j = D * q2_j (4 words), and h1 = D * A2 (n x 4 words, k-major).
absl::Status LweServer::AnswerDouble(absl::Span<const uint32_t> queries, int batch,
                                     absl::Span<uint32_t> answers, int threads) const {
  const Shape& shape = config_.shape;
  const uint64_t r_bytes = shape.record_bytes, d0 = shape.d0, d1 = shape.d1;
  const uint64_t qw = shape.query_words(), aw = shape.answer_words();
  const uint64_t digit_rows = kDigitsPerWord * kN;
  std::vector<uint32_t> q1(batch * d0), a1(batch * d1);
  for (int b = 0; b < batch; ++b) {
    std::copy_n(queries.begin() + b * qw, d0, q1.begin() + b * d0);
  }
  if (absl::Status s = product_->MultiplyOn(threads, q1, batch, absl::MakeSpan(a1)); !s.ok()) {
    return s;
  }

  const uint64_t stride = AlignedStride(d1);
  const ByteMatrixView m1{server_digits_.data(), digit_rows, d1, stride};
  std::vector<int8_t> digits(kDigitsPerWord * stride, 0);
  const ByteMatrixView own{digits.data(), kDigitsPerWord, d1, stride};
  for (int b = 0; b < batch; ++b) {
    for (uint64_t i = 0; i < d1; ++i) {
      for (uint32_t p = 0; p < kDigitsPerWord; ++p) {
        digits[p * stride + i] = static_cast<int8_t>(a1[b * d1 + i] >> (8 * p));
      }
    }
    const absl::Span<const uint32_t> q2 = queries.subspan(b * qw + d0, r_bytes * d1);
    const absl::Span<uint32_t> out = answers.subspan(b * aw, aw);
    const int r = static_cast<int>(r_bytes);
    absl::Status s = MultiplyBytes(m1, q2, r, out.first(r_bytes * digit_rows), digit_rows, threads);
    s.Update(MultiplyBytes(own, q2, r, out.subspan(r_bytes * digit_rows, r_bytes * kDigitsPerWord),
                           kDigitsPerWord, 1));
    s.Update(
        MultiplyBytesByMatrix(own, a2_rows_, kN, out.last(kDigitsPerWord * kN), kDigitsPerWord, 1));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

LweServerMemory LweServer::memory() const {
  LweServerMemory m;
  m.database = database_.bytes();
  m.hint_blob = blob_.size();
  m.server_digits = server_digits_.size();
  m.a2 = 4 * a2_rows_.size();
  return m;
}

}  // namespace veil::lattice
