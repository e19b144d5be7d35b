// What the report endpoint's TLS is made of (server.h, client.h): PEM files and CA
// bundles, checked the way the endpoint loads them, so that a bad one is an error of
// configuration (a flag, an environment variable) and not of every connection.
#pragma once

#include <string>

#include "star/core/status.h"

namespace star::report {

// The contents of the file at `path`. InvalidArgument "cannot read \"PATH\": <reason>"
// when it cannot be opened or read (or `path` is empty).
[[nodiscard]] StatusOr<std::string> ReadPemFile(const std::string& path);

// Reads a server's certificate (chain, leaf first) and private key, PEM files, and loads
// them as ReportServer::Start does: OK (also when neither is given), or InvalidArgument naming `cert_option` or
// `key_option` and the file: one given without the other, a file that cannot be read,
// is not PEM, or a key that does not match the certificate. For callers that check
// their flags before starting a server (the options' names are then the flags').
[[nodiscard]] Status CheckServerCertificate(const std::string& cert_file, const std::string& key_file,
                                            const std::string& cert_option = "tls_cert_file",
                                            const std::string& key_option = "tls_key_file");

// OK when `pem` is a CA bundle: one or more PEM certificates. InvalidArgument
// "not a PEM CA bundle: <OpenSSL's reason>" otherwise.
[[nodiscard]] Status CheckCaBundle(const std::string& pem);

// Whether `value` is PEM text rather than the name of a file: it starts with
// "-----BEGIN" (leading whitespace ignored).
bool LooksLikePem(const std::string& value);

// The subject of the first certificate in `pem` in OpenSSL's one-line form
// ("/CN=star-test-ca"), or "" when there is none.
std::string FirstCertificateSubject(const std::string& pem);

}  // namespace star::report
