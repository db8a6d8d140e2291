// veil-bench he-gpu (what `he --backend=gpu` runs): the GPU NTT of gpu/ntt.h at N = 4096 mod a
// 60-bit prime, one line each for ntt and intt: transforms_per_s on device-resident batches (CUDA
// events), us_per_op = 1 / that, and roofline_ratio = transforms_per_s x butterflies per
// transform / Montgomery multiply-adds per second measured on the same device in the same run.
// `verified`: a batch on the device equals pir/he's CPU NTT bit for bit.
#include <random>
#include <vector>

#include "bench/suite.h"
#include "gpu/ntt.h"
#include "pir/he/ntt.h"

namespace veil::bench {
namespace {

absl::Status HeGpu(const Flags& flags) {
  const int64_t n = flags.Int("n", 4096);
  if (n != 4096) return absl::InvalidArgumentError("he-gpu measures N = 4096 (--n=4096)");
  const uint32_t batch = static_cast<uint32_t>(flags.Int("batch", 16384));
  const int reps = static_cast<int>(flags.Int("reps", 20));
  const he::Modulus q = *he::Modulus::Create((*he::GenerateNttPrimes(60, 8192, 1))[0]);
  const he::NttTables tables = *he::NttTables::Create(12, q);
  absl::StatusOr<std::unique_ptr<gpu::GpuNtt>> ntt = gpu::GpuNtt::Create(tables);
  if (!ntt.ok()) return ntt.status();
  std::mt19937_64 rng(6);
  for (bool inverse : {false, true}) {
    std::vector<uint64_t> polys(64 * tables.n()), expect;
    for (uint64_t& v : polys) v = rng() % q.value();
    expect = polys;
    for (size_t p = 0; p < 64; ++p) {
      inverse ? tables.Inverse(expect.data() + p * tables.n())
              : tables.Forward(expect.data() + p * tables.n());
    }
    absl::Status s =
        inverse ? (*ntt)->Inverse(absl::MakeSpan(polys)) : (*ntt)->Forward(absl::MakeSpan(polys));
    if (!s.ok()) return s;
    absl::StatusOr<gpu::GpuNtt::Throughput> t = (*ntt)->Measure(batch, reps, inverse);
    if (!t.ok()) return t.status();
    JsonLine("he")
        .Add("backend", "gpu")
        .Add("op", inverse ? "intt" : "ntt")
        .Add("n", n)
        .Add("modulus_bits", 60)
        .Add("batch", uint64_t{batch})
        .Add("transforms_per_s", t->transforms_per_s)
        .Add("us_per_op", 1e6 / t->transforms_per_s)
        .Add("mul_add_per_s", t->mul_add_per_s)
        .Add("roofline_ratio",
             t->transforms_per_s * t->butterflies_per_transform / t->mul_add_per_s)
        .Add("verified", polys == expect)
        .Emit();
  }
  return absl::OkStatus();
}

SuiteRegistration he_gpu("he-gpu",
                         "--n=4096 --batch --reps: GPU NTT / inverse NTT throughput (transforms/s) "
                         "on device-resident batches, against the device's Montgomery multiply-add "
                         "rate measured in this run",
                         HeGpu);

}  // namespace
}  // namespace veil::bench
