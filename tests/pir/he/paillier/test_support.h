// What the Paillier tests share: the known-answer records of data/vectors.txt (written by
// data/make_vectors.py), key pairs built from its primes, and one printed random seed per run.
#ifndef VEIL_TESTS_PIR_HE_PAILLIER_TEST_SUPPORT_H_
#define VEIL_TESTS_PIR_HE_PAILLIER_TEST_SUPPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "pir/he/paillier/keys.h"
#include "pir/he/paillier/mpz.h"

namespace veil::he::testing {

// One line of vectors.txt: kind ("key", "enc", "add", ...), modulus bits, the numbers.
struct VectorRecord {
  std::string kind;
  int bits = 0;
  std::vector<Mpz> numbers;
};

// Every record of the file (aborts the test binary if it cannot be read).
const std::vector<VectorRecord>& Vectors();
// The records of one kind and size.
std::vector<const VectorRecord*> VectorsOf(const std::string& kind, int bits);

// The key pair of the file's primes for `bits` (1024, 2048, 3072; built once per binary).
const KeyPair& TestKeys(int bits);

// This run's seed, drawn once and printed as "he_paillier_test random seed: N".
uint64_t TestSeed();

// Uniform in [0, bound) from a seeded generator (reproducible, unlike RandomBelow).
Mpz SeededBelow(const Mpz& bound, uint64_t& state);

}  // namespace veil::he::testing

#endif  // VEIL_TESTS_PIR_HE_PAILLIER_TEST_SUPPORT_H_
