// Self-signed TLS certificates for veil-server (`veil tls-cert`, the demo, benchmarks and tests):
// an operator's tool, kept out of the client library.
#ifndef VEIL_TOOLS_TLS_CERT_H_
#define VEIL_TOOLS_TLS_CERT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace veil::tools {

struct CertificateFiles {
  std::string cert_path;  // DIR/server.pem: the certificate, also what clients trust
  std::string key_path;   // DIR/server.key: the private key, mode 0600
};

// Generates an ECDSA P-256 key and a self-signed X.509 v3 certificate for `hosts` (DNS names and
// IPv4/IPv6 literals, all in its subjectAltName; the first is also its common name), valid from
// an hour ago for `validity`, and writes them to DIR/server.pem and DIR/server.key (creating DIR,
// replacing older files). IP literals are listed both as IP and as DNS entries, because kj 0.9.2
// checks the expected name with X509_VERIFY_PARAM_set1_host, which only compares DNS entries.
// Returns INVALID_ARGUMENT for no hosts or a host that is neither an IP literal nor a DNS name,
// INTERNAL if OpenSSL fails, and the file system's error if a file cannot be written.
absl::StatusOr<CertificateFiles> WriteSelfSignedCertificate(
    const std::string& dir, const std::vector<std::string>& hosts,
    absl::Duration validity = absl::Hours(24 * 365));

}  // namespace veil::tools

#endif  // VEIL_TOOLS_TLS_CERT_H_
