// Where the lattice suite's packed servers (bench/lwe_suite.cc) run their LWE product and their
// per-query ring work: the CPU (no hooks) or a device (bench/lwe_gpu_suite.cc's lattice-gpu,
// what `lattice --backend=gpu` runs), so that both report the same figures from the same code.
#ifndef VEIL_BENCH_LATTICE_DEVICES_H_
#define VEIL_BENCH_LATTICE_DEVICES_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "bench/suite.h"
#include "pir/lattice/packed.h"
#include "pir/lattice/server.h"

namespace veil::bench {

struct LatticeDevices {
  std::string backend = "cpu";
  // The product for the server's matrix and batches of up to max_batch queries.
  std::function<absl::StatusOr<std::unique_ptr<lattice::DatabaseProduct>>(
      const lattice::ByteMatrixView& db, int max_batch)>
      product;
  // The engine for the packed server's ring and matrix.
  std::function<absl::StatusOr<std::unique_ptr<lattice::PackingEngine>>(
      const lattice::RingContext& ring, const lattice::PackingMatrix& matrix)>
      engine;
  // The bandwidth floor_ratio divides by (bytes per second): the device's; 0 measures the CPU's.
  double read_bytes_per_s = 0;
};

// The lattice suite for a packed protocol (exppack-s, hybrid, exppack-d, double-pack).
absl::Status PackedLattice(const Flags& flags, const std::string& protocol,
                           const LatticeDevices& devices);

}  // namespace veil::bench

#endif  // VEIL_BENCH_LATTICE_DEVICES_H_
