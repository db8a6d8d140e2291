// veil-bench he: the HE primitives of pir/he at one parameter set (--n), one JSON line per op:
//   ntt, intt     one transform of N coefficients mod a 60-bit NTT prime, the fastest kernel
//                 (us_per_op), with the 29- and 50-bit kernels beside it; roofline_ratio =
//                 (N/2 log2 N butterflies at the multiply-add rate measured now) / us_per_op,
//                 the rate being that of NttTables::MultiplyAdd (one Shoup product and one
//                 modular add per element, L1-resident, the same lanes);
//   pcmul         MultiplyPlain on a coefficient-form ciphertext (4k NTTs + products, as SEAL's
//                 multiply_plain), and ntt_domain_us: the slot products alone;
//   ccadd, ccmul  Add; Multiply + Relinearize;
//   rotate        RotateRows by one step, rotate_over_pcmul, and hoisted_us: per rotation when 8
//                 rotations of one ciphertext share a decomposition;
//   bsgs_matvec   EncodedMatrix::Multiply of a --matvec-rows x --matvec-cols matrix on
//                 --matvec-threads threads (default 2);
//   bfv_bag       one bfv-bag lookup: server_ms (compress_ms of it compressing the answer),
//                 parse_ms (the server reading the query, its c_0 rounded, on the threads),
//                 client_query_ms (encrypting and serializing it on one thread;
//                 client_query_threads_ms on the threads), client_decode_ms, bytes up /
//                 down, Galois key bytes, errors (0 if the decoded pooled sum equals the
//                 plaintext one).
// --backend=gpu runs he-gpu (the GPU NTT) where veil is built with CUDA.
#include <malloc.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <random>

#include "absl/strings/str_cat.h"
#include "bench/suite.h"
#include "pir/he/bag.h"
#include "pir/he/bfv.h"
#include "pir/he/encoder.h"
#include "pir/he/matvec.h"
#include "pir/he/poly.h"
#include "pir/he/serialization.h"

namespace veil::bench {
namespace {

using namespace veil::he;  // NOLINT: the suite exercises the whole namespace

constexpr int kTrimThresholdMb = 1024;

int LogN(int64_t n) {
  int log_n = 0;
  while ((int64_t{1} << log_n) < n) ++log_n;
  return (int64_t{1} << log_n) == n ? log_n : -1;
}

std::vector<uint64_t> Random(size_t n, uint64_t q, std::mt19937_64& rng) {
  std::vector<uint64_t> v(n);
  for (uint64_t& x : v) x = rng() % q;
  return v;
}

// Multiply-adds per second of `kernel` on L1-resident data (the fastest of repeated runs).
double MultiplyAddRate(const NttTables& t, NttKernel kernel) {
  std::mt19937_64 rng(1);
  constexpr size_t kCount = 1024, kReps = 2000;
  const std::vector<uint64_t> b = Random(kCount, t.modulus().value(), rng);
  std::vector<uint64_t> acc = Random(kCount, t.modulus().value(), rng);
  const double s = FastestSeconds([&] {
    for (size_t r = 0; r < kReps; ++r) t.MultiplyAdd(r + 1, b.data(), acc.data(), kCount, kernel);
  });
  return double(kCount) * kReps / s;
}

double TransformMicros(const NttTables& t, NttKernel kernel, bool inverse) {
  std::mt19937_64 rng(2);
  std::vector<uint64_t> a = Random(t.n(), t.modulus().value(), rng);
  constexpr int kReps = 200;
  return 1e6 / kReps * MedianSeconds([&] {
           for (int r = 0; r < kReps; ++r)
             inverse ? t.Inverse(a.data(), kernel) : t.Forward(a.data(), kernel);
         });
}

void NttLines(int log_n) {
  const size_t n = size_t{1} << log_n;
  auto tables = [&](int bits) {
    return *NttTables::Create(log_n, *Modulus::Create((*GenerateNttPrimes(bits, 2 * n, 1))[0]));
  };
  const NttTables t60 = tables(60), t50 = tables(50), t29 = tables(29);
  const double butterflies = double(n) / 2 * log_n;
  const double rate = MultiplyAddRate(t60, t60.best());
  for (bool inverse : {false, true}) {
    const double us = TransformMicros(t60, t60.best(), inverse);
    const double roofline_us = butterflies / rate * 1e6;
    JsonLine("he")
        .Add("backend", "cpu")
        .Add("op", inverse ? "intt" : "ntt")
        .Add("n", uint64_t{n})
        .Add("modulus_bits", 60)
        .Add("kernel", std::string(NttKernelName(t60.best())))
        .Add("us_per_op", us)
        .Add("scalar_us", TransformMicros(t60, NttKernel::kScalar, inverse))
        .Add("us_per_op_q50", TransformMicros(t50, t50.best(), inverse))
        .Add("kernel_q50", std::string(NttKernelName(t50.best())))
        .Add("us_per_op_q29", TransformMicros(t29, t29.best(), inverse))
        .Add("kernel_q29", std::string(NttKernelName(t29.best())))
        .Add("muladd_per_s", rate)
        .Add("roofline_us", roofline_us)
        .Add("roofline_ratio", roofline_us / us)
        .Emit();
  }
}

struct Fixture {
  std::shared_ptr<const BfvContext> ctx;
  SecretKey sk;
  Ciphertext a, b;
  PlaintextNtt plain;
};

Fixture MakeFixture(int log_n, int plain_bits) {
  Fixture f;
  f.ctx = *BfvContext::Create(*BfvParams::Standard(log_n, plain_bits));
  f.sk = GenerateSecretKey(*f.ctx);
  std::mt19937_64 rng(3);
  const uint64_t t = f.ctx->params().t;
  f.a = *EncryptSymmetric(*f.ctx, f.sk, *EncodeSlots(*f.ctx, Random(f.ctx->n(), t, rng)));
  f.b = *EncryptSymmetric(*f.ctx, f.sk, *EncodeSlots(*f.ctx, Random(f.ctx->n(), t, rng)));
  f.plain = *PrepareForMultiply(*f.ctx, *EncodeSlots(*f.ctx, Random(f.ctx->n(), t, rng)));
  return f;
}

JsonLine OpLine(const Fixture& f, const char* op, double us) {
  JsonLine line("he");
  line.Add("backend", "cpu")
      .Add("op", op)
      .Add("n", uint64_t{f.ctx->n()})
      .Add("q_primes", uint64_t{f.ctx->q_size()})
      .Add("log2_q", f.ctx->q_base().product_bits())
      .Add("plain_bits", f.ctx->plain_modulus().bits())
      .Add("malloc_trim_threshold_mb", kTrimThresholdMb)
      .Add("us_per_op", us);
  return line;
}

double Micros(const std::function<void()>& run) { return 1e6 * MedianSeconds(run, 1, 15, 2.0); }

// Each timed call assigns its result over the previous one, as a server loop does: the new
// result is allocated while the old one still lives, so freed ciphertexts are reused rather than
// returned to the OS and faulted back in (which costs more than a rotation on this VM).
void EvaluatorLines(const Fixture& f) {
  const BfvContext& ctx = *f.ctx;
  Ciphertext r;
  std::vector<Ciphertext> rs;
  const double pcmul = Micros([&] { r = *MultiplyPlain(ctx, f.a, f.plain); });
  const size_t words = ctx.q_size() * ctx.n();
  Ciphertext scratch = f.a;
  const double pointwise = Micros([&] {
    for (size_t i = 0; i < 2; ++i) {
      internal::MultiplyRows(ctx.q_ntt(), scratch.poly(i, words), f.plain.ntt.data(),
                             scratch.poly(i, words));
    }
  });
  OpLine(f, "pcmul", pcmul).Add("ntt_domain_us", pointwise).Emit();
  OpLine(f, "ccadd", Micros([&] { r = *Add(ctx, f.a, f.b); })).Emit();
  const RelinKey rk = *GenerateRelinKey(ctx, f.sk);
  const double multiply = Micros([&] { r = *Multiply(ctx, f.a, f.b); });
  const Ciphertext three = *Multiply(ctx, f.a, f.b);
  const double relin = Micros([&] { r = *Relinearize(ctx, three, rk); });
  OpLine(f, "ccmul", multiply + relin).Add("multiply_us", multiply).Add("relin_us", relin).Emit();
  std::vector<int> steps;
  std::vector<uint32_t> elements;
  for (int s = 1; s <= 8; ++s) {
    steps.push_back(s);
    elements.push_back(*GaloisElementForStep(ctx.log_n(), s));
  }
  const GaloisKeys gk = *GenerateGaloisKeys(ctx, f.sk, elements);
  const double rotate = Micros([&] { r = *RotateRows(ctx, f.a, 1, gk); });
  const double hoisted =
      Micros([&] { rs = *RotateRowsHoisted(ctx, f.a, steps, gk); }) / steps.size();
  OpLine(f, "rotate", rotate)
      .Add("rotate_over_pcmul", rotate / pcmul)
      .Add("hoisted_us", hoisted)
      .Add("galois_key_bytes", uint64_t{GaloisKeyBytes(ctx)})
      .Emit();
}

void MatVecLine(const Fixture& f, size_t rows, size_t cols, int threads) {
  const BfvContext& ctx = *f.ctx;
  std::cerr << "he: encoding a " << rows << " x " << cols << " matrix\n";
  std::mt19937_64 rng(4);
  const uint64_t t = ctx.params().t;
  const MatVecPlan plan = *MatVecPlan::Create(ctx, rows, cols);
  const std::vector<uint64_t> matrix = Random(rows * cols, t, rng), x = Random(cols, t, rng);
  const auto start = std::chrono::steady_clock::now();
  const EncodedMatrix encoded = *EncodedMatrix::Create(f.ctx, plan, matrix, threads);
  const double encode_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const GaloisKeys gk = *GenerateGaloisKeys(ctx, f.sk, plan.GaloisElements());
  std::vector<Ciphertext> in;
  const std::vector<std::vector<uint64_t>> packed = *plan.PackInput(x);
  for (const std::vector<uint64_t>& slots : packed) {
    in.push_back(*EncryptSymmetric(ctx, f.sk, *EncodeSlots(ctx, slots)));
  }
  Ciphertext y;
  const double us = 1e6 * MedianSeconds([&] { y = *encoded.Multiply(in, gk, threads); }, 1, 5, 5.0);
  const bool correct = plan.UnpackOutput(*DecodeSlots(ctx, *Decrypt(ctx, f.sk, y))) ==
                       MatVecPlain(ctx.plain_modulus(), rows, cols, matrix, x);
  OpLine(f, "bsgs_matvec", us)
      .Add("rows", uint64_t{rows})
      .Add("cols", uint64_t{cols})
      .Add("threads", threads)
      .Add("baby", uint64_t{plan.baby()})
      .Add("giant", uint64_t{plan.giant()})
      .Add("rotations", uint64_t{plan.rotations()})
      .Add("plain_products", uint64_t{plan.blocks() * plan.diagonals()})
      .Add("matrix_bytes", uint64_t{encoded.bytes()})
      .Add("encode_ms", encode_ms)
      .Add("budget_left", *NoiseBudget(ctx, f.sk, y))
      .Add("errors", correct ? 0 : 1)
      .Emit();
}

void BagLine(int log_n, size_t rows, size_t dim, size_t bag, int threads) {
  std::cerr << "he: bfv-bag over " << rows << " x " << dim << "\n";
  const auto ctx = *BfvContext::Create(*BagParams(log_n));
  std::mt19937_64 rng(5);
  std::vector<int32_t> table(rows * dim);
  for (int32_t& v : table) v = static_cast<int32_t>(rng());
  const std::unique_ptr<BagServer> server = *BagServer::Create(ctx, table, rows, dim, threads);
  const std::unique_ptr<BagClient> client = *BagClient::Create(ctx, server->info());
  const GaloisKeys gk = *client->MakeGaloisKeys();
  std::vector<uint64_t> bag_rows;
  std::vector<int64_t> weights;
  for (size_t i = 0; i < bag && i < rows; ++i) {
    bag_rows.push_back(i * (rows / std::min(bag, rows)));
    weights.push_back(65536);  // 1.0 in 16.16
  }
  // The query as a client sends it (c_0 rounded) and as the server reads it.
  const std::vector<uint8_t> up = *client->SerializedQuery(bag_rows, weights, kBagQueryRoundBits);
  const size_t blocks = server->plan().blocks();
  const double parse_ms =
      1e3 * MedianSeconds([&] { (void)*ParseBagQuery(*ctx, up, blocks, threads); }, 1, 7, 2.0);
  const BagQuery query = *ParseBagQuery(*ctx, up, blocks);
  CompressedCiphertext answer;
  const double ms =
      1e3 * MedianSeconds([&] { answer = *server->Answer(query, gk, threads); }, 1, 7, 5.0);
  std::vector<int64_t> expect(dim, 0);
  for (size_t i = 0; i < bag_rows.size(); ++i) {
    for (size_t j = 0; j < dim; ++j) expect[j] += weights[i] * table[bag_rows[i] * dim + j];
  }
  // Parts of a lookup: the answer's compression (inside server_ms), the client's query and decode.
  const double compress_ms =
      1e3 * MedianSeconds([&] { (void)*Compress(*ctx, query.blocks[0]); }, 1, 7, 2.0);
  const auto query_on = [&](int query_threads) {
    return 1e3 * MedianSeconds(
                     [&] {
                       (void)*client->SerializedQuery(bag_rows, weights, kBagQueryRoundBits,
                                                      query_threads);
                     },
                     1, 7, 5.0);
  };
  const double query_ms = query_on(1), query_threads_ms = query_on(threads);
  const double decode_ms = 1e3 * MedianSeconds([&] { (void)*client->Decode(answer); }, 1, 7, 2.0);
  const std::vector<int64_t> got = *client->Decode(answer);
  int64_t max_abs_error = 0;
  for (size_t j = 0; j < dim; ++j)
    max_abs_error = std::max(max_abs_error, std::abs(got[j] - expect[j]));
  const BagSizes sizes = client->Sizes(kBagQueryRoundBits);
  JsonLine("he")
      .Add("backend", "cpu")
      .Add("op", "bfv_bag")
      .Add("n", uint64_t{ctx->n()})
      .Add("rows", uint64_t{rows})
      .Add("dim", uint64_t{dim})
      .Add("bag", uint64_t{bag_rows.size()})
      .Add("threads", threads)
      .Add("server_ms", ms)
      .Add("compress_ms", compress_ms)
      .Add("parse_ms", parse_ms)
      .Add("client_query_ms", query_ms)
      .Add("client_query_threads_ms", query_threads_ms)
      .Add("client_decode_ms", decode_ms)
      .Add("bytes_up", uint64_t{sizes.query_bytes})
      .Add("bytes_down", uint64_t{sizes.answer_bytes})
      .Add("galois_keys", uint64_t{sizes.galois_keys})
      .Add("galois_key_bytes", uint64_t{sizes.galois_key_bytes})
      .Add("table_encoded_bytes", uint64_t{server->encoded_bytes()})
      .Add("errors", max_abs_error == 0 ? 0 : 1)
      .Add("max_abs_error", max_abs_error)
      .Emit();
}

absl::Status He(const Flags& flags) {
  const std::string backend = flags.Str("backend", "cpu");
  if (backend == "gpu") return RunSuite("he-gpu", flags);
  if (backend != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("--backend must be cpu or gpu, got ", backend));
  }
  // glibc returns freed memory at the top of the heap to the OS (trim threshold ~2x the largest
  // freed block) and faults it back in on the next allocation; ciphertexts are hundreds of KiB,
  // and on this VM a rotation's worth of page faults costs more than the rotation. veil-server
  // sets the same policy (server::KeepFreedMemoryForReuse, which this suite does not link: it
  // builds without the server; lines carry malloc_trim_threshold_mb).
  mallopt(M_TRIM_THRESHOLD, kTrimThresholdMb << 20);
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  const int log_n = LogN(flags.Int("n", 8192));
  if (log_n < 12 || log_n > 14) {
    return absl::InvalidArgumentError("--n must be 4096, 8192 or 16384");
  }
  const int plain_bits = static_cast<int>(flags.Int("plain-bits", log_n == 12 ? 20 : 40));
  const size_t default_matvec = log_n == 12 ? 2048 : log_n == 13 ? 4096 : 1024;
  const size_t rows = flags.Int("matvec-rows", default_matvec);
  const size_t cols = flags.Int("matvec-cols", default_matvec);
  const int threads = static_cast<int>(flags.Int("matvec-threads", 2));
  const size_t bag_rows = flags.Int("bag-rows", 4096), bag_dim = flags.Int("bag-dim", 64);
  const size_t bag = flags.Int("bag", 32);
  std::cerr << "he: N = " << (1 << log_n) << ": NTT\n";
  NttLines(log_n);
  std::cerr << "he: BFV operations\n";
  const Fixture f = MakeFixture(log_n, plain_bits);
  EvaluatorLines(f);
  if (rows > 0 && cols > 0) MatVecLine(f, rows, cols, threads);
  if (log_n >= 13 && bag_rows > 0) BagLine(log_n, bag_rows, bag_dim, bag, threads);
  return absl::OkStatus();
}

const char kHelp[] =
    "--n=4096|8192|16384 --backend=cpu|gpu [--plain-bits --matvec-rows --matvec-cols "
    "--matvec-threads --bag-rows --bag-dim --bag]: one line per op (ntt, intt, pcmul, ccadd, "
    "ccmul, rotate, bsgs_matvec, bfv_bag) with us_per_op; ntt/intt with roofline_ratio against "
    "the modular multiply-add rate measured in this run; rotate with rotate_over_pcmul";

SuiteRegistration he_suite("he", kHelp, He);

}  // namespace
}  // namespace veil::bench
