#include "pir/he/serialization.h"

#include <sodium.h>

#include <algorithm>
#include <bit>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "pir/he/dot_product.h"
#include "pir/he/poly.h"
#include "pir/he/scratch.h"

namespace veil::he {
namespace {

// The packed residues are little-endian bit strings, read and written a word at a time.
static_assert(std::endian::native == std::endian::little);

// Bits of row j's residues: the QP moduli's sizes, less `drop` in row 0 (a rounded c_0).
int RowBits(const BfvContext& ctx, size_t j, int drop) {
  return ctx.modulus(j).bits() - (j == 0 ? drop : 0);
}

size_t PolyBytes(const BfvContext& ctx, size_t rows, int drop = 0) {
  size_t bits = 0;
  for (size_t j = 0; j < rows; ++j) bits += RowBits(ctx, j, drop) * ctx.n();
  return (bits + 7) / 8;
}

// Ciphertext flags.
constexpr uint8_t kSeeded = 1;
constexpr uint8_t kRoundedC0 = 2;

// Whether the conversions' steps modulo q, reading digits below `from`, run on the FMA lanes
// (dot_product.h): both at most 50 bits, the CPU with AVX2 and FMA. Bit for bit the scalar steps.
bool OnFmaLanes(const Modulus& q, const Modulus& from) {
  return from.bits() <= 50 && internal::RowProductUsesAvx2F64(q);
}

// Mixed-radix digits of the k x N residues p (Garner's algorithm): x_j < q_j with
// p = x_0 + q_0 (x_1 + q_1 (x_2 + ...)). Multiplications by constants: Shoup's.
std::vector<uint64_t> ToMixedRadix(const BfvContext& ctx, const uint64_t* p) {
  const size_t k = ctx.q_size(), n = ctx.n();
  std::vector<uint64_t> x(p, p + k * n);
  for (size_t j = 1; j < k; ++j) {
    const Modulus& m = ctx.modulus(j);
    uint64_t* xj = x.data() + j * n;
    for (size_t i = 0; i < j; ++i) {
      // x_j = (x_j - x_i) q_i^{-1} mod q_j
      const uint64_t w = *m.Inverse(m.Reduce(ctx.modulus(i).value()));
      const uint64_t w_shoup = m.ShoupOf(w);
      const uint64_t* xi = x.data() + i * n;
      const size_t done = OnFmaLanes(m, ctx.modulus(i))
                              ? internal::SubReducedMulAvx2F64(m, w, n, xj, xi, xj)
                              : 0;
      for (size_t c = done; c < n; ++c) {
        xj[c] = MulShoup(m.Sub(xj[c], m.Reduce(xi[c])), w, w_shoup, m.value());
      }
    }
  }
  return x;
}

// The residues of x_0 + q_0 (x_1 + q_1 (x_2 + ...)) (x_j below q_j) into p: modulo q_i the
// digits past x_i vanish (their weights are multiples of q_i), so row i is Horner's rule over
// x_i, ..., x_0.
void FromMixedRadix(const BfvContext& ctx, const uint64_t* x, uint64_t* p) {
  const size_t k = ctx.q_size(), n = ctx.n();
  for (size_t i = 0; i < k; ++i) {
    const Modulus& m = ctx.modulus(i);
    uint64_t* acc = p + i * n;
    std::copy_n(x + i * n, n, acc);
    for (size_t j = i; j-- > 0;) {
      const uint64_t w = m.Reduce(ctx.modulus(j).value());
      const uint64_t w_shoup = m.ShoupOf(w);
      const uint64_t* xj = x + j * n;
      const size_t done = OnFmaLanes(m, ctx.modulus(j))
                              ? internal::MulAddReducedAvx2F64(m, w, n, acc, xj, acc)
                              : 0;
      for (size_t c = done; c < n; ++c) {
        acc[c] = m.Add(MulShoup(acc[c], w, w_shoup, m.value()), m.Reduce(xj[c]));
      }
    }
  }
}

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  void Bytes(const uint8_t* p, size_t n) { out_.insert(out_.end(), p, p + n); }
  void U8(uint8_t v) { out_.push_back(v); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void Header(const BfvContext& ctx, HeObjectKind kind) {
    U8(kHeMagic0);
    U8(kHeMagic1);
    U8(kHeVersion);
    U8(static_cast<uint8_t>(kind));
    U64(ctx.id());
  }
  // rows residue rows of N, bit-packed (row 0 at `drop` bits fewer), 64 bits stored at a time.
  void Poly(const BfvContext& ctx, const uint64_t* p, size_t rows, int drop = 0) {
    // Whole words cover at most the residues' bits, and the tail's bytes the rest: exactly
    // PolyBytes, so a caller's exact reserve holds.
    const size_t start = out_.size();
    out_.resize(start + PolyBytes(ctx, rows, drop));
    uint8_t* to = out_.data() + start;
    uint128_t acc = 0;
    int filled = 0;
    for (size_t j = 0; j < rows; ++j) {
      const int bits = RowBits(ctx, j, drop);
      for (size_t c = 0; c < ctx.n(); ++c) {
        acc |= static_cast<uint128_t>(p[j * ctx.n() + c]) << filled;
        filled += bits;
        if (filled >= 64) {
          const uint64_t word = static_cast<uint64_t>(acc);
          std::memcpy(to, &word, sizeof(word));
          to += sizeof(word);
          acc >>= 64;
          filled -= 64;
        }
      }
    }
    for (; filled > 0; filled -= 8, acc >>= 8) *to++ = static_cast<uint8_t>(acc);
  }
  // Values below 2^bits (bits <= 120), bit-packed, padded to a whole byte.
  void Wide(absl::Span<const uint128_t> values, int bits) {
    uint128_t acc = 0;
    int filled = 0;
    for (const uint128_t v : values) {
      for (int done = 0; done < bits;) {  // at most 64 bits at a time: acc never overflows
        const int take = std::min(64, bits - done);
        acc |= ((v >> done) & ((uint128_t{1} << take) - 1)) << filled;
        filled += take;
        done += take;
        while (filled >= 8) {
          out_.push_back(static_cast<uint8_t>(acc));
          acc >>= 8;
          filled -= 8;
        }
      }
    }
    if (filled > 0) out_.push_back(static_cast<uint8_t>(acc));
  }

 private:
  std::vector<uint8_t>& out_;
};

class Reader {
 public:
  explicit Reader(absl::Span<const uint8_t> in) : in_(in) {}
  absl::Status Need(size_t n, const char* what) const {
    if (in_.size() - pos_ < n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "truncated ", what, ": ", n, " more bytes needed, ", in_.size() - pos_, " left"));
    }
    return absl::OkStatus();
  }
  uint8_t U8() { return in_[pos_++]; }
  uint32_t U32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{in_[pos_++]} << (8 * i);
    return v;
  }
  uint64_t U64() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{in_[pos_++]} << (8 * i);
    return v;
  }
  void Bytes(uint8_t* p, size_t n) {
    std::copy_n(in_.begin() + pos_, n, p);
    pos_ += n;
  }
  absl::Status Header(const BfvContext& ctx, HeObjectKind kind) {
    if (absl::Status s = Need(kHeHeaderBytes, "header"); !s.ok()) return s;
    if (U8() != kHeMagic0 || U8() != kHeMagic1) {
      return absl::InvalidArgumentError("not a veil HE object (bad magic)");
    }
    if (const uint8_t v = U8(); v != kHeVersion) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported HE object version ", v));
    }
    if (const uint8_t k = U8(); k != static_cast<uint8_t>(kind)) {
      return absl::InvalidArgumentError(
          absl::StrCat("object kind ", k, " where kind ", static_cast<int>(kind), " was expected"));
    }
    return ctx.CheckId(U64(), "serialized object");
  }
  // As Writer::Poly packs them; each residue below q_j (row 0 of `drop` bits fewer: at most
  // (q_0 - 1) >> drop). Each residue from the 16 bytes at its first bit where they are in the
  // polynomial, else byte by byte.
  absl::Status Poly(const BfvContext& ctx, uint64_t* p, size_t rows, const char* what,
                    int drop = 0) {
    const size_t size = PolyBytes(ctx, rows, drop);
    if (absl::Status s = Need(size, what); !s.ok()) return s;
    const uint8_t* from = in_.data() + pos_;
    uint64_t bit = 0;
    for (size_t j = 0; j < rows; ++j) {
      const int bits = RowBits(ctx, j, drop);
      const uint64_t mask = (uint64_t{1} << bits) - 1;
      const uint64_t q =
          j == 0 ? ((ctx.modulus(0).value() - 1) >> drop) + 1 : ctx.modulus(j).value();
      for (size_t c = 0; c < ctx.n(); ++c, bit += bits) {
        const size_t byte = bit / 8;
        uint128_t window = 0;
        if (byte + 16 <= size) {
          std::memcpy(&window, from + byte, sizeof(window));
        } else {
          for (size_t b = byte; b < size && b < byte + 16; ++b) {
            window |= static_cast<uint128_t>(from[b]) << (8 * (b - byte));
          }
        }
        const uint64_t v = static_cast<uint64_t>(window >> (bit % 8)) & mask;
        if (v >= q) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, ": residue ", v, " in row ", j, " is not below ", q));
        }
        p[j * ctx.n() + c] = v;
      }
    }
    // The last byte's bits past the residues are zero: one encoding per polynomial.
    if (bit % 8 != 0 && (from[size - 1] >> (bit % 8)) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": nonzero padding bits"));
    }
    pos_ += size;
    return absl::OkStatus();
  }
  // count values of `bits` bits as Writer::Wide packs them; the padding must be zero.
  absl::Status Wide(std::vector<uint128_t>& values, size_t count, int bits, const char* what) {
    if (absl::Status s = Need((count * bits + 7) / 8, what); !s.ok()) return s;
    values.assign(count, 0);
    uint128_t acc = 0;
    int filled = 0;
    for (uint128_t& v : values) {
      for (int done = 0; done < bits;) {
        const int take = std::min(64, bits - done);
        while (filled < take) {
          acc |= static_cast<uint128_t>(in_[pos_++]) << filled;
          filled += 8;
        }
        v |= (acc & ((uint128_t{1} << take) - 1)) << done;
        acc >>= take;
        filled -= take;
        done += take;
      }
    }
    if (acc != 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": nonzero padding bits"));
    }
    return absl::OkStatus();
  }
  absl::Status Done(const char* what) const {
    if (pos_ != in_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(in_.size() - pos_, " bytes after the end of the ", what));
    }
    return absl::OkStatus();
  }
  size_t left() const { return in_.size() - pos_; }

 private:
  absl::Span<const uint8_t> in_;
  size_t pos_ = 0;
};

void WriteKeySwitchKey(const BfvContext& ctx, const KeySwitchKey& key, Writer& w) {
  const size_t words = (ctx.q_size() + 1) * ctx.n();
  w.Bytes(key.seed.data(), key.seed.size());
  for (size_t i = 0; i < ctx.q_size(); ++i) w.Poly(ctx, key.b.data() + i * words, ctx.q_size() + 1);
}

absl::StatusOr<KeySwitchKey> ReadKeySwitchKey(const BfvContext& ctx, Reader& r) {
  const size_t words = (ctx.q_size() + 1) * ctx.n();
  KeySwitchKey key;
  if (absl::Status s = r.Need(key.seed.size(), "key-switching key"); !s.ok()) return s;
  r.Bytes(key.seed.data(), key.seed.size());
  key.b.resize(ctx.q_size() * words);
  for (size_t i = 0; i < ctx.q_size(); ++i) {
    if (absl::Status s =
            r.Poly(ctx, key.b.data() + i * words, ctx.q_size() + 1, "key-switching key");
        !s.ok()) {
      return s;
    }
  }
  key.a.resize(key.b.size());
  internal::ExpandKeySwitchA(ctx, key.seed, key.a.data());
  return key;
}

// The compressed wire format carries the parameters' default widths only.
absl::Status CheckDefaultBits(const BfvContext& ctx, CompressionBits bits) {
  const CompressionBits expected = DefaultCompressionBits(ctx);
  if (bits.c0 != expected.c0 || bits.c1 != expected.c1) {
    return absl::InvalidArgumentError(absl::StrCat("compressed ciphertext of ", bits.c0, " and ",
                                                   bits.c1, " bits, where these parameters use ",
                                                   expected.c0, " and ", expected.c1));
  }
  return absl::OkStatus();
}

size_t KeySwitchKeyBytes(const BfvContext& ctx) {
  return sizeof(Seed) + ctx.q_size() * PolyBytes(ctx, ctx.q_size() + 1);
}

}  // namespace

absl::Status CheckRoundBits(const BfvContext& ctx, int bits) {
  if (bits < 1 || bits >= ctx.modulus(0).bits()) {
    return absl::InvalidArgumentError(
        absl::StrCat("c_0 rounded by ", bits, " bits (1 to ", ctx.modulus(0).bits() - 1, ")"));
  }
  return absl::OkStatus();
}

size_t CiphertextBytes(const BfvContext& ctx, size_t size, bool seeded, int round_c0_bits) {
  const size_t poly = PolyBytes(ctx, ctx.q_size());
  return kHeHeaderBytes + 2 + (round_c0_bits != 0 ? 1 : 0) +
         PolyBytes(ctx, ctx.q_size(), round_c0_bits) + (size - 1) * poly -
         (seeded ? poly - sizeof(Seed) : 0);
}

size_t CompressedCiphertextBytes(const BfvContext& ctx) {
  const CompressionBits b = DefaultCompressionBits(ctx);
  return kHeHeaderBytes + 2 + (ctx.n() * b.c0 + 7) / 8 + (ctx.n() * b.c1 + 7) / 8;
}

size_t GaloisKeyBytes(const BfvContext& ctx) { return 4 + KeySwitchKeyBytes(ctx); }

size_t RelinKeyBytes(const BfvContext& ctx) { return kHeHeaderBytes + KeySwitchKeyBytes(ctx); }

size_t RgswCiphertextsBytes(const BfvContext& ctx, size_t count) {
  return kHeHeaderBytes + 4 + count * 2 * KeySwitchKeyBytes(ctx);
}

absl::StatusOr<std::vector<uint8_t>> SerializeCiphertext(const BfvContext& ctx,
                                                         const Ciphertext& ct, int round_c0_bits) {
  if (absl::Status s = CheckCiphertext(ctx, ct, "ciphertext"); !s.ok()) return s;
  if (round_c0_bits != 0) {
    if (absl::Status s = CheckRoundBits(ctx, round_c0_bits); !s.ok()) return s;
  }
  std::vector<uint8_t> out;
  out.reserve(CiphertextBytes(ctx, ct.size, ct.seed.has_value(), round_c0_bits));
  Writer w(out);
  w.Header(ctx, HeObjectKind::kCiphertext);
  w.U8(static_cast<uint8_t>(ct.size));
  w.U8((ct.seed ? kSeeded : 0) | (round_c0_bits != 0 ? kRoundedC0 : 0));
  const size_t words = ctx.q_size() * ctx.n();
  if (round_c0_bits != 0) {
    // c_0's mixed-radix digits, the lowest without its low bits.
    std::vector<uint64_t> x = ToMixedRadix(ctx, ct.poly(0, words));
    for (size_t c = 0; c < ctx.n(); ++c) x[c] >>= round_c0_bits;
    w.U8(static_cast<uint8_t>(round_c0_bits));
    w.Poly(ctx, x.data(), ctx.q_size(), round_c0_bits);
  } else {
    w.Poly(ctx, ct.poly(0, words), ctx.q_size());
  }
  for (size_t i = 1; i < ct.size; ++i) {
    if (i == 1 && ct.seed) {
      w.Bytes(ct.seed->data(), ct.seed->size());
    } else {
      w.Poly(ctx, ct.poly(i, words), ctx.q_size());
    }
  }
  return out;
}

int SerializedRoundBits(absl::Span<const uint8_t> bytes) {
  const size_t flags = kHeHeaderBytes + 1;
  return bytes.size() > flags + 1 && (bytes[flags] & kRoundedC0) != 0 ? bytes[flags + 1] : 0;
}

absl::StatusOr<Ciphertext> ParseCiphertext(const BfvContext& ctx, absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kCiphertext); !s.ok()) return s;
  if (absl::Status s = r.Need(2, "ciphertext"); !s.ok()) return s;
  Ciphertext ct{ctx.id(), r.U8(), {}, std::nullopt};
  const uint8_t flags = r.U8();
  if (ct.size < 2 || ct.size > 3) {
    return absl::InvalidArgumentError(absl::StrCat("ciphertext size ", ct.size, " (2 or 3)"));
  }
  if ((flags & ~(kSeeded | kRoundedC0)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown ciphertext flags ", flags));
  }
  const size_t words = ctx.q_size() * ctx.n();
  ct.data.resize(ct.size * words);
  if ((flags & kRoundedC0) != 0) {
    if (absl::Status s = r.Need(1, "ciphertext"); !s.ok()) return s;
    const int drop = r.U8();
    if (absl::Status s = CheckRoundBits(ctx, drop); !s.ok()) return s;
    // The digits in c_1's place, which the rest of the parse then fills: no buffer of their own.
    uint64_t* x = ct.poly(1, words);
    if (absl::Status s = r.Poly(ctx, x, ctx.q_size(), "ciphertext c_0", drop); !s.ok()) {
      return s;
    }
    // The middle of the dropped range, below q_0: c_0 moves by at most 2^(drop - 1), and its
    // digits are again x (one encoding per ciphertext).
    const uint64_t top = ctx.modulus(0).value() - 1;
    for (size_t c = 0; c < ctx.n(); ++c) {
      x[c] = std::min((x[c] << drop) | (uint64_t{1} << (drop - 1)), top);
    }
    FromMixedRadix(ctx, x, ct.poly(0, words));
  } else if (absl::Status s = r.Poly(ctx, ct.poly(0, words), ctx.q_size(), "ciphertext"); !s.ok()) {
    return s;
  }
  for (size_t i = 1; i < ct.size; ++i) {
    if (i == 1 && (flags & kSeeded) != 0) {
      Seed seed;
      if (absl::Status s = r.Need(seed.size(), "ciphertext seed"); !s.ok()) return s;
      r.Bytes(seed.data(), seed.size());
      internal::ExpandCiphertextC1(ctx, seed, ct.poly(1, words));
      ct.seed = seed;
    } else if (absl::Status s = r.Poly(ctx, ct.poly(i, words), ctx.q_size(), "ciphertext");
               !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = r.Done("ciphertext"); !s.ok()) return s;
  return ct;
}

absl::StatusOr<std::vector<uint8_t>> SerializeCompressedCiphertext(const BfvContext& ctx,
                                                                   const CompressedCiphertext& ct) {
  if (absl::Status s = CheckCompressedCiphertext(ctx, ct); !s.ok()) return s;
  if (absl::Status s = CheckDefaultBits(ctx, ct.bits); !s.ok()) return s;
  std::vector<uint8_t> out;
  out.reserve(CompressedCiphertextBytes(ctx));
  Writer w(out);
  w.Header(ctx, HeObjectKind::kCompressedCiphertext);
  w.U8(static_cast<uint8_t>(ct.bits.c0));
  w.U8(static_cast<uint8_t>(ct.bits.c1));
  w.Wide(ct.c0, ct.bits.c0);
  w.Wide(ct.c1, ct.bits.c1);
  return out;
}

absl::StatusOr<CompressedCiphertext> ParseCompressedCiphertext(const BfvContext& ctx,
                                                               absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kCompressedCiphertext); !s.ok()) return s;
  if (absl::Status s = r.Need(2, "compressed ciphertext"); !s.ok()) return s;
  CompressedCiphertext ct{ctx.id(), {r.U8(), r.U8()}, {}, {}};
  if (absl::Status s = CheckDefaultBits(ctx, ct.bits); !s.ok()) return s;
  if (absl::Status s = r.Wide(ct.c0, ctx.n(), ct.bits.c0, "compressed ciphertext c_0"); !s.ok()) {
    return s;
  }
  if (absl::Status s = r.Wide(ct.c1, ctx.n(), ct.bits.c1, "compressed ciphertext c_1"); !s.ok()) {
    return s;
  }
  if (absl::Status s = r.Done("compressed ciphertext"); !s.ok()) return s;
  return ct;
}

absl::StatusOr<std::vector<uint8_t>> SerializePublicKey(const BfvContext& ctx,
                                                        const PublicKey& pk) {
  if (absl::Status s = ctx.CheckId(pk.params_id, "public key"); !s.ok()) return s;
  if (pk.p0.size() != ctx.q_size() * ctx.n()) {
    return absl::InvalidArgumentError("public key has the wrong size");
  }
  std::vector<uint8_t> out;
  Writer w(out);
  w.Header(ctx, HeObjectKind::kPublicKey);
  w.Poly(ctx, pk.p0.data(), ctx.q_size());
  w.Bytes(pk.seed.data(), pk.seed.size());
  return out;
}

absl::StatusOr<PublicKey> ParsePublicKey(const BfvContext& ctx, absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kPublicKey); !s.ok()) return s;
  PublicKey pk;
  pk.params_id = ctx.id();
  pk.p0.resize(ctx.q_size() * ctx.n());
  if (absl::Status s = r.Poly(ctx, pk.p0.data(), ctx.q_size(), "public key"); !s.ok()) return s;
  if (absl::Status s = r.Need(pk.seed.size(), "public key seed"); !s.ok()) return s;
  r.Bytes(pk.seed.data(), pk.seed.size());
  if (absl::Status s = r.Done("public key"); !s.ok()) return s;
  pk.p1.resize(pk.p0.size());
  internal::ExpandPublicKeyP1(ctx, pk.seed, pk.p1.data());
  return pk;
}

absl::StatusOr<std::vector<uint8_t>> SerializeRelinKey(const BfvContext& ctx, const RelinKey& rk) {
  if (absl::Status s = ctx.CheckId(rk.params_id, "relinearisation key"); !s.ok()) return s;
  if (absl::Status s = CheckKeySwitchKey(ctx, rk.key, "relinearisation key"); !s.ok()) return s;
  std::vector<uint8_t> out;
  Writer w(out);
  w.Header(ctx, HeObjectKind::kRelinKey);
  WriteKeySwitchKey(ctx, rk.key, w);
  return out;
}

absl::StatusOr<RelinKey> ParseRelinKey(const BfvContext& ctx, absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kRelinKey); !s.ok()) return s;
  absl::StatusOr<KeySwitchKey> key = ReadKeySwitchKey(ctx, r);
  if (!key.ok()) return key.status();
  if (absl::Status s = r.Done("relinearisation key"); !s.ok()) return s;
  return RelinKey{ctx.id(), *std::move(key)};
}

absl::StatusOr<std::vector<uint8_t>> SerializeGaloisKeys(const BfvContext& ctx,
                                                         const GaloisKeys& gk) {
  if (absl::Status s = ctx.CheckId(gk.params_id, "Galois keys"); !s.ok()) return s;
  std::vector<uint8_t> out;
  out.reserve(kHeHeaderBytes + 4 + gk.keys.size() * GaloisKeyBytes(ctx));
  Writer w(out);
  w.Header(ctx, HeObjectKind::kGaloisKeys);
  w.U32(static_cast<uint32_t>(gk.keys.size()));
  for (const auto& [element, key] : gk.keys) {  // std::map: increasing elements
    if (absl::Status s = CheckKeySwitchKey(ctx, key, "Galois key"); !s.ok()) return s;
    w.U32(element);
    WriteKeySwitchKey(ctx, key, w);
  }
  return out;
}

absl::StatusOr<GaloisKeys> ParseGaloisKeys(const BfvContext& ctx, absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kGaloisKeys); !s.ok()) return s;
  if (absl::Status s = r.Need(4, "Galois keys"); !s.ok()) return s;
  const uint32_t count = r.U32();
  if (count > ctx.n()) {
    return absl::InvalidArgumentError(absl::StrCat(count, " Galois keys: at most N = ", ctx.n()));
  }
  // The whole length is known before anything is allocated.
  if (absl::Status s = r.Need(count * GaloisKeyBytes(ctx), "Galois keys"); !s.ok()) return s;
  GaloisKeys gk;
  gk.params_id = ctx.id();
  uint32_t previous = 0;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t element = r.U32();
    if (element % 2 == 0 || element >= 2 * ctx.n() || element <= previous) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Galois element ", element, " must be odd, below 2N and above the previous one"));
    }
    previous = element;
    absl::StatusOr<KeySwitchKey> key = ReadKeySwitchKey(ctx, r);
    if (!key.ok()) return key.status();
    gk.keys.emplace(element, *std::move(key));
  }
  if (absl::Status s = r.Done("Galois keys"); !s.ok()) return s;
  return gk;
}

absl::StatusOr<std::vector<uint8_t>> SerializeRgswCiphertexts(
    const BfvContext& ctx, absl::Span<const RgswCiphertext> ciphertexts) {
  if (ciphertexts.size() > kMaxRgswCiphertexts) {
    return absl::InvalidArgumentError(
        absl::StrCat(ciphertexts.size(), " RGSW ciphertexts: at most ", kMaxRgswCiphertexts));
  }
  std::vector<uint8_t> out;
  out.reserve(RgswCiphertextsBytes(ctx, ciphertexts.size()));
  Writer w(out);
  w.Header(ctx, HeObjectKind::kRgswCiphertexts);
  w.U32(static_cast<uint32_t>(ciphertexts.size()));
  for (const RgswCiphertext& g : ciphertexts) {
    if (absl::Status s = CheckRgswCiphertext(ctx, g, "RGSW ciphertext"); !s.ok()) return s;
    WriteKeySwitchKey(ctx, g.m, w);
    WriteKeySwitchKey(ctx, g.ms, w);
  }
  return out;
}

absl::StatusOr<std::vector<RgswCiphertext>> ParseRgswCiphertexts(const BfvContext& ctx,
                                                                 absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kRgswCiphertexts); !s.ok()) return s;
  if (absl::Status s = r.Need(4, "RGSW ciphertexts"); !s.ok()) return s;
  const uint32_t count = r.U32();
  if (count > kMaxRgswCiphertexts) {
    return absl::InvalidArgumentError(
        absl::StrCat(count, " RGSW ciphertexts: at most ", kMaxRgswCiphertexts));
  }
  if (absl::Status s = r.Need(count * 2 * KeySwitchKeyBytes(ctx), "RGSW ciphertexts"); !s.ok()) {
    return s;
  }
  std::vector<RgswCiphertext> out(count);
  for (RgswCiphertext& g : out) {
    g.params_id = ctx.id();
    for (KeySwitchKey* key : {&g.m, &g.ms}) {
      absl::StatusOr<KeySwitchKey> read = ReadKeySwitchKey(ctx, r);
      if (!read.ok()) return read.status();
      *key = *std::move(read);
    }
  }
  if (absl::Status s = r.Done("RGSW ciphertexts"); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::vector<uint8_t>> SerializeSecretKey(const BfvContext& ctx,
                                                        const SecretKey& sk) {
  if (absl::Status s = CheckSecretKey(ctx, sk); !s.ok()) return s;
  internal::SecretNttScope wipe_ntt_scratch;  // s's transform
  const size_t n = ctx.n();
  std::vector<uint64_t> s0(sk.ntt.begin(), sk.ntt.begin() + n);
  ctx.ntt(0).Inverse(s0.data());
  std::vector<uint8_t> out;
  Writer w(out);
  w.Header(ctx, HeObjectKind::kSecretKey);
  for (size_t c = 0; c < n; c += 4) {
    uint8_t byte = 0;
    for (size_t i = 0; i < 4 && c + i < n; ++i) {
      // 0 -> 0, 1 -> 1, q - 1 -> 3 (q - 1 is even), without branching on the secret.
      const uint64_t v = s0[c + i];
      const uint8_t code = static_cast<uint8_t>((v & 1) | (3 & (0 - static_cast<uint64_t>(v > 1))));
      byte |= static_cast<uint8_t>(code << (2 * i));
    }
    w.U8(byte);
  }
  sodium_memzero(s0.data(), s0.size() * sizeof(uint64_t));
  return out;
}

absl::StatusOr<SecretKey> ParseSecretKey(const BfvContext& ctx, absl::Span<const uint8_t> bytes) {
  Reader r(bytes);
  if (absl::Status s = r.Header(ctx, HeObjectKind::kSecretKey); !s.ok()) return s;
  const size_t n = ctx.n();
  if (absl::Status s = r.Need((n + 3) / 4, "secret key"); !s.ok()) return s;
  SecretKey sk;
  sk.params_id = ctx.id();
  sk.ntt.assign((ctx.q_size() + 1) * n, 0);
  for (size_t c = 0; c < n; c += 4) {
    const uint8_t byte = r.U8();
    for (size_t i = 0; i < 4 && c + i < n; ++i) {
      const uint8_t code = (byte >> (2 * i)) & 3;
      if (code == 2) return absl::InvalidArgumentError("secret key: invalid ternary code 2");
      for (size_t j = 0; j <= ctx.q_size(); ++j) {
        const uint64_t q = ctx.modulus(j).value();
        sk.ntt[j * n + c + i] = (code & 1) + ((q - 2) & (0 - static_cast<uint64_t>(code >> 1)));
      }
    }
  }
  if (absl::Status s = r.Done("secret key"); !s.ok()) return s;
  internal::SecretNttScope wipe_ntt_scratch;  // s's transform
  internal::ForwardNtt(ctx.qp_ntt(), sk.ntt.data());
  return sk;
}

}  // namespace veil::he
