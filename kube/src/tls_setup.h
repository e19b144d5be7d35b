// The TLS side of a Client's connections: which CA verifies the server, which client
// certificate (if any) the client presents.
#pragma once

#include <functional>
#include <string>

#include <boost/asio/ssl/context.hpp>

#include "credentials.h"
#include "star/core/status.h"
#include "star/kube/client_options.h"

namespace star::kube {

using TlsSetupFn = std::function<void(boost::asio::ssl::context&)>;

// Loads options' CA (ca_file, else ca_data, else the system roots cpprest loads) and the
// credentials' client certificate into a context. Throws boost::system::system_error.
TlsSetupFn MakeTlsSetup(const ClientOptions& options, const Credentials& credentials);

// Tries MakeTlsSetup on a scratch context: InvalidArgument naming the option that does
// not load ("ca_file /x: not a PEM CA bundle", "client certificate: the key does not
// match"), so bad files are errors of Client::Create and not of every request.
Status CheckTlsSetup(const ClientOptions& options, const Credentials& credentials);

// Whether an error code cpprest reports for a failed handshake is OpenSSL's "certificate
// verify failed" (the server's certificate did not verify; retrying cannot help).
bool IsCertificateVerifyFailure(int error_code);

// Why the server at host:port's certificate does not verify with options' CA and host
// name, in OpenSSL's words ("unable to get local issuer certificate", "hostname
// mismatch"), from a handshake of its own; "" when that cannot be found out.
std::string DiagnoseServerCertificate(const ClientOptions& options, const std::string& host, int port);

// Words for a TLS failure: which CA the server's certificate was checked against.
std::string TrustedCaDescription(const ClientOptions& options);

}  // namespace star::kube
