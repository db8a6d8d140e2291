// Test fixtures for the end-to-end tests: random table files, self-signed certificates, and real
// veil-server processes on loopback (two dpf2 parties, one bfv-bag or one LWE server; port 0,
// plaintext or TLS), found through the build's VEIL_SERVER_BINARY path.
#ifndef VEIL_TESTS_SERVER_TWO_SERVERS_H_
#define VEIL_TESTS_SERVER_TWO_SERVERS_H_

#include <capnp/capability.h>
#include <kj/async.h>
#include <netinet/in.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "embedding/row_format.h"
#include "embedding/row_tag.h"
#include "rpc/tls.h"
#include "rpc/veil.capnp.h"
#include "tools/launcher.h"
#include "tools/tls_cert.h"

namespace veil::testing {

// A fresh path under the test's temporary directory.
std::string TempPath(const std::string& name);

// Writes a table of rows x dim values drawn uniformly from [-2, 2) with `seed` (rows tagged with
// tags of kind `kind` under `row_key` when given); returns its path.
absl::StatusOr<std::string> WriteRandomTable(
    const std::string& name, embedding::RowFormat format, uint64_t rows, uint32_t dim,
    uint64_t seed, uint64_t epoch = 1, const embedding::RowKey* row_key = nullptr,
    embedding::RowTag kind = embedding::RowTag::kSipHash64Shape);

// A copy (at TempPath(name)) of table `path` with the header's epoch set to `epoch`, its tag
// kind to `kind` and (if `frac_bits` >= 0) its fractional bits to `frac_bits`, the digest
// recomputed (anyone can: it is not keyed). With `key` every row's tag is recomputed for them
// (kSipHash64: what an older veil table build wrote); without, the rows are left as they are: an
// older version relabelled as a newer one, or rows relabelled to be read otherwise, as a hostile
// operator can.
std::string RewriteTable(const std::string& path, const std::string& name, uint64_t epoch,
                         embedding::RowTag kind, const embedding::RowKey* key, int frac_bits = -1);

// 127.0.0.1:`port` as a socket address (port 0: any).
sockaddr_in LoopbackAddress(int port);
// A TCP connection to 127.0.0.1:`port` (the caller closes it), or -1.
int ConnectLoopback(int port);

// The port of the metrics endpoint a server started with --metrics=127.0.0.1:0 listens on, read
// from its log at `log_path` (the line it writes before it prints its own port, so any time after
// ServerProcess::Start). NOT_FOUND if the log has no such line.
absl::StatusOr<int> MetricsPort(const std::string& log_path);
// GET `path` from 127.0.0.1:`port` over a plain socket (HTTP/1.0); the whole response, headers
// included.
absl::StatusOr<std::string> HttpGet(int port, const std::string& path);
// The samples of a Prometheus text exposition: "name{labels}" -> value.
using Samples = std::map<std::string, double>;
// Scrapes a server's metrics endpoint (--metrics=127.0.0.1:`port`).
absl::StatusOr<Samples> Scrape(int port);
// The sample's value, 0 if absent.
double Sample(const Samples& samples, const std::string& key);

// A fresh self-signed certificate and key (tools/tls_cert.h) in a new temporary folder, for
// `hosts`.
absl::StatusOr<tools::CertificateFiles> MakeCertificate(const std::vector<std::string>& hosts = {
                                                            "127.0.0.1", "localhost"});

// Server 0 serves table0, server 1 table1 (the same file unless a test wants a mismatch).
struct TwoServers {
  std::unique_ptr<tools::ServerProcess> server[2];
  std::string address(int party) const { return server[party]->address(); }
  std::string tls_cert;  // the certificate both servers present (clients trust it); "": plaintext
};
// With `tls`, both servers serve TLS with that certificate and key.
absl::StatusOr<TwoServers> StartTwoServers(const std::string& table0, const std::string& table1,
                                           const std::vector<std::string>& extra_args = {},
                                           const tools::CertificateFiles* tls = nullptr);

// The table versions (epochs) a running dpf2 server serves, oldest first, from its `config`.
absl::StatusOr<std::vector<uint64_t>> ServedEpochs(const tools::ServerProcess& server);
// Polls ServedEpochs until it equals `want`; DEADLINE_EXCEEDED (naming what it saw) after
// `timeout`. With ServerProcess::RollTable: a roll, and its end.
absl::Status WaitForEpochs(const tools::ServerProcess& server, const std::vector<uint64_t>& want,
                           absl::Duration timeout = absl::Seconds(30));

// One bfv-bag server (veil-server --protocol=bfv-bag) on `table`, which must be fixed-point; with
// `tls`, it serves TLS with that certificate and key. `log_path`: where its log goes ("": stderr).
absl::StatusOr<std::unique_ptr<tools::ServerProcess>> StartBagServer(
    const std::string& table, const std::vector<std::string>& extra_args = {},
    const tools::CertificateFiles* tls = nullptr, const std::string& log_path = "");

// One LWE server (veil-server --protocol=lwe-simple, lwe-double or lwe-exppack-s) on `table`; its
// hint is computed in memory (--lwe_hint_cache=false) unless extra_args say otherwise.
absl::StatusOr<std::unique_ptr<tools::ServerProcess>> StartLweServer(
    const std::string& table, const std::string& protocol,
    const std::vector<std::string>& extra_args = {}, const std::string& log_path = "");

// A stand-in's `hello` (every protocol's interface extends VeilServer): `protocol` at `version`.
kj::Promise<void> AnswerHello(
    capnp::CallContext<rpc::VeilServer::HelloParams, rpc::VeilServer::HelloResults> context,
    const std::string& protocol, uint16_t version = rpc::PROTOCOL_VERSION);

// A stand-in server that says what a test wants: the capability `make` returns (called on the
// server's own thread) served on a loopback port from that thread until destroyed.
class StandInServer {
 public:
  explicit StandInServer(std::function<capnp::Capability::Client()> make);
  ~StandInServer();
  StandInServer(const StandInServer&) = delete;
  StandInServer& operator=(const StandInServer&) = delete;
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  std::thread thread_;
  absl::Notification started_;
  unsigned port_ = 0;
  kj::Own<kj::CrossThreadPromiseFulfiller<void>> stop_;
};

}  // namespace veil::testing

#endif  // VEIL_TESTS_SERVER_TWO_SERVERS_H_
