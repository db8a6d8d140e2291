#include "pir/he/matvec.h"

#include <algorithm>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/encoder.h"
#include "pir/he/keyswitch.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"

namespace veil::he {
namespace {

size_t NextPowerOfTwo(size_t x) {
  size_t p = 1;
  while (p < x) p *= 2;
  return p;
}

// A size-2 ciphertext in NTT form (k rows per half).
struct NttCiphertext {
  std::vector<uint64_t> c0, c1;
};

// Slots handled per pass of the giant-step products: the baby steps' slices stay in L2.
constexpr size_t kSlotChunk = 512;

// rot_j(x) for j < b in NTT form, hoisted: one decomposition of c_1, then per rotation the
// permuted inner product and a division by P that ends in the NTT domain.
absl::StatusOr<std::vector<NttCiphertext>> BabySteps(const BfvContext& ctx, const Ciphertext& x,
                                                     size_t b, const GaloisKeys& gk,
                                                     int threads) {
  const size_t n = ctx.n(), words = ctx.q_size() * n;
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
  const std::vector<uint64_t> digits = internal::DecomposeForKeySwitch(ctx, x.poly(1, words));
  std::vector<NttCiphertext> out(b);
  out[0].c0.assign(x.poly(0, words), x.poly(0, words) + words);
  out[0].c1.assign(x.poly(1, words), x.poly(1, words) + words);
  internal::ForwardNtt(ctx.q_ntt(), out[0].c0.data());
  internal::ForwardNtt(ctx.q_ntt(), out[0].c1.data());
  internal::ParallelFor(threads, b - 1, [&](size_t index) {
    const size_t j = index + 1;
    const std::vector<uint32_t> perm = internal::GaloisNttPermutation(ctx.log_n(), elements[j]);
    std::vector<uint64_t> acc0((ctx.q_size() + 1) * n), acc1(acc0.size());
    internal::KeySwitchInnerProduct(ctx, digits.data(), *keys[j], perm.data(), acc0.data(),
                                    acc1.data());
    NttCiphertext& r = out[j];
    r.c0.resize(words);
    r.c1.resize(words);
    internal::ModDown(ctx, acc0.data(), true, r.c0.data());
    internal::ModDown(ctx, acc1.data(), true, r.c1.data());
    for (size_t row = 0; row < ctx.q_size(); ++row) {
      const uint64_t q = ctx.modulus(row).value();
      const uint64_t* c0 = out[0].c0.data() + row * n;
      uint64_t* dst = r.c0.data() + row * n;
      for (size_t c = 0; c < n; ++c) dst[c] = AddMod(dst[c], c0[perm[c]], q);
    }
  });
  return out;
}

absl::Status CheckInputs(const BfvContext& ctx, const MatVecPlan& plan,
                         const std::vector<Ciphertext>& x) {
  if (x.size() != plan.blocks()) {
    return absl::InvalidArgumentError(absl::StrCat("the product takes ", plan.blocks(),
                                                   " input ciphertexts, got ", x.size()));
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
  p.rows_padded_ = NextPowerOfTwo(rows);
  p.blocks_ = (cols + 2 * p.lane_ - 1) / (2 * p.lane_);
  p.lane_cols_ = p.blocks_ > 1 ? p.lane_ : NextPowerOfTwo((cols + 1) / 2);
  p.diagonals_ = std::min(p.rows_padded_, p.lane_cols_);
  // A baby step (hoisted, NTT output) costs about a third of a giant step (a full rotation):
  // minimise blocks (b - 1) + 3 (d / b - 1) over powers of two b dividing d.
  double best = 0;
  for (size_t b = 1; b <= p.diagonals_; b *= 2) {
    const double cost = double(p.blocks_ * (b - 1)) + 3.0 * double(p.diagonals_ / b - 1);
    if (b == 1 || cost < best) {
      best = cost;
      p.baby_ = b;
    }
  }
  return p;
}

size_t MatVecPlan::rotations() const {
  size_t fold = 0;
  for (size_t s = rows_padded_; s < lane_cols_; s *= 2) ++fold;
  return blocks_ * (baby_ - 1) + (giant() - 1) + fold + 1;
}

std::vector<int> MatVecPlan::RotationSteps() const {
  std::set<int> steps = {0};
  for (size_t j = 1; j < baby_; ++j) steps.insert(static_cast<int>(j));
  for (size_t k = 1; k < giant(); ++k) steps.insert(static_cast<int>(k * baby_));
  for (size_t s = rows_padded_; s < lane_cols_; s *= 2) steps.insert(static_cast<int>(s));
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
  return std::vector<uint64_t>(slots.begin(), slots.begin() + rows_);
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
    return absl::InvalidArgumentError(absl::StrCat("the matrix has ", matrix.size(),
                                                   " entries, expected ", rows, " x ", cols));
  }
  const uint64_t t = ctx->params().t;
  for (uint64_t v : matrix) {
    if (v >= t) return absl::InvalidArgumentError(absl::StrCat("entry ", v, " is not below t"));
  }
  EncodedMatrix m(ctx, plan);
  const size_t lane = plan.slots_per_lane(), n_lane = plan.lane_cols(), m_pad = plan.padded_rows();
  const size_t b = plan.baby(), g = plan.giant(), words = ctx->q_size() * ctx->n();
  const size_t count = plan.blocks() * g * b;
  m.plain_.resize(count * words);
  // Entry of the lane's matrix (zero outside M).
  auto entry = [&](size_t block, size_t lane_index, size_t r, size_t c) -> uint64_t {
    const size_t col = (2 * block + lane_index) * n_lane + c;
    return r < rows && col < cols ? matrix[r * cols + col] : 0;
  };
  absl::Status status;
  std::mutex status_mutex;
  internal::ParallelFor(threads, count, [&](size_t index) {
    const size_t block = index / (g * b), k = index / b % g, j = index % b, i = k * b + j;
    std::vector<uint64_t> slots(2 * lane);
    for (size_t l = 0; l < 2; ++l) {
      for (size_t s = 0; s < lane; ++s) {
        const size_t from = (s + lane - (k * b) % lane) % lane;  // rot_{-kb}
        uint64_t v;
        if (!plan.wide()) {
          v = from < m_pad ? entry(block, l, from, (from + i) % n_lane) : 0;
        } else {
          v = entry(block, l, from % m_pad, (from + i) % n_lane);
        }
        slots[l * lane + s] = v;
      }
    }
    absl::StatusOr<Plaintext> pt = EncodeSlots(*ctx, slots);
    absl::StatusOr<PlaintextNtt> prepared =
        pt.ok() ? PrepareForMultiply(*ctx, *pt) : absl::StatusOr<PlaintextNtt>(pt.status());
    if (!prepared.ok()) {
      std::lock_guard<std::mutex> lock(status_mutex);
      status = prepared.status();
      return;
    }
    std::copy(prepared->ntt.begin(), prepared->ntt.end(), m.plain_.begin() + index * words);
  });
  if (!status.ok()) return status;
  return m;
}

const uint64_t* EncodedMatrix::Plain(size_t block, size_t k, size_t j) const {
  const size_t words = ctx_->q_size() * ctx_->n();
  return plain_.data() + ((block * plan_.giant() + k) * plan_.baby() + j) * words;
}

absl::StatusOr<Ciphertext> EncodedMatrix::Multiply(const std::vector<Ciphertext>& x,
                                                   const GaloisKeys& gk, int threads) const {
  const BfvContext& ctx = *ctx_;
  if (absl::Status s = CheckInputs(ctx, plan_, x); !s.ok()) return s;
  const size_t n = ctx.n(), k_rows = ctx.q_size(), words = k_rows * n;
  const size_t b = plan_.baby(), g = plan_.giant(), blocks = plan_.blocks();
  std::vector<std::vector<NttCiphertext>> baby;
  for (const Ciphertext& ct : x) {
    absl::StatusOr<std::vector<NttCiphertext>> steps = BabySteps(ctx, ct, b, gk, threads);
    if (!steps.ok()) return steps.status();
    baby.push_back(*std::move(steps));
  }
  // inner_k for every giant step, computed slice by slice of slots so that the baby steps'
  // slices are read from cache by all g giant steps.
  std::vector<Ciphertext> inner(g, Ciphertext{ctx.id(), 2, std::vector<uint64_t>(2 * words),
                                             std::nullopt});
  const size_t chunks = (n + kSlotChunk - 1) / kSlotChunk;
  internal::ParallelFor(threads, k_rows * chunks, [&](size_t task) {
    const size_t row = task / chunks, first = task % chunks * kSlotChunk;
    const size_t len = std::min(kSlotChunk, n - first), offset = row * n + first;
    std::vector<const uint64_t*> plain(blocks * b), c0(blocks * b), c1(blocks * b);
    for (size_t blk = 0; blk < blocks; ++blk) {
      for (size_t j = 0; j < b; ++j) {
        c0[blk * b + j] = baby[blk][j].c0.data() + offset;
        c1[blk * b + j] = baby[blk][j].c1.data() + offset;
      }
    }
    for (size_t k = 0; k < g; ++k) {
      for (size_t blk = 0; blk < blocks; ++blk) {
        for (size_t j = 0; j < b; ++j) plain[blk * b + j] = Plain(blk, k, j) + offset;
      }
      internal::PlainDotProduct({&ctx.modulus(row), blocks * b, len, plain.data(), c0.data(),
                                 c1.data(), inner[k].poly(0, words) + offset,
                                 inner[k].poly(1, words) + offset});
    }
  });
  // y = sum_k rot_{kb}(inner_k).
  std::vector<absl::StatusOr<Ciphertext>> parts(g, absl::UnknownError("not computed"));
  internal::ParallelFor(threads, g, [&](size_t k) {
    internal::InverseNtt(ctx.q_ntt(), inner[k].poly(0, words));
    internal::InverseNtt(ctx.q_ntt(), inner[k].poly(1, words));
    if (k > 0) parts[k] = RotateRows(ctx, inner[k], static_cast<int>(k * b), gk);
  });
  Ciphertext y = inner[0];
  for (size_t k = 1; k < g; ++k) {
    if (!parts[k].ok()) return parts[k].status();
    absl::StatusOr<Ciphertext> sum = Add(ctx, y, *parts[k]);
    if (!sum.ok()) return sum.status();
    y = *std::move(sum);
  }
  for (size_t s = plan_.padded_rows(); s < plan_.lane_cols(); s *= 2) {
    absl::StatusOr<Ciphertext> rotated = RotateRows(ctx, y, static_cast<int>(s), gk);
    if (!rotated.ok()) return rotated.status();
    y = *Add(ctx, y, *rotated);
  }
  absl::StatusOr<Ciphertext> swapped = RotateColumns(ctx, y, gk);
  if (!swapped.ok()) return swapped.status();
  return Add(ctx, y, *swapped);
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
