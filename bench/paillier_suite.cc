// paillier: Paillier on GMP (pir/he/paillier), one JSON line per operation, every ratio taken
// against a baseline measured in the same run:
//   op=encrypt     randomness textbook | pool | fixed-base: encrypt_per_s end to end (plaintext
//                  check, randomness, (1 + m n) r^n mod n^2) and encrypt_speedup_vs_textbook;
//                  the pool's offline generation (pool_generation_s, on --threads) and the
//                  fixed-base table's build time are reported apart, not counted.
//   op=pipeline    the pipelined encryptor with --threads workers (fixed-base randomness).
//   op=decrypt     decrypt_per_s (CRT) and decrypt_speedup_crt over the textbook decryption.
//   op=aggregate   adds_per_s of the threaded tree reduction over --count ciphertexts, per core,
//                  and aggregate_ratio_to_modmul: per-core adds/s over this run's bare GMP
//                  modular multiplication rate mod n^2 (mpz_mul + mpz_mod, one thread). The
//                  inputs are random residues mod n^2: a multiplication costs the same whatever
//                  the residue, and 10^5 real encryptions would dominate the run.
//   op=packed      packed_values_per_s: values packed (16-bit, headroom for 1024 reports) and
//                  encrypted end to end with fixed-base randomness, one thread.
// --backend=gpu runs paillier-gpu (bench/paillier_gpu_suite.cc) where veil is built with CUDA.
#include <chrono>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/suite.h"
#include "pir/he/paillier/aggregate.h"
#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/packing.h"
#include "pir/he/paillier/paillier.h"
#include "pir/he/paillier/pipeline.h"
#include "pir/he/paillier/randomizer.h"

namespace veil::bench {
namespace {

using he::Ciphertext;
using he::KeyPair;
using he::Mpz;
using he::PublicKey;

constexpr int kReps = 5;  // timed repetitions (plus one warm-up) of each measurement

double Seconds(const std::function<void()>& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Random residues mod `modulus` (not secret: benchmark inputs).
std::vector<Mpz> RandomResidues(const Mpz& modulus, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Mpz> out(count);
  for (Mpz& x : out) {
    for (size_t i = 0; i < modulus.bits() / 64 + 2; ++i) {
      mpz_mul_2exp(x.get(), x.get(), 64);
      mpz_add_ui(x.get(), x.get(), rng());
    }
    mpz_mod(x.get(), x.get(), modulus.get());
  }
  return out;
}

JsonLine Line(const char* op, const PublicKey& key, int threads) {
  JsonLine line("paillier");
  line.Add("backend", "cpu").Add("op", op).Add("bits", key.modulus_bits()).Add("threads", threads);
  return line;
}

// Encryptions per second of `count` plaintexts with `randomness`, median of kReps.
double EncryptRate(const PublicKey& key, const std::vector<Mpz>& plaintexts,
                   he::Randomizer& randomness) {
  const double t = MedianSeconds(
      [&] {
        for (const Mpz& m : plaintexts) {
          if (!he::Encrypt(key, m, randomness).ok()) std::abort();  // pools are sized to fit
        }
      },
      1, kReps, 1e9);
  return plaintexts.size() / t;
}

void MeasureEncryption(const PublicKey& key, int threads, size_t count) {
  const std::vector<Mpz> plaintexts = RandomResidues(key.n(), count, 1);
  std::cerr << "paillier: textbook encryption\n";
  he::TextbookRandomizer textbook(key);
  const size_t textbook_count = std::max<size_t>(count / 20, 4);
  const std::vector<Mpz> few(plaintexts.begin(), plaintexts.begin() + textbook_count);
  const double textbook_rate = EncryptRate(key, few, textbook);
  Line("encrypt", key, 1)
      .Add("randomness", "textbook")
      .Add("encrypt_per_s", textbook_rate)
      .Add("encrypt_speedup_vs_textbook", 1.0)
      .Emit();

  std::cerr << "paillier: pool of " << count * (kReps + 1) << " r^n on " << threads
            << " thread(s)\n";
  std::unique_ptr<he::RandomnessPool> pool;
  const double pool_s =
      Seconds([&] { pool = *he::RandomnessPool::Create(key, count * (kReps + 1), threads); });
  const double pool_rate = EncryptRate(key, plaintexts, *pool);
  Line("encrypt", key, 1)
      .Add("randomness", "pool")
      .Add("encrypt_per_s", pool_rate)
      .Add("encrypt_speedup_vs_textbook", pool_rate / textbook_rate)
      .Add("pool_values", static_cast<uint64_t>(count * (kReps + 1)))
      .Add("pool_generation_s", pool_s)
      .Add("pool_generation_threads", threads)
      .Add("pool_values_per_s", count * (kReps + 1) / pool_s)
      .Emit();

  std::cerr << "paillier: fixed-base encryption\n";
  std::unique_ptr<he::FixedBaseRandomizer> fixed;
  const double table_s = Seconds([&] { fixed = *he::FixedBaseRandomizer::Create(key); });
  const double fixed_rate = EncryptRate(key, plaintexts, *fixed);
  Line("encrypt", key, 1)
      .Add("randomness", "fixed-base")
      .Add("encrypt_per_s", fixed_rate)
      .Add("encrypt_speedup_vs_textbook", fixed_rate / textbook_rate)
      .Add("table_build_s", table_s)
      .Add("table_bytes", static_cast<uint64_t>(fixed->table_bytes()))
      .Emit();

  const double pipe_s = MedianSeconds(
      [&] {
        auto pipeline = he::PipelinedEncryptor::Create(key, *fixed, {.workers = threads});
        if (!(*pipeline)->EncryptAll(plaintexts).ok()) std::abort();
      },
      1, kReps, 1e9);
  Line("pipeline", key, threads)
      .Add("randomness", "fixed-base")
      .Add("encrypt_per_s", count / pipe_s)
      .Add("encrypt_speedup_vs_textbook", count / pipe_s / textbook_rate)
      .Emit();
}

void MeasureDecryption(const KeyPair& keys, size_t count) {
  std::cerr << "paillier: decryption\n";
  const std::vector<Mpz> residues = RandomResidues(keys.public_key.n_squared(), count, 2);
  std::vector<Ciphertext> cts;
  for (const Mpz& r : residues) cts.push_back({r});
  auto rate = [&](auto decrypt, size_t n) {
    return n / MedianSeconds(
                   [&] {
                     for (size_t i = 0; i < n; ++i) {
                       if (!decrypt(keys, cts[i]).ok()) std::abort();
                     }
                   },
                   1, kReps, 1e9);
  };
  const double crt = rate(he::Decrypt, count);
  const double plain = rate(he::DecryptPlain, std::max<size_t>(count / 4, 2));
  Line("decrypt", keys.public_key, 1)
      .Add("decrypt_per_s", crt)
      .Add("decrypt_plain_per_s", plain)
      .Add("decrypt_speedup_crt", crt / plain)
      .Emit();
}

void MeasureAggregation(const PublicKey& key, int threads, size_t count) {
  std::cerr << "paillier: bare modmul and aggregation of " << count << " ciphertexts\n";
  const std::vector<Mpz> residues = RandomResidues(key.n_squared(), count, 3);
  std::vector<Ciphertext> cts;
  for (const Mpz& r : residues) cts.push_back({r});
  Mpz acc = residues[0], scratch;
  const double modmul_s = MedianSeconds(
      [&] {
        for (size_t i = 1; i < count; ++i) {
          mpz_mul(scratch.get(), acc.get(), residues[i].get());
          mpz_mod(acc.get(), scratch.get(), key.n_squared().get());
        }
      },
      1, kReps, 1e9);
  const double modmul_per_s = (count - 1) / modmul_s;
  const double aggregate_s = MedianSeconds(
      [&] {
        if (!he::Aggregate(key, cts, threads).ok()) std::abort();
      },
      1, kReps, 1e9);
  const double adds_per_s = (count - 1) / aggregate_s;
  Line("aggregate", key, threads)
      .Add("ciphertexts", static_cast<uint64_t>(count))
      .Add("adds_per_s", adds_per_s)
      .Add("adds_per_s_per_core", adds_per_s / threads)
      .Add("modmul_per_s", modmul_per_s)
      .Add("aggregate_ratio_to_modmul", adds_per_s / threads / modmul_per_s)
      .Emit();
}

void MeasurePacking(const PublicKey& key, size_t count) {
  std::cerr << "paillier: packed encryption\n";
  const he::PackingSpec spec{.value_bits = 16, .max_summands = 1024};
  auto packer = he::Packer::Create(key, spec);
  auto fixed = he::FixedBaseRandomizer::Create(key);
  std::vector<uint64_t> values(packer->slots() * count);
  std::mt19937_64 rng(4);
  for (uint64_t& v : values) v = rng() & 0xffff;
  const double t = MedianSeconds(
      [&] {
        if (!he::EncryptPacked(key, *packer, values, **fixed).ok()) std::abort();
      },
      1, kReps, 1e9);
  Line("packed", key, 1)
      .Add("randomness", "fixed-base")
      .Add("value_bits", static_cast<uint64_t>(spec.value_bits))
      .Add("max_summands", spec.max_summands)
      .Add("slot_bits", static_cast<uint64_t>(packer->slot_bits()))
      .Add("values_per_ciphertext", static_cast<uint64_t>(packer->slots()))
      .Add("packed_values_per_s", values.size() / t)
      .Emit();
}

absl::Status Paillier(const Flags& flags) {
  const std::string backend = flags.Str("backend", "cpu");
  if (backend == "gpu") return RunSuite("paillier-gpu", flags);
  if (backend != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("--backend must be cpu or gpu, got ", backend));
  }
  const int bits = static_cast<int>(flags.Int("bits", 2048));
  const int threads = static_cast<int>(flags.Int("threads", 1));
  const size_t count = static_cast<size_t>(flags.Int("count", 100));
  const size_t aggregate_count = static_cast<size_t>(flags.Int("aggregate-count", 20000));
  if (threads < 1 || count < 2 || aggregate_count < 2) {
    return absl::InvalidArgumentError("--threads >= 1, --count and --aggregate-count >= 2");
  }
  std::cerr << "paillier: generating a " << bits << "-bit key\n";
  auto keys = he::GenerateKeyPair({.modulus_bits = bits, .insecure_for_comparison = bits == 1024});
  if (!keys.ok()) return keys.status();
  MeasureEncryption(keys->public_key, threads, count);
  MeasureDecryption(*keys, count);
  MeasureAggregation(keys->public_key, threads, aggregate_count);
  MeasurePacking(keys->public_key, count);
  return absl::OkStatus();
}

constexpr char kHelp[] =
    "--bits=2048|3072|1024 (1024: insecure, for comparison) --threads=T --backend=cpu|gpu "
    "--count=N (encryptions per timing) --aggregate-count=M: encrypt_per_s and "
    "encrypt_speedup_vs_textbook (pool, fixed-base, pipeline), decrypt_per_s, "
    "decrypt_speedup_crt, adds_per_s, aggregate_ratio_to_modmul, packed_values_per_s";

SuiteRegistration paillier("paillier", kHelp, Paillier);

}  // namespace
}  // namespace veil::bench
