#include "pir/lattice/hybrid.h"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pir/he/parallel.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"
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

uint64_t HybridKeyBytes(const RingContext& ring) {
  if (ring.expansion() == nullptr) return 0;
  return ExpansionKeyBytes(ring, kLweDimension) + he::RelinKeyBytes(*ring.expansion());
}

absl::StatusOr<std::vector<uint8_t>> MakeHybridKeys(const RingContext& ring,
                                                    const he::SecretKey& key) {
  absl::StatusOr<std::vector<uint8_t>> out = MakeExpansionKeys(ring, key, kLweDimension);
  if (!out.ok()) return out.status();
  absl::StatusOr<he::RelinKey> conversion = he::GenerateRelinKey(*ring.expansion(), key);
  if (!conversion.ok()) return conversion.status();
  absl::StatusOr<std::vector<uint8_t>> bytes =
      he::SerializeRelinKey(*ring.expansion(), *conversion);
  if (!bytes.ok()) return bytes.status();
  out->insert(out->end(), bytes->begin(), bytes->end());
  return out;
}

absl::StatusOr<he::GaloisKeys> ParseHybridKeys(const RingContext& ring,
                                               absl::Span<const uint8_t> bytes) {
  if (absl::Status s = CheckExpansion(ring, kLweDimension); !s.ok()) return s;
  const uint64_t galois = ExpansionKeyBytes(ring, kLweDimension);
  if (bytes.size() != HybridKeyBytes(ring)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lwe-hybrid's session keys are ", HybridKeyBytes(ring),
                     " bytes (the expansion's and the conversion key), got ", bytes.size()));
  }
  absl::StatusOr<he::GaloisKeys> keys =
      ParseExpansionKeys(ring, kLweDimension, bytes.first(galois));
  if (!keys.ok()) return keys.status();
  absl::StatusOr<he::RelinKey> conversion =
      he::ParseRelinKey(*ring.expansion(), bytes.subspan(galois));
  if (!conversion.ok()) return conversion.status();
  keys->keys.emplace(kConversionKeyElement, std::move(conversion->key));
  return keys;
}

uint64_t HybridSelectionBytes(const RingContext& ring, const Shape& shape) {
  return HybridWindowFor(ring, shape).bits == 0 ? 0 : SecretCiphertextBytes(ring);
}

uint64_t HybridResponseBytes(const RingContext& ring, const Shape& shape) {
  return HybridWindowFor(ring, shape).window * SwitchedBytes(ring);
}

namespace {

absl::Status CheckSelectionBits(const RingContext& ring, const HybridWindow& window) {
  if (ring.k() * window.bits > ring.n()) {
    return absl::InvalidArgumentError(absl::StrCat(window.bits, " window bits (", ring.k(),
                                                   " values each) exceed N = ", ring.n()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<uint8_t>> PrepareHybridSelection(const RingContext& ring,
                                                            const RlweSecret& z,
                                                            const HybridWindow& window) {
  if (absl::Status s = CheckSelectionBits(ring, window); !s.ok()) return s;
  if (window.bits == 0) return std::vector<uint8_t>();
  std::vector<uint64_t> zero(ring.k() * ring.n(), 0);
  return internal::EncryptForExpansion(ring, z, absl::MakeSpan(zero));
}

absl::Status AddHybridSelection(const RingContext& ring, const HybridWindow& window, uint64_t start,
                                absl::Span<uint8_t> selection) {
  he::internal::SecretNttScope wipe_ntt_scratch;  // a transform of secret data
  if (absl::Status s = CheckSelectionBits(ring, window); !s.ok()) return s;
  const uint64_t expected = window.bits == 0 ? 0 : SecretCiphertextBytes(ring);
  if (start >= window.starts || selection.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat("window start ", start, " of ", window.starts,
                                                   ", a selection of ", selection.size(),
                                                   " bytes (expected ", expected, ")"));
  }
  if (window.bits == 0) return absl::OkStatus();
  const size_t n = ring.n(), k = ring.k(), words = k * n;
  // Coefficient b k + i: bit b in row i (m g_i), times 2^-L' (the expansion doubles L' times).
  const uint64_t scale_up = uint64_t{1} << ExpansionLevels(static_cast<uint32_t>(k * window.bits));
  std::vector<uint64_t> message(words, 0), c0(words);
  for (size_t i = 0; i < k; ++i) {
    const he::Modulus& q = ring.base()[i];
    const uint64_t inverse = *q.Inverse(q.Reduce(scale_up));
    for (uint32_t b = 0; b < window.bits; ++b) {
      message[i * n + b * k + i] = inverse & (uint64_t{0} - ((start >> b) & 1));
    }
  }
  // The encryption of zero's c0 (after its 32-byte seed) plus the message's NTT form: the
  // encryption is linear in its message, and every residue is rewritten whatever the bits.
  he::internal::ForwardNtt(ring.ntt(), message.data());
  uint8_t* residues = selection.data() + 32;
  for (size_t r = 0; r < words; ++r) {
    uint32_t residue;
    std::memcpy(&residue, residues + 4 * r, 4);
    c0[r] = residue;
  }
  he::internal::AddRows(ring.ntt(), c0.data(), message.data(), c0.data());
  for (size_t r = 0; r < words; ++r) {
    const uint32_t residue = static_cast<uint32_t>(c0[r]);  // primes are below 2^32
    std::memcpy(residues + 4 * r, &residue, 4);
  }
  sodium_memzero(message.data(), message.size() * sizeof(uint64_t));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> MakeHybridSelection(const RingContext& ring,
                                                         const RlweSecret& z,
                                                         const HybridWindow& window,
                                                         uint64_t start) {
  absl::StatusOr<std::vector<uint8_t>> selection = PrepareHybridSelection(ring, z, window);
  if (!selection.ok()) return selection.status();
  if (absl::Status s = AddHybridSelection(ring, window, start, absl::MakeSpan(*selection));
      !s.ok()) {
    return s;
  }
  return selection;
}

absl::StatusOr<std::vector<he::QRgswCiphertext>> ExpandHybridSelection(
    const RingContext& ring, const HybridWindow& window, const he::GaloisKeys& keys,
    absl::Span<const uint8_t> bytes, int threads) {
  if (threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (window.bits == 0) {
    if (!bytes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a selection of ", bytes.size(), " bytes where there is one window"));
    }
    return std::vector<he::QRgswCiphertext>();
  }
  const auto conversion = keys.keys.find(kConversionKeyElement);
  if (conversion == keys.keys.end()) {
    return absl::FailedPreconditionError("the session's keys lack lwe-hybrid's conversion key");
  }
  const size_t k = ring.k(), words = k * ring.n();
  const uint32_t values = static_cast<uint32_t>(k * window.bits);
  // The expanded parts, per bit its k ciphertexts of bit g_i (c0 then c1), as ConvertToRgsw
  // takes them, in this thread's scratch (fresh pages per query cost more than the work; the
  // workers write disjoint parts, then read them).
  const absl::Span<uint64_t> parts =
      absl::MakeSpan(he::internal::GetScratch(he::internal::Scratch::kExpanded, values * 2 * words),
                     values * 2 * words);
  if (absl::Status s = ExpandLweSecret(ring, keys, values, bytes, threads,
                                       [&](int, uint32_t count, const uint32_t* index,
                                           const uint64_t* beta, const uint64_t* alpha) {
                                         for (uint32_t c = 0; c < count; ++c) {
                                           uint64_t* to = parts.data() + index[c] * 2 * words;
                                           std::copy_n(beta + c * words, words, to);
                                           std::copy_n(alpha + c * words, words, to + words);
                                         }
                                       });
      !s.ok()) {
    return s;
  }
  std::vector<absl::StatusOr<he::QRgswCiphertext>> converted(window.bits);
  he::internal::ParallelFor(threads, window.bits, [&](size_t b) {
    converted[b] =
        he::ConvertToRgsw(*ring.expansion(), conversion->second,
                          absl::MakeConstSpan(parts).subspan(b * k * 2 * words, k * 2 * words));
  });
  std::vector<he::QRgswCiphertext> bits;
  for (absl::StatusOr<he::QRgswCiphertext>& g : converted) {
    if (!g.ok()) return g.status();
    bits.push_back(*std::move(g));
  }
  return bits;
}

absl::StatusOr<std::vector<RlweCiphertext>> SelectWindow(const RingContext& ring,
                                                         const HybridWindow& window,
                                                         absl::Span<const RlweCiphertext> packed,
                                                         absl::Span<const he::QRgswCiphertext> bits,
                                                         int threads) {
  if (threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (packed.size() != window.groups || bits.size() != window.bits) {
    return absl::InvalidArgumentError(absl::StrCat(packed.size(), " packed ciphertexts and ",
                                                   bits.size(), " selection bits (expected ",
                                                   window.groups, " and ", window.bits, ")"));
  }
  const he::BfvContext& ctx = *ring.expansion();
  const size_t words = ring.k() * ring.n(), leaves = size_t{1} << window.bits;
  // A tree's inner nodes in this thread's scratch, in two halves that the levels take in turn
  // (node i of a level in slot i of its half), so that a level's CMuxes, run side by side, never
  // write what another reads. A node that needed no CMux points at a leaf, never at a slot.
  const size_t half = std::max<size_t>(1, leaves / 2) * 2 * words;
  uint64_t* slots = he::internal::GetScratch(he::internal::Scratch::kSelection, 2 * half);
  struct Node {
    const uint64_t* c0;
    const uint64_t* c1;
  };
  std::vector<RlweCiphertext> out;
  for (uint64_t j = 0; j < window.window; ++j) {
    // Leaves j .. j + G - 1, padded with the last.
    std::vector<Node> level;
    for (uint64_t i = 0; i < leaves; ++i) {
      const RlweCiphertext& leaf = packed[j + std::min(i, window.starts - 1)];
      level.push_back({leaf.c0.data(), leaf.c1.data()});
    }
    for (uint32_t b = 0; b < window.bits; ++b) {
      std::vector<Node> next(level.size() / 2);
      uint64_t* to_half = slots + (b % 2) * half;
      he::internal::ParallelFor(threads, next.size(), [&](size_t i) {
        const Node a = level[2 * i], c = level[2 * i + 1];
        if (a.c0 == c.c0) {  // the padding (public): nothing to select
          next[i] = a;
          return;
        }
        uint64_t* to = to_half + i * 2 * words;
        he::internal::CMux(ctx, bits[b], a.c0, a.c1, c.c0, c.c1, to, to + words);
        next[i] = {to, to + words};
      });
      level = std::move(next);
    }
    RlweCiphertext& selected = out.emplace_back();
    selected.c0.assign(level[0].c0, level[0].c0 + words);
    selected.c1.assign(level[0].c1, level[0].c1 + words);
  }
  return out;
}

PackingNoise HybridNoiseBound(const RingContext& ctx, uint32_t lwe_n, uint32_t bits) {
  PackingNoise noise = ExpPackNoiseBound(ctx, lwe_n);
  if (bits == 0) return noise;
  double q = 1;
  for (uint64_t p : ctx.params().primes) q *= static_cast<double>(p);
  const double to_words = std::ldexp(1.0, 32) / q;
  // The expanded parts' variance, their conversion's, and what each level's product adds.
  const double parts = ExpandedKeyVariance(ctx, static_cast<uint32_t>(ctx.k() * bits));
  const double product = he::QRgswProductVariance(*ctx.expansion(), parts,
                                                  he::ConvertedVariance(*ctx.expansion(), parts));
  noise.sigma = std::sqrt(noise.sigma * noise.sigma + bits * product * to_words * to_words);
  return noise;
}

bool HybridNoiseWithinRule(const RingContext& ctx, uint32_t lwe_n, uint32_t bits) {
  const double limit = (kDelta / 2) / 256.0;
  return std::sqrt(2 * 41 * std::log(2.0)) * HybridNoiseBound(ctx, lwe_n, bits).sigma <= limit;
}

}  // namespace veil::lattice
