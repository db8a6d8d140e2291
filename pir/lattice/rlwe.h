// RLWE over R_Q = Z_Q[X] / (X^N + 1) for packing LWE answers (issue 15): parameters, a ternary
// secret, encryption and decryption of words of Z_{2^32}, and modulus switching of a response to
// one prime. pir/he provides the arithmetic (NTT tables, the RNS base, sampling); this file adds
// what LWE over Z_{2^32} needs and BFV does not have: a plaintext "modulus" 2^32 that is not
// coprime to Q, handled by scaling (see below).
//
// Plaintexts are words of Z_{2^32} scaled into Z_Q: a word m is encoded as round(Q m / 2^32) and
// a phase x in Z_Q decodes to round(2^32 x / Q) mod 2^32. The scaling is linear up to rounding:
// for integers a, round(Q m / 2^32) * a = Q (m a mod 2^32) / 2^32 + (rounding error) * a (mod Q)
// because Q * (a multiple of 2^32) / 2^32 vanishes mod Q. So an RLWE ciphertext holds an LWE
// phase over Z_{2^32} approximately, to within its noise times 2^32 / Q, which is all that LWE
// decryption (rounding to the top 8 bits) needs. This is the "rescaling" answer to the mismatch
// between the LWE modulus 2^32 and an RNS ring modulus; HintlessPIR instead computes exactly
// modulo several NTT-friendly plaintext moduli and recombines by CRT (more ciphertexts).
//
// Parameters (RingParams::Default): N = 2^12, Q = the three largest primes below 2^29 that are
// 1 mod 2N (Q ~ 2^87; VIPIR's set), response switched to the first of them, and the special
// prime P = 4,169,729 of ExpPack's key switching (expansion.h), the largest prime = 1 mod 2N that
// keeps log2 QP <= 109 (108.99). Security: the HomomorphicEncryption.org standard (Albrecht et
// al., 2018), Table 1: 128-bit classical security for N = 4096 needs log2 of the largest modulus
// a secret is used with (here QP, the expansion keys') <= 109 with a uniform ternary secret and
// error sigma ~ 3.2; the secret here is uniform ternary (he::SampleTernary) and the error
// centered binomial CBD(21), sigma 3.24 (he::SampleError). RingParams::SecuritySource states the
// claim for any set.
//
// Polynomials over Q are prime-major rows (row i: N residues modulo primes[i]), as in pir/he.
#ifndef VEIL_PIR_LATTICE_RLWE_H_
#define VEIL_PIR_LATTICE_RLWE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pir/he/bfv.h"
#include "pir/he/bfv_context.h"
#include "pir/he/ntt.h"
#include "pir/he/rns.h"

namespace veil::lattice {

struct RingParams {
  int log_n = 0;
  // Q = the product; primes[0] is also the modulus the response is switched to.
  std::vector<uint64_t> primes;
  // P, the special prime of ExpPack's hybrid key switching (its expansion keys live modulo QP);
  // 0: no key switching (RingContext::expansion() is null).
  uint64_t special = 0;

  size_t n() const { return size_t{1} << log_n; }

  // Validates: log_n in [10, 16]; 1 to 16 primes, each a prime = 1 mod 2N below 2^32 (residues
  // travel as 32-bit words), all distinct; special 0 or such a prime distinct from them. Returns
  // INVALID_ARGUMENT naming the first violation.
  static absl::StatusOr<RingParams> Create(int log_n, std::vector<uint64_t> primes,
                                           uint64_t special = 0);
  // N = 2^12, the three largest primes below 2^29 that are 1 mod 2^13 (VIPIR's set):
  // 536,813,569, 536,690,689 and 536,641,537, and P = 4,169,729 (tests/pir/lattice/rlwe_test.cc
  // pins them).
  static RingParams Default();
  // "HomomorphicEncryption.org standard, Table 1: ..." when log2 QP (log2 Q without a special
  // prime) is within the standard's 128-bit bound for N (ternary secret, sigma 3.2), else
  // "no security claim: ...".
  std::string SecuritySource() const;
};

// Everything derived from RingParams once: NTT tables per prime, the RNS base and the constants
// of encoding, decoding and modulus switching. Immutable and copyable (~0.6 MB of NTT tables).
class RingContext {
 public:
  // Returns RingParams::Create's errors.
  static absl::StatusOr<RingContext> Create(const RingParams& params);

  const RingParams& params() const { return params_; }
  size_t n() const { return params_.n(); }
  // k: primes of Q.
  size_t k() const { return params_.primes.size(); }
  const he::RnsBase& base() const { return base_; }
  absl::Span<const he::NttTables> ntt() const { return ntt_; }
  const he::Modulus& response_modulus() const { return base_[0]; }
  // With a special prime: the ring as a BFV context (primes Q, special P) whose key switching
  // (pir/he/keyswitch.h) ExpPack's expansion uses; its NTT forms modulo the q_i are this
  // context's (the same he::NttTables). Null without a special prime. (Its plaintext modulus is
  // a prime = 1 mod 2N that nothing here uses.)
  const std::shared_ptr<const he::BfvContext>& expansion() const { return expansion_; }
  // For each l < log2 N, X^{-2^l} = -X^{N - 2^l} in NTT form over Q (k x N residues), then its
  // Shoup factors: the expansion's steps' (expansion.h). Computed on first use (a 128-bit
  // division per residue: about a millisecond, which every query once paid) and shared by
  // copies; safe to call from several threads.
  const std::vector<std::vector<uint64_t>>& inverse_monomials() const;

  // round(Q m / 2^32) mod primes[i].
  uint64_t EncodeWord(uint32_t m, size_t i) const;
  // round(2^32 x / Q) mod 2^32 and round(q' x / Q) mod q' (q' = response modulus) for the
  // coefficient x of a polynomial over Q given by its residues at residues[i * n()].
  uint32_t DecodeWord(const uint64_t* residues) const;
  uint32_t SwitchResidue(const uint64_t* residues) const;
  // round(2^32 x / q') mod 2^32 for a residue x modulo the response modulus.
  uint32_t DecodeSwitchedWord(uint64_t x) const;

 private:
  RingContext() = default;
  // 2^64 frac(x / Q) from x's residues (to within k units): sum_i frac(y_i / q_i) with
  // y_i = [x_i (Q/q_i)^{-1}]_{q_i}, each fraction floor(y_i floor(2^128 / q_i) / 2^64).
  uint64_t Fraction(const uint64_t* residues) const;

  RingParams params_;
  he::RnsBase base_;
  std::vector<he::NttTables> ntt_;
  std::shared_ptr<const he::BfvContext> expansion_;
  std::vector<uint64_t> q_div_word_;           // [floor(Q / 2^32)]_{q_i}
  uint64_t q_mod_word_ = 0;                    // Q mod 2^32
  std::vector<uint64_t> ratio_hi_, ratio_lo_;  // floor(2^128 / q_i) in two words
  uint64_t response_ratio_hi_ = 0, response_ratio_lo_ = 0;
  struct Monomials;  // inverse_monomials(), once
  std::shared_ptr<Monomials> monomials_;
};

// The ternary RLWE secret z, kept in NTT form over Q (row 0 is also its form modulo the
// response prime). Move-only; wiped when destroyed.
class RlweSecret {
 public:
  // Fresh coefficients uniform in {-1, 0, 1} from libsodium (he::SampleTernary).
  static RlweSecret Generate(const RingContext& ctx);
  // The same secret as a BFV secret key over QP of ctx.expansion() (its first k rows).
  static RlweSecret FromKey(const RingContext& ctx, const he::SecretKey& key);
  ~RlweSecret();
  RlweSecret(RlweSecret&& other) noexcept = default;
  RlweSecret& operator=(RlweSecret&& other) noexcept;
  RlweSecret(const RlweSecret&) = delete;
  RlweSecret& operator=(const RlweSecret&) = delete;

  absl::Span<const uint64_t> ntt() const { return ntt_; }

 private:
  explicit RlweSecret(std::vector<uint64_t> ntt) : ntt_(std::move(ntt)) {}
  void Wipe();
  std::vector<uint64_t> ntt_;
};

// (c0, c1) over Q in NTT form, k x N residues each: c0 + c1 z = round(Q m / 2^32) + e.
struct RlweCiphertext {
  std::vector<uint64_t> c0, c1;
};

// A ciphertext switched to the response modulus q': N residues each, coefficient form.
struct SwitchedCiphertext {
  std::vector<uint32_t> c0, c1;
};

// c0 = message + e - a z over Q (all NTT form; a is c1, uniform), the error fresh from
// libsodium (he::SampleError). message, a and c0 hold k x N residues.
void EncryptWithMask(const RingContext& ctx, const RlweSecret& secret, const uint64_t* message,
                     const uint64_t* a, uint64_t* c0);

// Encrypts up to N words (coefficients; the rest are zero) under a fresh uniform mask.
// Returns INVALID_ARGUMENT for more than N words.
absl::StatusOr<RlweCiphertext> EncryptWords(const RingContext& ctx, const RlweSecret& secret,
                                            absl::Span<const uint32_t> words);

// The N coefficients' words round(2^32 (c0 + c1 z) / Q). Returns INVALID_ARGUMENT for a
// ciphertext of another size.
absl::StatusOr<std::vector<uint32_t>> DecryptWords(const RingContext& ctx, const RlweSecret& secret,
                                                   const RlweCiphertext& ct);

// round(q' c / Q) for both halves (q' = primes[0]): the response a client downloads. Adds at most
// 1/2 + N/2 (units of q') to the phase: each half's rounding, the second times the ternary z.
// Returns INVALID_ARGUMENT for a ciphertext of another size.
absl::StatusOr<SwitchedCiphertext> ModSwitch(const RingContext& ctx, const RlweCiphertext& ct);

// The N words round(2^32 (c0 + c1 z mod q') / q'). Returns INVALID_ARGUMENT for a ciphertext
// of another size.
absl::StatusOr<std::vector<uint32_t>> DecryptSwitched(const RingContext& ctx,
                                                      const RlweSecret& secret,
                                                      const SwitchedCiphertext& ct);

// Wire form of a switched ciphertext: c0 then c1, N little-endian 32-bit words each:
// SwitchedBytes = 8 N (32,768 bytes at N = 4096).
uint64_t SwitchedBytes(const RingContext& ctx);
std::vector<uint8_t> SerializeSwitched(const SwitchedCiphertext& ct);
// Returns INVALID_ARGUMENT for another size or a residue not below q'.
absl::StatusOr<SwitchedCiphertext> ParseSwitched(const RingContext& ctx,
                                                 absl::Span<const uint8_t> bytes);

}  // namespace veil::lattice

#endif  // VEIL_PIR_LATTICE_RLWE_H_
