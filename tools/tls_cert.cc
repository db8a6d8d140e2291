#include "tools/tls_cert.h"

#include <fcntl.h>
#include <openssl/buffer.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "rpc/openssl_util.h"

namespace veil::tools {
namespace {

using rpc::BignumPtr;
using rpc::BioPtr;
using rpc::EvpPkeyPtr;
using rpc::GeneralNamesPtr;
using rpc::OpenSslErrors;
using rpc::X509Ptr;

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

}  // namespace veil::tools
