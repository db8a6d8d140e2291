// LWE suites (pir/lattice): lwe-answer (the server's product, against the CPU's ceilings measured
// in the same run) and lattice (one protocol's costs end to end below the sockets: server and
// client time, bytes each way, the reusable hint; --protocol=exppack-s: SimplePIR with its answer
// ring-packed, pir/lattice/pack_simple.h; --protocol=hybrid: the same narrowed to the record's
// window by selection bits, pir/lattice/hybrid.h; --protocol=exppack-d: DoublePIR with its
// second-level answers packed, pir/lattice/pack_double.h).
//
// lwe-answer's roofline is the slower of two ceilings, both measured by
// lattice::MeasureCpuCeilings in this run on the same threads:
//   memory   the bytes the server reads per batch (the D1 x D0 matrix; DoublePIR also its 4n x D1
//            digit matrix) at the streaming read bandwidth, measured over as many bytes;
//   compute  the 32-bit multiply-adds per batch (batch x D1 x D0; DoublePIR adds its second
//            level, 4n x D1 x batch x R, and 4 x D1 x n per query) at the faster of the int32
//            rate and the VNNI byte rate / 4 (four byte planes per word product).
// roofline_qps = batch / max(the two); roofline_ratio = qps / roofline_qps. Batch 1 is
// memory-bound, large batches compute-bound.
#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/lattice_devices.h"
#include "bench/suite.h"
#include "pir/lattice/client.h"
#include "pir/lattice/double_pack.h"
#include "pir/lattice/expansion.h"
#include "pir/lattice/kernels.h"
#include "pir/lattice/pack_double.h"
#include "pir/lattice/pack_simple.h"
#include "pir/lattice/roofline.h"
#include "pir/lattice/server.h"

namespace veil::bench {
namespace {

using lattice::LweClient;
using lattice::LweServer;
using lattice::PendingLookup;
using lattice::Protocol;
using lattice::Shape;

constexpr uint64_t kN = lattice::kLweDimension;

struct Setup {
  std::vector<uint8_t> records;
  std::unique_ptr<LweServer> server;
  std::unique_ptr<LweClient> client;
  double hint_s = 0;
};

// A server over random records (the flags' table), its hint computed in memory, and a client.
absl::StatusOr<Setup> MakeSetup(const Flags& flags, const std::string& suite) {
  const uint64_t rows = flags.Int("rows", 1 << 20);
  const int64_t row_bytes = flags.Int("row-bytes", 64);
  // exppack-s and hybrid serve a SimplePIR matrix (its hint becomes the packing matrix).
  const std::string name = flags.Str("protocol", "simple");
  const bool packed = name == "exppack-s" || name == "hybrid" || name == "double-pack";
  auto protocol =
      lattice::ParseProtocol(packed ? "simple" : (name == "exppack-d" ? "double" : name));
  if (!protocol.ok()) return protocol.status();
  if (rows == 0 || row_bytes < 1 || row_bytes > lattice::kMaxRecordBytes) {
    return absl::InvalidArgumentError("--rows and --row-bytes must be positive");
  }
  lattice::LweServerOptions options;
  options.protocol = *protocol;
  options.threads = static_cast<int>(flags.Int("threads", 1));
  options.shape.records_per_column = flags.Int("records-per-column", 0);
  options.shape.lookups_per_hint = flags.Int("lookups-per-hint", 1024);
  if (packed) {
    options.shape.packed_ring_n = static_cast<uint32_t>(lattice::RingParams::Default().n());
  }
  Setup setup;
  setup.records.resize(rows * row_bytes);
  std::mt19937_64 gen(1);
  for (uint8_t& b : setup.records) b = static_cast<uint8_t>(gen());
  std::cerr << suite << ": " << rows << " rows x " << row_bytes << " B, "
            << lattice::ProtocolName(*protocol) << ", " << options.threads
            << " thread(s): computing the hint\n";
  const auto start = std::chrono::steady_clock::now();
  embedding::TableDigestBytes digest{};
  digest[0] = 1;
  auto server = LweServer::FromRecords(setup.records, rows, static_cast<uint32_t>(row_bytes),
                                       digest, options);
  if (!server.ok()) return server.status();
  setup.hint_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  setup.server = *std::move(server);
  auto client = LweClient::Create(setup.server->config(), setup.server->hint_blob());
  if (!client.ok()) return client.status();
  setup.client = *std::move(client);
  std::cerr << suite << ": " << lattice::ShapeSummary(setup.server->shape()) << "\n";
  return setup;
}

struct Batch {
  std::vector<uint64_t> rows;
  std::vector<uint32_t> queries, answers;
  std::vector<PendingLookup> pending;
};

absl::StatusOr<Batch> MakeBatch(const Setup& setup, int batch, uint64_t seed) {
  const Shape& s = setup.server->shape();
  Batch b;
  std::mt19937_64 gen(seed);
  for (int i = 0; i < batch; ++i) b.rows.push_back(gen() % s.rows);
  b.queries.resize(batch * s.query_words());
  b.answers.resize(batch * s.answer_words());
  auto pending = setup.client->MakeQueries(b.rows, absl::MakeSpan(b.queries));
  if (!pending.ok()) return pending.status();
  b.pending = *std::move(pending);
  return b;
}

// Records decoded wrongly from the batch's answers.
int CountErrors(const Setup& setup, const Batch& b) {
  const Shape& s = setup.server->shape();
  std::vector<uint8_t> record(s.record_bytes);
  int errors = 0;
  for (size_t i = 0; i < b.rows.size(); ++i) {
    const absl::Status st = setup.client->Decode(
        b.pending[i],
        absl::MakeConstSpan(b.answers).subspan(i * s.answer_words(), s.answer_words()),
        absl::MakeSpan(record));
    errors += !st.ok() || !std::equal(record.begin(), record.end(),
                                      setup.records.begin() + b.rows[i] * s.record_bytes);
  }
  return errors;
}

// Bytes the server reads and 32-bit multiply-adds it does per batch (the roofline's inputs).
struct Work {
  double bytes;
  double macs;
};

Work WorkOf(const Shape& s, int batch) {
  Work w{double(s.d1) * lattice::AlignedStride(s.d0), double(batch) * s.d1 * s.d0};
  if (s.protocol == Protocol::kDoublePir) {
    const double digit_rows = double(lattice::kDigitsPerWord) * kN;
    w.bytes += digit_rows * lattice::AlignedStride(s.d1);
    w.macs += digit_rows * s.d1 * batch * s.record_bytes +
              double(batch) * lattice::kDigitsPerWord * s.d1 * (kN + s.record_bytes);
  }
  return w;
}

// The fields every LWE line starts with: the table, its shape, the batch.
JsonLine LweLine(const std::string& suite, const std::string& protocol, const Shape& s, int batch,
                 int threads, const std::string& backend = "cpu") {
  JsonLine line(suite);
  line.Add("backend", backend)
      .Add("protocol", protocol)
      .Add("rows", s.rows)
      .Add("row_bytes", int64_t{s.record_bytes})
      .Add("batch", batch)
      .Add("threads", threads)
      .Add("d0", s.d0)
      .Add("d1", s.d1);
  return line;
}

// The read-bandwidth ceiling is measured over as many bytes as the server streams (at least
// 64 MiB): a table that stays in the last-level cache is judged against that cache's bandwidth,
// one beyond it against DRAM's.
uint64_t ReadBytes(const Work& work) {
  return std::max<uint64_t>(uint64_t{64} << 20, static_cast<uint64_t>(work.bytes));
}

// The lattice suite's server time against its floor, paired: the calls timed between reads of
// the database's bytes (lattice::ReadStream); the median call, the median read and the median
// of each call's ratio to the mean of the reads around it (floor_ratio). A ceiling measured once,
// seconds from the calls, moved the ratio by 2x on a VM whose bandwidth drifts.
struct FloorTimes {
  double server_s = 0, floor_s = 0, ratio = 0;
};
FloorTimes TimeAgainstFloor(const std::function<void()>& call, int threads, const Work& work,
                            int reps) {
  const lattice::ReadStream stream(threads, ReadBytes(work));
  const double scale = work.bytes / static_cast<double>(stream.bytes());
  call();  // warm-up
  std::vector<double> server, floor, ratio;
  double before = stream.Seconds() * scale;
  floor.push_back(before);
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double after = stream.Seconds() * scale;
    server.push_back(s);
    floor.push_back(after);
    ratio.push_back(s / (0.5 * (before + after)));
    before = after;
  }
  return {Percentile(server, 0.5), Percentile(floor, 0.5), Percentile(ratio, 0.5)};
}

absl::Status LweAnswer(const Flags& flags) {
  const std::string backend = flags.Str("backend", "cpu");
  if (backend == "gpu") return RunSuite("lwe-answer-gpu", flags);
  if (backend != "cpu") {
    return absl::InvalidArgumentError(absl::StrCat("--backend must be cpu or gpu, got ", backend));
  }
  const int batch = static_cast<int>(flags.Int("batch", 1));
  const int threads = static_cast<int>(flags.Int("threads", 1));
  const double budget_s = flags.Double("budget-s", 3.0);
  if (batch < 1 || threads < 1) {
    return absl::InvalidArgumentError("--batch and --threads must be positive");
  }
  absl::StatusOr<Setup> setup = MakeSetup(flags, "lwe-answer");
  if (!setup.ok()) return setup.status();
  absl::StatusOr<Batch> b = MakeBatch(*setup, batch, 2);
  if (!b.ok()) return b.status();
  const Shape& s = setup->server->shape();
  absl::Status status;
  const double t = MedianSeconds(
      [&] { status = setup->server->Answer(b->queries, batch, absl::MakeSpan(b->answers)); }, 1, 15,
      budget_s);
  if (!status.ok()) return status;
  const int errors = CountErrors(*setup, *b);

  std::cerr << "lwe-answer: measuring the ceilings on " << threads << " thread(s)\n";
  const Work work = WorkOf(s, batch);
  const lattice::CpuCeilings ceilings = lattice::MeasureCpuCeilings(threads, ReadBytes(work));
  const double qps = batch / t;
  const double db_bytes = double(s.d1) * lattice::AlignedStride(s.d0);
  LweLine("lwe-answer", std::string(lattice::ProtocolName(s.protocol)), s, batch, threads)
      .Add("kernel", std::string(lattice::ProductKernelName(lattice::FastestKernelForBatch(batch))))
      .Add("db_bytes", db_bytes)
      .Add("bytes_read", work.bytes)
      .Add("ms_per_batch", t * 1e3)
      .Add("gbps", db_bytes / t / 1e9)
      .Add("qps", qps)
      .Add("mem_read_gbps", ceilings.mem_read_bytes_per_s / 1e9)
      .Add("int32_mac_per_s", ceilings.int32_mac_per_s)
      .Add("vnni_byte_mac_per_s", ceilings.vnni_byte_mac_per_s)
      .AddRoofline(batch, qps, 0, work.macs / ceilings.word_mac_per_s(),
                   work.bytes / ceilings.mem_read_bytes_per_s)
      .Add("hint_s", setup->hint_s)
      .Add("errors", errors)
      .Emit();
  // --kernels=all: the first-level product alone with each kernel this CPU runs (how the
  // automatic choice per batch size was made).
  if (flags.Str("kernels", "auto") == "all") {
    for (lattice::ProductKernel k : lattice::AvailableProductKernels()) {
      std::vector<uint32_t> q1(batch * s.d0), out(batch * s.d1);
      for (int i = 0; i < batch; ++i) {
        std::copy_n(b->queries.begin() + i * s.query_words(), s.d0, q1.begin() + i * s.d0);
      }
      const double tk = MedianSeconds(
          [&] {
            status = lattice::MultiplyBytes(setup->server->database().view(), q1, batch,
                                            absl::MakeSpan(out), s.d1, threads, k);
          },
          1, 15, budget_s);
      if (!status.ok()) return status;
      JsonLine("lwe-answer-kernel")
          .Add("kernel", std::string(lattice::ProductKernelName(k)))
          .Add("batch", batch)
          .Add("threads", threads)
          .Add("ms_per_batch", tk * 1e3)
          .Add("gbps", db_bytes / tk / 1e9)
          .Add("word_mac_per_s", double(batch) * s.d1 * s.d0 / tk)
          .Emit();
    }
  }
  return errors == 0 ? absl::OkStatus()
                     : absl::InternalError(absl::StrCat(errors, " lookups decoded wrongly"));
}

// --protocol=exppack-s: ExpPack(S), the SimplePIR server wrapped by PackedSimpleServer:
// client_ms = query (SimplePIR query + the LWE secret's RLWE ciphertext) + decode;
// client_prepare_query_ms / client_finish_query_ms the same query made ahead (PrepareQuery) and
// finished for its row at lookup time (FinishQuery);
// client_keys_ms the session's secret and expansion keys (once); server_ms = one AnswerBatch of
// --batch queries (one SimplePIR product for all, then each query's expansion into the packing
// sums and ModSwitch, the queries spread over the threads), server_ms_per_query its share;
// server_expand_ms one expansion alone on all the threads, its leaves dropped (the CPU's: the
// top L - D levels when the engine defers D, deferred_levels, deferred_packing.h; the full
// expansion's 1,023 key switches as server_full_expand_ms);
// server_sums_ms the packing engine's expansion and sums of one ciphertext (the device's with
// --backend=gpu, lattice_devices.h);
// server_product_ms the batch's LWE product alone (the rest of server_ms is expansion, packing
// and switching);
// reusable_key_bytes the expansion keys, uploaded once; errors the batch's wrong records.
// --protocol=hybrid: the same with the hybrid's window selection (hybrid.h): query_bytes include
// the selection's ciphertext (selection_bytes), response_bytes are the window's.
// --protocol=exppack-d: ExpPack(D) (pack_double.h): DoublePIR's product, then each query's R
// expansions and packings (one per record byte) spread over the threads; the query carries R
// ciphertexts. --protocol=double-pack: double packing (double_pack.h) on ExpPack(S)'s shape: the
// second fold, sums W_t (by trace) and packing after ExpPack(S)'s.
}  // namespace

absl::Status PackedLattice(const Flags& flags, const std::string& name,
                           const LatticeDevices& devices) {
  const int batch = static_cast<int>(flags.Int("batch", 1));
  if (batch < 1) return absl::InvalidArgumentError("--batch must be positive");
  const int threads = static_cast<int>(flags.Int("threads", 1));
  absl::StatusOr<Setup> setup = MakeSetup(flags, "lattice");
  if (!setup.ok()) return setup.status();
  const Shape s = setup->server->shape();
  if (devices.product) {
    auto product = devices.product(setup->server->database().view(), batch);
    if (!product.ok()) return product.status();
    setup->server->SetDatabaseProduct(*std::move(product));
  }
  const lattice::LweServerMemory memory = setup->server->memory();
  // The LWE product alone, on random query words (its time does not depend on them); the
  // warm-up call picks the kernel (kernels.h measures them once per batch size).
  std::vector<uint32_t> product_in(s.query_words() * batch), product_out(s.answer_words() * batch);
  std::mt19937 words(7);
  for (uint32_t& w : product_in) w = words();
  absl::Status product_status;
  const double product_s = MedianSeconds(
      [&] {
        product_status = setup->server->Answer(product_in, batch, absl::MakeSpan(product_out));
      },
      1, 5, 3);
  if (!product_status.ok()) return product_status;
  const lattice::PackedProtocol simple_protocol =
      name == "hybrid" ? lattice::PackedProtocol::kHybrid : lattice::PackedProtocol::kExpPackS;
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<lattice::PackedServer>> server;
  if (name == "exppack-d") {
    server = lattice::PackedDoubleServer::Create(std::move(setup->server));
  } else if (name == "double-pack") {
    server = lattice::DoublePackedServer::Create(std::move(setup->server));
  } else {
    server = lattice::PackedSimpleServer::Create(std::move(setup->server),
                                                 lattice::RingParams::Default(), simple_protocol);
  }
  if (!server.ok()) return server.status();
  if (devices.engine) {
    auto engine = devices.engine((*server)->ring(), (*server)->matrix());
    if (!engine.ok()) return engine.status();
    (*server)->set_packing_engine(*std::move(engine));
  }
  (*server)->packing_engine().Prepare();
  const double prepare_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  absl::StatusOr<std::unique_ptr<lattice::PackedClient>> client;
  const double client_keys_s = MedianSeconds(
      [&] {
        if (name == "exppack-d") {
          client = lattice::PackedDoubleClient::Create((*server)->config());
        } else if (name == "double-pack") {
          client = lattice::DoublePackedClient::Create((*server)->config());
        } else {
          client = lattice::PackedSimpleClient::Create(
              (*server)->config(), lattice::RingParams::Default(), simple_protocol);
        }
      },
      0, 1, 3);
  if (!client.ok()) return client.status();
  absl::StatusOr<he::GaloisKeys> parsed = (*server)->ParseKeys((*client)->expansion_keys());
  if (!parsed.ok()) return parsed.status();
  // Owned, as a serving session's: a device engine keeps them after the first (warm-up) call.
  const auto keys = std::make_shared<const he::GaloisKeys>(*std::move(parsed));
  std::mt19937_64 gen(3);
  absl::StatusOr<lattice::PackedQuery> query;
  const double query_s =
      MedianSeconds([&] { query = (*client)->MakeQuery(gen() % s.rows); }, 0, 3, 10);
  if (!query.ok()) return query.status();
  // The same query made ahead (PrepareQuery) and finished at lookup time (FinishQuery).
  absl::StatusOr<lattice::PreparedQuery> prepared;
  const double prepare_query_s =
      MedianSeconds([&] { prepared = (*client)->PrepareQuery(); }, 0, 3, 10);
  if (!prepared.ok()) return prepared.status();
  std::vector<lattice::PreparedQuery> ahead;
  for (int i = 0; i < 10; ++i) {
    absl::StatusOr<lattice::PreparedQuery> p = (*client)->PrepareQuery();
    if (!p.ok()) return p.status();
    ahead.push_back(*std::move(p));
  }
  size_t next_ahead = 0;
  absl::StatusOr<lattice::PackedQuery> finished;
  const double finish_query_s = MedianSeconds(
      [&] { finished = (*client)->FinishQuery(gen() % s.rows, std::move(ahead[next_ahead++])); }, 0,
      static_cast<int>(ahead.size()), 10);
  if (!finished.ok()) return finished.status();
  std::vector<lattice::PackedQuery> queries;
  std::vector<lattice::PackedRequest> requests;
  for (int i = 0; i < batch; ++i) {
    absl::StatusOr<lattice::PackedQuery> q = (*client)->MakeQuery(gen() % s.rows);
    if (!q.ok()) return q.status();
    queries.push_back(*std::move(q));
  }
  for (const lattice::PackedQuery& q : queries) {
    requests.push_back({q.query, q.ciphertext, keys, q.selection});
  }
  std::vector<absl::StatusOr<std::vector<uint8_t>>> responses;
  // Warm runs: the first call after start-up is slower (by 0.05 s at 2^20 x 64 B, 0.2 s at 2^22,
  // with a few hundred minor page faults only), and a batch's median is of few runs. On the CPU
  // each call is paired with a read of the database (TimeAgainstFloor); a device's floor is its
  // bandwidth measured once.
  const auto answer = [&] { responses = (*server)->AnswerBatch(requests); };
  // A query alone on the CPU's product and two threads or more: past the server's trials of its
  // two schedules (SumsSchedule::kAdaptive; elsewhere the sums always follow the product).
  auto* simple = dynamic_cast<lattice::PackedSimpleServer*>(server->get());
  if (simple != nullptr && batch == 1 && threads > 1 && !devices.product) {
    for (int i = 0; i < 2 * lattice::SumsScheduleChoice::kTrials; ++i) answer();
  }
  FloorTimes timed;
  if (devices.read_bytes_per_s > 0) {
    timed.server_s = MedianSeconds(answer, 1, 3, batch > 1 ? 3 : 10);
    timed.floor_s = WorkOf(s, 1).bytes / devices.read_bytes_per_s;
    timed.ratio = timed.server_s / timed.floor_s;
  } else {
    timed = TimeAgainstFloor(answer, threads, WorkOf(s, 1), batch > 1 ? 3 : 9);
  }
  const double server_s = timed.server_s;
  for (const auto& r : responses) {
    if (!r.ok()) return r.status();
  }
  std::vector<uint8_t> record(s.record_bytes);
  absl::Status status;
  const double decode_s = MedianSeconds(
      [&] { status = (*client)->Decode(queries[0], *responses[0], absl::MakeSpan(record)); }, 0, 3,
      10);
  if (!status.ok()) return status;
  int errors = 0;
  for (int i = 0; i < batch; ++i) {
    const uint64_t row = queries[i].row();
    if (!(*client)->Decode(queries[i], *responses[i], absl::MakeSpan(record)).ok() ||
        !std::equal(record.begin(), record.end(), setup->records.begin() + row * s.record_bytes)) {
      ++errors;
    }
  }
  const absl::Span<const uint8_t> first_ciphertext =
      absl::MakeConstSpan(query->ciphertext)
          .first(lattice::SecretCiphertextBytes((*server)->ring()));
  const auto* cpu_engine =
      dynamic_cast<const lattice::CpuPackingEngine*>(&(*server)->packing_engine());
  const uint32_t deferred = cpu_engine != nullptr ? cpu_engine->deferred_levels() : 0;
  const auto expand_seconds = [&](uint32_t leaves) {
    return MedianSeconds(
        [&] {
          status = lattice::ExpandLweSecret(
              (*server)->ring(), *keys, leaves, first_ciphertext, threads,
              [](int, uint32_t, const uint32_t*, const uint64_t*, const uint64_t*) {});
        },
        0, 3, 10);
  };
  const double expand_s = expand_seconds(1u << (lattice::ExpansionLevels(kN) - deferred));
  if (!status.ok()) return status;
  const double full_expand_s = expand_seconds(kN);
  if (!status.ok()) return status;
  // The engine's expansion and packing sums of one ciphertext (the CPU's or the device's).
  std::vector<uint64_t> sums(lattice::PackingSumWords((*server)->ring(), (*server)->matrix()));
  const double sums_s = MedianSeconds(
      [&] {
        status =
            (*server)->packing_engine().Sums(keys, first_ciphertext, threads, absl::MakeSpan(sums));
      },
      1, 3, 10);
  if (!status.ok()) return status;
  JsonLine line = LweLine("lattice", "lwe-" + name, s, batch, threads, devices.backend);
  if (simple != nullptr) {  // exppack-s, hybrid
    const bool alongside =
        batch == 1 && simple->sums_schedule() == lattice::SumsSchedule::kAlongsideProduct;
    line.Add("sums_schedule", alongside ? "alongside-product" : "after-product");
  }
  line.Add("server_ms", server_s * 1e3)
      .Add("server_ms_per_query", server_s * 1e3 / batch)
      .Add("deferred_levels", static_cast<uint64_t>(deferred))
      .Add("server_expand_ms", expand_s * 1e3)
      .Add("server_full_expand_ms", full_expand_s * 1e3)
      .Add("server_sums_ms", sums_s * 1e3)
      .Add("server_product_ms", product_s * 1e3)
      .Add("client_ms", (query_s + decode_s) * 1e3)
      .Add("client_query_ms", query_s * 1e3)
      .Add("client_prepare_query_ms", prepare_query_s * 1e3)
      .Add("client_finish_query_ms", finish_query_s * 1e3)
      .Add("client_decode_ms", decode_s * 1e3)
      .Add("client_keys_ms", client_keys_s * 1e3)
      .Add("query_bytes",
           query->query.size() * 4 + query->ciphertext.size() + query->selection.size())
      .Add("selection_bytes", query->selection.size())
      .Add("response_bytes", responses[0]->size())
      .Add("reusable_key_bytes", (*client)->expansion_keys().size())
      .Add("floor_ms", timed.floor_s * 1e3)
      .Add("floor_ratio", timed.ratio)
      .Add("server_memory_bytes", memory.database + memory.server_digits + memory.a2 +
                                      memory.hint_blob + (*server)->matrix().bytes() +
                                      (*server)->packing_engine().host_bytes())
      .Add("hint_s", setup->hint_s)
      .Add("pack_prepare_s", prepare_s)
      .Add("errors", errors)
      .Emit();
  return errors == 0 ? absl::OkStatus()
                     : absl::InternalError(absl::StrCat(errors, " lookups decoded wrongly"));
}

namespace {

absl::Status Lattice(const Flags& flags) {
  const std::string protocol = flags.Str("protocol", "simple");
  const bool packed = protocol == "exppack-s" || protocol == "hybrid" || protocol == "exppack-d" ||
                      protocol == "double-pack";
  const std::string backend = flags.Str("backend", "cpu");
  if (backend == "gpu" && packed) return RunSuite("lattice-gpu", flags);
  if (backend != "cpu") {
    return absl::InvalidArgumentError(
        "the lattice suite runs --backend=cpu, or --backend=gpu for the packed protocols "
        "(lwe-answer --backend=gpu times lwe-simple's and lwe-double's product)");
  }
  if (packed) return PackedLattice(flags, protocol, {});
  const int batch = static_cast<int>(flags.Int("batch", 1));
  const int threads = static_cast<int>(flags.Int("threads", 1));
  if (batch < 1 || threads < 1) {
    return absl::InvalidArgumentError("--batch and --threads must be positive");
  }
  absl::StatusOr<Setup> setup = MakeSetup(flags, "lattice");
  if (!setup.ok()) return setup.status();
  const Shape& s = setup->server->shape();
  // Client: a query and a decode per lookup, one lookup at a time (a phone's view).
  absl::StatusOr<Batch> one = MakeBatch(*setup, 1, 3);
  if (!one.ok()) return one.status();
  if (absl::Status st = setup->server->Answer(one->queries, 1, absl::MakeSpan(one->answers));
      !st.ok()) {
    return st;
  }
  std::vector<uint8_t> record(s.record_bytes);
  absl::Status status;
  const double query_s = MedianSeconds([&] {
    auto p = setup->client->MakeQueries(one->rows, absl::MakeSpan(one->queries));
    status.Update(p.status());
  });
  const double decode_s = MedianSeconds([&] {
    status.Update(setup->client->Decode(one->pending[0], one->answers, absl::MakeSpan(record)));
  });
  // The same query made ahead (PrepareLookups) and finished at lookup time (FinishQuery).
  std::vector<lattice::PreparedLookup> ahead;
  const double prepare_query_s =
      MedianSeconds([&] { ahead = setup->client->PrepareLookups(1); }, 0, 3, 10);
  ahead = setup->client->PrepareLookups(10);
  size_t next_ahead = 0;
  const double finish_query_s = MedianSeconds(
      [&] {
        status.Update(setup->client
                          ->FinishQuery(one->rows[0], std::move(ahead[next_ahead++]),
                                        absl::MakeSpan(one->queries))
                          .status());
      },
      0, static_cast<int>(ahead.size()), 10);
  if (!status.ok()) return status;
  // Server: one batch.
  absl::StatusOr<Batch> b = MakeBatch(*setup, batch, 4);
  if (!b.ok()) return b.status();
  const FloorTimes timed = TimeAgainstFloor(
      [&] { status = setup->server->Answer(b->queries, batch, absl::MakeSpan(b->answers)); },
      threads, WorkOf(s, batch), batch > 1 ? 5 : 9);
  const double server_s = timed.server_s;
  if (!status.ok()) return status;
  const int errors = CountErrors(*setup, *b);
  const lattice::LweServerMemory memory = setup->server->memory();
  LweLine("lattice", absl::StrCat("lwe-", std::string(lattice::ProtocolName(s.protocol))), s, batch,
          threads)
      .Add("server_ms", server_s * 1e3)
      .Add("server_ms_per_query", server_s * 1e3 / batch)
      .Add("client_ms", (query_s + decode_s) * 1e3)
      .Add("client_query_ms", query_s * 1e3)
      .Add("client_prepare_query_ms", prepare_query_s * 1e3)
      .Add("client_finish_query_ms", finish_query_s * 1e3)
      .Add("client_decode_ms", decode_s * 1e3)
      .Add("query_bytes", 4 * s.query_words())
      .Add("response_bytes", 4 * s.answer_words())
      .Add("reusable_key_bytes", setup->server->hint_blob().size())
      .Add("floor_ms", timed.floor_s * 1e3)
      .Add("floor_ratio", timed.ratio)
      .Add("server_memory_bytes",
           memory.database + memory.hint_blob + memory.server_digits + memory.a2)
      .Add("hint_s", setup->hint_s)
      .Add("log2_failure", s.log2_failure)
      .Add("errors", errors)
      .Emit();
  return absl::OkStatus();
}

const char kLweAnswerHelp[] =
    "--rows --row-bytes --batch --threads --protocol=simple|double --backend=cpu|gpu "
    "[--records-per-column --lookups-per-hint --kernels=auto|all]: the LWE server's answer to a "
    "batch (random table, real queries, decoded and checked): gbps = database matrix bytes "
    "scanned per second, qps, roofline_ratio against the read bandwidth and the faster of the "
    "int32 and VNNI/4 multiply-add rates measured in this run";
const char kLatticeHelp[] =
    "--protocol=simple|double|exppack-s|exppack-d|hybrid|double-pack --rows --row-bytes --batch "
    "--threads [--backend=cpu|gpu: gpu for the packed protocols, product and engine on the "
    "device]: one "
    "protocol's costs "
    "below the sockets: server_ms (one batch), client_ms (query + decode of "
    "one lookup), query and response bytes, reusable_key_bytes (the hint; the packed protocols: "
    "the expansion keys), floor_ms (one read of the database's bytes on --threads) and "
    "floor_ratio (server time / floor_ms: 1 is the floor; on the CPU each call against the mean "
    "of the reads just before and after it, the median of the ratios), errors; exppack-s also "
    "deferred_levels (the "
    "CPU engine's, deferred_packing.h), server_expand_ms (one query's expansion on the CPU, its "
    "top levels when deferred), server_full_expand_ms (all 1,023 key switches), server_sums_ms "
    "(the engine's expansion and packing sums of one ciphertext), server_product_ms (the LWE "
    "product of the batch); exppack-s and hybrid also sums_schedule (after-product or "
    "alongside-product: where one query's sums ran, pack_simple.h's adaptive choice); hybrid also "
    "selection_bytes (the ciphertext of its bits, in query_bytes)";

SuiteRegistration lwe_answer("lwe-answer", kLweAnswerHelp, LweAnswer);
SuiteRegistration lattice_suite("lattice", kLatticeHelp, Lattice);

}  // namespace
}  // namespace veil::bench
