// paillier-gpu (also `paillier --backend=gpu`): Paillier aggregation on a device — the product
// mod n^2 of --aggregate-count rows of --columns ciphertexts, column by column
// (gpu/modular_product.h). No GMP (the GPU machine has none): the modulus is a random odd number of
// 2 --bits bits standing for n^2 and the ciphertexts are random residues below it; a Montgomery
// multiplication costs the same for any such operands. The result is checked against the host-run
// of the same phases on a prefix of the rows (the full host-run would take minutes), whose
// single-core rate is the CPU baseline of this run: gpu_over_cpu_core = adds_per_s / host-run
// adds/s on one core.
#include <algorithm>
#include <iostream>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/suite.h"
#include "gpu/backend.h"
#include "gpu/modular_product.h"

namespace veil::bench {
namespace {

constexpr uint64_t kCheckRows = 2000;

void RandomInput(size_t limbs, uint64_t count, std::vector<uint32_t>& modulus,
                 std::vector<uint32_t>& residues) {
  std::mt19937_64 rng(1);
  modulus.resize(limbs);
  for (uint32_t& w : modulus) w = static_cast<uint32_t>(rng());
  modulus[0] |= 1;
  modulus.back() |= 0x80000000u;
  residues.resize(count * limbs);
  for (uint64_t i = 0; i < count; ++i) {
    for (size_t j = 0; j < limbs; ++j) residues[i * limbs + j] = static_cast<uint32_t>(rng());
    residues[i * limbs + limbs - 1] %= modulus.back();
  }
}

absl::Status PaillierGpu(const Flags& flags) {
  flags.Str("backend", "gpu");
  flags.Int("threads", 1);  // the CPU suite's flag: accepted, the device uses all its SMs
  const int bits = static_cast<int>(flags.Int("bits", 2048));
  const uint64_t rows = static_cast<uint64_t>(flags.Int("aggregate-count", 1000000));
  const uint64_t columns = static_cast<uint64_t>(flags.Int("columns", 1));
  if (bits != 1024 && bits != 2048 && bits != 3072) {
    return absl::InvalidArgumentError("--bits must be 1024, 2048 or 3072");
  }
  if (rows < kCheckRows || columns < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--aggregate-count >= ", kCheckRows, ", --columns >= 1"));
  }
  if (gpu::GpuDeviceCount() == 0) return absl::UnavailableError("no CUDA device");
  const size_t limbs = 2 * bits / 32;
  std::vector<uint32_t> modulus, residues;
  std::cerr << "paillier-gpu: " << rows << " x " << columns << " random " << 2 * bits
            << "-bit residues\n";
  RandomInput(limbs, rows * columns, modulus, residues);

  // Correctness and the CPU baseline on a prefix of the rows.
  const gpu::ModularProductInput prefix{
      modulus, absl::MakeConstSpan(residues).subspan(0, kCheckRows * columns * limbs), kCheckRows,
      columns};
  std::vector<uint32_t> host(columns * limbs), device(columns * limbs);
  const double host_s = MedianSeconds(
      [&] {
        if (!gpu::HostRunModularProduct(prefix, absl::MakeSpan(host)).ok()) std::abort();
      },
      0, 3, 1e9);
  auto checked = gpu::GpuModularProduct(0, prefix, absl::MakeSpan(device));
  if (!checked.ok()) return checked.status();
  const bool verified = host == device;

  const gpu::ModularProductInput input{modulus, residues, rows, columns};
  std::vector<gpu::GpuProductTiming> timings;
  for (int rep = 0; rep < 4; ++rep) {
    auto t = gpu::GpuModularProduct(0, input, absl::MakeSpan(device));
    if (!t.ok()) return t.status();
    if (rep > 0) timings.push_back(*t);  // the first run is the warm-up
  }
  std::sort(timings.begin(), timings.end(),
            [](const auto& a, const auto& b) { return a.compute_s < b.compute_s; });
  const gpu::GpuProductTiming& median = timings[timings.size() / 2];
  const double adds = double(rows - 1) * columns;
  const double host_adds_per_s = double(kCheckRows - 1) * columns / host_s;
  JsonLine("paillier")
      .Add("backend", "gpu")
      .Add("op", "aggregate")
      .Add("bits", bits)
      .Add("rows", rows)
      .Add("columns", columns)
      .Add("adds_per_s", adds / median.compute_s)
      .Add("adds_per_s_end_to_end", adds / (median.upload_s + median.compute_s + median.download_s))
      .Add("compute_ms", median.compute_s * 1e3)
      .Add("upload_ms", median.upload_s * 1e3)
      .Add("download_ms", median.download_s * 1e3)
      .Add("cpu_core_adds_per_s", host_adds_per_s)
      .Add("gpu_over_cpu_core", adds / median.compute_s / host_adds_per_s)
      .Add("verified", verified)
      .Emit();
  return verified ? absl::OkStatus()
                  : absl::InternalError("paillier-gpu: device product differs from the host-run");
}

constexpr char kHelp[] =
    "--bits=1024|2048|3072 --aggregate-count=ROWS --columns=C: Paillier aggregation (products mod "
    "a "
    "2*bits-bit odd modulus) on GPU 0: adds_per_s, end to end, gpu_over_cpu_core, verified";

SuiteRegistration paillier_gpu("paillier-gpu", kHelp, PaillierGpu);

}  // namespace
}  // namespace veil::bench
