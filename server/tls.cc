#include "server/tls.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/buffer.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace veil::server {

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

template <auto Free>
struct OpenSslFree {
  template <typename T>
  void operator()(T* p) const {
    Free(p);
  }
};
using BioPtr = std::unique_ptr<BIO, OpenSslFree<BIO_free>>;
using X509Ptr = std::unique_ptr<X509, OpenSslFree<X509_free>>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, OpenSslFree<EVP_PKEY_free>>;
using GeneralNamesPtr = std::unique_ptr<GENERAL_NAMES, OpenSslFree<GENERAL_NAMES_free>>;
using BignumPtr = std::unique_ptr<BIGNUM, OpenSslFree<BN_free>>;
struct OpenSslBufferFree {
  void operator()(unsigned char* p) const { OPENSSL_free(p); }
};

// A private key's text, wiped when it goes.
struct SecretText {
  ~SecretText() { OPENSSL_cleanse(text.data(), text.size()); }
  std::string text;
};

// OpenSSL's error queue as one line (and cleared).
std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char line[256];
    ERR_error_string_n(e, line, sizeof(line));
    absl::StrAppend(&out, out.empty() ? "" : "; ", line);
  }
  return out.empty() ? "no detail from OpenSSL" : out;
}

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

absl::Status WriteWholeFile(const std::string& path, const char* data, size_t size, mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot create ", path));
  // An older file keeps its mode through O_CREAT: set it before writing anything secret.
  if (fchmod(fd, mode) != 0) {
    absl::Status s = absl::ErrnoToStatus(errno, absl::StrCat("cannot chmod ", path));
    close(fd);
    return s;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status s = absl::ErrnoToStatus(errno, absl::StrCat("cannot write ", path));
      close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot close ", path));
  return absl::OkStatus();
}

// A DNS name as a certificate may hold it: dot-separated labels of letters, digits and '-', not
// starting or ending with '-', at most 63 bytes each and 253 in all.
bool IsDnsName(const std::string& name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-') return false;
    }
  }
  return true;
}

bool AddName(GENERAL_NAMES* names, int type, ASN1_STRING* value) {
  GENERAL_NAME* name = GENERAL_NAME_new();
  if (name == nullptr) {
    ASN1_STRING_free(value);
    return false;
  }
  GENERAL_NAME_set0_value(name, type, value);
  if (sk_GENERAL_NAME_push(names, name) == 0) {
    GENERAL_NAME_free(name);
    return false;
  }
  return true;
}

bool AddDnsName(GENERAL_NAMES* names, const std::string& host) {
  ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
  if (dns == nullptr) return false;
  if (ASN1_STRING_set(dns, host.data(), static_cast<int>(host.size())) != 1) {
    ASN1_IA5STRING_free(dns);
    return false;
  }
  return AddName(names, GEN_DNS, dns);
}

bool AddExtension(X509* cert, X509V3_CTX* ctx, int nid, const char* value) {
  X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, ctx, nid, value);
  if (ext == nullptr) return false;
  const bool added = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added;
}

}  // namespace

absl::StatusOr<std::unique_ptr<kj::TlsContext>> MakeServerTlsContext(const std::string& cert_path,
                                                                     const std::string& key_path) {
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

absl::StatusOr<CertificateFiles> WriteSelfSignedCertificate(const std::string& dir,
                                                            const std::vector<std::string>& hosts,
                                                            absl::Duration validity) {
  if (hosts.empty()) {
    return absl::InvalidArgumentError("a certificate needs at least one host name or IP address");
  }
  if (validity <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the validity must be positive");
  }
  GeneralNamesPtr names(sk_GENERAL_NAME_new_null());
  if (names == nullptr) return absl::InternalError(OpenSslErrors());
  for (const std::string& host : hosts) {
    ASN1_OCTET_STRING* ip = a2i_IPADDRESS(host.c_str());
    if (ip != nullptr) {
      if (!AddName(names.get(), GEN_IPADD, ip)) return absl::InternalError(OpenSslErrors());
    } else if (!IsDnsName(host)) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"", host, "\" is neither an IP address nor a DNS name"));
    }
    // IP literals too (see the header): kj checks every name as a DNS entry.
    if (!AddDnsName(names.get(), host)) return absl::InternalError(OpenSslErrors());
  }
  ERR_clear_error();

  EvpPkeyPtr key(EVP_EC_gen("P-256"));
  X509Ptr cert(X509_new());
  BignumPtr serial(BN_new());
  if (key == nullptr || cert == nullptr || serial == nullptr) {
    return absl::InternalError(absl::StrCat("key generation failed: ", OpenSslErrors()));
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  // A common name is at most 64 bytes; the subjectAltName is what clients check anyway.
  const std::string common_name = hosts[0].size() <= 64 ? hosts[0] : "veil-server";
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert.get(), cert.get(), nullptr, nullptr, 0);
  const bool built =
      X509_set_version(cert.get(), X509_VERSION_3) == 1 &&
      // 127 random bits: positive, unique in practice, within RFC 5280's 20 bytes.
      BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1 &&
      BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(cert.get())) != nullptr &&
      // Valid from an hour ago, so that a peer whose clock is a little behind accepts it.
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) != nullptr &&
      X509_gmtime_adj(X509_getm_notAfter(cert.get()),
                      static_cast<long>(absl::ToInt64Seconds(validity))) != nullptr &&
      X509_NAME_add_entry_by_txt(subject, "O", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>("veil"), -1, -1, 0) == 1 &&
      X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(common_name.c_str()), -1,
                                 -1, 0) == 1 &&
      X509_set_issuer_name(cert.get(), subject) == 1 &&
      X509_set_pubkey(cert.get(), key.get()) == 1 &&
      AddExtension(cert.get(), &ctx, NID_basic_constraints, "critical,CA:FALSE") &&
      AddExtension(cert.get(), &ctx, NID_key_usage, "critical,digitalSignature") &&
      AddExtension(cert.get(), &ctx, NID_ext_key_usage, "serverAuth") &&
      AddExtension(cert.get(), &ctx, NID_subject_key_identifier, "hash") &&
      // Names the signing key: certificates of the same subject (two servers' "127.0.0.1") can
      // then share one trust file, where OpenSSL would otherwise try the first of that subject.
      AddExtension(cert.get(), &ctx, NID_authority_key_identifier, "keyid:always") &&
      X509_add1_ext_i2d(cert.get(), NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) ==
          1 &&
      X509_sign(cert.get(), key.get(), EVP_sha256()) > 0;
  if (!built) return absl::InternalError(absl::StrCat("certificate: ", OpenSslErrors()));

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  CertificateFiles files{dir + "/server.pem", dir + "/server.key"};

  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  // The key's PEM goes through OpenSSL's secure heap and is wiped before it is freed.
  BioPtr key_bio(BIO_new(BIO_s_secmem()));
  if (cert_bio == nullptr || key_bio == nullptr ||
      PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1 ||
      PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr) !=
          1) {
    return absl::InternalError(absl::StrCat("PEM encoding: ", OpenSslErrors()));
  }
  BUF_MEM* cert_text = nullptr;
  BUF_MEM* key_text = nullptr;
  BIO_get_mem_ptr(cert_bio.get(), &cert_text);
  BIO_get_mem_ptr(key_bio.get(), &key_text);
  absl::Status status = WriteWholeFile(files.key_path, key_text->data, key_text->length, 0600);
  OPENSSL_cleanse(key_text->data, key_text->length);
  if (!status.ok()) return status;
  status = WriteWholeFile(files.cert_path, cert_text->data, cert_text->length, 0644);
  if (!status.ok()) return status;
  return files;
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

}  // namespace veil::server
