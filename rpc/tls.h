// Transport security, shared by both ends of the wire (veil-server and the client library): TLS
// contexts over kj's TLS (OpenSSL) and the loopback rule for plaintext. Making certificates is an
// operator's job (tools/tls_cert.h), which the phone library does not link.
//
// Why TLS at all: each server alone learns nothing from its DPF key, but whoever reads the
// connections to BOTH servers (the phone's Wi-Fi, its ISP, a proxy) holds both keys of every
// lookup, whose evaluations add up to the point function of the row, and both answer shares, which
// add up to the row itself. So outside loopback every connection is TLS with an authenticated
// server, unless an operator explicitly accepts plaintext.
//
// Protocol version: kj 0.9.2's TlsContext::Options::minVersion stops at TLS_1_2 (its TlsVersion
// enum has no TLS 1.3) and the context does not expose its SSL_CTX, so the minimum is TLS 1.2,
// restricted to ECDHE key exchange with AEAD ciphers (kTls12Ciphers). kj sets no maximum, so two
// OpenSSL 3 ends negotiate TLS 1.3 (tests/rpc/tls_test.cc checks both facts).
#ifndef VEIL_RPC_TLS_H_
#define VEIL_RPC_TLS_H_

#include <kj/compat/tls.h>
#include <sys/socket.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace veil::rpc {

// Why plaintext is refused outside loopback, for error messages and warnings.
extern const char kPlaintextRisk[];

// TLS 1.2 cipher suites allowed (forward secrecy and AEAD only: Mozilla's "intermediate" list
// without classic DH). TLS 1.3 suites are OpenSSL's defaults, all AEAD.
extern const char kTls12Ciphers[];

// A server's side: its certificate (chain, leaf first) and private key, PEM files.
// Returns NOT_FOUND / PERMISSION_DENIED if a file cannot be read, INVALID_ARGUMENT if it holds no
// PEM certificate / private key or the key does not belong to the certificate.
absl::StatusOr<std::unique_ptr<kj::TlsContext>> MakeServerTlsContext(const std::string& cert_path,
                                                                     const std::string& key_path);

// A client's side: trusts the certificates of `trusted_certs_path` (one or more PEM certificates:
// the servers' self-signed certificates or the operator's CA) and nothing else (not the system's
// store: pass /etc/ssl/certs/ca-certificates.crt to trust the public CAs).
// Returns NOT_FOUND / PERMISSION_DENIED if the file cannot be read, INVALID_ARGUMENT if it holds
// no PEM certificate or a malformed one.
absl::StatusOr<std::unique_ptr<kj::TlsContext>> MakeClientTlsContext(
    const std::string& trusted_certs_path);

// Makes OpenSSL wipe every buffer it frees or moves (realloc), process-wide: its TLS record
// buffers hold the decrypted keys a server reads and the shares a client reads, and kj's
// TlsContext does not let us set SSL_OP_CLEANSE_PLAINTEXT on its connections. OpenSSL accepts
// this only before its first allocation, so binaries call it first thing in main(), and the TLS
// contexts below call it too (enough when nothing in the process used OpenSSL before). Returns
// whether wiping is on (false: OpenSSL had already allocated memory).
bool WipeOpenSslMemoryOnFree();

// Whether a socket address stays on this machine: IPv4 127.0.0.0/8, IPv6 ::1, IPv4-mapped
// 127.0.0.0/8, and Unix sockets. The wildcard addresses (0.0.0.0, ::) are not loopback.
bool IsLoopback(const struct sockaddr* address, socklen_t length);

// The host part of "HOST:PORT", "[IPV6]:PORT" or "HOST" (no brackets): the name a client expects
// in a server's certificate unless told otherwise.
std::string HostOf(absl::string_view address);

}  // namespace veil::rpc

#endif  // VEIL_RPC_TLS_H_
