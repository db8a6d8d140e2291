#include "pir/lattice/expansion.h"

#include <sodium.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/keyswitch.h"
#include "pir/he/modarith_hd.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"
#include "pir/he/sampling.h"
#include "pir/he/scratch.h"
#include "pir/he/serialization.h"
#include "pir/lattice/params.h"

namespace veil::lattice {
namespace {

// c1 of the secret's ciphertext is ExpandUniform(seed, this domain): uniform residues, used as
// the NTT form of a uniform polynomial (as the packing keys' alpha).
constexpr uint32_t kSecretMaskDomain = 0;

// A ciphertext in the NTT domain as two halves (c0, c1; k rows each), written by LevelStep.
struct Halves {
  uint64_t* c0;
  uint64_t* c1;
};

// One level of the expansion (expansion.h) on one node, in the NTT domain: c1 back to
// coefficients (k inverse NTTs), its RNS digits (pir/he's hybrid key switching), the key switch
// and the automorphism (a permutation of NTT slots), then c + g(c) and (c - g(c)) X^{-2^l}
// (X^{-2^l} is a slot-wise product with its transform). ExpandLweSecret runs the top levels with
// one; each Expander holds its own.
class LevelStep {
 public:
  LevelStep(const RingContext& ctx, const std::vector<const he::KeySwitchKey*>& keys,
            const std::vector<std::vector<uint64_t>>& monomials)
      : ctx_(ctx),
        bfv_(*ctx.expansion()),
        keys_(keys),
        monomials_(monomials),
        words_(ctx.k() * ctx.n()) {}

  // Level `level`'s step on (in0, in1) into `left` and `right` (either may have null halves;
  // left may be the input itself; monomials are read for a right child only).
  void Run(uint32_t level, const uint64_t* in0, const uint64_t* in1, Halves left, Halves right) {
    const size_t n = ctx_.n();
    // The rotated halves, then c1's coefficients: this thread's scratch, as every temporary
    // here (fresh vectors per step or per call cost page faults and zeroing).
    uint64_t* const rotated =
        he::internal::GetScratch(he::internal::Scratch::kExpansionStep, 3 * words_);
    uint64_t* const c1 = rotated + 2 * words_;
    std::copy_n(in1, words_, c1);
    he::internal::InverseNtt(ctx_.ntt(), c1);
    const uint64_t* digits = he::internal::DecomposeToScratch(bfv_, c1, in1);
    const uint32_t g = static_cast<uint32_t>(ctx_.n() >> level) + 1;
    he::internal::RotateFromDigits(bfv_, in0, digits, g, *keys_[level], true, rotated,
                                   rotated + words_);
    for (size_t h = 0; h < 2; ++h) {
      const uint64_t* x = h == 0 ? in0 : in1;
      const uint64_t* y = rotated + h * words_;
      uint64_t* to_left = h == 0 ? left.c0 : left.c1;
      uint64_t* to_right = h == 0 ? right.c0 : right.c1;
      if (to_left != nullptr) he::internal::AddRows(ctx_.ntt(), x, y, to_left);
      if (to_right == nullptr) continue;
      const std::vector<uint64_t>& mono = monomials_[level];  // X^{-2^l}, then Shoup factors
      for (size_t i = 0; i < ctx_.k(); ++i) {
        const size_t row = i * n;
        he::internal::SubMulShoup(ctx_.base()[i], n, x + row, y + row, mono.data() + row,
                                  mono.data() + words_ + row, 1, to_right + row);
      }
    }
  }

 private:
  const RingContext& ctx_;
  const he::BfvContext& bfv_;
  const std::vector<const he::KeySwitchKey*>& keys_;  // level l's key
  const std::vector<std::vector<uint64_t>>& monomials_;
  const size_t words_;
};

// The depth-first expansion of one subtree. left_[l] and right_[l] hold the children of level
// l's node on the current path; the last level writes its children straight into the packing
// block (beta_, alpha_), so no ciphertext is copied. Leaves are in NTT form already.
class Expander {
 public:
  // keys, monomials and `sink` (a FunctionRef) must outlive the expander.
  Expander(const RingContext& ctx, const std::vector<const he::KeySwitchKey*>& keys,
           const std::vector<std::vector<uint64_t>>& monomials, uint32_t lwe_n, SpecialSink sink)
      : step_(ctx, keys, monomials),
        lwe_n_(lwe_n),
        levels_(ExpansionLevels(lwe_n)),
        words_(ctx.k() * ctx.n()),
        path_words_((levels_ > 0 ? levels_ - 1 : 0) * 2 * words_),  // the last level's children
        block_words_(kPackKeysPerBlock * words_),                   // go straight to the block
        left_(he::internal::GetScratch(he::internal::Scratch::kExpansion,
                                       2 * (path_words_ + block_words_))),
        right_(left_ + path_words_),
        beta_(right_ + path_words_),
        alpha_(beta_ + block_words_),
        sink_(sink) {}

  // Expands the node `index` of level `level` (its ciphertext, NTT form, c0 then c1, in `ct`)
  // down to the leaves.
  void Run(uint32_t level, uint32_t index, const uint64_t* ct) {
    if (level == levels_) {  // a leaf already (n = 1)
      std::copy_n(ct, words_, beta_);
      std::copy_n(ct + words_, words_, alpha_);
      index_[count_++] = index;
    } else {
      Visit(level, index, ct, ct + words_);
    }
    Flush();
  }

 private:
  Halves Left(uint32_t level) {
    uint64_t* p = left_ + level * 2 * words_;
    return {p, p + words_};
  }
  Halves Right(uint32_t level) {
    uint64_t* p = right_ + level * 2 * words_;
    return {p, p + words_};
  }
  // The next free slot of the packing block.
  Halves Slot(uint32_t offset) {
    return {beta_ + (count_ + offset) * words_, alpha_ + (count_ + offset) * words_};
  }

  void Visit(uint32_t level, uint32_t index, const uint64_t* c0, const uint64_t* c1) {
    const uint64_t step = uint64_t{1} << level;
    const bool has_right = index + step < lwe_n_;
    if (level + 1 == levels_) {
      // The children are leaves: straight into the block's next two slots.
      if (count_ + (has_right ? 2 : 1) > kPackKeysPerBlock) Flush();
      step_.Run(level, c0, c1, Slot(0), has_right ? Slot(1) : Halves{nullptr, nullptr});
      index_[count_++] = index;
      if (has_right) index_[count_++] = static_cast<uint32_t>(index + step);
      if (count_ == kPackKeysPerBlock) Flush();
      return;
    }
    const Halves left = Left(level), right = Right(level);
    step_.Run(level, c0, c1, left, has_right ? right : Halves{nullptr, nullptr});
    Visit(level + 1, index, left.c0, left.c1);
    if (has_right) Visit(level + 1, static_cast<uint32_t>(index + step), right.c0, right.c1);
  }

  void Flush() {
    if (count_ > 0) sink_(count_, index_, beta_, alpha_);
    count_ = 0;
  }

  LevelStep step_;
  const uint32_t lwe_n_;
  const uint32_t levels_;
  const size_t words_;
  const size_t path_words_, block_words_;
  // This thread's scratch (kExpansion): the path's children, then the packing block. One
  // expander per thread at a time.
  uint64_t* const left_;
  uint64_t* const right_;
  uint64_t* const beta_;
  uint64_t* const alpha_;
  SpecialSink sink_;
  uint32_t index_[kPackKeysPerBlock] = {};
  uint32_t count_ = 0;
};

}  // namespace

uint32_t ExpansionLevels(uint32_t lwe_n) {
  uint32_t levels = 0;
  while ((uint64_t{1} << levels) < lwe_n) ++levels;
  return levels;
}

uint32_t DeferredLevels(uint32_t lwe_n) {
  return std::min(kDeferredLevels, ExpansionLevels(lwe_n));
}

uint32_t BestDeferredLevels(uint32_t lwe_n, uint64_t groups) {
  const uint32_t levels = ExpansionLevels(lwe_n);
  uint32_t best = 0;
  uint64_t fewest = 0;
  for (uint32_t d = 1; d <= DeferredLevels(lwe_n); ++d) {
    const uint64_t transforms =
        20 * ((uint64_t{1} << (levels - d)) - 1) + groups * (12 * ((uint64_t{1} << d) - 1) + 8);
    if (best == 0 || transforms < fewest) {
      best = d;
      fewest = transforms;
    }
  }
  return best;
}

uint32_t DeferredElement(const RingContext& ctx, uint32_t lwe_n, uint32_t deferred, uint32_t mask) {
  const uint32_t levels = ExpansionLevels(lwe_n);
  const uint64_t two_n = 2 * ctx.n();
  uint64_t element = 1;
  for (uint32_t b = 0; b < deferred; ++b) {
    if ((mask >> b & 1) != 0)
      element = element * ((ctx.n() >> (levels - deferred + b)) + 1) % two_n;
  }
  return static_cast<uint32_t>(element);
}

std::vector<uint32_t> ExpansionElements(const RingContext& ctx, uint32_t lwe_n) {
  std::vector<uint32_t> elements;
  for (uint32_t l = 0; l < ExpansionLevels(lwe_n); ++l) {
    elements.push_back(static_cast<uint32_t>(ctx.n() >> l) + 1);
  }
  for (uint32_t mask = 1; mask < (1u << DeferredLevels(lwe_n)); ++mask) {
    if (std::popcount(mask) >= 2)
      elements.push_back(DeferredElement(ctx, lwe_n, DeferredLevels(lwe_n), mask));
  }
  return elements;
}

absl::Status CheckExpansion(const RingContext& ctx, uint32_t lwe_n) {
  if (ctx.expansion() == nullptr) {
    return absl::FailedPreconditionError(
        "ExpPack needs a special prime for key switching; these ring parameters have none");
  }
  if (lwe_n == 0 || lwe_n > ctx.n()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expansion makes 1 to N = ", ctx.n(), " special ciphertexts, not ", lwe_n));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> MakeExpansionKeys(const RingContext& ctx,
                                                       const he::SecretKey& key, uint32_t lwe_n) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  absl::StatusOr<he::GaloisKeys> keys =
      he::GenerateGaloisKeys(*ctx.expansion(), key, ExpansionElements(ctx, lwe_n));
  if (!keys.ok()) return keys.status();
  return he::SerializeGaloisKeys(*ctx.expansion(), *keys);
}

uint64_t ExpansionKeyBytes(const RingContext& ctx, uint32_t lwe_n) {
  if (ctx.expansion() == nullptr) return 0;
  // Header (magic, version, kind, parameter id), the count, then the keys with their elements.
  return 12 + 4 + ExpansionElements(ctx, lwe_n).size() * he::GaloisKeyBytes(*ctx.expansion());
}

absl::StatusOr<he::GaloisKeys> ParseExpansionKeys(const RingContext& ctx, uint32_t lwe_n,
                                                  absl::Span<const uint8_t> bytes,
                                                  bool host_switching) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  absl::StatusOr<he::GaloisKeys> keys = he::ParseGaloisKeys(*ctx.expansion(), bytes);
  if (!keys.ok()) return keys.status();
  const std::vector<uint32_t> elements = ExpansionElements(ctx, lwe_n);
  bool exact = keys->keys.size() == elements.size();
  for (uint32_t g : elements) exact = exact && keys->keys.count(g) == 1;
  if (!exact) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expansion keys for n = ", lwe_n, " are the Galois keys of the ", elements.size(),
        " elements N / 2^l + 1 (l < ", ExpansionLevels(lwe_n),
        ") and the deferred levels' products; these hold ", keys->keys.size(), " other keys"));
  }
  if (host_switching) {
    for (auto& [element, key] : keys->keys) he::internal::NarrowKeySwitchKey(*ctx.expansion(), key);
  }
  return keys;
}

uint64_t SecretCiphertextBytes(const RingContext& ctx) { return 32 + 4 * ctx.k() * ctx.n(); }

absl::StatusOr<std::vector<uint8_t>> EncryptLweSecret(const RingContext& ctx, const RlweSecret& z,
                                                      absl::Span<const uint32_t> lwe_secret) {
  const uint32_t lwe_n = static_cast<uint32_t>(lwe_secret.size());
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  const size_t n = ctx.n();
  // round(Q s_j / 2^32) 2^-L: expansion multiplies by 2^L.
  const uint64_t scale_up = uint64_t{1} << ExpansionLevels(lwe_n);
  std::vector<uint64_t> message(ctx.k() * n, 0);
  for (size_t i = 0; i < ctx.k(); ++i) {
    const he::Modulus& q = ctx.base()[i];
    const uint64_t inverse = *q.Inverse(q.Reduce(scale_up));
    for (uint32_t j = 0; j < lwe_n; ++j) {
      message[i * n + j] = q.Mul(ctx.EncodeWord(lwe_secret[j], i), inverse);
    }
  }
  return internal::EncryptForExpansion(ctx, z, absl::MakeSpan(message));
}

namespace internal {

std::vector<uint8_t> EncryptForExpansion(const RingContext& ctx, const RlweSecret& z,
                                         absl::Span<uint64_t> message) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  const size_t n = ctx.n(), words = ctx.k() * n;
  std::vector<uint64_t> a(words), c0(words);
  he::internal::ForwardNtt(ctx.ntt(), message.data());
  const he::Seed seed = he::RandomSeed();
  he::ExpandUniform(seed, kSecretMaskDomain, ctx.base().moduli(), n, a.data());
  EncryptWithMask(ctx, z, message.data(), a.data(), c0.data());
  sodium_memzero(message.data(), message.size() * sizeof(uint64_t));
  std::vector<uint8_t> wire(SecretCiphertextBytes(ctx));
  std::memcpy(wire.data(), seed.data(), 32);
  for (size_t r = 0; r < words; ++r) {
    const uint32_t residue = static_cast<uint32_t>(c0[r]);  // primes are below 2^32
    std::memcpy(wire.data() + 32 + 4 * r, &residue, 4);
  }
  return wire;
}

absl::StatusOr<std::vector<const he::KeySwitchKey*>> ExpansionLevelKeys(const RingContext& ctx,
                                                                        const he::GaloisKeys& keys,
                                                                        uint32_t lwe_n) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  std::vector<const he::KeySwitchKey*> out;
  for (uint32_t l = 0; l < ExpansionLevels(lwe_n); ++l) {
    const uint32_t g = static_cast<uint32_t>(ctx.n() >> l) + 1;
    absl::StatusOr<const he::KeySwitchKey*> key =
        he::internal::FindGaloisKey(*ctx.expansion(), keys, g);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the expansion keys lack the Galois key of element ", g, ": ", key.status().message()));
    }
    out.push_back(*key);
  }
  return out;
}

absl::StatusOr<std::vector<uint64_t>> SecretCiphertextRoot(const RingContext& ctx,
                                                           absl::Span<const uint8_t> ciphertext) {
  const size_t n = ctx.n(), words = ctx.k() * n;
  if (ciphertext.size() != SecretCiphertextBytes(ctx)) {
    return absl::InvalidArgumentError(absl::StrCat("the secret's ciphertext is ",
                                                   SecretCiphertextBytes(ctx), " bytes, got ",
                                                   ciphertext.size()));
  }
  std::vector<uint64_t> root(2 * words);
  for (size_t r = 0; r < words; ++r) {
    uint32_t residue;
    std::memcpy(&residue, ciphertext.data() + 32 + 4 * r, 4);
    const uint64_t q = ctx.base()[r / n].value();
    if (residue >= q) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret ciphertext residue ", r, " is not below its prime ", q));
    }
    root[r] = residue;
  }
  he::Seed seed;
  std::memcpy(seed.data(), ciphertext.data(), 32);
  he::ExpandUniform(seed, kSecretMaskDomain, ctx.base().moduli(), n, root.data() + words);
  return root;
}

}  // namespace internal

absl::Status ExpandLweSecret(const RingContext& ctx, const he::GaloisKeys& keys, uint32_t lwe_n,
                             absl::Span<const uint8_t> ciphertext, int threads,
                             WorkerSpecialSink sink) {
  if (threads < 1) return absl::InvalidArgumentError("expansion needs at least one thread");
  absl::StatusOr<std::vector<const he::KeySwitchKey*>> keys_of_levels =
      internal::ExpansionLevelKeys(ctx, keys, lwe_n);
  if (!keys_of_levels.ok()) return keys_of_levels.status();
  absl::StatusOr<std::vector<uint64_t>> root = internal::SecretCiphertextRoot(ctx, ciphertext);
  if (!root.ok()) return root.status();
  const size_t words = ctx.k() * ctx.n();
  const std::vector<const he::KeySwitchKey*>& level_keys = *keys_of_levels;
  const uint32_t levels = ExpansionLevels(lwe_n);
  const std::vector<std::vector<uint64_t>>& monomials = ctx.inverse_monomials();
  // The top `split` levels run here; then each of their 2^split nodes (those with an index
  // below n) is a subtree for one worker. The split takes the fewest key switches one after
  // another: 2^s - 1 on top, then ceil(2^s / threads) subtrees of 2^(L - s) - 1 each (a small
  // tree on many threads would otherwise run every level here).
  uint32_t split = 0;
  const auto steps = [levels, threads](uint32_t s) {
    const uint64_t subtrees = ((uint64_t{1} << s) + threads - 1) / threads;
    return ((uint64_t{1} << s) - 1) + subtrees * ((uint64_t{1} << (levels - s)) - 1);
  };
  for (uint32_t s = 1; s <= levels; ++s) {
    if (steps(s) < steps(split)) split = s;
  }
  std::vector<std::vector<uint64_t>> frontier{*std::move(root)};
  LevelStep top(ctx, level_keys, monomials);
  for (uint32_t l = 0; l < split; ++l) {
    // Node i of level l + 1 comes from node i mod 2^l: left for i < 2^l, right above.
    std::vector<std::vector<uint64_t>> next(frontier.size() * 2);
    for (size_t i = 0; i < frontier.size(); ++i) {
      const bool has_right = i + frontier.size() < lwe_n;
      next[i].resize(2 * words);
      if (has_right) next[i + frontier.size()].resize(2 * words);
      const auto halves = [words](std::vector<uint64_t>& ct) {
        return Halves{ct.data(), ct.data() + words};
      };
      top.Run(l, frontier[i].data(), frontier[i].data() + words, halves(next[i]),
              has_right ? halves(next[i + frontier.size()]) : Halves{nullptr, nullptr});
    }
    frontier = std::move(next);
  }
  // Workers take subtrees from a shared counter; worker 0 is this thread, the others the pool's.
  std::atomic<size_t> next{0};
  auto work = [&](int worker) {
    // The sink an Expander refers to (a FunctionRef) outlives it: a named local.
    const auto leaves = [&sink, worker](uint32_t count, const uint32_t* index, const uint64_t* beta,
                                        const uint64_t* alpha) {
      sink(worker, count, index, beta, alpha);
    };
    Expander expander(ctx, level_keys, monomials, lwe_n, leaves);
    for (size_t i = next++; i < frontier.size(); i = next++) {
      if (!frontier[i].empty()) expander.Run(split, static_cast<uint32_t>(i), frontier[i].data());
    }
  };
  const int workers = static_cast<int>(std::min<size_t>(threads, frontier.size()));
  he::internal::ParallelFor(workers, workers, [&](size_t w) { work(static_cast<int>(w)); });
  return absl::OkStatus();
}

absl::StatusOr<absl::Span<const uint64_t>> ExpandIntoPackingSums(
    const RingContext& ctx, const he::GaloisKeys& keys, const PackingMatrix& matrix,
    absl::Span<const uint8_t> ciphertext, int threads) {
  const uint64_t words = PackingSumWords(ctx, matrix);
  uint64_t* storage = he::internal::GetScratch(he::internal::Scratch::kPackSums, threads * words);
  std::vector<PackAccumulator> acc;
  acc.reserve(threads);
  for (int w = 0; w < threads; ++w) {
    acc.emplace_back(ctx, matrix, absl::MakeSpan(storage + w * words, words));
  }
  const absl::Status expanded = ExpandLweSecret(
      ctx, keys, matrix.lwe_n(), ciphertext, threads,
      [&acc](int worker, uint32_t count, const uint32_t* index, const uint64_t* beta,
             const uint64_t* alpha) { acc[worker].Add(count, index, beta, alpha); });
  if (!expanded.ok()) return expanded;
  for (int w = 1; w < threads; ++w) acc[0].Merge(acc[w]);
  if (absl::Status s = acc[0].CheckComplete(); !s.ok()) return s;
  return absl::Span<const uint64_t>(storage, words);
}

namespace {

// The coefficients' variances after level l's c + g_l(c) (left) and (c - g_l(c)) X^{-2^l} (right)
// on a ciphertext whose coefficients have variances v, each plus `added` (a key switch's).
void LevelVariances(size_t n, uint32_t level, const std::vector<double>& v, double added,
                    std::vector<double>& left, std::vector<double>& right) {
  const uint64_t g = (n >> level) + 1, step = uint64_t{1} << level;
  std::vector<double> rotated(n);
  std::vector<int> fixed_sign(n, 0);  // +1 / -1: coefficient fixed by g, with that sign
  // Coefficient c goes to c g mod 2N under X -> X^g: position c g mod N, negated if the
  // quotient is odd; it is fixed (up to sign) exactly when c is a multiple of 2^l for g_l.
  for (size_t c = 0; c < n; ++c) {
    const uint64_t to = (c * g) % (2 * n);
    rotated[to % n] = v[c];
    if (to % n == c) fixed_sign[c] = to < n ? 1 : -1;
  }
  left.resize(n);
  right.resize(n);
  for (size_t c = 0; c < n; ++c) {
    // c +- g(c): a fixed coefficient doubles or cancels; others add independent variances.
    const double x = v[c];
    const double plus = fixed_sign[c] == 0 ? x + rotated[c] : (fixed_sign[c] > 0 ? 4 * x : 0);
    const double minus = fixed_sign[c] == 0 ? x + rotated[c] : (fixed_sign[c] > 0 ? 0 : 4 * x);
    left[c] = plus + added;
    right[(c + n - step) % n] = minus + added;  // times X^{-2^l}: a cyclic shift
  }
}

}  // namespace

absl::StatusOr<TracePacking> TracePacking::Create(const RingContext& ctx, uint32_t lwe_n,
                                                  uint64_t rows,
                                                  absl::Span<const uint32_t> scalars) {
  if (absl::Status s = CheckExpansion(ctx, lwe_n); !s.ok()) return s;
  if (rows == 0 || scalars.size() != rows * lwe_n) {
    return absl::InvalidArgumentError(absl::StrCat("a matrix of ", scalars.size(), " scalars for ",
                                                   rows, " rows of n = ", lwe_n));
  }
  const size_t n = ctx.n(), words = ctx.k() * n;
  std::vector<uint64_t> transforms(rows * words, 0);
  for (uint64_t t = 0; t < rows; ++t) {
    uint64_t* a = transforms.data() + t * words;
    for (size_t i = 0; i < ctx.k(); ++i) {
      for (uint32_t j = 0; j < lwe_n; ++j) {
        // X^{-j} = -X^{N - j} for j >= 1.
        const int64_t value = static_cast<int32_t>(scalars[t * lwe_n + j]);
        a[i * n + (n - j) % n] = ctx.base()[i].FromSigned(j == 0 ? value : -value);
      }
    }
    he::internal::ForwardNtt(ctx.ntt(), a);
  }
  return TracePacking(ctx, lwe_n, rows, std::move(transforms));
}

absl::Status TracePacking::Sums(const he::GaloisKeys& keys, absl::Span<const uint8_t> ciphertext,
                                int threads, absl::Span<uint64_t> sums) const {
  const RingContext& ctx = *ctx_;
  const size_t words = ctx.k() * ctx.n();
  if (threads < 1) return absl::InvalidArgumentError("packing sums need at least one thread");
  if (sums.size() != rows_ * 2 * words) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing sums: ", sums.size(), " (expected ", rows_ * 2 * words, ")"));
  }
  absl::StatusOr<std::vector<const he::KeySwitchKey*>> level_keys =
      internal::ExpansionLevelKeys(ctx, keys, lwe_n_);
  if (!level_keys.ok()) return level_keys.status();
  absl::StatusOr<std::vector<uint64_t>> root = internal::SecretCiphertextRoot(ctx, ciphertext);
  if (!root.ok()) return root.status();
  const std::vector<std::vector<uint64_t>> no_monomials;  // no right children
  he::internal::ParallelFor(threads, rows_, [&](size_t t) {
    uint64_t* c0 = sums.data() + t * 2 * words;
    uint64_t* c1 = c0 + words;
    const uint64_t* a = transforms_.data() + t * words;
    he::internal::MultiplyRows(ctx.ntt(), a, root->data(), c0);
    he::internal::MultiplyRows(ctx.ntt(), a, root->data() + words, c1);
    LevelStep step(ctx, *level_keys, no_monomials);
    for (uint32_t l = 0; l < ExpansionLevels(lwe_n_); ++l) {
      step.Run(l, c0, c1, Halves{c0, c1}, Halves{nullptr, nullptr});
    }
  });
  return absl::OkStatus();
}

double TraceSwitchVariance(const RingContext& ctx, uint32_t lwe_n) {
  const size_t n = ctx.n();
  const double key_switch = he::internal::KeySwitchVariance(*ctx.expansion());
  std::vector<double> v(n, 0), left, right;
  for (uint32_t l = 0; l < ExpansionLevels(lwe_n); ++l) {
    LevelVariances(n, l, v, key_switch, left, right);
    v.swap(left);
  }
  double total = 0;
  for (double x : v) total += x;
  return total / static_cast<double>(n);
}

double ExpandedKeyVariance(const RingContext& ctx, uint32_t lwe_n, uint32_t deferred_levels) {
  const size_t n = ctx.n();
  const double ring_n = static_cast<double>(n);
  const double key_switch = he::internal::KeySwitchVariance(*ctx.expansion());
  const uint32_t levels = ExpansionLevels(lwe_n);
  const uint32_t switched = levels - std::min(deferred_levels, levels);  // levels with a switch
  // Depth first as the expansion: v[l] the coefficients' variances at the node of level l.
  std::vector<std::vector<double>> v(levels + 1, std::vector<double>(n));
  std::fill(v[0].begin(), v[0].end(), 10.5);
  double total = 0;
  auto visit = [&](auto&& self, uint32_t level, uint64_t index) -> void {
    if (level == levels) {
      for (double x : v[levels]) total += x;
      return;
    }
    const uint64_t step = uint64_t{1} << level;
    std::vector<double> left, right;
    LevelVariances(n, level, v[level], level < switched ? key_switch : 0, left, right);
    v[level + 1] = left;
    self(self, level + 1, index);
    if (index + step < lwe_n) {
      v[level + 1] = right;
      self(self, level + 1, index + step);
    }
  };
  visit(visit, 0, 0);
  return total / (static_cast<double>(lwe_n) * ring_n);
}

PackingNoise ExpPackNoiseBound(const RingContext& ctx, uint32_t lwe_n, uint32_t deferred_levels) {
  PackingNoise noise =
      PackingNoiseForKeys(ctx, lwe_n, ExpandedKeyVariance(ctx, lwe_n, deferred_levels),
                          std::numeric_limits<double>::infinity());
  // The deferred levels' key switches, one per deferred element, on the packed ciphertext: their
  // keys' errors each, and one ModDown's rounding for all (he::internal::RotateBeforeModDown).
  const uint32_t deferred = std::min(deferred_levels, ExpansionLevels(lwe_n));
  double q = 1;
  for (uint64_t p : ctx.params().primes) q *= static_cast<double>(p);
  const double at_q = std::ldexp(1.0, 32) / q;
  const double switches = static_cast<double>((1u << deferred) - 1);
  const double key = he::internal::KeyErrorVariance(*ctx.expansion());
  const double rounding = he::internal::KeySwitchVariance(*ctx.expansion()) - key;
  noise.sigma = std::sqrt(noise.sigma * noise.sigma +
                          (switches * key + (deferred > 0 ? rounding : 0)) * at_q * at_q);
  return noise;
}

bool ExpPackNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n) {
  const double limit = (kDelta / 2) / 256.0;
  return std::sqrt(2 * 41 * std::log(2.0)) * ExpPackNoiseBound(ctx, lwe_n).sigma <= limit;
}

}  // namespace veil::lattice
