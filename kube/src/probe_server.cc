#include "star/kube/probe_server.h"

#include <cpprest/http_listener.h>

namespace star::kube {

namespace http = web::http;

struct ProbeServer::Impl {
  ProbeHandlers handlers;
  std::unique_ptr<http::experimental::listener::http_listener> listener;

  void Log(const std::string& m) const {
    if (handlers.log) handlers.log(m);
  }
};

ProbeServer::ProbeServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StatusOr<std::unique_ptr<ProbeServer>> ProbeServer::Start(const std::string& address,
                                                          ProbeHandlers handlers,
                                                          const std::string& flag) {
  if (!handlers.metrics || !handlers.not_ready) {
    return Status::InvalidArgument("handlers: metrics and not_ready are required");
  }
  auto impl = std::make_unique<Impl>();
  impl->handlers = std::move(handlers);
  Impl* self = impl.get();
  try {
    impl->listener =
        std::make_unique<http::experimental::listener::http_listener>("http://" + address);
    impl->listener->support(http::methods::GET, [self](http::http_request r) {
      const std::string path = r.relative_uri().path();
      try {
        if (path == "/metrics") {
          r.reply(http::status_codes::OK, self->handlers.metrics(), "text/plain; version=0.0.4")
              .wait();
        } else if (path == "/healthz") {
          const std::optional<std::string> why =
              self->handlers.not_alive ? self->handlers.not_alive() : std::nullopt;
          r.reply(why ? http::status_codes::ServiceUnavailable : http::status_codes::OK,
                  why ? *why + "\n" : std::string("ok\n"))
              .wait();
        } else if (path == "/readyz") {
          const std::optional<std::string> why = self->handlers.not_ready();
          r.reply(why ? http::status_codes::ServiceUnavailable : http::status_codes::OK,
                  why ? *why + "\n" : std::string("ok\n"))
              .wait();
        } else {
          r.reply(http::status_codes::NotFound, "not found\n").wait();
        }
      } catch (const std::exception& e) {
        self->Log(std::string("http: ") + e.what());
        try {  // the prober gets an answer, not a timeout
          r.reply(http::status_codes::InternalError, std::string(e.what()) + "\n");
        } catch (const std::exception&) {
        }
      }
    });
    impl->listener->open().wait();
  } catch (const std::exception& e) {
    return Status::Unavailable(flag + " " + address + ": " + e.what());
  }
  return std::unique_ptr<ProbeServer>(new ProbeServer(std::move(impl)));
}

ProbeServer::~ProbeServer() {
  try {
    impl_->listener->close().wait();
  } catch (const std::exception& e) {
    impl_->Log(std::string("http: close: ") + e.what());
  }
}

}  // namespace star::kube
