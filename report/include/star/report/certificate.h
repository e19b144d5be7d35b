// A serving certificate for the report endpoint that nobody has to provide: a CA made on
// the spot (its key dropped once it has signed) and the certificate it signs for the
// endpoint's host names. Workers trust the CA (STAR_REPORT_CA); the operator keeps all
// three PEM texts (report_certificate.h of the operator keeps them in a Secret).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "star/core/status.h"

namespace star::report {

struct ServingCertificate {
  std::string ca_pem;    // the CA workers verify the endpoint with
  std::string cert_pem;  // the endpoint's certificate, signed by the CA
  std::string key_pem;   // its private key (EC P-256)
};

// A new CA ("star-report-ca") and a certificate it signs for `hosts` (IPv4/IPv6 literals
// become IP names, anything else DNS names; the first is also the common name), both
// valid from an hour ago for `validity`. InvalidArgument naming "hosts" when there is
// none or one is empty, "validity" when it is not positive; Internal naming the OpenSSL
// call that failed.
[[nodiscard]] StatusOr<ServingCertificate> IssueServingCertificate(const std::vector<std::string>& hosts,
                                                                   std::chrono::hours validity);

// OK when `c` can serve `hosts` until at least `margin` from now: the certificate and
// key load and match, the certificate is signed by the CA and names every host.
// FailedPrecondition saying what does not hold otherwise ("does not name host X",
// "expires within ...", "is not signed by the CA", "...: not PEM").
[[nodiscard]] Status CheckServingCertificate(const ServingCertificate& c, const std::vector<std::string>& hosts,
                                             std::chrono::seconds margin);

}  // namespace star::report
