// The controller's end of the report protocol (client.h has the wire contract): serves
// POST /v1/jobs/{job}/reports and answers each report with the handler's decision, over
// HTTP or, given a certificate, HTTPS. Used by the operator's report endpoint, `star
// local` (plain HTTP on loopback) and tests.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "star/core/api/decision.h"
#include "star/core/api/worker_report.h"
#include "star/core/status.h"

namespace star::report {

struct ReportServerOptions {
  std::string host = "127.0.0.1";  // address to listen on; default loopback
  int port = 0;                    // default 0 = pick a free port (see port())
  std::string token;               // required bearer token; default "" = accept any request
  // Per-job tokens (the operator's endpoint); when set it replaces `token`: the token
  // the path's job must present, or nullopt for a job this server does not know (which
  // is answered as a wrong token is, so that the answer does not tell which jobs exist).
  // Called on server threads, concurrently; must be thread-safe. Default empty = use
  // `token`.
  std::function<std::optional<std::string>(const std::string& job)> job_token;
  // Whether the server calls the handler one report at a time. Default true; false for a
  // thread-safe handler (the operator's, whose reports of different jobs must not wait
  // on each other).
  bool serialize_handler = true;
  // The largest request body accepted, in bytes; a longer one is answered 413 (by its
  // Content-Length before any of it is read, or once a chunked body passes it) and read
  // no further into memory than one 64 KiB chunk. Default 1 MiB; must be > 0.
  size_t max_body_bytes = 1024 * 1024;
  // HTTPS: the server's certificate (chain, leaf first) and its private key, PEM files;
  // both or neither. Read once, by Start. TLS 1.2 or later. Default "" = plain HTTP.
  std::string tls_cert_file{};
  std::string tls_key_file{};
  // The same as PEM text (a certificate the caller made or keeps elsewhere); both or
  // neither, and not with the files. Default "" = none.
  std::string tls_cert_pem{};
  std::string tls_key_pem{};
};

// Decides what to answer a report with; nullopt = no decision. Called on a server
// thread, one report at a time unless ReportServerOptions::serialize_handler is false. To refuse a report it throws
// std::invalid_argument: the client gets a 400 with the exception's message; any other
// exception is a 500.
using ReportHandler = std::function<std::optional<api::Decision>(const api::WorkerReport&)>;

// Serves the report endpoint until destroyed. Requests are checked in this order: path
// and method (404/405), the job and its token (401 {"error": "missing or wrong bearer
// token"}, the same for a job the server does not know; tokens are compared in constant
// time), body size (413), body (400 with the error naming the field; also when the
// path's job differs from the report's "job"), then the handler. Every refused request's
// body is read and dropped, never kept. The decision is sent as the handler returns it
// (not validated here). Thread-safe.
class ReportServer {
 public:
  // Unavailable when it cannot listen (with port 0 it tries a few free ports);
  // InvalidArgument naming "handler" (empty), "port" (outside [0, 65535]),
  // "max_body_bytes" (0), or "tls_cert_file" / "tls_key_file" and the file (one without
  // the other, a file that cannot be read, is not PEM, or a key that does not match the
  // certificate), or "tls_cert_pem" / "tls_key_pem" likewise (also when given with the
  // files).
  static StatusOr<std::unique_ptr<ReportServer>> Start(ReportServerOptions options,
                                                       ReportHandler handler);
  // Stops listening; waits for requests in flight.
  ~ReportServer();
  ReportServer(const ReportServer&) = delete;
  ReportServer& operator=(const ReportServer&) = delete;

  int port() const;
  std::string base_url() const;  // "http://<host>:<port>", "https://..." with TLS

 private:
  struct Impl;
  explicit ReportServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace star::report
