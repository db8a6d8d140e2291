#include "pir/lattice/hybrid.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "absl/strings/str_cat.h"
#include "pir/he/serialization.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/params.h"

namespace veil::lattice {

uint64_t HybridWindow::StartOf(const RingContext& ring, const Shape& shape, uint64_t row) const {
  return std::min(shape.slot_of(row) * shape.record_bytes / ring.n(), groups - window);
}

HybridWindow HybridWindowFor(const RingContext& ring, const Shape& shape) {
  const uint64_t n = ring.n(), r = shape.record_bytes;
  HybridWindow w;
  w.groups = (shape.d1 + n - 1) / n;
  w.window = n % r == 0 ? 1 : (r % n == 0 ? r / n : (r + n - 1) / n + 1);
  w.window = std::min(w.window, w.groups);
  w.starts = w.groups - w.window + 1;
  while ((uint64_t{1} << w.bits) < w.starts) ++w.bits;
  return w;
}

uint64_t HybridSelectionBytes(const RingContext& ring, const Shape& shape) {
  return he::RgswCiphertextsBytes(*ring.expansion(), HybridWindowFor(ring, shape).bits);
}

uint64_t HybridResponseBytes(const RingContext& ring, const Shape& shape) {
  return HybridWindowFor(ring, shape).window * SwitchedBytes(ring);
}

absl::StatusOr<std::vector<uint8_t>> MakeHybridSelection(const RingContext& ring,
                                                         const he::SecretKey& key,
                                                         const HybridWindow& window,
                                                         uint64_t start) {
  if (start >= window.starts) {
    return absl::InvalidArgumentError(
        absl::StrCat("window start ", start, " is not below ", window.starts));
  }
  std::vector<he::RgswCiphertext> bits;
  for (uint32_t b = 0; b < window.bits; ++b) {
    absl::StatusOr<he::RgswCiphertext> g =
        he::EncryptRgswBit(*ring.expansion(), key, static_cast<uint32_t>((start >> b) & 1));
    if (!g.ok()) return g.status();
    bits.push_back(*std::move(g));
  }
  return he::SerializeRgswCiphertexts(*ring.expansion(), bits);
}

absl::StatusOr<std::vector<he::RgswCiphertext>> ParseHybridSelection(
    const RingContext& ring, const HybridWindow& window, absl::Span<const uint8_t> bytes) {
  absl::StatusOr<std::vector<he::RgswCiphertext>> bits =
      he::ParseRgswCiphertexts(*ring.expansion(), bytes);
  if (!bits.ok()) return bits.status();
  if (bits->size() != window.bits) {
    return absl::InvalidArgumentError(
        absl::StrCat("a selection of ", bits->size(), " RGSW bits (expected ", window.bits, ")"));
  }
  return bits;
}

absl::StatusOr<std::vector<RlweCiphertext>> SelectWindow(
    const RingContext& ring, const HybridWindow& window, absl::Span<const RlweCiphertext> packed,
    absl::Span<const he::RgswCiphertext> bits) {
  if (packed.size() != window.groups || bits.size() != window.bits) {
    return absl::InvalidArgumentError(absl::StrCat(packed.size(), " packed ciphertexts and ",
                                                   bits.size(), " selection bits (expected ",
                                                   window.groups, " and ", window.bits, ")"));
  }
  const he::BfvContext& ctx = *ring.expansion();
  std::deque<RlweCiphertext> made;  // the trees' inner nodes (a deque: pointers stay valid)
  std::vector<RlweCiphertext> out;
  for (uint64_t j = 0; j < window.window; ++j) {
    // Leaves j .. j + G - 1, padded with the last.
    std::vector<const RlweCiphertext*> level;
    for (uint64_t i = 0; i < (uint64_t{1} << window.bits); ++i) {
      level.push_back(&packed[j + std::min(i, window.starts - 1)]);
    }
    for (uint32_t b = 0; b < window.bits; ++b) {
      std::vector<const RlweCiphertext*> next(level.size() / 2);
      for (size_t i = 0; i < next.size(); ++i) {
        const RlweCiphertext* a = level[2 * i];
        const RlweCiphertext* c = level[2 * i + 1];
        if (a == c) {  // the padding (public): nothing to select
          next[i] = a;
          continue;
        }
        RlweCiphertext& node = made.emplace_back();
        node.c0.resize(a->c0.size());
        node.c1.resize(a->c1.size());
        he::internal::CMux(ctx, bits[b], a->c0.data(), a->c1.data(), c->c0.data(), c->c1.data(),
                           node.c0.data(), node.c1.data());
        next[i] = &node;
      }
      level = std::move(next);
    }
    out.push_back(*level[0]);
  }
  return out;
}

PackingNoise HybridNoiseBound(const RingContext& ctx, uint32_t lwe_n, uint32_t bits) {
  PackingNoise noise = ExpPackNoiseBound(ctx, lwe_n);
  double q = 1;
  for (uint64_t p : ctx.params().primes) q *= static_cast<double>(p);
  const double to_words = std::ldexp(1.0, 32) / q;
  noise.sigma =
      std::sqrt(noise.sigma * noise.sigma +
                bits * he::ExternalProductVariance(*ctx.expansion()) * to_words * to_words);
  return noise;
}

bool HybridNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n, uint32_t bits) {
  const double limit = (kDelta / 2) / 256.0;
  return std::sqrt(2 * 41 * std::log(2.0)) * HybridNoiseBound(ctx, lwe_n, bits).sigma <= limit;
}

}  // namespace veil::lattice
