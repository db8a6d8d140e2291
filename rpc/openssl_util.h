// OpenSSL helpers shared by the TLS contexts (rpc/tls.cc) and the certificate tool
// (tools/tls_cert.cc): owning pointers and the error queue as text.
#ifndef VEIL_RPC_OPENSSL_UTIL_H_
#define VEIL_RPC_OPENSSL_UTIL_H_

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>
#include <string>

namespace veil::rpc {

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

// OpenSSL's error queue as one line (and cleared).
std::string OpenSslErrors();

}  // namespace veil::rpc

#endif  // VEIL_RPC_OPENSSL_UTIL_H_
