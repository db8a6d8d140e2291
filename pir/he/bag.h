// bfv-bag: single-server private pooled embedding lookup (EmbeddingBag with private weights).
// The protocol logic without sockets; the server and client wire these types.
//
//   table   T: rows x dim signed 32-bit fixed-point values (e.g. embedding/table.h kFixed32
//           rows); the server publishes BagTableInfo (shape and max |T|) and keeps T in the clear.
//   client  w: one signed weight per row (zero outside its bag), packed in slots and encrypted
//           symmetrically (seeded: half the upload; c_0 rounded by kBagQueryRoundBits: 18% less
//           again); Galois keys uploaded once per session.
//   server  Enc(T^T w) with the baby-step giant-step product (matvec.h) of the dim x rows
//           matrix T^T, compressed (compressed.h): one ciphertext down (142,350 bytes at
//           N = 8192 instead of 356,366), no hint, one server.
//   client  decrypts and reads the exact pooled sum sum_r w_r T[r][j] as int64.
//
// Exactness: one plaintext modulus t, large enough (no CRT): the client refuses a bag unless
// sum_r |w_r| max|T| <= (t - 1) / 2, so the centered residue is the integer sum. With the
// default t of kBagPlainBits = 58 bits and max|T| < 2^31, the weights' L1 norm may reach 2^26
// (e.g. 1024 rows of weight 1.0 in 16.16 fixed point). The noise budget left after the product
// at N = 8192 is 38 to 40 bits (measured with veil-bench he: fresh 111; after the product 40
// for 64 x 8192 and 16 or 18 x 65536, 38 for 256 x 20000 and 64 x 65536; 33 while the server
// still folded the sums with rotations), so decryption is correct with a wide margin; a larger
// t would shrink it by about two bits per bit of t. Compressing the answer adds at most 1/16 of the
// decryption margin whatever the noise (compressed.h), so the budget the client then measures is 4
// or 5 bits (bag_test); Decode refuses an answer whose budget is spent.
//
// Blocks: a ciphertext holds 2 lanes x N/2 slots, so a table of more than N rows (8192 at
// N = 8192) is split into blocks of N rows, one query ciphertext each. The server sums the
// blocks' products before the giant-step rotations, so each extra block costs (b - 1) hoisted
// rotations and about dim plaintext products (plus one query ciphertext up, ~142 KiB); the giant
// steps and the download are shared. dim may be up to N/2. The product leaves each sum spread
// over the slots of its column's windows (matvec.h), which the client adds up after decrypting:
// no rotations fold them on the server, and a dim that is not a power of two costs about dim
// diagonals, not the next power of two (18: 20 instead of 32).
//
// Privacy: the server sees only ciphertexts under the client's key (RLWE, 128-bit standard
// parameters). The answer is not re-randomised and its slots hold partial sums of T, so the
// table is not protected from the client (no circuit privacy) -- this protocol hides the query.
#ifndef VEIL_PIR_HE_BAG_H_
#define VEIL_PIR_HE_BAG_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/he/compressed.h"
#include "pir/he/matvec.h"

namespace veil::he {

inline constexpr int kBagPlainBits = 58;

// SEAL's 128-bit set for N = 2^log_n (13 or 14) with the bag's plaintext modulus.
absl::StatusOr<BfvParams> BagParams(int log_n = 13);

// What the server publishes about its table.
struct BagTableInfo {
  uint64_t params_id = 0;
  uint64_t rows = 0;
  uint64_t dim = 0;
  uint32_t max_abs = 0;  // max |T[r][j]|
};

// 36 bytes: 'V' 'B' 'T' version(1), params id (8), rows (8), dim (8), max_abs (4), 4 zero bytes.
std::vector<uint8_t> SerializeBagTableInfo(const BagTableInfo& info);
// INVALID_ARGUMENT for a wrong length, magic, version, zero shape or nonzero padding.
absl::StatusOr<BagTableInfo> ParseBagTableInfo(absl::Span<const uint8_t> bytes);

// The encrypted weights: one ciphertext per block of N rows, their c_0 rounded by round_bits on
// the wire (0: exact).
struct BagQuery {
  std::vector<Ciphertext> blocks;
  int round_bits = 0;
};

// The bits a query's c_0 drops on the wire (SerializeCiphertext's round_c0_bits): 32 of its 174
// at N = 8192, 145,455 bytes a block instead of 178,222 (18% less up). c_0 moves by at most
// 2^31, which adds to the query's fresh noise (a few units) and so to the product's noise, which
// grows by about one bit per dropped bit past ~8: measured at N = 8192 (budget after the product
// for d = 0 / 32 / 38): 8192 x 16: 41 / 18 / 12; 65536 x 16: 40 / 16 / 10; 65536 x 64 and
// 20000 x 256: 38 / 15 / 9; 262144 x 16: 44 / 15 / 9. So 15 bits stay after the product at 32,
// where the compressed answer's rounding (1/16 of the margin) needs ~4: the budget the client
// measures stays 4, and the product's noise adds at most 2^-15 of the margin to the rounding's.
// At N = 16384 (BagParams(14), a 389-bit Q) 251 to 254 bits stay after the product exact and 229
// to 232 rounded (16384 x 16, 131072 x 16, 40000 x 256).
inline constexpr int kBagQueryRoundBits = 32;

// 'V' 'B' 'Q' version(1), count (4 bytes), then per block its length (4 bytes) and its
// serialized ciphertext (serialization.h), c_0 rounded by q.round_bits (0: exact; servers from
// before 2026-12-06 read only those). The blocks are serialized on up to `threads` threads.
absl::StatusOr<std::vector<uint8_t>> SerializeBagQuery(const BfvContext& ctx, const BagQuery& q,
                                                       int threads = 1);
// INVALID_ARGUMENT for malformed bytes (as ParseCiphertext), more than max_blocks blocks, or
// blocks rounded by different bits. The blocks are parsed on up to `threads` threads (the same
// result and the same first error on any number).
absl::StatusOr<BagQuery> ParseBagQuery(const BfvContext& ctx, absl::Span<const uint8_t> bytes,
                                       size_t max_blocks, int threads = 1);

// Bytes of one lookup and of the session's keys.
struct BagSizes {
  size_t query_bytes = 0;       // up, per lookup
  size_t answer_bytes = 0;      // down, per lookup
  size_t galois_keys = 0;       // how many
  size_t galois_key_bytes = 0;  // up, once per session
};

// The sizes of a session with a table of `plan`'s shape, its queries rounded by
// query_round_bits (what BagClient::Sizes reports; the server checks uploads against them).
BagSizes SizesOf(const BfvContext& ctx, const MatVecPlan& plan, int query_round_bits = 0);

class BagServer {
 public:
  // table: rows x dim values, row-major. Returns INVALID_ARGUMENT if the shape is empty, does not
  // match the table's length, dim > N/2, or the context's t is too small for 32-bit entries.
  static absl::StatusOr<std::unique_ptr<BagServer>> Create(std::shared_ptr<const BfvContext> ctx,
                                                           absl::Span<const int32_t> table,
                                                           size_t rows, size_t dim,
                                                           int threads = 1);

  const BagTableInfo& info() const { return info_; }
  const MatVecPlan& plan() const { return matrix_.plan(); }
  // Bytes the encoded table occupies (the pre-rotated diagonals, NTT form).
  size_t encoded_bytes() const { return matrix_.bytes(); }
  // Enc(T^T w), compressed. Errors of EncodedMatrix::Multiply (wrong block count, parameters,
  // missing keys).
  absl::StatusOr<CompressedCiphertext> Answer(const BagQuery& query, const GaloisKeys& gk,
                                              int threads = 1) const;

 private:
  BagServer(BagTableInfo info, EncodedMatrix matrix) : info_(info), matrix_(std::move(matrix)) {}

  BagTableInfo info_;
  EncodedMatrix matrix_;
};

class BagClient {
 public:
  // Returns INVALID_ARGUMENT if info belongs to other parameters or its shape cannot be served.
  static absl::StatusOr<std::unique_ptr<BagClient>> Create(std::shared_ptr<const BfvContext> ctx,
                                                           const BagTableInfo& info);

  const SecretKey& secret_key() const { return sk_; }
  BagSizes Sizes(int query_round_bits = 0) const;
  // The Galois keys the server needs (upload once per session).
  absl::StatusOr<GaloisKeys> MakeGaloisKeys() const;
  // A bag: rows (each below info.rows, no repeats) and their weights. Returns INVALID_ARGUMENT for
  // a row out of range or repeated, lengths that differ, or weights too large for an exact sum
  // (sum |w| max|T| > (t - 1) / 2). The blocks are encoded and encrypted on up to `threads`
  // threads.
  absl::StatusOr<BagQuery> Query(absl::Span<const uint64_t> rows, absl::Span<const int64_t> weights,
                                 int threads = 1) const;
  // The same query serialized as SerializeBagQuery would with round_bits (0, or
  // CheckRoundBits' range), each block serialized on its thread as soon as it is encrypted and
  // dropped: the lookup holds the message and a block per thread, not every block's ciphertext
  // (at 2^20 rows 18.6 MB instead of 64 MiB more).
  absl::StatusOr<std::vector<uint8_t>> SerializedQuery(absl::Span<const uint64_t> rows,
                                                       absl::Span<const int64_t> weights,
                                                       int round_bits, int threads = 1) const;
  // The pooled sum sum_r w_r T[r][.] (dim values). INVALID_ARGUMENT for a ciphertext of other
  // parameters or bits; DATA_LOSS if its noise budget is exhausted (the result would be wrong).
  absl::StatusOr<std::vector<int64_t>> Decode(const CompressedCiphertext& answer) const;

 private:
  BagClient(std::shared_ptr<const BfvContext> ctx, BagTableInfo info, MatVecPlan plan)
      : ctx_(std::move(ctx)), info_(info), plan_(plan), sk_(GenerateSecretKey(*ctx_)) {}

  // The bag's weights checked and packed into the blocks' slots (plan_.PackInput).
  absl::StatusOr<std::vector<std::vector<uint64_t>>> Slots(absl::Span<const uint64_t> rows,
                                                           absl::Span<const int64_t> weights) const;
  // One block's slots encoded and encrypted; the slots and the plaintext wiped.
  absl::StatusOr<Ciphertext> EncryptBlock(std::vector<uint64_t>& slots) const;

  std::shared_ptr<const BfvContext> ctx_;
  BagTableInfo info_;
  MatVecPlan plan_;
  SecretKey sk_;
};

}  // namespace veil::he

#endif  // VEIL_PIR_HE_BAG_H_
