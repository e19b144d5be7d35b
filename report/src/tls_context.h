// boost::asio::ssl contexts for the report endpoint (cpprest's listener and client
// configure theirs through these): TLS 1.2 or later, the server's certificate and key,
// the CA a client trusts. OpenSSL's errors become Status here.
#pragma once

#include <string>

#include <boost/asio/ssl/context.hpp>

#include "star/core/status.h"

namespace star::report::tls {

// A server's certificate chain and private key: where they came from and their PEM text.
struct ServerIdentity {
  std::string cert_file, cert_pem;
  std::string key_file, key_pem;
};

// Refuses anything older than TLS 1.2.
void RequireTls12(boost::asio::ssl::context& ctx);

// Loads the identity into `ctx`. InvalidArgument naming the option that does not load:
// "tls_cert_file /x: not a PEM certificate: ...", "tls_key_file /y: not a PEM private
// key: ...", or "tls_key_file /y: does not match tls_cert_file /x".
Status UseServerIdentity(boost::asio::ssl::context& ctx, const ServerIdentity& identity);

// Makes the CA bundle `pem` the only one `ctx` trusts (it replaces the system's CAs).
// InvalidArgument "not a PEM CA bundle: <reason>" when it does not load.
Status TrustOnly(boost::asio::ssl::context& ctx, const std::string& pem);

// Whether an error code cpprest reports for a failed handshake is OpenSSL's "certificate
// verify failed": the server's certificate did not verify (retrying cannot help).
bool IsCertificateVerifyFailure(int error_code);

}  // namespace star::report::tls
