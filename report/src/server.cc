// The cpprestsdk adapter of the controller's end: every cpprest exception is turned into
// a reply or a Status here, and every pplx task is observed.
#include "star/report/server.h"

// cpprest otherwise defines a macro U(), which breaks any template parameter named U.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_listener.h>

#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "body.h"
#include "star/report/net.h"
#include "star/report/token.h"
#include "tls_context.h"
#include "wire.h"

namespace star::report {
namespace {
namespace http = web::http;
using nlohmann::json;
using wire::ErrorBody;
using Listener = http::experimental::listener::http_listener;

// The certificate and key of `o`, read and loaded into a scratch context: nullopt for
// plain HTTP; InvalidArgument naming the option and the file.
StatusOr<std::optional<tls::ServerIdentity>> LoadIdentity(const ReportServerOptions& o) {
  const bool files = !o.tls_cert_file.empty() || !o.tls_key_file.empty();
  const bool text = !o.tls_cert_pem.empty() || !o.tls_key_pem.empty();
  if (files && text) return Status::InvalidArgument("tls_cert_pem: give the certificate as files or as text, not both");
  if (text) {
    STAR_ASSIGN_OR_RETURN(tls::ServerIdentity id,
                          tls::ServerIdentityFromPem("tls_cert_pem", o.tls_cert_pem, "tls_key_pem", o.tls_key_pem));
    return std::optional<tls::ServerIdentity>(std::move(id));
  }
  if (!files) return std::optional<tls::ServerIdentity>();
  STAR_ASSIGN_OR_RETURN(tls::ServerIdentity id,
                        tls::ReadServerIdentity("tls_cert_file", o.tls_cert_file, "tls_key_file", o.tls_key_file));
  return std::optional<tls::ServerIdentity>(std::move(id));
}

// A listener at `url`; with an identity it serves HTTPS (TLS 1.2 or later).
std::unique_ptr<Listener> MakeListener(const std::string& url, const std::optional<tls::ServerIdentity>& identity) {
  http::experimental::listener::http_listener_config config;
  if (identity) {
    config.set_ssl_context_callback([id = *identity](boost::asio::ssl::context& ctx) {
      tls::RequireTls12(ctx);
      (void)tls::UseServerIdentity(ctx, id);  // loaded once already by Start: cannot fail
    });
  }
  return std::make_unique<Listener>(url, config);
}
}  // namespace

struct ReportServer::Impl {
  ReportServerOptions options;
  ReportHandler handler;
  std::optional<tls::ServerIdentity> identity;  // HTTPS when set
  std::mutex handler_mu;  // serialises handler calls
  const std::string unknown_job_token = RandomToken();  // compared with for unknown jobs
  std::unique_ptr<Listener> listener;

  std::string Url(int port) const {
    return (identity ? "https://" : "http://") + options.host + ":" + std::to_string(port);
  }

  // Replies and observes the reply task (a send failure only concerns that client).
  static void Reply(const http::http_request& request, http::status_code code, std::string body) {
    try {
      request.reply(code, std::move(body), "application/json").wait();
    } catch (const std::exception&) {
    }
  }

  void Handle(http::http_request request) {
    try {
      HandleOrThrow(request);
    } catch (const std::invalid_argument& e) {  // the handler refused the report
      Reply(request, http::status_codes::BadRequest, ErrorBody(e.what()));
    } catch (const std::exception& e) {
      Reply(request, http::status_codes::InternalError, ErrorBody(e.what()));
    } catch (...) {  // a handler that throws something else
      Reply(request, http::status_codes::InternalError, ErrorBody("handler failed"));
    }
  }

  // Whether the request carries the token of `job`. A job this server does not know is
  // refused as a wrong token is, after the same comparison (against a token no client
  // has), so neither the answer nor its time tells which jobs exist.
  bool Authorized(const http::http_request& request, const std::string& job) const {
    std::optional<std::string> token = options.token;
    if (options.job_token) token = options.job_token(job);
    if (token && token->empty()) return true;  // this server asks for no token
    auto it = request.headers().find(http::header_names::authorization);
    const std::string presented = it == request.headers().end() ? std::string() : it->second;
    const bool equal = TokensEqual(presented, "Bearer " + token.value_or(unknown_job_token));
    return token.has_value() && equal;
  }

  void HandleOrThrow(http::http_request request) {
    std::vector<std::string> segments = web::uri::split_path(request.relative_uri().path());
    if (segments.size() != 4 || segments[0] != "v1" || segments[1] != "jobs" ||
        segments[3] != "reports") {
      body::Drain(request);
      Reply(request, http::status_codes::NotFound, ErrorBody("no such endpoint"));
      return;
    }
    if (request.method() != http::methods::POST) {
      body::Drain(request);
      Reply(request, http::status_codes::MethodNotAllowed, ErrorBody("use POST"));
      return;
    }
    const std::string job = web::uri::decode(segments[2]);
    if (!Authorized(request, job)) {
      body::Drain(request);
      Reply(request, http::status_codes::Unauthorized, ErrorBody("missing or wrong bearer token"));
      return;
    }
    const std::optional<std::string> text = body::ReadAtMost(request, options.max_body_bytes);
    if (!text) {
      Reply(request, http::status_codes::RequestEntityTooLarge,
            ErrorBody("body: larger than " + std::to_string(options.max_body_bytes) + " bytes"));
      return;
    }
    json j = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      Reply(request, http::status_codes::BadRequest, ErrorBody("body: not JSON"));
      return;
    }
    StatusOr<api::WorkerReport> report = api::WorkerReportFromJson(j);
    if (!report.ok()) {
      Reply(request, http::status_codes::BadRequest, ErrorBody(report.status().message()));
      return;
    }
    if (report->job != job) {
      Reply(request, http::status_codes::BadRequest,
            ErrorBody("job: the path names \"" + job + "\", the report \"" + report->job + "\""));
      return;
    }
    std::optional<api::Decision> decision;
    if (options.serialize_handler) {
      std::lock_guard<std::mutex> lock(handler_mu);
      decision = handler(*report);
    } else {
      decision = handler(*report);
    }
    json out = {{"decision", decision ? api::ToJson(*decision) : json(nullptr)}};
    Reply(request, http::status_codes::OK, out.dump());
  }
};

ReportServer::ReportServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ReportServer::~ReportServer() {
  try {
    impl_->listener->close().wait();
  } catch (const std::exception&) {
  }
}

int ReportServer::port() const { return impl_->options.port; }

std::string ReportServer::base_url() const { return impl_->Url(impl_->options.port); }

StatusOr<std::unique_ptr<ReportServer>> ReportServer::Start(ReportServerOptions options,
                                                            ReportHandler handler) {
  if (!handler) return Status::InvalidArgument("handler: must be set");
  if (options.max_body_bytes == 0) return Status::InvalidArgument("max_body_bytes: must be > 0");
  auto impl = std::make_unique<Impl>();
  STAR_ASSIGN_OR_RETURN(impl->identity, LoadIdentity(options));
  impl->options = std::move(options);
  impl->handler = std::move(handler);
  Impl* self = impl.get();
  StatusOr<int> port = ListenOnPort(self->options.host, self->options.port, [self](int p) {
    const std::string url = self->Url(p);
    try {
      std::unique_ptr<Listener> listener = MakeListener(url, self->identity);
      listener->support([self](http::http_request r) { self->Handle(r); });
      listener->open().wait();
      self->listener = std::move(listener);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Unavailable(url + ": " + e.what());
    }
  });
  if (!port.ok()) {  // InvalidArgument naming "port", or Unavailable
    return Status(port.status().code(), "report server: " + port.status().message());
  }
  impl->options.port = *port;
  return std::unique_ptr<ReportServer>(new ReportServer(std::move(impl)));
}

}  // namespace star::report
