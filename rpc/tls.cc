#include "rpc/tls.h"

#include "rpc/openssl_util.h"

#include <fcntl.h>
#include <malloc.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace veil::rpc {

const char kPlaintextRisk[] =
    "anyone who can read the connections to both servers (the client's Wi-Fi, its ISP, a proxy) "
    "adds what they carry (the two DPF keys of a lookup, or the two answer shares) and learns "
    "every queried row";

const char kTls12Ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

namespace {

// Larger PEM files are refused before they are read (the Debian CA bundle is ~220 KB).
constexpr off_t kMaxPemBytes = 4 << 20;

// A private key's text, wiped when it goes.
struct SecretText {
  ~SecretText() { OPENSSL_cleanse(text.data(), text.size()); }
  std::string text;
};

// Reads a whole PEM file into `out`, sized once so that no partial copy is left behind.
absl::Status ReadPemFile(const std::string& path, const char* what, std::string& out) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", what, " ", path));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    absl::Status s = absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path));
    close(fd);
    return s;
  }
  if (st.st_size > kMaxPemBytes) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(what, " ", path, " holds ", st.st_size,
                                                   " bytes; a PEM file here is at most ",
                                                   kMaxPemBytes));
  }
  out.assign(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(done);  // shrinking never reallocates
  return absl::OkStatus();
}

// The certificates of a PEM text, in order. INVALID_ARGUMENT if there is none or one is malformed.
absl::StatusOr<std::vector<X509Ptr>> ParseCertificates(const std::string& pem,
                                                       const std::string& path) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return absl::InternalError(OpenSslErrors());
  std::vector<X509Ptr> certs;
  ERR_clear_error();
  for (;;) {
    X509Ptr cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (cert == nullptr) break;
    certs.push_back(std::move(cert));
  }
  // The loop ends with "no start line" at the end of the text; anything else is a bad certificate.
  const unsigned long last = ERR_peek_last_error();
  if (ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
    ERR_clear_error();
  } else if (last != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds a malformed certificate: ", OpenSslErrors()));
  }
  if (certs.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\")"));
  }
  return certs;
}

int NoPassword(char*, int, int, void*) { return 0; }

kj::TlsContext::Options BaseOptions() {
  kj::TlsContext::Options options;
  options.useSystemTrustStore = false;
  options.minVersion = kj::TlsVersion::TLS_1_2;
  options.cipherList = kTls12Ciphers;
  return options;
}

}  // namespace

namespace {

// OpenSSL's allocator, wiping what it frees. malloc_usable_size: the whole block, whatever
// OpenSSL asked for.
void* WipingMalloc(size_t bytes, const char*, int) { return std::malloc(bytes); }

void WipingFree(void* p, const char*, int) {
  if (p == nullptr) return;
  sodium_memzero(p, malloc_usable_size(p));
  std::free(p);
}

void* WipingRealloc(void* p, size_t bytes, const char* file, int line) {
  if (p == nullptr) return std::malloc(bytes);
  if (bytes == 0) {
    WipingFree(p, file, line);
    return nullptr;
  }
  void* moved = std::malloc(bytes);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, p, std::min(bytes, malloc_usable_size(p)));
  WipingFree(p, file, line);
  return moved;
}

}  // namespace

bool WipeOpenSslMemoryOnFree() {
  // Refused (harmlessly) once OpenSSL has allocated memory.
  static std::once_flag once;
  std::call_once(once, [] { CRYPTO_set_mem_functions(WipingMalloc, WipingRealloc, WipingFree); });
  CRYPTO_malloc_fn m;
  CRYPTO_realloc_fn r;
  CRYPTO_free_fn f;
  CRYPTO_get_mem_functions(&m, &r, &f);
  return f == WipingFree;
}

absl::StatusOr<std::unique_ptr<kj::TlsContext>> MakeServerTlsContext(const std::string& cert_path,
                                                                     const std::string& key_path) {
  WipeOpenSslMemoryOnFree();
  std::string cert_pem;
  if (absl::Status s = ReadPemFile(cert_path, "certificate", cert_pem); !s.ok()) return s;
  SecretText key_pem;
  if (absl::Status s = ReadPemFile(key_path, "private key", key_pem.text); !s.ok()) return s;

  // OpenSSL checks first, for messages that name the file and the problem (kj would only say
  // "OpenSSL error"), and because kj never checks that the key belongs to the certificate.
  auto chain = ParseCertificates(cert_pem, cert_path);
  if (!chain.ok()) return chain.status();
  {
    BioPtr bio(BIO_new_mem_buf(key_pem.text.data(), static_cast<int>(key_pem.text.size())));
    if (bio == nullptr) return absl::InternalError(OpenSslErrors());
    EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassword, nullptr));
    if (key == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(key_path,
                       " holds no usable PEM private key (encrypted keys are not "
                       "supported): ",
                       OpenSslErrors()));
    }
    if (X509_check_private_key((*chain)[0].get(), key.get()) != 1) {
      ERR_clear_error();
      return absl::InvalidArgumentError(absl::StrCat(
          "the private key in ", key_path, " does not belong to the certificate in ", cert_path));
    }
  }
  try {
    kj::TlsKeypair keypair{kj::TlsPrivateKey(kj::StringPtr(key_pem.text.c_str())),
                           kj::TlsCertificate(kj::StringPtr(cert_pem.c_str()))};
    kj::TlsContext::Options options = BaseOptions();
    options.defaultKeypair = keypair;
    return std::make_unique<kj::TlsContext>(kj::mv(options));
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("TLS set-up with ", cert_path, " and ", key_path,
                                                   " failed: ", e.getDescription().cStr()));
  }
}

absl::StatusOr<std::unique_ptr<kj::TlsContext>> MakeClientTlsContext(
    const std::string& trusted_certs_path) {
  WipeOpenSslMemoryOnFree();
  std::string pem;
  if (absl::Status s = ReadPemFile(trusted_certs_path, "trusted certificates", pem); !s.ok()) {
    return s;
  }
  auto certs = ParseCertificates(pem, trusted_certs_path);
  if (!certs.ok()) return certs.status();
  try {
    // One kj::TlsCertificate per certificate: kj trusts only the first certificate of each.
    std::vector<kj::TlsCertificate> trusted;
    trusted.reserve(certs->size());
    for (const X509Ptr& cert : *certs) {
      unsigned char* der = nullptr;
      const int size = i2d_X509(cert.get(), &der);
      if (size <= 0) return absl::InternalError(OpenSslErrors());
      std::unique_ptr<unsigned char, OpenSslBufferFree> owned(der);
      trusted.emplace_back(kj::arrayPtr(der, static_cast<size_t>(size)));
    }
    kj::TlsContext::Options options = BaseOptions();
    options.trustedCertificates = kj::arrayPtr(trusted.data(), trusted.size());
    return std::make_unique<kj::TlsContext>(kj::mv(options));
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("TLS set-up with ", trusted_certs_path,
                                                   " failed: ", e.getDescription().cStr()));
  }
}

bool IsLoopback(const struct sockaddr* address, socklen_t length) {
  if (address == nullptr || length < static_cast<socklen_t>(sizeof(sa_family_t))) return false;
  switch (address->sa_family) {
    case AF_UNIX:
      return true;
    case AF_INET: {
      if (length < static_cast<socklen_t>(sizeof(sockaddr_in))) return false;
      sockaddr_in in;
      std::memcpy(&in, address, sizeof(in));
      return (ntohl(in.sin_addr.s_addr) >> 24) == 127;
    }
    case AF_INET6: {
      if (length < static_cast<socklen_t>(sizeof(sockaddr_in6))) return false;
      sockaddr_in6 in6;
      std::memcpy(&in6, address, sizeof(in6));
      if (IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr)) return true;
      return IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 127;
    }
    default:
      return false;
  }
}

std::string HostOf(absl::string_view address) {
  if (!address.empty() && address.front() == '[') {
    const size_t close = address.find(']');
    return std::string(
        address.substr(1, close == absl::string_view::npos ? absl::string_view::npos : close - 1));
  }
  const size_t colon = address.find(':');
  // No colon: a bare host; several: a bare IPv6 literal.
  if (colon == absl::string_view::npos || address.find(':', colon + 1) != absl::string_view::npos) {
    return std::string(address);
  }
  return std::string(address.substr(0, colon));
}

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(e, line, sizeof(line));
    absl::StrAppend(&out, out.empty() ? "" : "; ", line);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

}  // namespace veil::rpc
