// Encrypted matrix-vector product y = M x (mod t) for a plaintext m x n matrix M and an encrypted
// x, by the diagonal method (Halevi and Shoup, "Algorithms in HElib", CRYPTO 2014) with baby-step
// giant-step (Halevi and Shoup, CRYPTO 2018, Sec. 4): d diagonals as b baby steps times g giant
// steps, b g >= d, costing (b - 1) + (g - 1) rotations instead of d - 1.
//
// Layout. Slots form two lanes (rows) of S = N/2, each rotated cyclically by RotateRows. The
// columns of M are cut into blocks of two lanes, each lane holding L = the next power of two of
// its columns (all of S when n > 2S), repeated S / L times so that a rotation within the lane is
// a rotation mod L. One input ciphertext per block. Each used slot s of a lane belongs to one
// row r(s) and sums a window of w(s) consecutive columns, s .. s + w(s) - 1 (mod L):
//   diag_i[s] = M[r(s)][(s + i) mod L] for i < w(s), 0 beyond (and 0 in unused slots),
// so that slot s of the result holds sum_{i < w(s)} M[r(s)][s + i] x[s + i]. The slots of one row
// are placed so that their windows tile the lane: the client adds them up (UnpackOutput, over
// both lanes), and the server needs no rotations to fold them. With m rows:
//   m >= L: slot s < m is row s with the whole lane as its window, d = L diagonals;
//   m < L:  rounds of m slots (one per row, in order), q = floor(L / m) of them, the
//           L - q m slots left over spread one or more between rounds, unused: a row's windows
//           then span m or m + 1 (or more) columns, d = m + ceil((L - q m) / q) diagonals
//           (m when m divides L; 19 instead of the next power of two 32 for m = 18, L = 4096).
// d is rounded up to b g for the baby-step giant-step product (the extra diagonals are zero).
// Each giant step k accumulates sum_blocks sum_{j < b} rot_{-kb}(diag_{kb+j}) o rot_j(x_block)
// with the baby steps of all blocks hoisted and left in NTT form, the products summed lazily
// (dot_product.h); then y = sum_k rot_{kb}(inner_k).
// Cost: blocks x (b - 1) hoisted rotations + (g - 1) rotations, and blocks x b g plaintext
// products (each over both lanes). The encoded matrix holds blocks x b g plaintexts of k x N
// residues (8 k N bytes each).
//
// Privacy: x stays encrypted; the result is not re-randomised (no noise flooding), and its slots
// hold the partial sums of the windows, not only their totals: the product protects the client's
// vector, not the matrix.
#ifndef VEIL_PIR_HE_MATVEC_H_
#define VEIL_PIR_HE_MATVEC_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"

namespace veil::he {

class MatVecPlan {
 public:
  // Returns INVALID_ARGUMENT if rows or cols is 0 or rows > N/2.
  static absl::StatusOr<MatVecPlan> Create(const BfvContext& ctx, size_t rows, size_t cols);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t slots_per_lane() const { return lane_; }
  size_t lane_cols() const { return lane_cols_; }      // L
  size_t blocks() const { return blocks_; }            // input ciphertexts
  size_t window() const { return window_; }            // d, the longest window
  size_t baby() const { return baby_; }                // b
  size_t giant() const { return giant_; }              // g
  size_t diagonals() const { return baby_ * giant_; }  // b g >= d
  // The row slot s of a lane sums (-1: unused) and its window's length.
  int32_t slot_row(size_t s) const { return slot_row_[s]; }
  uint32_t slot_window(size_t s) const { return slot_window_[s]; }
  // Rotations of one product (blocks x (b - 1) + g - 1).
  size_t rotations() const { return blocks_ * (baby_ - 1) + giant_ - 1; }
  // The row rotation steps whose Galois keys Multiply needs.
  std::vector<int> RotationSteps() const;
  // Their Galois elements, for GenerateGaloisKeys.
  std::vector<uint32_t> GaloisElements() const;

  // The slot vectors (N values) of the blocks' input ciphertexts. x: cols values mod t.
  // Returns INVALID_ARGUMENT for another length or a value not below t.
  absl::StatusOr<std::vector<std::vector<uint64_t>>> PackInput(absl::Span<const uint64_t> x) const;
  // y (rows values mod t): each row's slots summed over both lanes.
  std::vector<uint64_t> UnpackOutput(absl::Span<const uint64_t> slots) const;

 private:
  int log_n_ = 0;
  uint64_t t_ = 0;
  size_t rows_ = 0, cols_ = 0, lane_ = 0, lane_cols_ = 0, blocks_ = 0;
  size_t window_ = 0, baby_ = 0, giant_ = 0;
  std::vector<int32_t> slot_row_;      // S entries
  std::vector<uint32_t> slot_window_;  // S entries
};

// M encoded for one plan: the pre-rotated diagonals as prepared plaintexts.
class EncodedMatrix {
 public:
  // Slots of a plaintext tile (PlainTile), a multiple of the dot product's (dot_product.h).
  static constexpr size_t kPlainTile = 64;

  // matrix: rows x cols values mod t, row-major. Returns INVALID_ARGUMENT for another size or a
  // value not below t, or a context that is not the plan's. Encodes on `threads` threads.
  static absl::StatusOr<EncodedMatrix> Create(std::shared_ptr<const BfvContext> ctx,
                                              const MatVecPlan& plan,
                                              absl::Span<const uint64_t> matrix, int threads = 1);

  const MatVecPlan& plan() const { return plan_; }
  const BfvContext& context() const { return *ctx_; }
  size_t bytes() const { return plain_words_ * sizeof(uint64_t); }

  // Enc(M x) from the blocks' ciphertexts (encryptions of PackInput). Returns INVALID_ARGUMENT for
  // the wrong number of ciphertexts, other parameters or sizes, NOT_FOUND for a missing Galois
  // key. Runs on `threads` threads.
  absl::StatusOr<Ciphertext> Multiply(const std::vector<Ciphertext>& x, const GaloisKeys& gk,
                                      int threads = 1) const;

 private:
  EncodedMatrix(std::shared_ptr<const BfvContext> ctx, MatVecPlan plan)
      : ctx_(std::move(ctx)), plan_(plan) {}
  // Slots of a tile: kPlainTile, or N where it is smaller (both powers of two).
  size_t tile_slots() const { return std::min<size_t>(kPlainTile, ctx_->n()); }
  // The plaintexts of giant step k, residue row `row`, slots [tile, tile + 1) x tile_slots(): the
  // blocks' b baby steps' (term block b + j) residues one after the other, so that the product
  // reads them as one stream (rather than blocks b streams 8 k N bytes apart).
  uint64_t* PlainTile(size_t row, size_t tile, size_t k) const;

  std::shared_ptr<const BfvContext> ctx_;
  MatVecPlan plan_;
  // Uninitialised until encoded: the encoding threads fault its pages in, in parallel.
  std::unique_ptr<uint64_t[]> plain_;
  size_t plain_words_ = 0;
};

// The plain product y = M x mod t (the reference the tests compare with).
std::vector<uint64_t> MatVecPlain(const Modulus& t, size_t rows, size_t cols,
                                  absl::Span<const uint64_t> matrix, absl::Span<const uint64_t> x);

}  // namespace veil::he

#endif  // VEIL_PIR_HE_MATVEC_H_
