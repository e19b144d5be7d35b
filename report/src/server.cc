// The cpprestsdk adapter of the controller's end: every cpprest exception is turned into
// a reply or a Status here, and every pplx task is observed.
#include "star/report/server.h"

// cpprest otherwise defines a macro U(), which breaks any template parameter named U.
#define _TURN_OFF_PLATFORM_STRING
#include <cpprest/http_listener.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
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

// Requests are handled on threads of the server's own: handling blocks (reading the body,
// the report handler), and cpprest's shared threads must stay free to deliver bodies and
// replies (64 reports at once would otherwise hold all of them waiting for bodies that
// only they can deliver) and to serve the process's other listeners (the probes).
constexpr int kHandlerThreads = 16;
constexpr size_t kMaxQueued = 4096;  // requests waiting beyond it get a 503

struct ReportServer::Impl {
  ReportServerOptions options;
  ReportHandler handler;
  std::optional<tls::ServerIdentity> identity;  // HTTPS when set
  std::mutex handler_mu;  // serialises handler calls
  const std::string unknown_job_token = RandomToken();  // compared with for unknown jobs
  std::unique_ptr<Listener> listener;
  std::mutex queue_mu;
  std::condition_variable queue_cv;
  std::deque<http::http_request> queue;  // guarded by queue_mu
  bool stopping = false;                 // guarded by queue_mu
  std::vector<std::thread> workers;

  // On a cpprest thread: queues the request for the handler threads.
  void Enqueue(http::http_request r) {
    {
      std::lock_guard lock(queue_mu);
      if (queue.size() < kMaxQueued) {
        queue.push_back(std::move(r));
        queue_cv.notify_one();
        return;
      }
    }
    Reply(r, http::status_codes::ServiceUnavailable, ErrorBody("busy: too many reports waiting"));
  }
  // A handler thread: handles queued requests until StopWorkers.
  void Serve() {
    for (;;) {
      std::unique_lock lock(queue_mu);
      queue_cv.wait(lock, [this] { return stopping || !queue.empty(); });
      if (queue.empty()) return;  // stopping
      http::http_request r = std::move(queue.front());
      queue.pop_front();
      lock.unlock();
      Handle(r);
    }
  }
  void StopWorkers() {
    {
      std::lock_guard lock(queue_mu);
      stopping = true;
      queue_cv.notify_all();
    }
    for (std::thread& t : workers) t.join();
    workers.clear();
  }

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
    impl_->listener->close().wait();  // waits for the requests in flight: handled first
  } catch (const std::exception&) {
  }
  impl_->StopWorkers();
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
  for (int i = 0; i < kHandlerThreads; ++i) impl->workers.emplace_back([self] { self->Serve(); });
  StatusOr<int> port = ListenOnPort(self->options.host, self->options.port, [self](int p) {
    const std::string url = self->Url(p);
    try {
      std::unique_ptr<Listener> listener = MakeListener(url, self->identity);
      listener->support([self](http::http_request r) { self->Enqueue(std::move(r)); });
      listener->open().wait();
      self->listener = std::move(listener);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Unavailable(url + ": " + e.what());
    }
  });
  if (!port.ok()) {  // InvalidArgument naming "port", or Unavailable
    impl->StopWorkers();
    return Status(port.status().code(), "report server: " + port.status().message());
  }
  impl->options.port = *port;
  return std::unique_ptr<ReportServer>(new ReportServer(std::move(impl)));
}

}  // namespace star::report
