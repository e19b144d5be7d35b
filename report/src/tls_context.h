// boost::asio::ssl contexts for the report endpoint (cpprest's listener and client
// configure theirs through these): TLS 1.2 or later, the server's certificate and key,
// the CA a client trusts. OpenSSL's errors become Status here.
#pragma once

#include <string>

#include <boost/asio/ssl/context.hpp>

#include "star/core/status.h"

namespace star::report::tls {

// A server's certificate chain and private key: the options that named them (for
// errors), their files and their PEM text.
struct ServerIdentity {
  std::string cert_option, cert_file, cert_pem;
  std::string key_option, key_file, key_pem;
};

// Refuses anything older than TLS 1.2.
void RequireTls12(boost::asio::ssl::context& ctx);

// Loads the identity into `ctx`. InvalidArgument naming the option that does not load:
// "tls_cert_file /x: not a PEM certificate: ...", "tls_key_file /y: not a PEM private
// key: ...", or "tls_key_file /y: does not match tls_cert_file /x".
Status UseServerIdentity(boost::asio::ssl::context& ctx, const ServerIdentity& identity);

// Reads both files and loads them into a scratch context: an identity that
// UseServerIdentity loads, or InvalidArgument naming the option: one set without the
// other ("tls_key_file: must be set with tls_cert_file"), a file that cannot be read
// ("tls_cert_file: cannot read \"/x\": ..."), or UseServerIdentity's errors.
StatusOr<ServerIdentity> ReadServerIdentity(const std::string& cert_option, const std::string& cert_file,
                                            const std::string& key_option, const std::string& key_file);

// An identity from PEM text (named in errors as the options `cert_option` and
// `key_option`, "(text)" for the file): InvalidArgument as ReadServerIdentity's when one
// is empty or they do not load.
StatusOr<ServerIdentity> ServerIdentityFromPem(const std::string& cert_option, std::string cert_pem,
                                               const std::string& key_option, std::string key_pem);

// Makes the CA bundle `pem` the only one `ctx` trusts (it replaces the system's CAs).
// InvalidArgument "not a PEM CA bundle: <reason>" when it does not load.
Status TrustOnly(boost::asio::ssl::context& ctx, const std::string& pem);

// Whether an error code cpprest reports for a failed handshake is OpenSSL's "certificate
// verify failed": the server's certificate did not verify (retrying cannot help).
bool IsCertificateVerifyFailure(int error_code);

}  // namespace star::report::tls
