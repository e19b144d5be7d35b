// The report endpoint's managed certificate: star-operator --report-tls-secret keeps a CA
// and the serving certificate it signed (report::IssueServingCertificate) in a Secret of
// its own namespace, so that every replica and every restart serves the same one and the
// pods of running jobs keep trusting it. Made when missing, replaced when it no longer
// fits (a host it does not name, expiry within renew_before, contents that do not load).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "star/core/status.h"
#include "star/kube/client.h"
#include "star/report/certificate.h"

namespace star::op {

struct ReportCertificateOptions {
  std::string ns;                  // the Secret's namespace (the operator's own); required
  std::string name;                // the Secret's name; required
  std::vector<std::string> hosts;  // what the certificate must name; at least one
  std::chrono::hours validity{24 * 365};                 // of a new certificate; default a year
  std::chrono::seconds renew_before{30 * 24 * 3600};     // replace it this long before it expires; default 30 days
};

// The label (with value "star-operator") that marks the Secret as the operator's: a
// Secret of that name without it is never read as a certificate nor overwritten.
inline constexpr char kManagedByLabel[] = "app.kubernetes.io/managed-by";

// The certificate in the Secret ns/name, made (create) or replaced (update, guarded by
// its resourceVersion) when it does not fit; when another replica wrote it first, the
// one it wrote. InvalidArgument naming the option (empty ns, name or hosts);
// FailedPrecondition when a Secret of that name exists that the operator did not make;
// the API's errors otherwise (Aborted after repeated conflicts).
[[nodiscard]] StatusOr<report::ServingCertificate> EnsureReportCertificate(kube::Client* client,
                                                                           const ReportCertificateOptions& options);

// What the certificate must name: the host of `url` (the URL pods report to; without one,
// `listen_host` unless it is a wildcard address), then `extra`, each once.
std::vector<std::string> ReportCertificateHosts(const std::string& url, const std::string& listen_host,
                                                const std::vector<std::string>& extra);

// The Secret holding `c` (type kubernetes.io/tls: tls.crt, tls.key, and ca.crt).
nlohmann::json ReportCertificateSecret(const ReportCertificateOptions& options, const report::ServingCertificate& c);

}  // namespace star::op
