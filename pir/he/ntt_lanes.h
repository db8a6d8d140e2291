// The NTT's vector stage loops, shared by the kernels of each instruction set (ntt_avx512.cc,
// ntt_avx2.cc; each includes this header compiled for its own ISA, with lane types of its own in
// an anonymous namespace, so that no instantiation is shared between them). A lane type L gives
// V (its vector), Elem and kLanes, Load / Store, Set1, Add, Sub, ReduceOnce(a, m) = a or a - m
// (whichever is below m), Permute2(a, idx, b) (lanes of the pair a | b), Permute(idx, a), Index,
// the root tables (Roots, RootsShoup), ShoupScalar / ShoupVector / ShoupOfScalar and
// MulShoupLazy(a, w, w_shoup) = a w mod q in [0, 2q).
//
// Stages whose butterfly distance `half` is at least a vector use whole vectors; the last (first,
// for the inverse) log2(lanes) stages gather the X and Y halves of two vectors with permutes,
// and take each lane's root from consecutive table entries (roots[m + b / (2 half) + k / half]).
#ifndef VEIL_PIR_HE_NTT_LANES_H_
#define VEIL_PIR_HE_NTT_LANES_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "pir/he/ntt.h"

namespace veil::he::internal {
namespace {

// What the 32-bit lanes (q < 2^30) of every width share: the 32-bit root tables and their Shoup
// companions floor(w 2^32 / q).
struct U32Tables {
  using Elem = uint32_t;
  static const Elem* Roots(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots32() : t.roots32()).data();
  }
  static const Elem* RootsShoup(const NttTables& t, bool inverse) {
    return (inverse ? t.inverse_roots_shoup32() : t.roots_shoup32()).data();
  }
  static Elem ShoupScalar(Elem w_shoup) { return w_shoup; }
  static Elem ShoupOfScalar(uint64_t w, uint64_t q) { return static_cast<Elem>((w << 32) / q); }
};

// Permutes of a small-distance stage over two vectors (positions 0 .. 2L-1): lane k of X is
// position (k / half) * 2 half + k % half, of Y that plus half; `back0`/`back1` undo it; lane k
// takes root k / half of the loaded roots.
template <class L>
struct StagePermutes {
  using V = typename L::V;
  explicit StagePermutes(size_t half) {
    constexpr size_t kL = L::kLanes;
    int x[kL], y[kL], b0[kL], b1[kL], r[kL];
    for (size_t k = 0; k < kL; ++k) {
      x[k] = static_cast<int>((k / half) * 2 * half + k % half);
      y[k] = x[k] + static_cast<int>(half);
      r[k] = static_cast<int>(k / half);
    }
    for (size_t p = 0; p < 2 * kL; ++p) {
      const size_t lane = (p / (2 * half)) * half + p % half;
      const int source = static_cast<int>(p % (2 * half) < half ? lane : kL + lane);
      (p < kL ? b0[p] : b1[p - kL]) = source;
    }
    to_x = L::Index(x);
    to_y = L::Index(y);
    back0 = L::Index(b0);
    back1 = L::Index(b1);
    root = L::Index(r);
  }
  V to_x, to_y, back0, back1, root;
};

template <class L>
void ForwardButterfly(const L& ops, typename L::V two_q, typename L::V w, typename L::V ws,
                      typename L::V& x, typename L::V& y) {
  using V = typename L::V;
  const V u = L::ReduceOnce(x, two_q);
  const V v = ops.MulShoupLazy(y, w, ws);
  x = L::Add(u, v);
  y = L::Add(L::Sub(u, v), two_q);
}

template <class L>
void InverseButterfly(const L& ops, typename L::V two_q, typename L::V w, typename L::V ws,
                      typename L::V& x, typename L::V& y) {
  using V = typename L::V;
  const V s = L::ReduceOnce(L::Add(x, y), two_q);
  y = ops.MulShoupLazy(L::Add(L::Sub(x, y), two_q), w, ws);
  x = s;
}

// A lane type that runs the small stages itself, all of them in one pass (ntt_avx2.cc: in
// registers, with in-lane shuffles): ForwardSmallStages(two_q, q, roots, roots_shoup, n, work,
// out) with the forward's final pass into out, InverseSmallStages(two_q, roots, roots_shoup, n,
// in, work) from the inverse's words.
template <class L>
concept OwnSmallStages = L::kOwnSmallStages;

// A transform's input and output are words of type Word: L's Elem (in place), or wider words
// that the first stage narrows as it loads them and the last pass widens as it stores them (a
// lane type that takes them gives LoadNarrow and StoreWide), the stages between in a scratch of
// Elems.
template <class L, class Word>
typename L::V LoadWord(const Word* p) {
  if constexpr (std::is_same_v<Word, typename L::Elem>) {
    return L::Load(p);
  } else {
    return L::LoadNarrow(p);
  }
}
template <class L, class Word>
void StoreWord(Word* p, typename L::V v) {
  if constexpr (std::is_same_v<Word, typename L::Elem>) {
    L::Store(p, v);
  } else {
    L::StoreWide(p, v);
  }
}

// One stage of distance half < L over the whole polynomial: groups of 2 half elements, root
// table entries starting at roots + m; from `in` (words) into `out` (which may be in).
template <class L, bool kInverse, class Word = typename L::Elem>
void SmallStage(const L& ops, typename L::V two_q, const typename L::Elem* roots,
                const typename L::Elem* roots_shoup, size_t n, size_t m, size_t half,
                const Word* in, typename L::Elem* out) {
  using V = typename L::V;
  constexpr size_t kL = L::kLanes;
  const StagePermutes<L> p(half);
  for (size_t b = 0; b < n; b += 2 * kL) {
    const V v0 = LoadWord<L>(in + b), v1 = LoadWord<L>(in + b + kL);
    V x = L::Permute2(v0, p.to_x, v1), y = L::Permute2(v0, p.to_y, v1);
    const size_t first_root = m + b / (2 * half);
    const V w = L::Permute(p.root, L::Load(roots + first_root));
    const V ws = L::ShoupVector(L::Permute(p.root, L::Load(roots_shoup + first_root)));
    if (kInverse) {
      InverseButterfly(ops, two_q, w, ws, x, y);
    } else {
      ForwardButterfly(ops, two_q, w, ws, x, y);
    }
    L::Store(out + b, L::Permute2(x, p.back0, y));
    L::Store(out + b + kL, L::Permute2(x, p.back1, y));
  }
}

// One stage of distance half >= L: whole vectors, one broadcast root per group; from `in`
// (words) into `out` (which may be in).
template <class L, bool kInverse, class Word = typename L::Elem>
void WideStage(const L& ops, typename L::V two_q, const typename L::Elem* roots,
               const typename L::Elem* roots_shoup, size_t m, size_t half, const Word* in,
               typename L::Elem* out) {
  using V = typename L::V;
  for (size_t i = 0; i < m; ++i) {
    const V w = L::Set1(roots[m + i]), ws = L::Set1(L::ShoupScalar(roots_shoup[m + i]));
    const Word* from_x = in + 2 * i * half;
    const Word* from_y = from_x + half;
    typename L::Elem* x = out + 2 * i * half;
    typename L::Elem* y = x + half;
    for (size_t j = 0; j < half; j += L::kLanes) {
      V u = LoadWord<L>(from_x + j), v = LoadWord<L>(from_y + j);
      if (kInverse) {
        InverseButterfly(ops, two_q, w, ws, u, v);
      } else {
        ForwardButterfly(ops, two_q, w, ws, u, v);
      }
      L::Store(x + j, u);
      L::Store(y + j, v);
    }
  }
}

// The transforms of `a` (words: see LoadWord), through `work` (n Elems; a itself where Word is
// Elem).
template <class L, class Word = typename L::Elem>
void Forward(const NttTables& t, Word* a, typename L::Elem* work) {
  using V = typename L::V;
  const uint64_t qv = t.modulus().value();
  const L ops(qv);
  const V q = L::Set1(static_cast<typename L::Elem>(qv));
  const V two_q = L::Set1(static_cast<typename L::Elem>(2 * qv));
  const auto* roots = L::Roots(t, false);
  const auto* roots_shoup = L::RootsShoup(t, false);
  const size_t n = t.n();
  size_t m = 1, half = n / 2;
  // The first stage from the words (n >= 2 L: half >= L).
  WideStage<L, false>(ops, two_q, roots, roots_shoup, m, half, a, work);
  for (m *= 2, half /= 2; half >= L::kLanes; m *= 2, half /= 2) {
    WideStage<L, false>(ops, two_q, roots, roots_shoup, m, half, work, work);
  }
  if constexpr (OwnSmallStages<L>) {
    ops.ForwardSmallStages(two_q, q, roots, roots_shoup, n, work, a);
  } else {
    for (; half >= 1; m *= 2, half /= 2) {
      SmallStage<L, false>(ops, two_q, roots, roots_shoup, n, m, half, work, work);
    }
    for (size_t j = 0; j < n; j += L::kLanes) {
      StoreWord<L>(a + j, L::ReduceOnce(L::ReduceOnce(L::Load(work + j), two_q), q));
    }
  }
}

template <class L, class Word = typename L::Elem>
void Inverse(const NttTables& t, Word* a, typename L::Elem* work) {
  using V = typename L::V;
  const uint64_t qv = t.modulus().value();
  const L ops(qv);
  const V q = L::Set1(static_cast<typename L::Elem>(qv));
  const V two_q = L::Set1(static_cast<typename L::Elem>(2 * qv));
  const auto* roots = L::Roots(t, true);
  const auto* roots_shoup = L::RootsShoup(t, true);
  const size_t n = t.n();
  size_t m = n / (2 * L::kLanes), half = L::kLanes;
  if constexpr (OwnSmallStages<L>) {
    ops.InverseSmallStages(two_q, roots, roots_shoup, n, a, work);
  } else {
    // The first stage from the words (half 1 < L).
    SmallStage<L, true>(ops, two_q, roots, roots_shoup, n, n / 2, 1, a, work);
    for (size_t h = 2; h < L::kLanes; h *= 2) {
      SmallStage<L, true>(ops, two_q, roots, roots_shoup, n, n / (2 * h), h, work, work);
    }
  }
  for (; m >= 1; m /= 2, half *= 2) {
    WideStage<L, true>(ops, two_q, roots, roots_shoup, m, half, work, work);
  }
  const V n_inv = L::Set1(static_cast<typename L::Elem>(t.n_inverse()));
  const V n_inv_shoup = L::Set1(L::ShoupOfScalar(t.n_inverse(), qv));
  for (size_t j = 0; j < n; j += L::kLanes) {
    StoreWord<L>(a + j, L::ReduceOnce(ops.MulShoupLazy(L::Load(work + j), n_inv, n_inv_shoup), q));
  }
}

// In place.
template <class L>
void Forward(const NttTables& t, typename L::Elem* a) {
  Forward<L>(t, a, a);
}
template <class L>
void Inverse(const NttTables& t, typename L::Elem* a) {
  Inverse<L>(t, a, a);
}

}  // namespace
}  // namespace veil::he::internal

#endif  // VEIL_PIR_HE_NTT_LANES_H_
