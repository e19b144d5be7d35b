// The OpenSSL side of the report endpoint's TLS.
#include "tls_context.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "star/report/tls.h"

namespace star::report::tls {
namespace {

namespace ssl = boost::asio::ssl;

boost::asio::const_buffer Buffer(const std::string& s) { return boost::asio::buffer(s.data(), s.size()); }

}  // namespace

void RequireTls12(ssl::context& ctx) {
  SSL_CTX_set_min_proto_version(ctx.native_handle(), TLS1_2_VERSION);
}

Status UseServerIdentity(ssl::context& ctx, const ServerIdentity& id) {
  // The key first: a certificate loaded after it replaces a key that does not match it,
  // which SSL_CTX_check_private_key then tells apart from a key that does not parse.
  boost::system::error_code ec;
  ctx.use_private_key(Buffer(id.key_pem), ssl::context::pem, ec);
  if (ec) {
    return Status::InvalidArgument(id.key_option + " " + id.key_file + ": not a PEM private key: " + ec.message());
  }
  ctx.use_certificate_chain(Buffer(id.cert_pem), ec);
  if (ec) {
    return Status::InvalidArgument(id.cert_option + " " + id.cert_file + ": not a PEM certificate: " + ec.message());
  }
  if (SSL_CTX_check_private_key(ctx.native_handle()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument(id.key_option + " " + id.key_file + ": does not match " + id.cert_option + " " +
                                   id.cert_file);
  }
  return Status::Ok();
}

StatusOr<ServerIdentity> ReadServerIdentity(const std::string& cert_option, const std::string& cert_file,
                                            const std::string& key_option, const std::string& key_file) {
  if (key_file.empty()) return Status::InvalidArgument(key_option + ": must be set with " + cert_option);
  if (cert_file.empty()) return Status::InvalidArgument(cert_option + ": must be set with " + key_option);
  StatusOr<std::string> cert = ReadPemFile(cert_file);
  if (!cert.ok()) return Status::InvalidArgument(cert_option + ": " + cert.status().message());
  StatusOr<std::string> key = ReadPemFile(key_file);
  if (!key.ok()) return Status::InvalidArgument(key_option + ": " + key.status().message());
  ServerIdentity id{cert_option, cert_file, std::move(cert).value(), key_option, key_file, std::move(key).value()};
  ssl::context scratch(ssl::context::tls_server);
  STAR_RETURN_IF_ERROR(UseServerIdentity(scratch, id));
  return id;
}

StatusOr<ServerIdentity> ServerIdentityFromPem(const std::string& cert_option, std::string cert_pem,
                                               const std::string& key_option, std::string key_pem) {
  if (key_pem.empty()) return Status::InvalidArgument(key_option + ": must be set with " + cert_option);
  if (cert_pem.empty()) return Status::InvalidArgument(cert_option + ": must be set with " + key_option);
  ServerIdentity id{cert_option, "(text)", std::move(cert_pem), key_option, "(text)", std::move(key_pem)};
  ssl::context scratch(ssl::context::tls_server);
  STAR_RETURN_IF_ERROR(UseServerIdentity(scratch, id));
  return id;
}

Status TrustOnly(ssl::context& ctx, const std::string& pem) {
  X509_STORE* store = X509_STORE_new();
  if (store == nullptr) return Status::Internal("X509_STORE_new failed");
  SSL_CTX_set_cert_store(ctx.native_handle(), store);  // takes it; frees the old one
  boost::system::error_code ec;
  ctx.add_certificate_authority(Buffer(pem), ec);
  ERR_clear_error();
  if (ec) return Status::InvalidArgument("not a PEM CA bundle: " + ec.message());
  return Status::Ok();
}

bool IsCertificateVerifyFailure(int error_code) {
  const auto code = static_cast<unsigned long>(static_cast<unsigned int>(error_code));
  return ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_CERTIFICATE_VERIFY_FAILED;
}

}  // namespace star::report::tls
