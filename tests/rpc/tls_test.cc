// Transport security (server/tls.h): self-signed certificates, TLS file checks, the loopback rule,
// and a real veil-server's TLS as an independent OpenSSL client sees it (protocol version, cipher
// suites, handshake timeout, refusing plaintext off loopback).
#include "rpc/tls.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/two_servers.h"
#include "tools/tls_cert.h"

namespace veil {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteText(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// The server's log once it holds `text` (it may log an event just after the peer sees it), or
// after a second.
std::string LogWith(const std::string& path, const std::string& text) {
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  std::string log = ReadText(path);
  while (log.find(text) == std::string::npos && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
    log = ReadText(path);
  }
  return log;
}

std::unique_ptr<X509, decltype(&X509_free)> LoadCertificate(const std::string& path) {
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(path.c_str(), "r"), BIO_free);
  X509* cert = bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr;
  return {cert, X509_free};
}

// "IP:127.0.0.1" / "DNS:localhost" for each subjectAltName entry.
std::vector<std::string> SubjectAltNames(X509* cert) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      const ASN1_IA5STRING* dns = name->d.dNSName;
      out.push_back(absl::StrCat(
          "DNS:", std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                              ASN1_STRING_length(dns))));
    } else if (name->type == GEN_IPADD) {
      const ASN1_OCTET_STRING* ip = name->d.iPAddress;
      char text[INET6_ADDRSTRLEN] = {};
      inet_ntop(ASN1_STRING_length(ip) == 4 ? AF_INET : AF_INET6, ASN1_STRING_get0_data(ip), text,
                sizeof(text));
      out.push_back(absl::StrCat("IP:", text));
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

TEST(SelfSignedCertificateTest, HoldsTheHostsAndAPrivateP256Key) {
  const std::string dir = testing::TempPath("cert");
  auto files =
      tools::WriteSelfSignedCertificate(dir, {"127.0.0.1", "::1", "localhost", "pir.example"});
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->cert_path, dir + "/server.pem");
  EXPECT_EQ(files->key_path, dir + "/server.key");
  struct stat st;
  ASSERT_EQ(stat(files->key_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  auto cert = LoadCertificate(files->cert_path);
  ASSERT_NE(cert, nullptr);
  // IP literals also as DNS entries: kj 0.9.2 compares the expected name with DNS entries only.
  EXPECT_THAT(SubjectAltNames(cert.get()),
              UnorderedElementsAre("IP:127.0.0.1", "DNS:127.0.0.1", "IP:::1", "DNS:::1",
                                   "DNS:localhost", "DNS:pir.example"));
  EXPECT_EQ(X509_check_host(cert.get(), "pir.example", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(cert.get(), "other.example", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_ip_asc(cert.get(), "::1", 0), 1);
  EXPECT_EQ(X509_get_version(cert.get()), X509_VERSION_3);
  EXPECT_EQ(X509_check_purpose(cert.get(), X509_PURPOSE_SSL_SERVER, 0), 1);
  EVP_PKEY* public_key = X509_get0_pubkey(cert.get());
  ASSERT_NE(public_key, nullptr);
  EXPECT_EQ(EVP_PKEY_get_base_id(public_key), EVP_PKEY_EC);
  EXPECT_EQ(EVP_PKEY_get_bits(public_key), 256);
  EXPECT_EQ(X509_verify(cert.get(), public_key), 1);  // self-signed

  std::unique_ptr<BIO, decltype(&BIO_free)> key_bio(BIO_new_file(files->key_path.c_str(), "r"),
                                                    BIO_free);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  ASSERT_NE(key, nullptr);
  EXPECT_EQ(X509_check_private_key(cert.get(), key.get()), 1);

  EXPECT_TRUE(rpc::MakeServerTlsContext(files->cert_path, files->key_path).ok());
  EXPECT_TRUE(rpc::MakeClientTlsContext(files->cert_path).ok());

  // A second run replaces both files (a new key), keeping the key private.
  ASSERT_EQ(chmod(files->key_path.c_str(), 0644), 0);
  const std::string first = ReadText(files->cert_path);
  ASSERT_TRUE(tools::WriteSelfSignedCertificate(dir, {"localhost"}).ok());
  EXPECT_NE(ReadText(files->cert_path), first);
  ASSERT_EQ(stat(files->key_path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(SelfSignedCertificateTest, BadHostsAreRefused) {
  const std::string dir = testing::TempPath("bad");
  EXPECT_TRUE(absl::IsInvalidArgument(tools::WriteSelfSignedCertificate(dir, {}).status()));
  for (const char* host : {"two words", "-lead.example", "a..b", "x_y.example", ""}) {
    auto files = tools::WriteSelfSignedCertificate(dir, {"localhost", host});
    EXPECT_TRUE(absl::IsInvalidArgument(files.status())) << host;
    EXPECT_THAT(files.status().message(), HasSubstr("neither an IP address nor a DNS name"));
  }
}

TEST(TlsFilesTest, UnusableFilesAreClearErrors) {
  auto a = testing::MakeCertificate();
  auto b = testing::MakeCertificate();
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string missing = testing::TempPath("missing.pem");
  const std::string junk = testing::TempPath("junk.pem");
  WriteText(junk, "not a certificate\n");
  const std::string broken = testing::TempPath("broken.pem");
  WriteText(broken, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n");

  auto status = rpc::MakeServerTlsContext(missing, a->key_path).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("cannot open certificate " + missing));
  status = rpc::MakeServerTlsContext(junk, a->key_path).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("holds no PEM certificate"));
  status = rpc::MakeServerTlsContext(broken, a->key_path).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("malformed certificate"));
  status = rpc::MakeServerTlsContext(a->cert_path, b->key_path).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("does not belong to the certificate"));
  status = rpc::MakeServerTlsContext(a->cert_path, a->cert_path).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("holds no usable PEM private key"));

  EXPECT_TRUE(absl::IsNotFound(rpc::MakeClientTlsContext(missing).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(rpc::MakeClientTlsContext(junk).status()));
}

sockaddr_storage Ipv4(const char* text) {
  sockaddr_storage storage = {};
  auto* in = reinterpret_cast<sockaddr_in*>(&storage);
  in->sin_family = AF_INET;
  inet_pton(AF_INET, text, &in->sin_addr);
  return storage;
}

sockaddr_storage Ipv6(const char* text) {
  sockaddr_storage storage = {};
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
  in6->sin6_family = AF_INET6;
  inet_pton(AF_INET6, text, &in6->sin6_addr);
  return storage;
}

TEST(AddressTest, LoopbackAddressesAndHostNames) {
  auto loopback = [](const sockaddr_storage& a) {
    return rpc::IsLoopback(reinterpret_cast<const sockaddr*>(&a), sizeof(a));
  };
  for (const char* ip : {"127.0.0.1", "127.1.2.3"}) EXPECT_TRUE(loopback(Ipv4(ip))) << ip;
  for (const char* ip : {"0.0.0.0", "192.0.2.1", "128.0.0.1"}) EXPECT_FALSE(loopback(Ipv4(ip)));
  for (const char* ip : {"::1", "::ffff:127.0.0.1"}) EXPECT_TRUE(loopback(Ipv6(ip))) << ip;
  for (const char* ip : {"::", "2001:db8::1", "::ffff:10.0.0.1"}) EXPECT_FALSE(loopback(Ipv6(ip)));
  sockaddr_un unix_socket = {};
  unix_socket.sun_family = AF_UNIX;
  EXPECT_TRUE(
      rpc::IsLoopback(reinterpret_cast<const sockaddr*>(&unix_socket), sizeof(unix_socket)));
  EXPECT_FALSE(rpc::IsLoopback(nullptr, 0));

  EXPECT_EQ(rpc::HostOf("pir.example:4000"), "pir.example");
  EXPECT_EQ(rpc::HostOf("127.0.0.1:4000"), "127.0.0.1");
  EXPECT_EQ(rpc::HostOf("[::1]:4000"), "::1");
  EXPECT_EQ(rpc::HostOf("::1"), "::1");
  EXPECT_EQ(rpc::HostOf("localhost"), "localhost");
}

// ---- A real veil-server ----------------------------------------------------------------------

class ServerTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto path = testing::WriteRandomTable("tls.veil", embedding::RowFormat::kFp32, 50, 4, 3);
    ASSERT_TRUE(path.ok()) << path.status();
    table_ = *path;
    auto cert = testing::MakeCertificate();
    ASSERT_TRUE(cert.ok()) << cert.status();
    cert_ = *cert;
  }

  tools::ServerProcessOptions Options(const std::vector<std::string>& extra_args) {
    tools::ServerProcessOptions o;
    o.binary = VEIL_SERVER_BINARY;
    o.table_path = table_;
    o.extra_args = extra_args;
    o.log_path = testing::TempPath("server.log");
    return o;
  }

  std::string table_;
  tools::CertificateFiles cert_;
};

TEST_F(ServerTlsTest, PlaintextOffLoopbackIsRefusedUnlessInsecurePlaintext) {
  tools::ServerProcessOptions o = Options({});
  o.listen = "0.0.0.0:0";  // the wildcard reaches every interface: not loopback
  auto refused = tools::ServerProcess::Start(o);
  EXPECT_TRUE(absl::IsUnavailable(refused.status())) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("exited with status 1"));
  const std::string log = ReadText(o.log_path);
  EXPECT_THAT(log, HasSubstr("refusing to serve plaintext on 0.0.0.0:0, which is not a loopback "
                             "address: anyone who can read the connections to both servers"));
  EXPECT_THAT(log, HasSubstr("--insecure-plaintext"));

  o = Options({"--insecure-plaintext"});
  o.listen = "0.0.0.0:0";
  auto insecure = tools::ServerProcess::Start(o);
  ASSERT_TRUE(insecure.ok()) << insecure.status();
  EXPECT_THAT(ReadText(o.log_path), HasSubstr("WARNING: serving PLAINTEXT on 0.0.0.0:"));
  EXPECT_TRUE((*insecure)->Stop().ok());

  o = Options({});
  o.listen = "0.0.0.0:0";
  o.tls_cert_path = cert_.cert_path;
  o.tls_key_path = cert_.key_path;
  auto secure = tools::ServerProcess::Start(o);
  ASSERT_TRUE(secure.ok()) << secure.status();
  EXPECT_THAT(ReadText(o.log_path), HasSubstr("over TLS"));
  EXPECT_THAT(ReadText(o.log_path), ::testing::Not(HasSubstr("WARNING")));
  EXPECT_TRUE((*secure)->Stop().ok());

  // Loopback needs neither.
  o = Options({});
  auto local = tools::ServerProcess::Start(o);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_THAT(ReadText(o.log_path), HasSubstr("in plaintext (loopback only)"));
}

TEST_F(ServerTlsTest, BadTlsOptionsFailWithAMessage) {
  auto other = testing::MakeCertificate();
  ASSERT_TRUE(other.ok()) << other.status();
  const std::string other_key = other->key_path;
  const struct {
    std::vector<std::string> args;
    const char* message;
  } cases[] = {
      {{"--tls-cert=" + cert_.cert_path}, "--tls-cert and --tls-key go together"},
      {{"--tls_key=" + cert_.key_path}, "--tls-cert and --tls-key go together"},
      {{"--tls-cert=" + cert_.cert_path, "--tls-key=" + cert_.key_path, "--insecure-plaintext"},
       "--insecure-plaintext contradicts"},
      {{"--tls-cert=" + cert_.cert_path, "--tls-key=" + other_key},
       "does not belong to the certificate"},
      {{"--tls-cert=" + cert_.cert_path + ".missing", "--tls-key=" + cert_.key_path},
       "cannot open certificate"},
  };
  for (const auto& c : cases) {
    tools::ServerProcessOptions o = Options(c.args);
    EXPECT_FALSE(tools::ServerProcess::Start(o).ok()) << c.message;
    EXPECT_THAT(ReadText(o.log_path), HasSubstr(c.message));
  }
}

// One TLS handshake with 127.0.0.1:port as a plain OpenSSL client that trusts `cert` and allows
// protocol versions up to `max_version`, with `tls12_ciphers` (OpenSSL syntax) for TLS <= 1.2.
// Returns "VERSION CIPHER" (e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384") or the handshake's error.
absl::StatusOr<std::string> Handshake(int port, const std::string& cert, int max_version,
                                      const char* tls12_ciphers = "DEFAULT:@SECLEVEL=0") {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        SSL_CTX_free);
  SSL_CTX_set_security_level(ctx.get(), 0);  // let this client offer what the server must refuse
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_VERSION);
  SSL_CTX_set_max_proto_version(ctx.get(), max_version);
  if (SSL_CTX_set_cipher_list(ctx.get(), tls12_ciphers) != 1 ||
      SSL_CTX_load_verify_locations(ctx.get(), cert.c_str(), nullptr) != 1) {
    return absl::InternalError("client set-up failed");
  }
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_PEER, nullptr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_storage address = Ipv4("127.0.0.1");
  reinterpret_cast<sockaddr_in*>(&address)->sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(sockaddr_in)) != 0) {
    close(fd);
    return absl::UnavailableError("connect failed");
  }
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), SSL_free);
  SSL_set_fd(ssl.get(), fd);
  SSL_set1_host(ssl.get(), "127.0.0.1");
  absl::StatusOr<std::string> result;
  if (SSL_connect(ssl.get()) == 1) {
    result = absl::StrCat(SSL_get_version(ssl.get()), " ", SSL_get_cipher_name(ssl.get()));
  } else {
    char error[256] = "no detail";
    if (unsigned long e = ERR_get_error()) ERR_error_string_n(e, error, sizeof(error));
    result = absl::UnavailableError(error);
  }
  ERR_clear_error();
  close(fd);
  return result;
}

TEST_F(ServerTlsTest, NegotiatesTls13AndRefusesOldVersionsAndWeakCiphers) {
  tools::ServerProcessOptions o = Options({});
  o.tls_cert_path = cert_.cert_path;
  o.tls_key_path = cert_.key_path;
  auto server = tools::ServerProcess::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  auto best = Handshake(port, cert_.cert_path, TLS1_3_VERSION);
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_THAT(*best, ::testing::StartsWith("TLSv1.3 "));
  // TLS 1.2 (kj 0.9.2's highest settable minimum) only with forward secrecy and AEAD.
  auto tls12 = Handshake(port, cert_.cert_path, TLS1_2_VERSION);
  ASSERT_TRUE(tls12.ok()) << tls12.status();
  EXPECT_EQ(*tls12, "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256");
  for (const char* weak : {"ECDHE-ECDSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA384", "AES128-SHA"}) {
    EXPECT_FALSE(Handshake(port, cert_.cert_path, TLS1_2_VERSION, weak).ok()) << weak;
  }
  EXPECT_FALSE(Handshake(port, cert_.cert_path, TLS1_1_VERSION).ok());
  EXPECT_FALSE(Handshake(port, cert_.cert_path, TLS1_VERSION).ok());
  // The refused handshakes closed only their own connections.
  EXPECT_TRUE(Handshake(port, cert_.cert_path, TLS1_3_VERSION).ok());
  EXPECT_THAT(LogWith(o.log_path, "TLS handshake with 127.0.0.1:"),
              HasSubstr("TLS handshake with 127.0.0.1:"));
}

TEST_F(ServerTlsTest, ASilentClientIsClosedAfterTheHandshakeTimeout) {
  tools::ServerProcessOptions o = Options({"--tls-handshake-timeout-ms=300"});
  o.tls_cert_path = cert_.cert_path;
  o.tls_key_path = cert_.key_path;
  auto server = tools::ServerProcess::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  sockaddr_storage address = Ipv4("127.0.0.1");
  reinterpret_cast<sockaddr_in*>(&address)->sin_port =
      htons(static_cast<uint16_t>((*server)->port()));
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(sockaddr_in)), 0);
  const absl::Time start = absl::Now();
  char byte;
  EXPECT_EQ(recv(fd, &byte, 1, 0), 0);  // closed by the server, not by the 5 s receive timeout
  const absl::Duration took = absl::Now() - start;
  close(fd);
  EXPECT_GE(took, absl::Milliseconds(250));
  EXPECT_LT(took, absl::Seconds(3));
  EXPECT_THAT(LogWith(o.log_path, "no complete handshake within 300ms"),
              HasSubstr("no complete handshake within 300ms"));
}

TEST_F(ServerTlsTest, OneSilentAddressCannotHoldEverySlotInHandshakes) {
  // 127.0.0.2 opens three of four slots and never starts its handshakes; 127.0.0.3 takes the
  // last (the address holding the most may not). Before, every other client was refused until
  // the handshake timeout; now a newcomer from another address ends one of 127.0.0.2's.
  tools::ServerProcessOptions o =
      Options({"--max_connections=4", "--tls-handshake-timeout-ms=30000"});
  o.tls_cert_path = cert_.cert_path;
  o.tls_key_path = cert_.key_path;
  auto server = tools::ServerProcess::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  std::vector<int> silent;
  for (const char* source : {"127.0.0.2", "127.0.0.2", "127.0.0.2", "127.0.0.3"}) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_storage from = Ipv4(source);
    sockaddr_storage to = Ipv4("127.0.0.1");
    reinterpret_cast<sockaddr_in*>(&to)->sin_port = htons(static_cast<uint16_t>((*server)->port()));
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof(sockaddr_in)), 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof(sockaddr_in)), 0);
    timeval timeout{0, 300000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    silent.push_back(fd);
  }
  absl::SleepFor(absl::Milliseconds(200));  // accepted, in their handshakes
  auto handshake = Handshake((*server)->port(), cert_.cert_path, TLS1_3_VERSION);
  EXPECT_TRUE(handshake.ok()) << handshake.status();
  std::vector<bool> ended;
  for (int fd : silent) {
    char byte;
    ended.push_back(recv(fd, &byte, 1, 0) == 0);  // else timed out: still in its handshake
    close(fd);
  }
  EXPECT_EQ(ended[0] + ended[1] + ended[2], 1) << "one of 127.0.0.2's";
  EXPECT_FALSE(ended[3]) << "127.0.0.3's";
  EXPECT_THAT(LogWith(o.log_path, "closed the TLS handshake of 127.0.0.2:"),
              HasSubstr("its address held 3 connections (127.0.0.1:"));
}

}  // namespace
}  // namespace veil
