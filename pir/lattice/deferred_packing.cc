#include "pir/lattice/deferred_packing.h"

#include <emmintrin.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/keyswitch.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"
#include "pir/lattice/expansion.h"

namespace veil::lattice {
namespace {

// c_{t,s} for the 2^D leaves t under a node and the 2^D elements s (NTT form over Q, k x N
// residues each, leaf-major): the deferred levels run on formal sums sum_s a_s sigma_s(R),
// starting from R itself (a_0 = 1). g maps a_s sigma_s(R) to g(a_s) sigma_{s | bit}(R).
std::vector<uint64_t> LeafCoefficients(const RingContext& ctx, uint32_t lwe_n, uint32_t deferred) {
  const size_t n = ctx.n(), words = ctx.k() * n;
  const uint32_t levels = ExpansionLevels(lwe_n), top = levels - deferred;
  const size_t elements = size_t{1} << deferred;
  const std::vector<std::vector<uint64_t>>& monomials = ctx.inverse_monomials();
  std::vector<uint64_t> nodes(elements * words, 0);
  std::fill_n(nodes.begin(), words, 1);  // the constant 1 evaluates to 1 in every slot
  std::vector<uint64_t> rotated(words), shifted(words);
  for (uint32_t b = 0; b < deferred; ++b) {
    const uint32_t level = top + b;
    const std::vector<uint32_t> perm = he::internal::GaloisNttPermutation(
        static_cast<int>(ctx.params().log_n), static_cast<uint32_t>(n >> level) + 1);
    const uint64_t* mono = monomials[level].data();  // X^{-2^l}
    const size_t count = size_t{1} << b;             // nodes now; children t and t + count
    std::vector<uint64_t> next(2 * count * elements * words, 0);
    for (size_t t = 0; t < count; ++t) {
      uint64_t* left = next.data() + t * elements * words;
      uint64_t* right = next.data() + (t + count) * elements * words;
      for (size_t s = 0; s < (size_t{1} << b); ++s) {
        const uint64_t* a = nodes.data() + (t * elements + s) * words;
        for (size_t i = 0; i < ctx.k(); ++i) {
          for (size_t c = 0; c < n; ++c) rotated[i * n + c] = a[i * n + perm[c]];
        }
        const size_t with = s | (size_t{1} << b);
        // left: a sigma_s + g(a) sigma_with; right: (a sigma_s - g(a) sigma_with) X^{-2^l}.
        he::internal::AddRows(ctx.ntt(), left + s * words, a, left + s * words);
        he::internal::AddRows(ctx.ntt(), left + with * words, rotated.data(), left + with * words);
        he::internal::MultiplyRows(ctx.ntt(), a, mono, shifted.data());
        he::internal::AddRows(ctx.ntt(), right + s * words, shifted.data(), right + s * words);
        he::internal::MultiplyRows(ctx.ntt(), rotated.data(), mono, shifted.data());
        he::internal::SubRows(ctx.ntt(), right + with * words, shifted.data(),
                              right + with * words);
      }
    }
    nodes = std::move(next);
  }
  return nodes;
}

// Create's checks; D = min(levels, L).
absl::StatusOr<uint32_t> CheckFold(const RingContext& ctx, const PackingMatrix& matrix,
                                   uint32_t levels, int threads) {
  const uint32_t lwe_n = matrix.lwe_n();
  if (lwe_n > ctx.n() || threads < 1 || levels == 0 || levels > kDeferredLevels) {
    return absl::InvalidArgumentError(
        absl::StrCat("deferred packing of ", levels, " levels (1 to ", kDeferredLevels,
                     ": the session keys' products) for n = ", lwe_n, " on ", threads,
                     " threads (N = ", ctx.n(), ")"));
  }
  return std::min(levels, ExpansionLevels(lwe_n));
}

// W'_{r,s} of every virtual group v = g 2^D + s and root r: store(v, r, i, c, residue) for slot
// c of prime i, each once, from up to `threads` threads (distinct (v, r) at once).
template <class Store>
void Fold(const RingContext& ctx, const PackingMatrix& matrix, uint32_t deferred, int threads,
          Store&& store) {
  const uint32_t lwe_n = matrix.lwe_n();
  const uint32_t top = ExpansionLevels(lwe_n) - deferred;
  const size_t n = ctx.n(), words = ctx.k() * n;
  const size_t elements = size_t{1} << deferred, roots = size_t{1} << top;
  const std::vector<uint64_t> coefficients = LeafCoefficients(ctx, lwe_n, deferred);
  std::vector<std::vector<uint32_t>> perms;
  for (size_t s = 0; s < elements; ++s) {
    perms.push_back(he::internal::GaloisNttPermutation(
        static_cast<int>(ctx.params().log_n),
        DeferredElement(ctx, lwe_n, deferred, static_cast<uint32_t>(s))));
  }
  he::internal::ParallelFor(threads, matrix.groups() * roots, [&](size_t task) {
    const uint64_t g = task / roots, r = task % roots;
    std::vector<uint64_t> w(elements * words, 0), a(words);
    for (size_t t = 0; t < elements; ++t) {
      const uint64_t j = r + t * roots;
      if (j >= lwe_n) continue;  // K_j past n: A_j is zero
      const uint32_t* poly = matrix.Polynomial(g, static_cast<uint32_t>(j));
      std::copy_n(poly, words, a.begin());
      for (size_t s = 0; s < elements; ++s) {
        he::internal::MultiplyAccumulateRows(ctx.ntt(), a.data(),
                                             coefficients.data() + (t * elements + s) * words,
                                             w.data() + s * words);
      }
    }
    // W' = sigma_s^-1(W): sigma_s(W')[c] = W'[perm[c]] must be W[c].
    for (size_t s = 0; s < elements; ++s) {
      const uint64_t* in = w.data() + s * words;
      for (size_t i = 0; i < ctx.k(); ++i) {
        for (size_t c = 0; c < n; ++c) {
          store(g * elements + s, r, i, perms[s][c], static_cast<uint32_t>(in[i * n + c]));
        }
      }
    }
  });
}

}  // namespace

namespace internal {

absl::Status CheckSumsBatch(size_t keys, size_t ciphertexts, size_t sums, int threads) {
  if (ciphertexts != keys || sums != keys || threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("a batch of ", keys, " keys, ", ciphertexts,
                                                   " ciphertexts and ", sums, " sums on ", threads,
                                                   " threads"));
  }
  return absl::OkStatus();
}

}  // namespace internal

uint32_t EngineDeferredLevels(const RingContext& ctx, uint32_t lwe_n, uint32_t levels) {
  return lwe_n > ctx.n() ? 0 : std::min({levels, kDeferredLevels, ExpansionLevels(lwe_n)});
}

absl::StatusOr<DeferredPacking> DeferredPacking::Create(const RingContext& ctx,
                                                        const PackingMatrix& matrix,
                                                        uint32_t levels, int threads) {
  absl::StatusOr<uint32_t> deferred = CheckFold(ctx, matrix, levels, threads);
  if (!deferred.ok()) return deferred.status();
  const size_t words = ctx.k() * ctx.n(), tiles = ctx.n() / 8;
  const uint64_t virtual_groups = matrix.groups() << *deferred;
  const size_t roots = size_t{1} << (ExpansionLevels(matrix.lwe_n()) - *deferred);
  he::HugePageVector<uint32_t> folded(virtual_groups * roots * words);
  Fold(ctx, matrix, *deferred, threads,
       [&](uint64_t v, size_t r, size_t i, size_t c, uint32_t residue) {
         folded[((i * tiles + c / 8) * virtual_groups + v) * roots * 8 + r * 8 + c % 8] = residue;
       });
  return DeferredPacking(ctx, matrix, *deferred, std::move(folded));
}

absl::StatusOr<PackingMatrix> DeferredPacking::FoldedMatrix(const RingContext& ctx,
                                                            const PackingMatrix& matrix,
                                                            uint32_t levels, int threads) {
  absl::StatusOr<uint32_t> deferred = CheckFold(ctx, matrix, levels, threads);
  if (!deferred.ok()) return deferred.status();
  const size_t n = ctx.n(), words = ctx.k() * n;
  const uint64_t virtual_groups = matrix.groups() << *deferred;
  const uint32_t roots = 1u << (ExpansionLevels(matrix.lwe_n()) - *deferred);
  std::vector<uint32_t> folded(virtual_groups * roots * words);
  Fold(ctx, matrix, *deferred, threads,
       [&](uint64_t v, size_t r, size_t i, size_t c, uint32_t residue) {
         folded[(v * roots + r) * words + i * n + c] = residue;
       });
  return PackingMatrix::FromTransforms(ctx, virtual_groups, roots, std::move(folded));
}

absl::StatusOr<DeferredPacking::Switches> DeferredPacking::CheckedSwitches(
    const he::GaloisKeys* keys, absl::Span<uint64_t> sums, int threads) const {
  const RingContext& ctx = *ctx_;
  if (sums.size() != PackingSumWords(ctx, *matrix_)) {
    return absl::InvalidArgumentError(absl::StrCat("packing sums: ", sums.size(), " (expected ",
                                                   PackingSumWords(ctx, *matrix_), ")"));
  }
  if (threads < 1) return absl::InvalidArgumentError("packing sums need at least one thread");
  if (keys == nullptr) return absl::InvalidArgumentError("packing sums without keys");
  if (absl::Status s = CheckExpansion(ctx, matrix_->lwe_n()); !s.ok()) return s;
  Switches switches(size_t{1} << levels_);
  for (size_t s = 1; s < switches.size(); ++s) {
    const uint32_t g = DeferredElement(ctx, matrix_->lwe_n(), levels_, static_cast<uint32_t>(s));
    absl::StatusOr<const he::KeySwitchKey*> key =
        he::internal::FindGaloisKey(*ctx.expansion(), *keys, g);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the expansion keys lack the Galois key of element ", g, ": ", key.status().message()));
    }
    switches[s] = {g, *key};
  }
  return switches;
}

size_t DeferredPacking::roots() const {
  return size_t{1} << (ExpansionLevels(matrix_->lwe_n()) - levels_);
}

uint64_t DeferredPacking::virtual_sum_words() const {
  return (matrix_->groups() << levels_) * 2 * ctx_->k() * ctx_->n();
}

namespace {

// 64 bytes from `from` to `to` (16-byte aligned), past the caches: the nodes (25 MB at 2^24 x
// 64 B) are read once, by the tile pass, so reading their lines for ownership first is wasted
// (the sums at 2^24 x 64 B on two Zen 2 vCPUs: 31.9-32.9 -> 30.9-31.3 ms).
void StreamLine(uint64_t* to, const uint64_t* from) {
  for (int k = 0; k < 4; ++k) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(to) + k,
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(from) + k));
  }
}

}  // namespace

absl::Status DeferredPacking::ExpandNodes(const he::GaloisKeys& keys,
                                          absl::Span<const uint8_t> ciphertext, int threads,
                                          uint64_t* nodes) const {
  // The top levels' 2^(L-D) nodes, gathered in the tiles' order: at ((i N / 8 + c / 8) R + r) 16
  // + 8 h + c mod 8 for half h of node r (TileDotProduct's keys).
  const size_t words = ctx_->k() * ctx_->n(), roots = this->roots();
  std::vector<uint8_t> seen(roots, 0);  // each written by the worker that expands that node
  std::atomic<bool> bad_index{false};
  const absl::Status expanded = ExpandLweSecret(
      *ctx_, keys, static_cast<uint32_t>(roots), ciphertext, threads,
      [&](int, uint32_t count, const uint32_t* index, const uint64_t* beta, const uint64_t* alpha) {
        bool valid = true;
        for (uint32_t j = 0; j < count; ++j) {
          const uint32_t r = index[j];
          valid = valid && r < roots && seen[r] == 0;
          if (valid) seen[r] = 1;
        }
        if (!valid) {
          bad_index = true;
          return;
        }
        // Tile by tile, the block's nodes together: a node at a time would sweep the whole
        // buffer per node (a TLB miss per store; 11 ms more per query at one thread and G = 1).
        for (size_t t = 0; t < words / 8; ++t) {
          uint64_t* tile = nodes + t * roots * 16;
          for (uint32_t j = 0; j < count; ++j) {
            StreamLine(tile + index[j] * 16, beta + j * words + 8 * t);
            StreamLine(tile + index[j] * 16 + 8, alpha + j * words + 8 * t);
          }
        }
        _mm_sfence();
      });
  if (!expanded.ok()) return expanded;
  if (bad_index || std::count(seen.begin(), seen.end(), 0) != 0) {
    return absl::InternalError("the expansion did not yield each node once");
  }
  return absl::OkStatus();
}

void DeferredPacking::TilePass(absl::Span<const uint64_t* const> nodes,
                               absl::Span<uint64_t* const> virtual_sums, int threads) const {
  // The virtual groups' sums (PackAccumulator's layout), a run of tiles per task; each tile of
  // the folded matrix against every query's nodes in turn, so that it comes from memory once.
  const RingContext& ctx = *ctx_;
  const size_t n = ctx.n(), tiles = n / 8, words = ctx.k() * n, roots = this->roots();
  const uint64_t virtual_groups = matrix_->groups() << levels_;
  constexpr size_t kTilesPerTask = 16;
  const size_t runs = (tiles + kTilesPerTask - 1) / kTilesPerTask;
  he::internal::ParallelFor(threads, ctx.k() * runs, [&](size_t task) {
    const size_t i = task / runs, first = (task % runs) * kTilesPerTask;
    for (size_t t = first; t < std::min(tiles, first + kTilesPerTask); ++t) {
      const size_t tile = i * tiles + t;
      for (size_t q = 0; q < nodes.size(); ++q) {
        he::internal::TileDotProduct(he::internal::TileDotProductArgs{
            &ctx.base()[i], roots, virtual_groups,
            tiles_.data() + tile * virtual_groups * roots * 8, nodes[q] + tile * roots * 16,
            virtual_sums[q] + i * n + t * 8, 2 * words, words});
      }
    }
  });
}

void DeferredPacking::SwitchGroups(const Switches& switches, const uint64_t* virtual_sums,
                                   int threads, absl::Span<uint64_t> sums) const {
  // sigma_s of every virtual group's sum but s = 0, key-switched back to z and left over QP
  // (RotateBeforeModDown); a group's are summed and ModDown'ed once. Tasks run s by s (each key
  // for all groups in a row: measured no faster than group by group, as the keys stay in L3).
  const RingContext& ctx = *ctx_;
  const he::BfvContext& bfv = *ctx.expansion();
  const size_t n = ctx.n(), words = ctx.k() * n, qp_words = (ctx.k() + 1) * n;
  const uint64_t groups = matrix_->groups();
  const size_t elements = switches.size(), switched = elements - 1;
  uint64_t* rotated = he::internal::GetScratch(he::internal::Scratch::kPackRotated,
                                               groups * switched * 2 * qp_words);
  he::internal::ParallelFor(threads, groups * switched, [&](size_t task) {
    const uint64_t g = task % groups;
    const size_t s = task / groups + 1;
    const uint64_t* c0 = virtual_sums + (g * elements + s) * 2 * words;
    const uint64_t* c1 = c0 + words;
    std::vector<uint64_t> coefficients(c1, c1 + words);
    he::internal::InverseNtt(ctx.ntt(), coefficients.data());
    const uint64_t* digits = he::internal::DecomposeToScratch(bfv, coefficients.data(), c1);
    uint64_t* out = rotated + (g * switched + s - 1) * 2 * qp_words;
    he::internal::RotateBeforeModDown(bfv, c0, digits, switches[s].first, *switches[s].second, out,
                                      out + qp_words);
  });
  he::internal::ParallelFor(threads, groups * 2, [&](size_t task) {
    const uint64_t g = task / 2;
    const size_t h = task % 2;
    uint64_t* out = sums.data() + (g * 2 + h) * words;
    const uint64_t* identity = virtual_sums + (g * elements * 2 + h) * words;
    if (switched == 0) {
      std::copy_n(identity, words, out);
      return;
    }
    uint64_t* acc = rotated + g * switched * 2 * qp_words + h * qp_words;
    for (size_t s = 1; s < switched; ++s) {
      he::internal::AddRows(bfv.qp_ntt(), acc, acc + s * 2 * qp_words, acc);
    }
    he::internal::ModDown(bfv, acc, true, out);
    he::internal::AddRows(ctx.ntt(), out, identity, out);
  });
}

absl::Status DeferredPacking::Sums(const he::GaloisKeys& keys, absl::Span<const uint8_t> ciphertext,
                                   int threads, absl::Span<uint64_t> sums) const {
  const RingContext& ctx = *ctx_;
  absl::StatusOr<Switches> switches = CheckedSwitches(&keys, sums, threads);
  if (!switches.ok()) return switches.status();
  const size_t words = ctx.k() * ctx.n();
  uint64_t* nodes =
      he::internal::GetScratch(he::internal::Scratch::kPackNodes, roots() * 2 * words);
  if (absl::Status s = ExpandNodes(keys, ciphertext, threads, nodes); !s.ok()) return s;
  uint64_t* virtual_sums =
      he::internal::GetScratch(he::internal::Scratch::kPackSums, virtual_sum_words());
  const uint64_t* const node_list[] = {nodes};
  uint64_t* const sum_list[] = {virtual_sums};
  TilePass(node_list, sum_list, threads);
  SwitchGroups(*switches, virtual_sums, threads, sums);
  return absl::OkStatus();
}

std::vector<absl::Status> DeferredPacking::SumsBatch(
    absl::Span<const he::GaloisKeys* const> keys,
    absl::Span<const absl::Span<const uint8_t>> ciphertexts,
    absl::Span<const absl::Span<uint64_t>> sums, int threads) const {
  const size_t count = keys.size();
  std::vector<absl::Status> out(count);
  if (absl::Status s = internal::CheckSumsBatch(count, ciphertexts.size(), sums.size(), threads);
      !s.ok()) {
    out.assign(count, s);
    return out;
  }
  const RingContext& ctx = *ctx_;
  const uint64_t node_words = roots() * 2 * ctx.k() * ctx.n(), sum_words = virtual_sum_words();
  const size_t chunk = std::min(count, kBatchChunk);
  uint64_t* nodes = he::internal::GetScratch(he::internal::Scratch::kPackNodes, chunk * node_words);
  uint64_t* virtual_sums =
      he::internal::GetScratch(he::internal::Scratch::kPackSums, chunk * sum_words);
  std::vector<std::optional<Switches>> switches(count);
  for (size_t first = 0; first < count; first += chunk) {
    const size_t size = std::min(chunk, count - first);
    // Each query expanded on one worker; those that fail are left out of the rest.
    he::internal::ParallelFor(threads, size, [&](size_t c) {
      const size_t q = first + c;
      absl::StatusOr<Switches> found = CheckedSwitches(keys[q], sums[q], 1);
      if (!found.ok()) {
        out[q] = found.status();
        return;
      }
      switches[q] = *std::move(found);
      out[q] = ExpandNodes(*keys[q], ciphertexts[q], 1, nodes + c * node_words);
    });
    std::vector<const uint64_t*> node_list;
    std::vector<uint64_t*> sum_list;
    for (size_t c = 0; c < size; ++c) {
      if (!out[first + c].ok()) continue;
      node_list.push_back(nodes + c * node_words);
      sum_list.push_back(virtual_sums + c * sum_words);
    }
    TilePass(node_list, sum_list, threads);
    he::internal::ParallelFor(threads, size, [&](size_t c) {
      const size_t q = first + c;
      if (out[q].ok()) SwitchGroups(*switches[q], virtual_sums + c * sum_words, 1, sums[q]);
    });
  }
  return out;
}

}  // namespace veil::lattice
