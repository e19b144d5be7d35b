// ReportEndpoint: the operator's worker-report endpoint (star::report's server). Each
// report, authenticated by its job's token (JobRegistry), feeds the job's control loop;
// a new decision is recorded in status (StatusRecords, on the DecisionRecorder's threads)
// before any worker gets it: until then the job's reports are answered with the newest
// decision status holds. A report never waits on the API server, and reports of
// different jobs do not wait on each other. Started by the Manager once the
// caches synced, before any reconcile: pods get its URL as STAR_CONTROLLER_URL and,
// when it has one, the CA that verifies it as STAR_REPORT_CA. Plain HTTP unless given a
// certificate (HTTPS, TLS 1.2 or later).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"
#include "star/core/status.h"
#include "star/operator/reconciler/controller.h"
#include "star/operator/reconciler/decision_recorder.h"
#include "star/operator/reconciler/job_registry.h"
#include "star/operator/reconciler/metrics.h"
#include "star/operator/reconciler/status_records.h"
#include "star/report/server.h"

namespace star::op {

struct ReportEndpointOptions {
  // HOST:PORT to listen on; default "127.0.0.1:0" (port 0 = a free port, see port());
  // "" = no endpoint.
  std::string listen = "127.0.0.1:0";
  // The URL pods reach it at; default "" = the endpoint's own URL.
  std::string url;
  // HTTPS: the certificate (chain, leaf first; it must name the host of the URL pods
  // use) and its key, PEM files: the operator's --report-tls-cert-file and
  // --report-tls-key-file; both or neither. Default "" = plain HTTP.
  std::string tls_cert_file{};
  std::string tls_key_file{};
  // The CA pods verify the endpoint with (--report-ca-file), a PEM file read at Create:
  // its text reaches them as STAR_REPORT_CA. Default "" = none (pods use their system's
  // CAs).
  std::string ca_file{};
  // The same as PEM text (the managed certificate of --report-tls-secret,
  // report_certificate.h): the certificate and key instead of the files, the CA instead
  // of ca_file. Default "" = none.
  std::string tls_cert_pem{};
  std::string tls_key_pem{};
  std::string ca_pem{};
};

// Checks that the TLS options fit together, as star-operator checks its flags before it
// starts: the certificate and key load (CheckServerCertificate), the CA file is a PEM CA
// bundle, --report-url is https:// when the endpoint serves HTTPS, a CA is given only for
// an https endpoint, and the managed certificate (PEM text) comes without files.
// Returns the CA's PEM text ("" without one), or
// InvalidArgument naming the flag ("--report-tls-key-file: must be set with
// --report-tls-cert-file").
StatusOr<std::string> CheckReportTls(const ReportEndpointOptions& options);

class ReportEndpoint : public Runnable {
 public:
  // `registry`, `records` and `metrics` must outlive it. InvalidArgument naming
  // report_listen when it is not HOST:PORT, or CheckReportTls's errors.
  static StatusOr<std::unique_ptr<ReportEndpoint>> Create(ReportEndpointOptions options, JobRegistry* registry,
                                                          StatusRecords* records, OperatorMetrics* metrics);
  // Starts the decision recorder, then listens. Unavailable when it cannot.
  [[nodiscard]] Status Start() override;
  void Stop() override;  // stops listening; waits for reports in flight, then the recorder

  int port() const;  // 0 without an endpoint (or before Start)
  // What pods get as STAR_CONTROLLER_URL: options.url, else the endpoint's own URL once
  // started, else "".
  std::string url() const;
  // What pods get as STAR_REPORT_CA: options.ca_pem, or the PEM text of
  // options.ca_file; "" = nothing.
  const std::string& report_ca() const { return report_ca_; }

  // One report (what the server calls; thread-safe; never waits on the API server): the
  // newest decision status records for the job, if any. A new decision the report made
  // is handed to the recorder; the workers get it with their reports once recorded.
  // std::invalid_argument for a report its job's loop refuses (a 400).
  std::optional<api::Decision> OnReport(const api::WorkerReport& report);

 private:
  ReportEndpoint(ReportEndpointOptions options, std::pair<std::string, int> address, std::string report_ca,
                 JobRegistry* registry, StatusRecords* records, OperatorMetrics* metrics);

  ReportEndpointOptions options_;
  std::pair<std::string, int> address_;  // host, port
  std::string report_ca_;                // PEM; "" = none
  JobRegistry* registry_;
  StatusRecords* records_;
  OperatorMetrics* metrics_;
  DecisionRecorder recorder_;
  std::unique_ptr<report::ReportServer> server_;
};

// Host and port of "HOST:PORT"; InvalidArgument naming `flag` otherwise.
StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& s, const std::string& flag);

}  // namespace star::op
