#include "dpf/key.h"

#include <sodium.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "dpf/internal/key_generation.h"
#include "dpf/prg_portable.h"

namespace veil::dpf {
namespace {

void StoreBlock(Block b, uint8_t* out) {
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(b.lo >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(b.hi >> (8 * i));
  }
}

Block LoadBlock(const uint8_t* in) {
  Block b;
  for (int i = 0; i < 8; ++i) {
    b.lo |= uint64_t{in[i]} << (8 * i);
    b.hi |= uint64_t{in[8 + i]} << (8 * i);
  }
  return b;
}

// Hides x's value from the optimiser, so that a mask built from a secret bit stays a mask: a
// compiler that sees a mask is all zeros or all ones may select with a branch again. GCC 12 -O3
// compiled the former `bit ? a : b` selects of key generation to conditional jumps; it keeps the
// masks below branch-free even without the barrier, which is there for other compilers and
// versions (tests/dpf/constant_time_test.cc checks the result, not the intent).
uint64_t ValueBarrier(uint64_t x) {
  __asm__("" : "+r"(x));
  return x;
}

// bit (0 or 1) ? if_one : if_zero, without a branch.
Block Select(uint64_t bit, Block if_one, Block if_zero) {
  const uint64_t m = ValueBarrier(0 - bit);
  return {(if_one.lo & m) | (if_zero.lo & ~m), (if_one.hi & m) | (if_zero.hi & ~m)};
}

// All ones if a == b, else zero, without a branch.
uint64_t EqualMask(uint64_t a, uint64_t b) {
  const uint64_t d = ValueBarrier(a ^ b);
  return ((d | (0 - d)) >> 63) - 1;
}

}  // namespace

DpfKey::DpfKey(DpfKey&& other) noexcept
    : params_(other.params_),
      party_(other.party_),
      root_(other.root_),
      cw_seed_(std::move(other.cw_seed_)),
      cw_right_(std::move(other.cw_right_)),
      final_cw_(other.final_cw_) {
  other.Clear();
}

DpfKey& DpfKey::operator=(const DpfKey& other) {
  if (this == &other) return *this;
  // Wiped first: the vectors' copy-assignment either reuses these buffers, leaving a stale tail
  // when other's are shorter, or frees them.
  Clear();
  params_ = other.params_;
  party_ = other.party_;
  root_ = other.root_;
  cw_seed_ = other.cw_seed_;
  cw_right_ = other.cw_right_;
  final_cw_ = other.final_cw_;
  return *this;
}

DpfKey& DpfKey::operator=(DpfKey&& other) noexcept {
  if (this == &other) return *this;
  Clear();  // the move-assignments below free these buffers
  params_ = other.params_;
  party_ = other.party_;
  root_ = other.root_;
  cw_seed_ = std::move(other.cw_seed_);
  cw_right_ = std::move(other.cw_right_);
  final_cw_ = other.final_cw_;
  other.Clear();
  return *this;
}

DpfKey::~DpfKey() { Clear(); }

void DpfKey::Clear() {
  sodium_memzero(&root_, sizeof(root_));
  if (!cw_seed_.empty()) sodium_memzero(cw_seed_.data(), cw_seed_.size() * sizeof(Block));
  if (!cw_right_.empty()) sodium_memzero(cw_right_.data(), cw_right_.size());
  sodium_memzero(final_cw_.data(), sizeof(final_cw_));
  cw_seed_.clear();
  cw_right_.clear();
  params_ = DpfParameters();
  party_ = 0;
}

size_t DpfKey::SerializedSize(const DpfParameters& params) {
  size_t levels = params.levels();
  return kKeyHeaderBytes + 16 + 16 * levels + (levels + 7) / 8 + 4 * params.leaf_block_words();
}

std::vector<uint8_t> DpfKey::Serialize() const {
  std::vector<uint8_t> out(SerializedSize(params_));
  uint8_t* p = out.data();
  p[0] = kKeyMagic0;
  p[1] = kKeyMagic1;
  p[2] = kKeyVersion;
  p[3] = static_cast<uint8_t>(params_.prg);
  p[4] = static_cast<uint8_t>(params_.log_domain);
  int words_log2 = params_.output == OutputType::kAdditive ? params_.leaf_words_log2 : 0;
  p[5] = static_cast<uint8_t>(static_cast<int>(params_.output) | (words_log2 << 4));
  p[6] = static_cast<uint8_t>(party_);
  p += kKeyHeaderBytes;
  StoreBlock(root_, p);
  p += 16;
  for (const Block& cw : cw_seed_) {
    StoreBlock(cw, p);
    p += 16;
  }
  for (size_t i = 0; i < cw_right_.size(); ++i) p[i / 8] |= cw_right_[i] << (i % 8);
  p += (cw_right_.size() + 7) / 8;
  for (int i = 0; i < params_.leaf_block_words(); ++i) {
    for (int b = 0; b < 4; ++b) *p++ = static_cast<uint8_t>(final_cw_[i] >> (8 * b));
  }
  return out;
}

absl::StatusOr<DpfKey> DpfKey::Parse(absl::Span<const uint8_t> bytes) {
  if (bytes.size() < kKeyHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DPF key truncated: %d bytes, the header alone needs %d", bytes.size(), kKeyHeaderBytes));
  }
  if (bytes[0] != kKeyMagic0 || bytes[1] != kKeyMagic1) {
    return absl::InvalidArgumentError("DPF key has wrong magic (expected 'VD')");
  }
  if (bytes[2] != kKeyVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DPF key version %d is not supported (expected %d)", bytes[2], kKeyVersion));
  }
  DpfKey key;
  key.params_.prg = static_cast<Prg>(bytes[3]);
  key.params_.log_domain = bytes[4];
  key.params_.output = static_cast<OutputType>(bytes[5] & 0x0f);
  key.params_.leaf_words_log2 = bytes[5] >> 4;
  if (key.params_.output == OutputType::kXor && key.params_.leaf_words_log2 != 0) {
    return absl::InvalidArgumentError("DPF key of XOR output type has a nonzero leaf-words field");
  }
  if (absl::Status s = ValidateParameters(key.params_); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("DPF key: ", s.message()));
  }
  if (bytes[6] > 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("DPF key party %d is not 0 or 1", bytes[6]));
  }
  key.party_ = bytes[6];
  size_t expected = SerializedSize(key.params_);
  if (bytes.size() != expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "DPF key length %d does not match its parameters (log domain %d, output %s): expected %d",
        bytes.size(), key.params_.log_domain, OutputName(key.params_), expected));
  }
  const uint8_t* p = bytes.data() + kKeyHeaderBytes;
  key.root_ = LoadBlock(p);
  p += 16;
  if (static_cast<int>(key.root_.control_bit()) != key.party_) {
    return absl::InvalidArgumentError("DPF key root control bit contradicts its party");
  }
  int levels = key.params_.levels();
  key.cw_seed_.resize(levels);
  key.cw_right_.resize(levels);
  for (int i = 0; i < levels; ++i, p += 16) key.cw_seed_[i] = LoadBlock(p);
  for (int i = 0; i < levels; ++i) key.cw_right_[i] = (p[i / 8] >> (i % 8)) & 1;
  int pad_bits = (8 - levels % 8) % 8;
  if (pad_bits != 0 && (p[levels / 8] >> (8 - pad_bits)) != 0) {
    return absl::InvalidArgumentError("DPF key has nonzero padding bits after the control bits");
  }
  p += (levels + 7) / 8;
  for (int i = 0; i < key.params_.leaf_block_words(); ++i, p += 4) {
    key.final_cw_[i] = p[0] | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
  return key;
}

namespace internal {

// Builds both parties' keys level by level (BGI16's Gen, with early termination). Every
// intermediate secret (both parties' nodes and raw children, leaf values, the target block, the
// final word) lives in this object and is wiped when it goes away, on every path.
class KeyGenerator {
 public:
  KeyGenerator(const DpfParameters& params, const Block (&roots)[2], DpfKey& key0, DpfKey& key1);
  ~KeyGenerator();
  KeyGenerator(const KeyGenerator&) = delete;
  KeyGenerator& operator=(const KeyGenerator&) = delete;

  // Writes the correction words of f(alpha) = beta into the keys; alpha and beta are validated.
  void Generate(uint64_t alpha, uint32_t beta);

 private:
  // One level: the correction word that keeps alpha's path (bit: which child it takes).
  void CorrectLevel(int level, uint64_t bit);
  // The final correction word, which turns the leaf on alpha's path into the target block.
  void CorrectLeaf(uint64_t offset, uint32_t beta);

  const DpfParameters& params_;
  const AesKeys aes_ = HostAesKeys();
  DpfKey* key_[2];
  Block node_[2];
  Block left_[2] = {}, right_[2] = {};
  uint32_t conv_[2][16] = {};
  uint32_t target_[16] = {};
  std::array<uint32_t, 16> final_cw_{};
};

KeyGenerator::KeyGenerator(const DpfParameters& params, const Block (&roots)[2], DpfKey& key0,
                           DpfKey& key1)
    : params_(params), key_{&key0, &key1} {
  for (int b = 0; b < 2; ++b) {
    node_[b] = roots[b].without_control_bit();
    node_[b].lo |= static_cast<uint64_t>(b);
    key_[b]->params_ = params;
    key_[b]->party_ = b;
    key_[b]->root_ = node_[b];
    key_[b]->cw_seed_.resize(params.levels());
    key_[b]->cw_right_.resize(params.levels());
  }
}

KeyGenerator::~KeyGenerator() {
  sodium_memzero(node_, sizeof(node_));
  sodium_memzero(left_, sizeof(left_));
  sodium_memzero(right_, sizeof(right_));
  sodium_memzero(conv_, sizeof(conv_));
  sodium_memzero(target_, sizeof(target_));
  sodium_memzero(final_cw_.data(), sizeof(final_cw_));
}

void KeyGenerator::Generate(uint64_t alpha, uint32_t beta) {
  const int levels = params_.levels();
  const uint64_t leaf = alpha >> params_.leaf_points_log2();
  for (int level = 0; level < levels; ++level) {
    CorrectLevel(level, (leaf >> (levels - 1 - level)) & 1);
  }
  CorrectLeaf(alpha & ((uint64_t{1} << params_.leaf_points_log2()) - 1), beta);
}

void KeyGenerator::CorrectLevel(int level, uint64_t bit) {
  for (int b = 0; b < 2; ++b) ExpandNode(params_.prg, aes_, node_[b], left_[b], right_[b]);
  // The lose side's seeds must become equal after correction, with equal control bits; the keep
  // side's control bits must differ.
  Block cw_left = Select(bit, left_[0] ^ left_[1], right_[0] ^ right_[1]).without_control_bit();
  cw_left.lo |= (left_[0].lo ^ left_[1].lo ^ bit ^ 1) & 1;
  const uint64_t t_right = (right_[0].lo ^ right_[1].lo ^ bit) & 1;
  for (int b = 0; b < 2; ++b) {
    key_[b]->cw_seed_[level] = cw_left;
    key_[b]->cw_right_[level] = static_cast<uint8_t>(t_right);
    CorrectChildren(node_[b], cw_left, t_right, left_[b], right_[b]);
    node_[b] = Select(bit, right_[b], left_[b]);
  }
  sodium_memzero(&cw_left, sizeof(cw_left));
}

void KeyGenerator::CorrectLeaf(uint64_t offset, uint32_t beta) {
  const int words = params_.leaf_block_words();
  for (int b = 0; b < 2; ++b) ConvertLeaf(params_.prg, aes_, node_[b], words, conv_[b]);
  // The target block: beta (additive) or a set bit (XOR) at alpha's offset, built by comparing the
  // offset with every point of the block rather than indexing with it.
  for (uint64_t point = 0; point < (uint64_t{1} << params_.leaf_points_log2()); ++point) {
    const uint64_t at_alpha = EqualMask(offset, point);
    if (params_.output == OutputType::kXor) {
      target_[point / 32] |= static_cast<uint32_t>(at_alpha & 1) << (point % 32);
    } else {
      target_[point] = beta & static_cast<uint32_t>(at_alpha);
    }
  }
  if (params_.output == OutputType::kXor) {
    for (int i = 0; i < words; ++i) final_cw_[i] = target_[i] ^ conv_[0][i] ^ conv_[1][i];
  } else {
    // y_b = (-1)^b (V(s_b) + t_b CW); at alpha t_0 != t_1, so CW = (-1)^t_1 (target - V_0 + V_1).
    const uint32_t neg = 0u - static_cast<uint32_t>(node_[1].lo & 1);
    for (int i = 0; i < words; ++i) {
      final_cw_[i] = ((target_[i] - conv_[0][i] + conv_[1][i]) ^ neg) - neg;
    }
  }
  key_[0]->final_cw_ = final_cw_;
  key_[1]->final_cw_ = final_cw_;
}

absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeysFromRoots(const DpfParameters& params,
                                                               uint64_t alpha, uint32_t beta,
                                                               const Block (&roots)[2]) {
  if (absl::Status s = ValidateParameters(params); !s.ok()) return s;
  // Reads only alpha's bits above the domain (public zeros for a valid alpha), never the bits
  // that choose the point.
  if ((alpha >> params.log_domain) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "alpha %d outside the domain of 2^%d points", alpha, params.log_domain));
  }
  if (params.output == OutputType::kXor && beta != 1) {
    return absl::InvalidArgumentError("XOR output keys encode the indicator: beta must be 1");
  }
  std::pair<DpfKey, DpfKey> keys;
  KeyGenerator(params, roots, keys.first, keys.second).Generate(alpha, beta);
  return keys;
}

}  // namespace internal

absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeys(const DpfParameters& params,
                                                      uint64_t alpha, uint32_t beta) {
  // sodium_init is idempotent and thread safe; a failure leaves no safe source of seeds.
  static const bool sodium_ready = sodium_init() >= 0;
  if (!sodium_ready) std::abort();
  Block roots[2];
  randombytes_buf(roots, sizeof(roots));
  auto keys = internal::GenerateKeysFromRoots(params, alpha, beta, roots);
  sodium_memzero(roots, sizeof(roots));
  return keys;
}

}  // namespace veil::dpf
