// WorkerReports over HTTP (ARCHITECTURE.md steps 2 and 4).
//
// Wire contract: POST {base_url}/v1/jobs/{job}/reports, body = api::ToJson(WorkerReport),
// header "Authorization: Bearer <token>" when a token is configured; {job} is the
// report's job, percent-encoded ("ns/name" -> "ns%2Fname"). The response is 200 with an
// empty body, {"decision": null}, or {"decision": <api::Decision JSON>}; 400 carries
// {"error": "<message naming the field>"}; 401 means a missing or wrong token.
//
// ReportClient is what a worker uses; ReportServer is the other end for tests and local
// mode, and a seed for the operator's endpoint.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"
#include "star/core/status.h"

namespace star::shim {

struct ReportClientOptions {
  std::string base_url;  // e.g. "http://127.0.0.1:8080"; required (http or https)
  std::string token;     // bearer token; default "" = send no Authorization header
  std::chrono::milliseconds timeout{5000};  // per request, connect included; default 5 s
};

// Sends reports to one controller. Thread-safe (requests may run concurrently).
// No retries inside: a failed Send changed nothing on the worker, and the caller decides
// whether to retry (the next report carries fresher data, so the engine just sends the
// next one).
class ReportClient {
 public:
  // InvalidArgument naming "base_url" if it is not an http(s) URL, or "timeout" if <= 0.
  static StatusOr<std::unique_ptr<ReportClient>> Create(ReportClientOptions options);
  ~ReportClient();
  ReportClient(const ReportClient&) = delete;
  ReportClient& operator=(const ReportClient&) = delete;

  // Sends one report and returns the controller's decision, if any. Errors:
  //   InvalidArgument    report.job empty; the server's 400 (its message); a response
  //                      that is not JSON or whose decision is malformed (names the
  //                      field, "decision.k: ...")
  //   FailedPrecondition "report rejected: 401 unauthorized" (or 403 forbidden)
  //   Unavailable        cannot connect, or the server answers 5xx
  //   DeadlineExceeded   no answer within options.timeout
  //   Internal           any other HTTP status
  [[nodiscard]] StatusOr<std::optional<api::Decision>> Send(const api::WorkerReport& report);

 private:
  struct Impl;
  explicit ReportClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct ReportServerOptions {
  std::string host = "127.0.0.1";  // address to listen on; default loopback
  int port = 0;                    // default 0 = pick a free port (see port())
  std::string token;               // required bearer token; default "" = accept any request
  // Per-job tokens (the operator's endpoint); when set it replaces `token`: the token
  // the path's job must present, or nullopt for a job this server does not know (404
  // {"error": ...}). Called on server threads, concurrently; must be thread-safe.
  // Default empty = use `token`.
  std::function<std::optional<std::string>(const std::string& job)> job_token;
  // Whether the server calls the handler one report at a time. Default true; false for a
  // thread-safe handler (the operator's, whose reports of different jobs must not wait
  // on each other).
  bool serialize_handler = true;
};

// Decides what to answer a report with; nullopt = no decision. Called on a server
// thread, one report at a time unless ReportServerOptions::serialize_handler is false. To refuse a report it throws
// std::invalid_argument: the client gets a 400 with the exception's message; any other
// exception is a 500.
using ReportHandler = std::function<std::optional<api::Decision>(const api::WorkerReport&)>;

// Serves the report endpoint until destroyed. Requests are checked in this order: path
// and method (404/405), the job (404, with job_token only), token (401), body (400 with the error naming the field; also
// when the path's job differs from the report's "job"), then the handler. The decision
// is sent as the handler returns it (not validated here). Thread-safe.
class ReportServer {
 public:
  // Unavailable when it cannot listen (with port 0 it tries a few free ports);
  // InvalidArgument naming "handler" (empty) or "port" (outside [0, 65535]).
  static StatusOr<std::unique_ptr<ReportServer>> Start(ReportServerOptions options,
                                                       ReportHandler handler);
  // Stops listening; waits for requests in flight.
  ~ReportServer();
  ReportServer(const ReportServer&) = delete;
  ReportServer& operator=(const ReportServer&) = delete;

  int port() const;
  std::string base_url() const;  // "http://<host>:<port>"

 private:
  struct Impl;
  explicit ReportServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::shim
