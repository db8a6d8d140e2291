#include "tests/pir/he/paillier/test_support.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <sstream>

namespace veil::he::testing {

const std::vector<VectorRecord>& Vectors() {
  static const std::vector<VectorRecord>* records = [] {
    auto* out = new std::vector<VectorRecord>;
    std::ifstream in(VEIL_PAILLIER_VECTORS);
    if (!in) {
      std::fprintf(stderr, "cannot open %s\n", VEIL_PAILLIER_VECTORS);
      std::abort();
    }
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      VectorRecord r;
      fields >> r.kind >> r.bits;
      std::string hex;
      while (fields >> hex) r.numbers.push_back(*Mpz::FromHex(hex));
      out->push_back(std::move(r));
    }
    return out;
  }();
  return *records;
}

std::vector<const VectorRecord*> VectorsOf(const std::string& kind, int bits) {
  std::vector<const VectorRecord*> out;
  for (const VectorRecord& r : Vectors()) {
    if (r.kind == kind && r.bits == bits) out.push_back(&r);
  }
  return out;
}

const KeyPair& TestKeys(int bits) {
  static std::mutex mu;
  static std::map<int, std::unique_ptr<KeyPair>> keys;
  std::lock_guard lock(mu);
  auto& slot = keys[bits];
  if (!slot) {
    const VectorRecord* key = VectorsOf("key", bits).at(0);
    auto pair = KeyPairFromPrimes(key->numbers[0], key->numbers[1], bits == 1024);
    if (!pair.ok()) {
      std::fprintf(stderr, "test key %d: %s\n", bits, pair.status().ToString().c_str());
      std::abort();
    }
    slot = std::make_unique<KeyPair>(*std::move(pair));
  }
  return *slot;
}

uint64_t TestSeed() {
  static const uint64_t seed = [] {
    const uint64_t s = std::random_device{}();
    std::printf("he_paillier_test random seed: %llu\n", static_cast<unsigned long long>(s));
    return s;
  }();
  return seed;
}

Mpz SeededBelow(const Mpz& bound, uint64_t& state) {
  std::mt19937_64 rng(state++);
  Mpz x;
  for (size_t i = 0; i < bound.bits() / 64 + 2; ++i) {
    mpz_mul_2exp(x.get(), x.get(), 64);
    mpz_add_ui(x.get(), x.get(), rng());
  }
  mpz_mod(x.get(), x.get(), bound.get());
  return x;
}

}  // namespace veil::he::testing
