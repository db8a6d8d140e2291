#include "pir/he/matvec.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/keyswitch.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {
namespace {

size_t NextPowerOfTwo(size_t x) {
  size_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// Slots handled per pass of the giant-step products: the baby steps' slices stay in L2.
constexpr size_t kSlotChunk = 512;
static_assert(kSlotChunk % EncodedMatrix::kPlainTile == 0);

// Baby steps live in one buffer: step (block, j), half h at ((block * b + j) * 2 + h) * words.
uint64_t* BabyHalf(uint64_t* baby, size_t words, size_t b, size_t block, size_t j, size_t h) {
  return baby + ((block * b + j) * 2 + h) * words;
}

// rot_j(x) for j < b in NTT form into `out` (the block's b steps), hoisted: one decomposition of
// c_1 shared by all rotations, each then an inner product with its key, a division by P that
// ends in the NTT domain, and the automorphism as a permutation of NTT slots.
absl::Status BabySteps(const BfvContext& ctx, const Ciphertext& x, size_t b, const GaloisKeys& gk,
                       int threads, uint64_t* out) {
  const size_t n = ctx.n(), k = ctx.q_size(), words = k * n;
  std::vector<const KeySwitchKey*> keys(b, nullptr);
  std::vector<uint32_t> elements(b, 1);
  for (size_t j = 1; j < b; ++j) {
    absl::StatusOr<uint32_t> g = GaloisElementForStep(ctx.log_n(), static_cast<int>(j));
    if (!g.ok()) return g.status();
    absl::StatusOr<const KeySwitchKey*> key = internal::FindGaloisKey(ctx, gk, *g);
    if (!key.ok()) return key.status();
    elements[j] = *g;
    keys[j] = *key;
  }
  uint64_t* c0 = BabyHalf(out, words, b, 0, 0, 0);
  std::copy_n(x.data.data(), 2 * words, c0);  // both halves of step 0
  internal::ForwardNtt(ctx.q_ntt(), c0);
  internal::ForwardNtt(ctx.q_ntt(), c0 + words);
  if (b == 1) return absl::OkStatus();  // no rotation: nothing to decompose
  // c_1's transform (just made) is its digits' modulo their own primes: k transforms saved.
  const uint64_t* digits = internal::DecomposeToScratch(ctx, x.poly(1, words), c0 + words);
  internal::ParallelFor(threads, b - 1, [&](size_t index) {
    const size_t j = index + 1;
    uint64_t* r0 = BabyHalf(out, words, b, 0, j, 0);
    internal::RotateFromDigits(ctx, c0, digits, elements[j], *keys[j], true, r0, r0 + words);
  });
  return absl::OkStatus();
}

absl::Status CheckInputs(const BfvContext& ctx, const MatVecPlan& plan,
                         const std::vector<Ciphertext>& x) {
  if (x.size() != plan.blocks()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the product takes ", plan.blocks(), " input ciphertexts, got ", x.size()));
  }
  for (const Ciphertext& ct : x) {
    if (absl::Status s = CheckCiphertext(ctx, ct, "input ciphertext"); !s.ok()) return s;
    if (ct.size != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("input ciphertexts must have size 2, got ", ct.size));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<MatVecPlan> MatVecPlan::Create(const BfvContext& ctx, size_t rows, size_t cols) {
  MatVecPlan p;
  p.log_n_ = ctx.log_n();
  p.t_ = ctx.params().t;
  p.lane_ = ctx.n() / 2;
  if (rows == 0 || cols == 0 || rows > p.lane_) {
    return absl::InvalidArgumentError(absl::StrCat("a ", rows, " x ", cols,
                                                   " matrix needs 1 to N/2 = ", p.lane_,
                                                   " rows and at least one column"));
  }
  p.rows_ = rows;
  p.cols_ = cols;
  p.blocks_ = (cols + 2 * p.lane_ - 1) / (2 * p.lane_);
  const size_t lane_cols = p.blocks_ > 1 ? p.lane_ : NextPowerOfTwo((cols + 1) / 2);
  p.lane_cols_ = lane_cols;
  p.slot_row_.assign(p.lane_, -1);
  p.slot_window_.assign(p.lane_, 0);
  if (rows >= lane_cols) {
    for (size_t s = 0; s < rows; ++s) {
      p.slot_row_[s] = static_cast<int32_t>(s);
      p.slot_window_[s] = static_cast<uint32_t>(lane_cols);
    }
    p.window_ = lane_cols;
  } else {
    // Rounds of `rows` slots; after round k, spare_k unused slots (Bresenham: the L - q m left
    // over spread as evenly as they go).
    const size_t rounds = lane_cols / rows, left = lane_cols - rounds * rows;
    size_t s = 0;
    for (size_t k = 0; k < rounds; ++k) {
      const size_t spare = left * (k + 1) / rounds - left * k / rounds;
      for (size_t r = 0; r < rows; ++r) {
        p.slot_row_[s + r] = static_cast<int32_t>(r);
        p.slot_window_[s + r] = static_cast<uint32_t>(rows + spare);
      }
      s += rows + spare;
      p.window_ = std::max(p.window_, rows + spare);
    }
  }
  // b a power of two, g = ceil(d / b). A baby step (hoisted, NTT output) costs about a third of a
  // giant step (a full rotation) and a plaintext product (per block and diagonal) about a
  // sixteenth of one: minimise blocks (b - 1) + 3 (g - 1) + 3 blocks b g / 16.
  double best = 0;
  for (size_t b = 1; b <= NextPowerOfTwo(p.window_); b *= 2) {
    const size_t g = (p.window_ + b - 1) / b;
    const double cost =
        double(p.blocks_ * (b - 1)) + 3.0 * double(g - 1) + 3.0 * double(p.blocks_ * b * g) / 16.0;
    if (b == 1 || cost < best) {
      best = cost;
      p.baby_ = b;
      p.giant_ = g;
    }
  }
  return p;
}

std::vector<int> MatVecPlan::RotationSteps() const {
  std::set<int> steps;
  for (size_t j = 1; j < baby_; ++j) steps.insert(static_cast<int>(j));
  for (size_t k = 1; k < giant_; ++k) steps.insert(static_cast<int>(k * baby_));
  return std::vector<int>(steps.begin(), steps.end());
}

std::vector<uint32_t> MatVecPlan::GaloisElements() const {
  std::vector<uint32_t> elements;
  for (int step : RotationSteps()) elements.push_back(*GaloisElementForStep(log_n_, step));
  return elements;
}

absl::StatusOr<std::vector<std::vector<uint64_t>>> MatVecPlan::PackInput(
    absl::Span<const uint64_t> x) const {
  if (x.size() != cols_) {
    return absl::InvalidArgumentError(
        absl::StrCat("the vector has ", x.size(), " entries, the matrix ", cols_, " columns"));
  }
  for (uint64_t v : x) {
    if (v >= t_) return absl::InvalidArgumentError(absl::StrCat("entry ", v, " is not below t"));
  }
  std::vector<std::vector<uint64_t>> blocks(blocks_, std::vector<uint64_t>(2 * lane_, 0));
  for (size_t b = 0; b < blocks_; ++b) {
    for (size_t lane = 0; lane < 2; ++lane) {
      const size_t col0 = (2 * b + lane) * lane_cols_;
      for (size_t s = 0; s < lane_; ++s) {
        const size_t col = col0 + s % lane_cols_;
        if (col < cols_) blocks[b][lane * lane_ + s] = x[col];
      }
    }
  }
  return blocks;
}

std::vector<uint64_t> MatVecPlan::UnpackOutput(absl::Span<const uint64_t> slots) const {
  std::vector<uint64_t> y(rows_, 0);
  for (size_t l = 0; l < 2; ++l) {
    for (size_t s = 0; s < lane_; ++s) {
      if (slot_row_[s] < 0) continue;
      uint64_t& sum = y[slot_row_[s]];
      sum += slots[l * lane_ + s];  // both below t < 2^61: no overflow before the reduction
      sum = sum >= t_ ? sum - t_ : sum;
    }
  }
  return y;
}

absl::StatusOr<EncodedMatrix> EncodedMatrix::Create(std::shared_ptr<const BfvContext> ctx,
                                                    const MatVecPlan& plan,
                                                    absl::Span<const uint64_t> matrix,
                                                    int threads) {
  const size_t rows = plan.rows(), cols = plan.cols();
  if (plan.slots_per_lane() != ctx->n() / 2) {
    return absl::InvalidArgumentError("the plan was made for other parameters");
  }
  if (matrix.size() != rows * cols) {
    return absl::InvalidArgumentError(
        absl::StrCat("the matrix has ", matrix.size(), " entries, expected ", rows, " x ", cols));
  }
  const uint64_t t = ctx->params().t;
  for (uint64_t v : matrix) {
    if (v >= t) return absl::InvalidArgumentError(absl::StrCat("entry ", v, " is not below t"));
  }
  EncodedMatrix m(ctx, plan);
  const size_t lane = plan.slots_per_lane(), n_lane = plan.lane_cols();
  const size_t b = plan.baby(), g = plan.giant(), words = ctx->q_size() * ctx->n();
  const size_t count = plan.blocks() * g * b;
  m.plain_words_ = count * words;
  m.plain_.reset(new uint64_t[m.plain_words_]);
  // Entry of the lane's matrix (zero outside M).
  auto entry = [&](size_t block, size_t lane_index, size_t r, size_t c) -> uint64_t {
    const size_t col = (2 * block + lane_index) * n_lane + c;
    return r < rows && col < cols ? matrix[r * cols + col] : 0;
  };
  const uint32_t* slot_index = ctx->slot_index().data();
  internal::ParallelFor(threads, count, [&](size_t index) {
    const size_t block = index / (g * b), k = index / b % g, j = index % b, i = k * b + j;
    // Slot values straight into NTT positions mod t (EncodeSlots without its checks and copies).
    uint64_t* coeffs = internal::GetScratch(internal::Scratch::kPoly, 2 * lane);
    for (size_t l = 0; l < 2; ++l) {
      for (size_t s = 0; s < lane; ++s) {
        const size_t from = (s + lane - (k * b) % lane) % lane;  // rot_{-kb}
        const int32_t row = plan.slot_row(from);
        coeffs[slot_index[l * lane + s]] =
            row >= 0 && i < plan.slot_window(from) ? entry(block, l, row, (from + i) % n_lane) : 0;
      }
    }
    ctx->plain_ntt().Inverse(coeffs);
    uint64_t* lifted = internal::GetScratch(internal::Scratch::kOut0, words);
    internal::LiftForMultiply(*ctx, coeffs, lifted);
    const size_t term = block * b + j, slots = m.tile_slots();
    for (size_t row = 0; row < ctx->q_size(); ++row) {
      for (size_t tile = 0; tile < ctx->n() / slots; ++tile) {
        std::copy_n(lifted + row * ctx->n() + tile * slots, slots,
                    m.PlainTile(row, tile, k) + term * slots);
      }
    }
  });
  return m;
}

uint64_t* EncodedMatrix::PlainTile(size_t row, size_t tile, size_t k) const {
  const size_t slots = tile_slots(), terms = plan_.blocks() * plan_.baby();
  return plain_.get() + ((row * (ctx_->n() / slots) + tile) * plan_.giant() + k) * terms * slots;
}

absl::StatusOr<Ciphertext> EncodedMatrix::Multiply(const std::vector<Ciphertext>& x,
                                                   const GaloisKeys& gk, int threads) const {
  const BfvContext& ctx = *ctx_;
  if (absl::Status s = CheckInputs(ctx, plan_, x); !s.ok()) return s;
  const size_t n = ctx.n(), k_rows = ctx.q_size(), words = k_rows * n;
  const size_t b = plan_.baby(), g = plan_.giant(), blocks = plan_.blocks();
  // The baby steps and the giant steps' sums come from the calling thread's scratch: tens of
  // MiB that would otherwise be allocated and faulted in on every product.
  uint64_t* baby = internal::GetScratch(internal::Scratch::kBabySteps, blocks * b * 2 * words);
  uint64_t* inner = internal::GetScratch(internal::Scratch::kGiantSteps, g * 2 * words);
  // The blocks' baby steps on the threads (each block's rotations on them too where there are
  // fewer blocks than threads); the first failure in block order.
  std::vector<absl::Status> baby_status(blocks);
  internal::ParallelFor(threads, blocks, [&](size_t blk) {
    baby_status[blk] = BabySteps(ctx, x[blk], b, gk, blocks >= size_t(threads) ? 1 : threads,
                                 BabyHalf(baby, words, b, blk, 0, 0));
  });
  for (const absl::Status& s : baby_status) {
    if (!s.ok()) return s;
  }
  // inner_k for every giant step, slice by slice of slots so that the baby steps' slices are
  // read from cache by all g giant steps, a tile of slots at a time: every term's plaintext tile
  // follows the last one's (PlainTile).
  const size_t terms = blocks * b, slots = tile_slots(), chunks = (n + kSlotChunk - 1) / kSlotChunk;
  internal::ParallelFor(threads, k_rows * chunks, [&](size_t task) {
    const size_t row = task / chunks, first = task % chunks * kSlotChunk;
    const size_t last = std::min(n, first + kSlotChunk);
    std::vector<const uint64_t*> plain(terms), c0(terms), c1(terms);
    for (size_t tile = first / slots; tile * slots < last; ++tile) {
      const size_t offset = row * n + tile * slots;
      for (size_t term = 0; term < terms; ++term) {
        c0[term] = BabyHalf(baby, words, b, term / b, term % b, 0) + offset;
        c1[term] = BabyHalf(baby, words, b, term / b, term % b, 1) + offset;
      }
      for (size_t k = 0; k < g; ++k) {
        const uint64_t* tiles = PlainTile(row, tile, k);
        for (size_t term = 0; term < terms; ++term) plain[term] = tiles + term * slots;
        uint64_t* out = inner + 2 * k * words + offset;
        internal::PlainDotProduct({&ctx.modulus(row), terms, slots, plain.data(), c0.data(),
                                   c1.data(), out, out + words});
      }
    }
  });
  // y = sum_k rot_{kb}(inner_k), each rotation added as soon as it is made.
  Ciphertext y{ctx.id(), 2, std::vector<uint64_t>(2 * words, 0), std::nullopt};
  std::mutex y_mutex;
  absl::Status status;
  internal::ParallelFor(threads, g, [&](size_t k) {
    uint64_t* c0 = inner + 2 * k * words;
    // A rotated inner_k's c_1 in NTT form too: its digits' transforms modulo their own primes
    // (k transforms saved for a copy).
    uint64_t* c1_ntt = nullptr;
    if (k > 0) {
      c1_ntt = internal::GetScratch(internal::Scratch::kOut1, words);
      std::copy_n(c0 + words, words, c1_ntt);
    }
    internal::InverseNtt(ctx.q_ntt(), c0);
    internal::InverseNtt(ctx.q_ntt(), c0 + words);
    const uint64_t* add = c0;
    if (k > 0) {
      const uint32_t galois = *GaloisElementForStep(ctx.log_n(), static_cast<int>(k * b));
      absl::StatusOr<const KeySwitchKey*> key = internal::FindGaloisKey(ctx, gk, galois);
      if (!key.ok()) {
        std::lock_guard<std::mutex> lock(y_mutex);
        status = key.status();
        return;
      }
      uint64_t* r = internal::GetScratch(internal::Scratch::kOut0, 2 * words);
      internal::RotateFromDigits(ctx, c0, internal::DecomposeToScratch(ctx, c0 + words, c1_ntt),
                                 galois, **key, false, r, r + words);
      add = r;
    }
    std::lock_guard<std::mutex> lock(y_mutex);
    internal::AddRows(ctx.q_ntt(), y.poly(0, words), add, y.poly(0, words));
    internal::AddRows(ctx.q_ntt(), y.poly(1, words), add + words, y.poly(1, words));
  });
  if (!status.ok()) return status;
  return y;
}

std::vector<uint64_t> MatVecPlain(const Modulus& t, size_t rows, size_t cols,
                                  absl::Span<const uint64_t> matrix, absl::Span<const uint64_t> x) {
  std::vector<uint64_t> y(rows, 0);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t c = 0; c < cols; ++c) y[r] = t.Add(y[r], t.Mul(matrix[r * cols + c], x[c]));
  }
  return y;
}

}  // namespace veil::he
