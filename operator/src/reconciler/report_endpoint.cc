#include "star/operator/reconciler/report_endpoint.h"

#include <stdexcept>

#include "star/report/tls.h"

namespace star::op {

StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& s, const std::string& flag) {
  const auto colon = s.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument(flag + ": must be HOST:PORT, got \"" + s + "\"");
  }
  try {
    size_t used = 0;
    const int port = std::stoi(s.substr(colon + 1), &used);
    if (used != s.size() - colon - 1 || port < 0 || port > 65535) throw std::out_of_range("port");
    return std::make_pair(s.substr(0, colon), port);
  } catch (const std::exception&) {
    return Status::InvalidArgument(flag + ": bad port in \"" + s + "\"");
  }
}

StatusOr<std::string> CheckReportTls(const ReportEndpointOptions& o) {
  STAR_RETURN_IF_ERROR(report::CheckServerCertificate(o.tls_cert_file, o.tls_key_file, "--report-tls-cert-file",
                                                      "--report-tls-key-file"));
  const bool managed = !o.tls_cert_pem.empty() || !o.tls_key_pem.empty();
  if (managed && (!o.tls_cert_file.empty() || !o.ca_file.empty())) {
    return Status::InvalidArgument("--report-tls-secret: not with --report-tls-cert-file or --report-ca-file "
                                   "(the operator's own certificate or one given, not both)");
  }
  const bool serves_https = !o.tls_cert_file.empty() || managed;
  const bool url_https = o.url.empty() ? serves_https : o.url.rfind("https://", 0) == 0;
  if (serves_https && !url_https) {
    return Status::InvalidArgument("--report-url: must be https:// when the endpoint serves HTTPS "
                                   "(--report-tls-cert-file), got \"" + o.url + "\"");
  }
  if (!o.ca_pem.empty()) {
    if (Status s = report::CheckCaBundle(o.ca_pem); !s.ok()) return Status::InvalidArgument("ca.crt: " + s.message());
    return o.ca_pem;
  }
  if (o.ca_file.empty()) return std::string();
  if (!url_https) {
    return Status::InvalidArgument("--report-ca-file: the report endpoint is plain HTTP; give "
                                   "--report-tls-cert-file and --report-tls-key-file, or an https:// --report-url");
  }
  StatusOr<std::string> pem = report::ReadPemFile(o.ca_file);
  if (!pem.ok()) return Status::InvalidArgument("--report-ca-file: " + pem.status().message());
  if (Status s = report::CheckCaBundle(*pem); !s.ok()) {
    return Status::InvalidArgument("--report-ca-file " + o.ca_file + ": " + s.message());
  }
  return pem;
}

StatusOr<std::unique_ptr<ReportEndpoint>> ReportEndpoint::Create(ReportEndpointOptions options,
                                                                 JobRegistry* registry, StatusRecords* records,
                                                                 OperatorMetrics* metrics) {
  if (registry == nullptr || records == nullptr || metrics == nullptr) {
    return Status::InvalidArgument("registry/records/metrics: required");
  }
  std::pair<std::string, int> address;
  if (!options.listen.empty()) {
    STAR_ASSIGN_OR_RETURN(address, SplitHostPort(options.listen, "report_listen"));
  }
  STAR_ASSIGN_OR_RETURN(std::string report_ca, CheckReportTls(options));
  return std::unique_ptr<ReportEndpoint>(
      new ReportEndpoint(std::move(options), std::move(address), std::move(report_ca), registry, records, metrics));
}

ReportEndpoint::ReportEndpoint(ReportEndpointOptions options, std::pair<std::string, int> address,
                               std::string report_ca, JobRegistry* registry, StatusRecords* records,
                               OperatorMetrics* metrics)
    : options_(std::move(options)),
      address_(std::move(address)),
      report_ca_(std::move(report_ca)),
      registry_(registry),
      records_(records),
      metrics_(metrics),
      recorder_(records) {}

Status ReportEndpoint::Start() {
  if (options_.listen.empty()) return Status::Ok();
  STAR_RETURN_IF_ERROR(recorder_.Start());
  report::ReportServerOptions ro;
  ro.host = address_.first;
  ro.port = address_.second;
  ro.job_token = [this](const std::string& job) { return registry_->Token(job); };
  ro.serialize_handler = false;  // OnReport is thread-safe
  ro.tls_cert_file = options_.tls_cert_file;
  ro.tls_key_file = options_.tls_key_file;
  ro.tls_cert_pem = options_.tls_cert_pem;
  ro.tls_key_pem = options_.tls_key_pem;
  STAR_ASSIGN_OR_RETURN(server_,
                        report::ReportServer::Start(ro, [this](const api::WorkerReport& r) { return OnReport(r); }));
  return Status::Ok();
}

void ReportEndpoint::Stop() {
  server_.reset();
  recorder_.Stop();
}

int ReportEndpoint::port() const { return server_ ? server_->port() : 0; }

std::string ReportEndpoint::url() const {
  if (!options_.url.empty()) return options_.url;
  return server_ ? server_->base_url() : "";
}

std::optional<api::Decision> ReportEndpoint::OnReport(const api::WorkerReport& report) {
  auto observed = registry_->ObserveReport(report);
  if (!observed.ok()) throw std::invalid_argument(observed.status().message());
  metrics_->Report(report.job);
  if (observed->new_decision) metrics_->DecisionLatency(observed->latency_seconds);
  if (observed->unrecorded) recorder_.Request(report.job);
  return observed->recorded;
}

}  // namespace star::op
