#include "pir/he/bag.h"

#include <sodium.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "pir/he/encoder.h"
#include "pir/he/parallel.h"
#include "pir/he/serialization.h"

namespace veil::he {
namespace {

constexpr uint8_t kInfoMagic[3] = {'V', 'B', 'T'};
constexpr uint8_t kQueryMagic[3] = {'V', 'B', 'Q'};
constexpr uint8_t kBagVersion = 1;
constexpr size_t kInfoBytes = 36;

void PutLe(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

uint64_t GetLe(absl::Span<const uint8_t> in, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{in[at + i]} << (8 * i);
  return v;
}

// A bag query's first 8 bytes: magic, version and block count.
std::vector<uint8_t> QueryHeader(size_t count) {
  std::vector<uint8_t> out(kQueryMagic, kQueryMagic + 3);
  out.push_back(kBagVersion);
  PutLe(out, count, 4);
  return out;
}

uint64_t ToResidue(int64_t v, uint64_t t) {
  return v >= 0 ? static_cast<uint64_t>(v) % t : t - static_cast<uint64_t>(-v) % t;
}

}  // namespace

absl::StatusOr<BfvParams> BagParams(int log_n) {
  if (log_n != 13 && log_n != 14) {
    return absl::InvalidArgumentError(
        absl::StrCat("bfv-bag runs at N = 8192 or 16384, not 2^", log_n));
  }
  return BfvParams::Standard(log_n, kBagPlainBits);
}

std::vector<uint8_t> SerializeBagTableInfo(const BagTableInfo& info) {
  std::vector<uint8_t> out(kInfoMagic, kInfoMagic + 3);
  out.push_back(kBagVersion);
  PutLe(out, info.params_id, 8);
  PutLe(out, info.rows, 8);
  PutLe(out, info.dim, 8);
  PutLe(out, info.max_abs, 4);
  PutLe(out, 0, 4);
  return out;
}

absl::StatusOr<BagTableInfo> ParseBagTableInfo(absl::Span<const uint8_t> bytes) {
  if (bytes.size() != kInfoBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("bag table info has ", bytes.size(), " bytes, expected ", kInfoBytes));
  }
  if (!std::equal(kInfoMagic, kInfoMagic + 3, bytes.begin())) {
    return absl::InvalidArgumentError("not a bag table info (bad magic)");
  }
  if (bytes[3] != kBagVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported bag table info version ", bytes[3]));
  }
  BagTableInfo info{GetLe(bytes, 4, 8), GetLe(bytes, 12, 8), GetLe(bytes, 20, 8),
                    static_cast<uint32_t>(GetLe(bytes, 28, 4))};
  if (info.rows == 0 || info.dim == 0 || GetLe(bytes, 32, 4) != 0) {
    return absl::InvalidArgumentError("bag table info: empty shape or nonzero padding");
  }
  return info;
}

absl::StatusOr<std::vector<uint8_t>> SerializeBagQuery(const BfvContext& ctx, const BagQuery& q,
                                                       int threads) {
  std::vector<absl::StatusOr<std::vector<uint8_t>>> blocks(q.blocks.size(), absl::UnknownError(""));
  internal::ParallelFor(threads, q.blocks.size(), [&](size_t i) {
    blocks[i] = SerializeCiphertext(ctx, q.blocks[i], q.round_bits);
  });
  size_t size = 8;
  for (const absl::StatusOr<std::vector<uint8_t>>& bytes : blocks) {
    if (!bytes.ok()) return bytes.status();
    size += 4 + bytes->size();
  }
  std::vector<uint8_t> out = QueryHeader(q.blocks.size());
  out.reserve(size);
  for (const absl::StatusOr<std::vector<uint8_t>>& bytes : blocks) {
    PutLe(out, bytes->size(), 4);
    out.insert(out.end(), bytes->begin(), bytes->end());
  }
  return out;
}

absl::StatusOr<BagQuery> ParseBagQuery(const BfvContext& ctx, absl::Span<const uint8_t> bytes,
                                       size_t max_blocks, int threads) {
  if (bytes.size() < 8 || !std::equal(kQueryMagic, kQueryMagic + 3, bytes.begin()) ||
      bytes[3] != kBagVersion) {
    return absl::InvalidArgumentError("not a version 1 bag query");
  }
  const uint64_t count = GetLe(bytes, 4, 4);
  if (count == 0 || count > max_blocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("bag query with ", count, " blocks, 1 to ", max_blocks, " allowed"));
  }
  // The blocks' spans up to the first truncated one, parsed on the threads, then checked in
  // order: the first error is the one a block-by-block reading would meet.
  std::vector<absl::Span<const uint8_t>> spans;
  size_t at = 8;
  bool truncated = false;
  for (uint64_t i = 0; i < count && !truncated; ++i) {
    truncated = bytes.size() - at < 4 || bytes.size() - at - 4 < GetLe(bytes, at, 4);
    if (!truncated) {
      spans.push_back(bytes.subspan(at + 4, GetLe(bytes, at, 4)));
      at += 4 + spans.back().size();
    }
  }
  std::vector<absl::StatusOr<Ciphertext>> parsed(spans.size(), absl::UnknownError(""));
  internal::ParallelFor(threads, spans.size(),
                        [&](size_t i) { parsed[i] = ParseCiphertext(ctx, spans[i]); });
  BagQuery q;
  for (size_t i = 0; i < spans.size(); ++i) {
    if (!parsed[i].ok()) return parsed[i].status();
    const int round_bits = SerializedRoundBits(spans[i]);
    if (i == 0) {
      q.round_bits = round_bits;
    } else if (round_bits != q.round_bits) {
      return absl::InvalidArgumentError(
          absl::StrCat("bag query blocks rounded by ", q.round_bits, " and ", round_bits, " bits"));
    }
    q.blocks.push_back(*std::move(parsed[i]));
  }
  if (truncated) return absl::InvalidArgumentError("truncated bag query");
  if (at != bytes.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(bytes.size() - at, " bytes after the end of the bag query"));
  }
  return q;
}

absl::StatusOr<std::unique_ptr<BagServer>> BagServer::Create(std::shared_ptr<const BfvContext> ctx,
                                                             absl::Span<const int32_t> table,
                                                             size_t rows, size_t dim, int threads) {
  if (rows == 0 || dim == 0 || table.size() != rows * dim) {
    return absl::InvalidArgumentError(absl::StrCat("a table of ", rows, " x ", dim, " needs ",
                                                   rows * dim, " values, got ", table.size()));
  }
  const uint64_t t = ctx->params().t;
  if (t <= (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError(
        absl::StrCat("t = ", t, " cannot hold 32-bit table entries exactly"));
  }
  absl::StatusOr<MatVecPlan> plan = MatVecPlan::Create(*ctx, dim, rows);
  if (!plan.ok()) return plan.status();
  // The product's matrix is T^T: dim x rows.
  std::vector<uint64_t> transposed(rows * dim);
  uint32_t max_abs = 0;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < dim; ++j) {
      const int32_t v = table[r * dim + j];
      transposed[j * rows + r] = ToResidue(v, t);
      max_abs = std::max(max_abs, static_cast<uint32_t>(std::abs(int64_t{v})));
    }
  }
  const uint64_t id = ctx->id();
  absl::StatusOr<EncodedMatrix> matrix = EncodedMatrix::Create(ctx, *plan, transposed, threads);
  if (!matrix.ok()) return matrix.status();
  return std::unique_ptr<BagServer>(
      new BagServer(BagTableInfo{id, rows, dim, max_abs}, *std::move(matrix)));
}

absl::StatusOr<CompressedCiphertext> BagServer::Answer(const BagQuery& query, const GaloisKeys& gk,
                                                       int threads) const {
  absl::StatusOr<Ciphertext> product = matrix_.Multiply(query.blocks, gk, threads);
  if (!product.ok()) return product.status();
  return Compress(matrix_.context(), *product);
}

absl::StatusOr<std::unique_ptr<BagClient>> BagClient::Create(std::shared_ptr<const BfvContext> ctx,
                                                             const BagTableInfo& info) {
  if (absl::Status s = ctx->CheckId(info.params_id, "bag table info"); !s.ok()) return s;
  absl::StatusOr<MatVecPlan> plan = MatVecPlan::Create(*ctx, info.dim, info.rows);
  if (!plan.ok()) return plan.status();
  return std::unique_ptr<BagClient>(new BagClient(std::move(ctx), info, *plan));
}

BagSizes SizesOf(const BfvContext& ctx, const MatVecPlan& plan, int query_round_bits) {
  BagSizes s;
  s.query_bytes = 8 + plan.blocks() * (4 + CiphertextBytes(ctx, 2, true, query_round_bits));
  s.answer_bytes = CompressedCiphertextBytes(ctx);
  s.galois_keys = plan.RotationSteps().size();
  s.galois_key_bytes = kHeHeaderBytes + 4 + s.galois_keys * GaloisKeyBytes(ctx);
  return s;
}

BagSizes BagClient::Sizes(int query_round_bits) const {
  return SizesOf(*ctx_, plan_, query_round_bits);
}

absl::StatusOr<GaloisKeys> BagClient::MakeGaloisKeys() const {
  return GenerateGaloisKeys(*ctx_, sk_, plan_.GaloisElements());
}

namespace {

// Plaintext words of a query or an answer, wiped once used.
void WipeWords(std::vector<uint64_t>& words) {
  sodium_memzero(words.data(), words.size() * sizeof(uint64_t));
}

}  // namespace

absl::StatusOr<std::vector<std::vector<uint64_t>>> BagClient::Slots(
    absl::Span<const uint64_t> rows, absl::Span<const int64_t> weights) const {
  if (rows.size() != weights.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(rows.size(), " rows but ", weights.size(), " weights"));
  }
  const uint64_t t = ctx_->params().t, half = (t - 1) / 2;
  std::vector<uint64_t> w(info_.rows, 0);
  std::vector<bool> seen(info_.rows, false);
  // Both say which rows the bag holds: wiped on every way out.
  struct Wipe {
    std::vector<uint64_t>& w;
    std::vector<bool>& seen;
    ~Wipe() {
      WipeWords(w);
      std::fill(seen.begin(), seen.end(), false);
    }
  } wipe{w, seen};
  uint128_t l1 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] >= info_.rows || seen[rows[i]]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "bag row ", rows[i], rows[i] >= info_.rows ? " is outside the table" : " repeats"));
    }
    seen[rows[i]] = true;
    const uint64_t magnitude =
        weights[i] >= 0 ? uint64_t(weights[i]) : uint64_t{0} - uint64_t(weights[i]);
    l1 += magnitude;
    if (magnitude > half || l1 * info_.max_abs > half) {
      return absl::InvalidArgumentError(
          absl::StrCat("the bag's weights times the table's largest |value| (", info_.max_abs,
                       ") exceed (t - 1) / 2 = ", half, ": the pooled sum would not be exact"));
    }
    w[rows[i]] = ToResidue(weights[i], t);
  }
  return plan_.PackInput(w);
}

absl::StatusOr<Ciphertext> BagClient::EncryptBlock(std::vector<uint64_t>& slots) const {
  absl::StatusOr<Plaintext> m = EncodeSlots(*ctx_, slots);
  WipeWords(slots);
  if (!m.ok()) return m.status();
  absl::StatusOr<Ciphertext> ct = EncryptSymmetric(*ctx_, sk_, *m);
  WipeWords(m->coeffs);
  return ct;
}

absl::StatusOr<BagQuery> BagClient::Query(absl::Span<const uint64_t> rows,
                                          absl::Span<const int64_t> weights, int threads) const {
  absl::StatusOr<std::vector<std::vector<uint64_t>>> packed = Slots(rows, weights);
  if (!packed.ok()) return packed.status();
  // Each block encoded and encrypted on one of the threads, its slots and plaintext wiped there.
  std::vector<absl::StatusOr<Ciphertext>> blocks(packed->size(), absl::UnknownError(""));
  internal::ParallelFor(threads, packed->size(),
                        [&](size_t i) { blocks[i] = EncryptBlock((*packed)[i]); });
  BagQuery q;
  for (absl::StatusOr<Ciphertext>& ct : blocks) {
    if (!ct.ok()) return ct.status();
    q.blocks.push_back(*std::move(ct));
  }
  return q;
}

absl::StatusOr<std::vector<uint8_t>> BagClient::SerializedQuery(absl::Span<const uint64_t> rows,
                                                                absl::Span<const int64_t> weights,
                                                                int round_bits,
                                                                int threads) const {
  if (round_bits != 0) {
    if (absl::Status s = CheckRoundBits(*ctx_, round_bits); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<std::vector<uint64_t>>> packed = Slots(rows, weights);
  if (!packed.ok()) return packed.status();
  const size_t count = packed->size();
  const size_t block_bytes = CiphertextBytes(*ctx_, 2, /*seeded=*/true, round_bits);
  std::vector<uint8_t> out = QueryHeader(count);
  out.resize(out.size() + count * (4 + block_bytes));
  // Each block encrypted, serialized into its place and dropped on one of the threads.
  std::vector<absl::Status> status(count);
  internal::ParallelFor(threads, count, [&](size_t i) {
    absl::StatusOr<Ciphertext> ct = EncryptBlock((*packed)[i]);
    if (!ct.ok()) {
      status[i] = ct.status();
      return;
    }
    absl::StatusOr<std::vector<uint8_t>> bytes = SerializeCiphertext(*ctx_, *ct, round_bits);
    if (!bytes.ok() || bytes->size() != block_bytes) {
      status[i] = bytes.ok() ? absl::InternalError("a query block of an unexpected size")
                             : bytes.status();
      return;
    }
    uint8_t* at = out.data() + 8 + i * (4 + block_bytes);
    for (int b = 0; b < 4; ++b) at[b] = static_cast<uint8_t>(block_bytes >> (8 * b));
    std::copy(bytes->begin(), bytes->end(), at + 4);
  });
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> BagClient::Decode(const CompressedCiphertext& answer) const {
  absl::StatusOr<CompressedDecryption> m = DecryptCompressed(*ctx_, sk_, answer);
  if (!m.ok()) return m.status();
  if (m->noise_budget == 0) {
    WipeWords(m->m.coeffs);
    return absl::DataLossError("the answer's noise budget is exhausted: it cannot be decrypted");
  }
  absl::StatusOr<std::vector<uint64_t>> slots = DecodeSlots(*ctx_, m->m);
  WipeWords(m->m.coeffs);
  if (!slots.ok()) return slots.status();
  // Each column's windows summed (mod t), then centred: the exactness bound makes it the sum.
  std::vector<uint64_t> residues = plan_.UnpackOutput(*slots);
  WipeWords(*slots);
  std::vector<int64_t> sums(residues.size());
  const Modulus& t = ctx_->plain_modulus();
  for (size_t j = 0; j < residues.size(); ++j) sums[j] = t.Centered(residues[j]);
  WipeWords(residues);
  return sums;
}

}  // namespace veil::he
