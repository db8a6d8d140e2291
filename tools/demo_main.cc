// veil-demo (scripts/demo, the README's first command): the whole private-lookup path on real
// data. Builds an embedding table whose rows are the MovieLens movies (vectors from a quick
// matrix factorisation of the ratings), starts two veil-server processes on loopback over TLS (a
// self-signed certificate made in the work folder; --tls=off for plaintext), fetches movies' rows
// privately, checks every row against the plaintext table, prints latency and bytes per lookup,
// and stops the servers.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/client.h"
#include "tools/launcher.h"
#include "rpc/tls.h"
#include "tools/tls_cert.h"
#include "training_tools/data/movielens.h"

namespace {

struct DemoFlags {
  std::string data_dir = "data/movielens";
  std::string work_dir = "build/demo";
  std::string format = "fp32";
  int dim = 32;
  int lookups = 50;
  std::string backend = "cpu";
  bool tls = true;
};

bool ParseFlags(int argc, char** argv, DemoFlags* flags) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) return false;
    std::string name = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    if (name == "data") {
      flags->data_dir = value;
    } else if (name == "work-dir") {
      flags->work_dir = value;
    } else if (name == "format") {
      flags->format = value;
    } else if (name == "backend") {
      flags->backend = value;
    } else if (name == "tls") {
      if (value != "on" && value != "off") return false;
      flags->tls = value == "on";
    } else if (name == "dim") {
      if (!absl::SimpleAtoi(value, &flags->dim) || flags->dim < 1) return false;
    } else if (name == "lookups") {
      if (!absl::SimpleAtoi(value, &flags->lookups) || flags->lookups < 1) return false;
    } else {
      return false;
    }
  }
  return true;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "veil-demo: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  DemoFlags flags;
  if (!ParseFlags(argc, argv, &flags)) {
    std::fprintf(stderr,
                 "usage: veil-demo [--data=data/movielens] [--work-dir=build/demo] "
                 "[--format=fp32|fp16|int8|fixed] [--dim=32] [--lookups=50] "
                 "[--backend=cpu|gpu|auto] [--tls=on|off]\n");
    return 2;
  }
  auto format = veil::embedding::ParseRowFormat(flags.format);
  if (!format.ok()) return Fail("--format", format.status());

  // 1. Real data: the MovieLens ratings and a quick factorisation into movie vectors.
  std::printf("[1/5] loading MovieLens from %s\n", flags.data_dir.c_str());
  auto ratings = veil::training::LoadMovieLens(flags.data_dir);
  if (!ratings.ok()) return Fail("loading MovieLens (run scripts/fetch-data)", ratings.status());
  veil::training::DenseIndex items = veil::training::DenseIndex::FromMovies(ratings->ratings);
  std::printf("      %zu ratings, %d users, %d movies; factorising (dim %d)\n",
              ratings->ratings.size(), ratings->num_users, items.size(), flags.dim);
  std::vector<float> vectors =
      veil::training::QuickFactorize(ratings->ratings, items, flags.dim, /*epochs=*/10, 1);

  // 2. The table file: row r holds the vector of movie items.IdOf(r).
  std::error_code ec;
  std::filesystem::create_directories(flags.work_dir, ec);
  std::string table_path = flags.work_dir + "/movielens." + flags.format + ".veil";
  veil::embedding::TableOptions table_options;
  table_options.epoch = 1;
  if (absl::Status s =
          veil::embedding::WriteTable(table_path, *format, flags.dim, vectors, table_options);
      !s.ok()) {
    return Fail("writing the table", s);
  }
  auto table = veil::embedding::Table::Open(table_path);
  if (!table.ok()) return Fail("opening the table", table.status());
  std::printf("[2/5] wrote %s: %llu rows (movies), %s, %u words per row, digest %s...\n",
              table_path.c_str(), static_cast<unsigned long long>((*table)->rows()),
              flags.format.c_str(), (*table)->row_words(),
              (*table)->DigestHex().substr(0, 16).c_str());

  // 3. Two servers on loopback, one per party, over TLS with a certificate made here (a real
  // deployment uses its operator's certificates; see README).
  std::printf("[3/5] two servers on loopback, %s\n", flags.tls ? "over TLS" : "in plaintext");
  veil::tools::CertificateFiles tls;
  if (flags.tls) {
    auto made = veil::tools::WriteSelfSignedCertificate(flags.work_dir + "/tls",
                                                         {"127.0.0.1", "localhost"});
    if (!made.ok()) return Fail("making the TLS certificate", made.status());
    tls = *made;
    std::printf("      self-signed ECDSA P-256 certificate %s (for 127.0.0.1 and localhost)\n",
                tls.cert_path.c_str());
  }
  std::unique_ptr<veil::tools::ServerProcess> servers[2];
  for (int party = 0; party < 2; ++party) {
    veil::tools::ServerProcessOptions o;
    o.binary = veil::tools::ServerBinaryNextToSelf();
    o.party = party;
    o.table_path = table_path;
    o.backend = flags.backend;
    o.log_path = absl::StrCat(flags.work_dir, "/server", party, ".log");
    o.tls_cert_path = tls.cert_path;
    o.tls_key_path = tls.key_path;
    auto started = veil::tools::ServerProcess::Start(o);
    if (!started.ok()) return Fail(absl::StrCat("starting server ", party), started.status());
    servers[party] = *std::move(started);
    std::printf("      server %d (party %d) listening on %s %s, log %s\n", party, party,
                servers[party]->address().c_str(),
                flags.tls ? "over TLS" : "in plaintext (loopback only)", o.log_path.c_str());
  }

  // 4. Private lookups by movie id: popular and random movies, one lookup per call.
  veil::client::ClientOptions client_options;
  client_options.server0 = servers[0]->address();
  client_options.server1 = servers[1]->address();
  client_options.tls_trusted_certs = tls.cert_path;
  auto client = veil::client::Client::Connect(client_options);
  if (!client.ok()) return Fail("connecting", client.status());
  // kj 0.9.2 does not report the negotiated protocol version, hence just "TLS".
  std::printf("      connected to both servers %s\n",
              flags.tls ? "over TLS (certificates verified for 127.0.0.1)"
                        : "in PLAINTEXT (loopback only; --tls=on encrypts)");
  std::map<int32_t, int> popularity;
  for (const auto& r : ratings->ratings) ++popularity[r.movie_id];
  std::vector<std::pair<int, int32_t>> by_count;
  for (auto [id, n] : popularity) by_count.push_back({n, id});
  std::sort(by_count.rbegin(), by_count.rend());
  std::vector<int32_t> movie_ids;
  for (int i = 0; i < std::min<int>(5, by_count.size()); ++i)
    movie_ids.push_back(by_count[i].second);
  absl::BitGen gen;
  while (static_cast<int>(movie_ids.size()) < flags.lookups) {
    movie_ids.push_back(items.IdOf(absl::Uniform<int32_t>(gen, 0, items.size())));
  }
  std::printf("[4/5] %zu private lookups by movie id (one row per call)\n", movie_ids.size());

  const veil::client::TableInfo& info = (*client)->table();
  std::vector<double> latency_ms, up, down;
  int mismatches = 0;
  std::vector<float> expected(info.dim);
  for (size_t i = 0; i < movie_ids.size(); ++i) {
    int32_t row = items.RowOf(movie_ids[i]);
    auto words = (*client)->LookupWords({static_cast<uint64_t>(row)});
    if (!words.ok()) return Fail(absl::StrCat("lookup of movie ", movie_ids[i]), words.status());
    veil::client::CallStats s = (*client)->last_call();
    latency_ms.push_back(s.latency_ms);
    up.push_back(s.bytes_up);
    down.push_back(s.bytes_down);
    auto plain = (*table)->row(row);
    bool exact = std::equal(plain.begin(), plain.end(), words->begin());
    std::vector<float> got(info.dim);
    absl::Status decoded = veil::embedding::DecodeRow(info.format, info.frac_bits, info.dim, *words,
                                                      absl::MakeSpan(got));
    if (!exact || !decoded.ok()) ++mismatches;
    if (i < 8) {
      std::printf(
          "      movie %6d -> row %4d: [%+.3f %+.3f %+.3f ...] %s, %.2f ms, %llu B up, %llu B "
          "down\n",
          movie_ids[i], row, got[0], info.dim > 1 ? got[1] : 0.f, info.dim > 2 ? got[2] : 0.f,
          exact ? "matches the table" : "MISMATCH", s.latency_ms,
          static_cast<unsigned long long>(s.bytes_up),
          static_cast<unsigned long long>(s.bytes_down));
    }
  }
  // A batch of the same movies in one call: the per-call envelope is shared.
  std::vector<uint64_t> batch;
  for (int32_t id : movie_ids) batch.push_back(static_cast<uint64_t>(items.RowOf(id)));
  auto batched = (*client)->LookupWords(batch);
  if (!batched.ok()) return Fail("batched lookup", batched.status());
  for (size_t i = 0; i < batch.size(); ++i) {
    auto plain = (*table)->row(batch[i]);
    if (!std::equal(plain.begin(), plain.end(), batched->begin() + i * info.row_words))
      ++mismatches;
  }
  veil::client::CallStats b = (*client)->last_call();

  // Fixed-point tables also pool: the mean vector of one user's rated movies (EmbeddingBag), summed
  // on the servers so that one row per server comes back.
  std::string pooled_line;
  if (info.format == veil::embedding::RowFormat::kFixed32) {
    std::vector<uint64_t> bag;
    for (const auto& r : ratings->ratings) {
      if (r.user_id == ratings->ratings.front().user_id && bag.size() < 64) {
        bag.push_back(static_cast<uint64_t>(items.RowOf(r.movie_id)));
      }
    }
    const uint32_t bag_size = static_cast<uint32_t>(bag.size());
    auto sums = (*client)->LookupPooledWords(bag, {bag_size}, {});
    if (!sums.ok()) return Fail("pooled lookup", sums.status());
    veil::client::CallStats p = (*client)->last_call();
    std::vector<uint32_t> expected(info.row_words, 0);
    for (uint64_t row : bag) {
      auto plain = (*table)->row(row);
      for (uint32_t j = 0; j < info.row_words; ++j) expected[j] += plain[j];
    }
    if (*sums != expected) ++mismatches;
    std::vector<float> mean(info.dim);
    if (absl::Status s = veil::embedding::DecodePooledFixed(info.frac_bits, *sums, bag_size,
                                                            absl::MakeSpan(mean));
        !s.ok()) {
      return Fail("decoding the pooled row", s);
    }
    pooled_line = absl::StrFormat(
        "      pooled: mean of user %d's %u movies [%+.3f %+.3f ...] %s, %.2f ms, %d B up, "
        "%d B down (one row per server)\n",
        ratings->ratings.front().user_id, bag_size, mean[0], info.dim > 1 ? mean[1] : 0.f,
        *sums == expected ? "matches the plaintext sum" : "MISMATCH", p.latency_ms, p.bytes_up,
        p.bytes_down);
  }

  std::printf("[5/5] results\n");
  std::printf("%s", pooled_line.c_str());
  std::printf(
      "      %zu single lookups: median %.2f ms, %.0f B up and %.0f B down per lookup "
      "(row %u B; both servers)\n",
      movie_ids.size(), Median(latency_ms), Median(up), Median(down), info.row_words * 4);
  std::printf(
      "      1 batched call of %zu lookups: %.2f ms, %.0f B up and %.0f B down per lookup\n",
      batch.size(), b.latency_ms, static_cast<double>(b.bytes_up) / batch.size(),
      static_cast<double>(b.bytes_down) / batch.size());
  std::printf("      every row checked against the plaintext table: %s\n",
              mismatches == 0 ? "all match" : absl::StrCat(mismatches, " MISMATCHES").c_str());

  client->reset();
  for (int party = 0; party < 2; ++party) {
    if (absl::Status s = servers[party]->Stop(); !s.ok()) {
      return Fail(absl::StrCat("stopping server ", party), s);
    }
  }
  std::printf("      servers stopped cleanly\n");
  return mismatches == 0 ? 0 : 1;
}
