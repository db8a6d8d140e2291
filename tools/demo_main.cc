// veil-demo (scripts/demo, the README's first command): the whole private-lookup path on real
// data. Builds an embedding table whose rows are the MovieLens movies (vectors from a quick
// matrix factorisation of the ratings), starts two veil-server processes on loopback over TLS (a
// self-signed certificate made in the work folder; --tls=off for plaintext), fetches movies' rows
// privately, checks every row against the plaintext table, prints latency and bytes per lookup,
// and stops the servers. With --lwe (on by default) the same lookups also go to ONE lattice PIR
// server (lwe-simple or lwe-double), and both protocols' costs are printed side by side.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "embedding/table.h"
#include "embedding/table_builder.h"
#include "mobile_client/client.h"
#include "mobile_client/lwe_client.h"
#include "rpc/tls.h"
#include "tools/flags.h"
#include "tools/launcher.h"
#include "tools/tls_cert.h"
#include "training_tools/data/movielens.h"

ABSL_FLAG(std::string, data, "data/movielens", "the MovieLens data folder (scripts/fetch-data)");
ABSL_FLAG(std::string, work_dir, "build/demo", "where the table, certificate and logs go");
ABSL_FLAG(std::string, format, "fp32", "row format: fp32, fp16, int8 or fixed (pooled lookups)");
ABSL_FLAG(int, dim, 32, "embedding dimension of the movie vectors");
ABSL_FLAG(int, lookups, 50, "single-row private lookups to make");
ABSL_FLAG(std::string, backend, "cpu", "the servers' backend: cpu, gpu or auto");
ABSL_FLAG(std::string, tls, "on", "on: both servers over TLS (a self-signed certificate); off");
ABSL_FLAG(std::string, lwe, "simple",
          "also look the movies up from one LWE PIR server: simple (SimplePIR), double "
          "(DoublePIR) or off");

namespace {

using veil::client::CallStats;
using veil::client::Client;
using veil::client::TableInfo;

constexpr char kUsage[] =
    "veil-demo: private MovieLens embedding lookups through two local veil servers.\n"
    "Builds a table of movie vectors from the ratings, starts two veil-server processes on\n"
    "loopback (over TLS by default), fetches rows privately, checks every row against the\n"
    "plaintext table, prints latency and bytes per lookup, and stops the servers.\n"
    "\n"
    "example:\n"
    "  veil-demo --data=data/movielens --format=fixed --lookups=20";

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "veil-demo: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

struct Movies {
  veil::training::MovieLensRatings ratings;
  veil::training::DenseIndex items;
  std::vector<float> vectors;  // row r: the vector of movie items.IdOf(r)
};

// 1. Real data: the MovieLens ratings and a quick factorisation into movie vectors.
absl::StatusOr<Movies> LoadMovies(const std::string& dir, int dim) {
  std::printf("[1/5] loading MovieLens from %s\n", dir.c_str());
  auto ratings = veil::training::LoadMovieLens(dir);
  if (!ratings.ok()) return ratings.status();
  Movies m{*std::move(ratings), {}, {}};
  m.items = veil::training::DenseIndex::FromMovies(m.ratings.ratings);
  std::printf("      %zu ratings, %d users, %d movies; factorising (dim %d)\n",
              m.ratings.ratings.size(), m.ratings.num_users, m.items.size(), dim);
  m.vectors = veil::training::QuickFactorize(m.ratings.ratings, m.items, dim, /*epochs=*/10, 1);
  return m;
}

// 3. Two servers on loopback, one per party, over TLS with a certificate made here (a real
// deployment uses its operator's certificates; see README) unless `tls` is off.
absl::Status StartServers(const std::string& table_path, const std::string& work_dir,
                          const std::string& backend, bool tls,
                          std::unique_ptr<veil::tools::ServerProcess> (&servers)[2],
                          veil::tools::CertificateFiles& certificate) {
  std::printf("[3/5] two servers on loopback, %s\n", tls ? "over TLS" : "in plaintext");
  if (tls) {
    auto made =
        veil::tools::WriteSelfSignedCertificate(work_dir + "/tls", {"127.0.0.1", "localhost"});
    if (!made.ok()) return made.status();
    certificate = *made;
    std::printf("      self-signed ECDSA P-256 certificate %s (for 127.0.0.1 and localhost)\n",
                certificate.cert_path.c_str());
  }
  for (int party = 0; party < 2; ++party) {
    veil::tools::ServerProcessOptions o;
    o.binary = veil::tools::ServerBinaryNextToSelf();
    o.party = party;
    o.table_path = table_path;
    o.backend = backend;
    o.log_path = absl::StrCat(work_dir, "/server", party, ".log");
    o.tls_cert_path = certificate.cert_path;
    o.tls_key_path = certificate.key_path;
    auto started = veil::tools::ServerProcess::Start(o);
    if (!started.ok()) return started.status();
    servers[party] = *std::move(started);
    std::printf("      server %d (party %d) listening on %s %s, log %s\n", party, party,
                servers[party]->address().c_str(),
                tls ? "over TLS" : "in plaintext (loopback only)", o.log_path.c_str());
  }
  return absl::OkStatus();
}

// The movies to look up: the five most rated, then random ones.
std::vector<int32_t> ChooseMovies(const Movies& m, int lookups) {
  std::map<int32_t, int> popularity;
  for (const auto& r : m.ratings.ratings) ++popularity[r.movie_id];
  std::vector<std::pair<int, int32_t>> by_count;
  for (auto [id, n] : popularity) by_count.push_back({n, id});
  std::sort(by_count.rbegin(), by_count.rend());
  std::vector<int32_t> movie_ids;
  for (int i = 0; i < std::min<int>(5, by_count.size()); ++i) {
    movie_ids.push_back(by_count[i].second);
  }
  absl::BitGen gen;
  while (static_cast<int>(movie_ids.size()) < lookups) {
    movie_ids.push_back(m.items.IdOf(absl::Uniform<int32_t>(gen, 0, m.items.size())));
  }
  return movie_ids;
}

struct LookupFigures {
  std::vector<double> latency_ms, up, down;
  int mismatches = 0;
  CallStats batch;  // one call with every lookup
};

// 4. Private lookups by movie id, one per call, then all in one call; every row checked.
absl::StatusOr<LookupFigures> LookUpMovies(Client& client, const veil::embedding::Table& table,
                                           const Movies& m, const std::vector<int32_t>& ids) {
  std::printf("[4/5] %zu private lookups by movie id (one row per call)\n", ids.size());
  const TableInfo& info = client.table();
  LookupFigures f;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t row = m.items.RowOf(ids[i]);
    auto words = client.LookupWords({static_cast<uint64_t>(row)});
    if (!words.ok()) return words.status();
    const CallStats s = client.last_call();
    f.latency_ms.push_back(s.latency_ms);
    f.up.push_back(s.bytes_up);
    f.down.push_back(s.bytes_down);
    auto plain = table.row(row).first(table.data_words());
    const bool exact = std::equal(plain.begin(), plain.end(), words->begin(), words->end());
    std::vector<float> got(info.dim);
    absl::Status decoded = veil::embedding::DecodeRow(info.format, info.frac_bits, info.dim, *words,
                                                      absl::MakeSpan(got));
    if (!exact || !decoded.ok()) ++f.mismatches;
    if (i < 8) {
      std::printf(
          "      movie %6d -> row %4d: [%+.3f %+.3f %+.3f ...] %s, %.2f ms, %llu B up, %llu B "
          "down\n",
          ids[i], row, got[0], info.dim > 1 ? got[1] : 0.f, info.dim > 2 ? got[2] : 0.f,
          exact ? "matches the table" : "MISMATCH", s.latency_ms,
          static_cast<unsigned long long>(s.bytes_up),
          static_cast<unsigned long long>(s.bytes_down));
    }
  }
  // A batch of the same movies in one call: the per-call envelope is shared.
  std::vector<uint64_t> batch;
  for (int32_t id : ids) batch.push_back(static_cast<uint64_t>(m.items.RowOf(id)));
  auto batched = client.LookupWords(batch);
  if (!batched.ok()) return batched.status();
  for (size_t i = 0; i < batch.size(); ++i) {
    auto plain = table.row(batch[i]).first(table.data_words());
    if (!std::equal(plain.begin(), plain.end(), batched->begin() + i * info.row_words)) {
      ++f.mismatches;
    }
  }
  f.batch = client.last_call();
  return f;
}

// The same lookups from ONE lattice PIR server (protocol lwe-simple or lwe-double) with the
// same certificate and row key: one row per call, then all in one call, every row checked.
// Returns the lines to print beside the two-server figures.
absl::StatusOr<std::string> LookUpOverLwe(const std::string& mode, const std::string& table_path,
                                          const std::string& work_dir, const std::string& key_path,
                                          const veil::tools::CertificateFiles& certificate,
                                          const veil::embedding::Table& table, const Movies& m,
                                          const std::vector<int32_t>& ids, int& mismatches) {
  const std::string protocol = "lwe-" + mode;
  veil::tools::ServerProcessOptions o;
  o.binary = veil::tools::ServerBinaryNextToSelf();
  o.protocol = protocol;
  o.table_path = table_path;
  o.log_path = work_dir + "/server-" + protocol + ".log";
  o.tls_cert_path = certificate.cert_path;
  o.tls_key_path = certificate.key_path;
  o.extra_args = {"--max_message_bytes=16777216"};  // DoublePIR answers are ~0.5-1 MB per row
  auto server = veil::tools::ServerProcess::Start(o);
  if (!server.ok()) return server.status();
  veil::client::LweClientOptions co;
  co.server = (*server)->address();
  co.protocol = protocol;
  co.tls_trusted_certs = certificate.cert_path;
  co.row_key_file = key_path;
  co.hint_cache_dir = work_dir + "/lwe-hints";
  auto client = veil::client::LweClient::Connect(co);
  if (!client.ok()) return client.status();
  const veil::client::LweTableInfo& info = (*client)->table();
  std::vector<double> latency, up, down;
  std::vector<uint64_t> rows;
  for (int32_t id : ids) rows.push_back(static_cast<uint64_t>(m.items.RowOf(id)));
  for (uint64_t row : rows) {
    auto words = (*client)->LookupWords({row});
    if (!words.ok()) return words.status();
    auto plain = table.row(row).first(table.data_words());
    if (!std::equal(plain.begin(), plain.end(), words->begin(), words->end())) ++mismatches;
    const CallStats s = (*client)->last_call();
    latency.push_back(s.latency_ms);
    up.push_back(s.bytes_up);
    down.push_back(s.bytes_down);
  }
  auto batched = (*client)->LookupWords(rows);
  if (!batched.ok()) return batched.status();
  for (size_t i = 0; i < rows.size(); ++i) {
    auto plain = table.row(rows[i]).first(table.data_words());
    if (!std::equal(plain.begin(), plain.end(), batched->begin() + i * info.row_words)) {
      ++mismatches;
    }
  }
  const CallStats b = (*client)->last_call();
  std::string lines = absl::StrFormat(
      "      one %s server (%llu x %llu database): median %.2f ms, %.0f B up and %.0f B down "
      "per lookup; %zu in 1 call: %.2f ms; hint %llu B downloaded once (%s)\n",
      protocol, static_cast<unsigned long long>(info.d1), static_cast<unsigned long long>(info.d0),
      Median(latency), Median(up), Median(down), rows.size(), b.latency_ms,
      static_cast<unsigned long long>(info.hint_bytes),
      (*client)->hint_from_cache() ? "this time read from the cache" : "then cached");
  client->reset();
  if (absl::Status s = (*server)->Stop(); !s.ok()) return s;
  return lines;
}

// Fixed-point tables also pool: the mean vector of one user's rated movies (EmbeddingBag), summed
// on the servers so that one row per server comes back. Returns the line to print.
absl::StatusOr<std::string> PoolOneUser(Client& client, const veil::embedding::Table& table,
                                        const Movies& m, int& mismatches) {
  const TableInfo& info = client.table();
  const int32_t user = m.ratings.ratings.front().user_id;
  std::vector<uint64_t> bag;
  for (const auto& r : m.ratings.ratings) {
    if (r.user_id == user && bag.size() < 64) bag.push_back(m.items.RowOf(r.movie_id));
  }
  const uint32_t bag_size = static_cast<uint32_t>(bag.size());
  auto sums = client.LookupPooledWords(bag, {bag_size}, {});
  if (!sums.ok()) return sums.status();
  const CallStats p = client.last_call();
  std::vector<uint32_t> expected(info.row_words, 0);
  for (uint64_t row : bag) {
    auto plain = table.row(row);
    for (uint32_t j = 0; j < info.row_words; ++j) expected[j] += plain[j];
  }
  if (*sums != expected) ++mismatches;
  std::vector<float> mean(info.dim);
  if (absl::Status s =
          veil::embedding::DecodePooledFixed(info.frac_bits, *sums, bag_size, absl::MakeSpan(mean));
      !s.ok()) {
    return s;
  }
  return absl::StrFormat(
      "      pooled: mean of user %d's %u movies [%+.3f %+.3f ...] %s, %.2f ms, %d B up, "
      "%d B down (one row per server)\n",
      user, bag_size, mean[0], info.dim > 1 ? mean[1] : 0.f,
      *sums == expected ? "matches the plaintext sum" : "MISMATCH", p.latency_ms, p.bytes_up,
      p.bytes_down);
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything makes OpenSSL allocate: its freed buffers (TLS records) are then wiped.
  veil::rpc::WipeOpenSslMemoryOnFree();
  veil::tools::ParseFlags(argc, argv, kUsage);
  const std::string work_dir = absl::GetFlag(FLAGS_work_dir);
  const std::string format_name = absl::GetFlag(FLAGS_format);
  const std::string tls_flag = absl::GetFlag(FLAGS_tls);
  const int dim = absl::GetFlag(FLAGS_dim), lookups = absl::GetFlag(FLAGS_lookups);
  const std::string lwe_flag = absl::GetFlag(FLAGS_lwe);
  if ((tls_flag != "on" && tls_flag != "off") || dim < 1 || lookups < 1 ||
      (lwe_flag != "simple" && lwe_flag != "double" && lwe_flag != "off")) {
    std::fprintf(stderr,
                 "veil-demo: --tls must be on or off, --lwe simple, double or off, --dim and "
                 "--lookups positive\n");
    return 2;
  }
  auto format = veil::embedding::ParseRowFormat(format_name);
  if (!format.ok()) return Fail("--format", format.status());

  auto movies = LoadMovies(absl::GetFlag(FLAGS_data), dim);
  if (!movies.ok()) return Fail("loading MovieLens (run scripts/fetch-data)", movies.status());

  // 2. The table file: row r holds the vector of movie items.IdOf(r).
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  const std::string table_path = work_dir + "/movielens." + format_name + ".veil";
  veil::embedding::TableOptions table_options;
  table_options.epoch = 1;
  // Every row ends with an authentication tag under a key only the client holds: a server that
  // answers from a corrupted table, or shifts its share, is caught instead of returning a wrong
  // row.
  table_options.row_key = veil::embedding::NewRowKey();
  const std::string key_path = table_path + ".rowkey";
  if (absl::Status s = veil::embedding::WriteRowKeyFile(key_path, *table_options.row_key);
      !s.ok()) {
    return Fail("writing the row key", s);
  }
  if (absl::Status s =
          veil::embedding::WriteTable(table_path, *format, dim, movies->vectors, table_options);
      !s.ok()) {
    return Fail("writing the table", s);
  }
  auto table = veil::embedding::Table::Open(table_path);
  if (!table.ok()) return Fail("opening the table", table.status());
  std::printf(
      "[2/5] wrote %s: %llu rows (movies), %s, %u words per row (%u of them the row's tag), "
      "digest %s...; the tag key, for the client only: %s\n",
      table_path.c_str(), static_cast<unsigned long long>((*table)->rows()), format_name.c_str(),
      (*table)->row_words(), (*table)->row_words() - (*table)->data_words(),
      (*table)->DigestHex().substr(0, 16).c_str(), key_path.c_str());

  const bool tls = tls_flag == "on";
  std::unique_ptr<veil::tools::ServerProcess> servers[2];
  veil::tools::CertificateFiles certificate;
  if (absl::Status s = StartServers(table_path, work_dir, absl::GetFlag(FLAGS_backend), tls,
                                    servers, certificate);
      !s.ok()) {
    return Fail("starting the servers", s);
  }
  veil::client::ClientOptions client_options;
  client_options.server0 = servers[0]->address();
  client_options.server1 = servers[1]->address();
  client_options.tls_trusted_certs = certificate.cert_path;
  client_options.row_key_file = key_path;
  auto client = Client::Connect(client_options);
  if (!client.ok()) return Fail("connecting", client.status());
  // kj 0.9.2 does not report the negotiated protocol version, hence just "TLS".
  std::printf("      connected to both servers %s\n",
              tls ? "over TLS (certificates verified for 127.0.0.1)"
                  : "in PLAINTEXT (loopback only; --tls=on encrypts)");

  const std::vector<int32_t> ids = ChooseMovies(*movies, lookups);
  auto figures = LookUpMovies(**client, **table, *movies, ids);
  if (!figures.ok()) return Fail("lookups", figures.status());
  std::string pooled_line;
  if ((*client)->table().format == veil::embedding::RowFormat::kFixed32) {
    auto line = PoolOneUser(**client, **table, *movies, figures->mismatches);
    if (!line.ok()) return Fail("pooled lookup", line.status());
    pooled_line = *line;
  }

  std::string lwe_lines;
  if (lwe_flag != "off") {
    std::printf("      the same lookups from one lwe-%s server (single-server lattice PIR)\n",
                lwe_flag.c_str());
    auto lines = LookUpOverLwe(lwe_flag, table_path, work_dir, key_path, certificate, **table,
                               *movies, ids, figures->mismatches);
    if (!lines.ok()) return Fail("lookups over LWE", lines.status());
    lwe_lines = *lines;
  }

  std::printf("[5/5] results\n%s", pooled_line.c_str());
  std::printf(
      "      two dpf2 servers, %zu single lookups: median %.2f ms, %.0f B up and %.0f B down per "
      "lookup "
      "(row %u B; both servers)\n",
      ids.size(), Median(figures->latency_ms), Median(figures->up), Median(figures->down),
      (*client)->table().row_words * 4);
  std::printf(
      "      1 batched call of %zu lookups: %.2f ms, %.0f B up and %.0f B down per lookup\n",
      ids.size(), figures->batch.latency_ms,
      static_cast<double>(figures->batch.bytes_up) / ids.size(),
      static_cast<double>(figures->batch.bytes_down) / ids.size());
  std::printf("%s", lwe_lines.c_str());
  std::printf(
      "      every row's authentication tag checked by the client, and every row checked "
      "against the plaintext table: %s\n",
      figures->mismatches == 0 ? "all match"
                               : absl::StrCat(figures->mismatches, " MISMATCHES").c_str());
  client->reset();
  for (int party = 0; party < 2; ++party) {
    if (absl::Status s = servers[party]->Stop(); !s.ok()) {
      return Fail(absl::StrCat("stopping server ", party), s);
    }
  }
  std::printf("      servers stopped cleanly\n");
  return figures->mismatches == 0 ? 0 : 1;
}
