// boost::asio::ssl contexts for cpprest's client; OpenSSL errors become Status here.
#include "tls_setup.h"

#include <arpa/inet.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <memory>
#include <stdexcept>

namespace star::kube {
namespace {

namespace ssl = boost::asio::ssl;

// Trusts the CA of `options` alone when it names one (cpprest's context comes with the
// system's CAs loaded: they are dropped), and the system's CAs otherwise.
void LoadCa(const ClientOptions& options, ssl::context& ctx) {
  if (options.ca_file.empty() && options.ca_data.empty()) {
    ctx.set_default_verify_paths();
    return;
  }
  X509_STORE* only = X509_STORE_new();
  if (only == nullptr) throw std::runtime_error("X509_STORE_new failed");
  SSL_CTX_set_cert_store(ctx.native_handle(), only);  // frees the store it had
  if (!options.ca_file.empty()) {
    ctx.load_verify_file(options.ca_file);
  } else {
    ctx.add_certificate_authority(boost::asio::buffer(options.ca_data.data(), options.ca_data.size()));
  }
}

void LoadClientCertificate(const Credentials& c, ssl::context& ctx) {
  if (c.client_cert_pem.empty()) return;
  ctx.use_certificate_chain(boost::asio::buffer(c.client_cert_pem.data(), c.client_cert_pem.size()));
  ctx.use_private_key(boost::asio::buffer(c.client_key_pem.data(), c.client_key_pem.size()), ssl::context::pem);
}

}  // namespace

TlsSetupFn MakeTlsSetup(const ClientOptions& options, const Credentials& credentials) {
  return [options, credentials](ssl::context& ctx) {
    LoadCa(options, ctx);
    LoadClientCertificate(credentials, ctx);
  };
}

Status CheckTlsSetup(const ClientOptions& options, const Credentials& credentials) {
  ssl::context probe(ssl::context::tls_client);
  try {
    LoadCa(options, probe);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("kube client: " +
                                   (options.ca_file.empty() ? std::string("ca_data") : "ca_file " + options.ca_file) +
                                   ": not a PEM CA bundle: " + e.what());
  }
  try {
    LoadClientCertificate(credentials, probe);
  } catch (const std::exception& e) {
    const bool mismatch = std::string(e.what()).find("mismatch") != std::string::npos;
    return Status::InvalidArgument("kube client: client certificate" +
                                   (options.client_cert_file.empty() ? "" : " " + options.client_cert_file) +
                                   (mismatch ? ": the key does not match it" : ": not a PEM certificate and key: ") +
                                   (mismatch ? "" : e.what()));
  }
  if (!credentials.client_cert_pem.empty() && SSL_CTX_check_private_key(probe.native_handle()) != 1) {
    return Status::InvalidArgument("kube client: client certificate" +
                                   (options.client_cert_file.empty() ? "" : " " + options.client_cert_file) +
                                   ": the key does not match it");
  }
  return Status::Ok();
}

bool IsCertificateVerifyFailure(int error_code) {
  const auto code = static_cast<unsigned long>(static_cast<unsigned int>(error_code));
  return ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

namespace {
// The CA of `options` in an OpenSSL context; false when there is none to load.
bool LoadCaInto(const ClientOptions& options, SSL_CTX* ctx) {
  if (!options.ca_file.empty()) return SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr) == 1;
  if (options.ca_data.empty()) return SSL_CTX_set_default_verify_paths(ctx) == 1;
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_mem_buf(options.ca_data.data(), static_cast<int>(options.ca_data.size())), BIO_free);
  X509_STORE* store = SSL_CTX_get_cert_store(ctx);
  bool any = false;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    any = X509_STORE_add_cert(store, cert) == 1 || any;
    X509_free(cert);
  }
  ERR_clear_error();
  return any;
}

// Expects the verified name to be `host` (an IP address or a DNS name).
void ExpectHost(SSL* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  unsigned char buf[sizeof(in6_addr)];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    SSL_set1_host(ssl, host.c_str());
    SSL_set_tlsext_host_name(ssl, host.c_str());
  }
}
}  // namespace

std::string DiagnoseServerCertificate(const ClientOptions& options, const std::string& host, int port) {
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()), SSL_CTX_free);
  if (ctx == nullptr || !LoadCaInto(options, ctx.get())) return "";
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);  // verify, record, go on
  std::unique_ptr<BIO, decltype(&BIO_free_all)> bio(BIO_new_ssl_connect(ctx.get()), BIO_free_all);
  if (bio == nullptr) return "";
  const std::string address = (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + std::to_string(port);
  BIO_set_conn_hostname(bio.get(), address.c_str());
  SSL* ssl = nullptr;
  BIO_get_ssl(bio.get(), &ssl);
  if (ssl == nullptr) return "";
  ExpectHost(ssl, host);
  if (BIO_do_handshake(bio.get()) != 1) {
    ERR_clear_error();
    return "";
  }
  const long result = SSL_get_verify_result(ssl);
  return result == X509_V_OK ? "" : X509_verify_cert_error_string(result);
}

std::string TrustedCaDescription(const ClientOptions& options) {
  if (options.insecure_skip_tls_verify) return "not verified";
  if (!options.ca_file.empty()) return "CA " + options.ca_file;
  if (!options.ca_data.empty()) return "the kubeconfig's certificate-authority-data";
  return "the system's CAs";
}

}  // namespace star::kube
