// A worker's end of the report protocol: WorkerReports over HTTP or HTTPS (docs/ARCHITECTURE.md
// steps 2 and 4).
//
// Wire contract: POST {base_url}/v1/jobs/{job}/reports, body = api::ToJson(WorkerReport),
// header "Authorization: Bearer <token>" when a token is configured; {job} is the
// report's job, percent-encoded ("ns/name" -> "ns%2Fname"). The response is 200 with an
// empty body, {"decision": null}, or {"decision": <api::Decision JSON>}; 400 carries
// {"error": "<message naming the field>"}; 401 means a missing or wrong token.
// server.h is the controller's end.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"
#include "star/core/status.h"

namespace star::report {

struct ReportClientOptions {
  std::string base_url;  // e.g. "http://127.0.0.1:8080"; required (http or https)
  std::string token;     // bearer token; default "" = send no Authorization header
  std::chrono::milliseconds timeout{5000};  // per request, connect included; default 5 s
  // The CA that an https server's certificate must verify against (which must also name
  // the URL's host): a PEM bundle, as a file (read once, by Create) or as text; the file
  // wins when both are set; only for an https base_url. Default "" (both) = the system's
  // CAs.
  std::string ca_file{};
  std::string ca_data{};
};

// Sends reports to one controller. Thread-safe (requests may run concurrently).
// No retries inside: a failed Send changed nothing on the worker, and the caller decides
// whether to retry (the next report carries fresher data, so the engine just sends the
// next one).
class ReportClient {
 public:
  // InvalidArgument naming "base_url" if it is not an http(s) URL, "timeout" if <= 0, or
  // "ca_file" (with the file) / "ca_data" when the CA cannot be read, is not a PEM CA
  // bundle, or is given for an http:// base_url.
  static StatusOr<std::unique_ptr<ReportClient>> Create(ReportClientOptions options);
  ~ReportClient();
  ReportClient(const ReportClient&) = delete;
  ReportClient& operator=(const ReportClient&) = delete;

  // Sends one report and returns the controller's decision, if any. Errors:
  //   InvalidArgument    report.job empty; the server's 400 (its message); a response
  //                      that is not JSON or whose decision is malformed (names the
  //                      field, "decision.k: ...")
  //   FailedPrecondition "report rejected: 401 unauthorized" (or 403 forbidden); or
  //                      "report to URL: TLS: the server's certificate does not verify
  //                      against <the CA: ca_file and its subject, ca_data and its
  //                      subject, or the system's CAs> ...": a wrong CA, or a certificate
  //                      that does not name the URL's host (retrying cannot help)
  //   Unavailable        cannot connect (other TLS failures included: an http:// URL of
  //                      an https server), or the server answers 5xx
  //   DeadlineExceeded   no answer within options.timeout
  //   Internal           any other HTTP status
  [[nodiscard]] StatusOr<std::optional<api::Decision>> Send(const api::WorkerReport& report);

 private:
  struct Impl;
  explicit ReportClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::report
