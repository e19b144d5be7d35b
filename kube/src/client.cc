// The Kubernetes API client over cpprestsdk's http_client. cpprest (and boost::asio)
// exceptions are converted to Status here and nowhere else.
#include "star/kube/client.h"

#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <cerrno>
#include <cpprest/http_client.h>
#include <future>
#include <mutex>
#include <thread>

#include "credentials.h"
#include "tls_setup.h"

namespace star::kube {
namespace {

namespace http = web::http;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kMaxBackoff{5000};      // the retry backoff stops doubling here
constexpr milliseconds kMaxRetryAfter{30000};  // a server's Retry-After is honoured up to this
constexpr milliseconds kStopPoll{100};         // how often a watch looks at its stop flag

bool Retryable(int code) { return code == 429 || code >= 500; }

std::string Encode(const std::string& s) { return web::uri::encode_data_string(s); }

std::string Millis(milliseconds d) { return std::to_string(d.count()) + " ms"; }

// The HTTP status (or a watch ERROR event's Status object) as a star::Status whose message
// is the server's.
Status FromServerStatus(int code, const std::string& reason, const std::string& message) {
  switch (code) {
    case 404:
      return Status::NotFound(message);
    case 409:
      return reason == "AlreadyExists" ? Status::AlreadyExists(message) : Status::Aborted(message);
    case 410:
      return Status::OutOfRange(message);
    case 400:
    case 422:
      return Status::InvalidArgument(message);
    case 401:
    case 403:
      return Status::FailedPrecondition(message);
    case 408:
      return Status::DeadlineExceeded(message);
    default:
      if (Retryable(code)) return Status::Unavailable(message);
      return Status::InvalidArgument(message);  // any other 4xx: the request was wrong
  }
}

// The Status of an error answer: its meta/v1 Status message, else the body text.
Status ErrorFromBody(int code, const std::string& body) {
  const json status = json::parse(body, nullptr, false);
  std::string message, reason;
  if (status.is_object()) {
    if (status.contains("message") && status["message"].is_string()) message = status["message"].get<std::string>();
    if (status.contains("reason") && status["reason"].is_string()) reason = status["reason"].get<std::string>();
  }
  if (message.empty()) {
    message = "HTTP " + std::to_string(code);
    if (!body.empty()) message += ": " + body.substr(0, 512);
  }
  return FromServerStatus(code, reason, message);
}

std::optional<milliseconds> RetryAfter(const http::http_headers& headers) {
  auto it = headers.find("Retry-After");
  if (it == headers.end()) return std::nullopt;
  try {
    size_t used = 0;
    const long seconds = std::stol(it->second, &used);
    if (used != it->second.size() || seconds < 0) return std::nullopt;
    return std::min<milliseconds>(std::chrono::seconds(seconds), kMaxRetryAfter);
  } catch (const std::exception&) {
    return std::nullopt;  // an HTTP date: use our own backoff
  }
}

// Waits for `task`, looking at `stop` every kStopPoll. On stop, cancels `cancel` (cpprest
// then closes the connection) and returns nullopt. Rethrows the task's exception. The task
// is always observed (pplx terminates the process on an unobserved task exception).
template <typename T>
std::optional<T> Await(pplx::task<T> task, const std::atomic<bool>* stop,
                       pplx::cancellation_token_source& cancel) {
  auto promise = std::make_shared<std::promise<T>>();
  std::future<T> result = promise->get_future();
  task.then([promise](pplx::task<T> done) {
    try {
      promise->set_value(done.get());
    } catch (...) {
      promise->set_exception(std::current_exception());
    }
  });
  while (result.wait_for(kStopPoll) != std::future_status::ready) {
    if (stop != nullptr && stop->load()) {
      cancel.cancel();
      return std::nullopt;
    }
  }
  return result.get();
}

// Sleeps `d`, waking early when `stop` is set. False when stopped.
bool SleepUnlessStopped(milliseconds d, const std::atomic<bool>* stop) {
  const auto until = Clock::now() + d;
  while (Clock::now() < until) {
    if (stop != nullptr && stop->load()) return false;
    std::this_thread::sleep_for(std::min<Clock::duration>(kStopPoll, until - Clock::now()));
  }
  return stop == nullptr || !stop->load();
}

bool IsTimeout(const http::http_exception& e) { return e.error_code().value() == ETIMEDOUT; }

using ClientFor = std::function<StatusOr<std::shared_ptr<http::client::http_client>>(const Credentials&)>;

}  // namespace

ResourceRef Pods() { return {"", "v1", "pods", true, "Pod"}; }
ResourceRef Services() { return {"", "v1", "services", true, "Service"}; }
ResourceRef Events() { return {"", "v1", "events", true, "Event"}; }
ResourceRef Leases() { return {"coordination.k8s.io", "v1", "leases", true, "Lease"}; }
ResourceRef TrainingJobs() { return {"star.dev", "v1alpha1", "trainingjobs", true, "TrainingJob"}; }
ResourceRef NodeAllocations() { return {"star.dev", "v1alpha1", "nodeallocations", false, "NodeAllocation"}; }

struct Client::Impl {
  ClientOptions options;
  bool https = false;
  http::client::http_client_config config;  // request_timeout; watches copy it with their own
  std::unique_ptr<CredentialSource> credentials;
  std::mutex client_mu;
  std::shared_ptr<http::client::http_client> client;  // for one-shot requests
  Credentials client_credentials;                     // what `client`'s TLS context presents

  // A new connection pool with `config` whose TLS context presents `c`'s certificate.
  StatusOr<std::shared_ptr<http::client::http_client>> NewClient(http::client::http_client_config c,
                                                                 const Credentials& creds) const {
    if (https) c.set_ssl_context_callback(MakeTlsSetup(options, creds));
    try {
      return std::make_shared<http::client::http_client>(web::uri(options.server), c);
    } catch (const std::exception& e) {
      return Status::Unavailable("kube: " + options.server + ": " + e.what());
    }
  }

  // The shared client, rebuilt when the client certificate changed (an exec plugin's).
  StatusOr<std::shared_ptr<http::client::http_client>> SharedClient(const Credentials& creds) {
    std::lock_guard<std::mutex> lock(client_mu);
    if (client == nullptr || creds.client_cert_pem != client_credentials.client_cert_pem ||
        creds.client_key_pem != client_credentials.client_key_pem) {
      STAR_ASSIGN_OR_RETURN(client, NewClient(config, creds));
      client_credentials = creds;
    }
    return client;
  }

  // "/apis/g/v[/namespaces/ns]/resource[/name[/sub]]"; ns "" = no namespace segment.
  static std::string Path(const ResourceRef& r, const std::string& ns, const std::string& name,
                          const std::string& subresource = "") {
    std::string path = r.group.empty() ? "/api/" + r.version : "/apis/" + r.group + "/" + r.version;
    if (r.namespaced && !ns.empty()) path += "/namespaces/" + Encode(ns);
    path += "/" + r.resource;
    if (!name.empty()) path += "/" + Encode(name);
    if (!subresource.empty()) path += "/" + subresource;
    return path;
  }

  // The namespace of a one-object request: `ns`, else the object's, else the default.
  std::string NamespaceFor(const ResourceRef& r, const std::string& ns, const json* object = nullptr) const {
    if (!r.namespaced) return "";
    if (!ns.empty()) return ns;
    if (object != nullptr && object->is_object() && object->contains("metadata")) {
      const json& meta = (*object)["metadata"];
      if (meta.is_object() && meta.contains("namespace") && meta["namespace"].is_string()) {
        const std::string own = meta["namespace"].get<std::string>();
        if (!own.empty()) return own;
      }
    }
    return options.default_namespace;
  }

  http::http_request MakeRequest(const http::method& method, const std::string& target, const std::string* body,
                                 const std::string& content_type, const std::string& token) const {
    http::http_request req(method);
    req.set_request_uri(web::uri(target));
    req.headers().add("Accept", "application/json");
    req.headers().add("User-Agent", options.user_agent);
    if (!token.empty()) req.headers().add("Authorization", "Bearer " + token);
    // Bodies go out as byte vectors (cpprest's string-body path trips UBSan's vptr check).
    if (body != nullptr) {
      req.set_body(std::vector<unsigned char>(body->begin(), body->end()));
      req.headers().set_content_type(content_type);
    }
    return req;
  }

  // Sends one request with the retry policy (429/5xx answers and connection failures
  // retried with doubling backoff, Retry-After honoured, up to max_retries; a first 401
  // retried at once when the credentials can be refreshed). Returns the first answer that
  // is not retried, body unread. With `stop`, waits look at it and a stop returns Aborted
  // (the caller checks its flag).
  StatusOr<http::http_response> Exchange(const ClientFor& client_for, const http::method& method,
                                         const std::string& target, const std::string* body,
                                         const std::string& content_type, const std::atomic<bool>* stop,
                                         pplx::cancellation_token_source& cancel) const {
    const std::string what = "kube: " + method + " " + options.server + target;
    milliseconds backoff = options.initial_backoff;
    bool refreshed = false;
    for (int attempt = 0;; ++attempt) {
      STAR_ASSIGN_OR_RETURN(Credentials creds, credentials->Get());
      STAR_ASSIGN_OR_RETURN(std::shared_ptr<http::client::http_client> c, client_for(creds));
      Status failure;
      std::optional<milliseconds> wait;
      try {
        std::optional<http::http_response> resp = Await(
            c->request(MakeRequest(method, target, body, content_type, creds.token), cancel.get_token()), stop, cancel);
        if (!resp) return Status::Aborted(what + ": stopped");
        if (resp->status_code() == http::status_codes::Unauthorized && !refreshed && credentials->Refresh(creds)) {
          refreshed = true;
          --attempt;  // a refresh is not a retry
          continue;
        }
        if (!Retryable(resp->status_code())) return *resp;
        const std::vector<unsigned char> bytes = resp->extract_vector().get();
        failure = ErrorFromBody(resp->status_code(), std::string(bytes.begin(), bytes.end()));
        wait = RetryAfter(resp->headers());
      } catch (const http::http_exception& e) {
        if (IsTimeout(e)) {
          return Status::DeadlineExceeded(what + ": no answer within " + Millis(config.timeout<milliseconds>()));
        }
        if (IsCertificateVerifyFailure(e.error_code().value())) return CertificateFailure(what);
        failure = Status::Unavailable(what + ": " + e.what());
      } catch (const std::exception& e) {
        if (stop != nullptr && stop->load()) return Status::Aborted(what + ": stopped");
        failure = Status::Unavailable(what + ": " + e.what());
      }
      if (attempt >= options.max_retries) {
        if (attempt == 0) return Status::Unavailable(failure.message());
        return Status::Unavailable(failure.message() + " (gave up after " + std::to_string(attempt) + " retries)");
      }
      if (!SleepUnlessStopped(wait.value_or(backoff), stop)) return Status::Aborted(what + ": stopped");
      backoff = std::min(backoff * 2, kMaxBackoff);
    }
  }

  // A handshake that failed on the server's certificate (wrong CA, wrong host name,
  // expired): not retried, and explained.
  Status CertificateFailure(const std::string& what) const {
    std::string why;
    try {
      const web::uri uri(options.server);
      why = DiagnoseServerCertificate(options, uri.host(), uri.port() > 0 ? uri.port() : 443);
    } catch (const std::exception&) {
    }
    return Status::Unavailable(what + ": TLS: the server's certificate does not verify against " +
                               TrustedCaDescription(options) + (why.empty() ? "" : ": " + why) +
                               " (is this the cluster's CA, and does the certificate name the server's host?)");
  }

  // A complete request: the answer's JSON, or its error.
  StatusOr<json> Call(const http::method& method, const std::string& target, const json* body = nullptr,
                      const std::string& content_type = "application/json") const {
    std::string text;
    if (body != nullptr) {
      try {
        text = body->dump();
      } catch (const json::exception& e) {
        return Status::InvalidArgument("kube: " + method + " " + target + ": cannot encode the body: " + e.what());
      }
    }
    pplx::cancellation_token_source cancel;
    Impl* self = const_cast<Impl*>(this);
    const ClientFor shared = [self](const Credentials& creds) { return self->SharedClient(creds); };
    STAR_ASSIGN_OR_RETURN(http::http_response resp,
                          Exchange(shared, method, target, body != nullptr ? &text : nullptr, content_type,
                                   nullptr, cancel));
    std::string reply;
    try {
      const std::vector<unsigned char> bytes = resp.extract_vector().get();
      reply.assign(bytes.begin(), bytes.end());
    } catch (const http::http_exception& e) {
      if (IsTimeout(e)) return Status::DeadlineExceeded("kube: " + method + " " + target + ": reading the answer timed out");
      return Status::Unavailable("kube: " + method + " " + target + ": reading the answer: " + e.what());
    } catch (const std::exception& e) {
      return Status::Unavailable("kube: " + method + " " + target + ": reading the answer: " + e.what());
    }
    if (resp.status_code() >= 400) return ErrorFromBody(resp.status_code(), reply);
    json parsed = json::parse(reply, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      return Status::Internal("kube: " + method + " " + target + ": the answer (HTTP " +
                              std::to_string(resp.status_code()) + ") is not a JSON object");
    }
    return parsed;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.server.empty()) return Status::InvalidArgument("kube client: server: required");
  std::string scheme;
  try {
    const web::uri uri(options.server);
    scheme = uri.scheme();
    if ((scheme != "http" && scheme != "https") || uri.host().empty()) {
      return Status::InvalidArgument("kube client: server: want http(s)://host:port, got \"" + options.server + "\"");
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument("kube client: server: \"" + options.server + "\": " + e.what());
  }
  if (options.request_timeout.count() <= 0) {
    return Status::InvalidArgument("kube client: request_timeout: must be > 0");
  }
  if (options.max_retries < 0) return Status::InvalidArgument("kube client: max_retries: must be >= 0");
  auto impl = std::make_unique<Impl>();
  impl->config.set_timeout(options.request_timeout);
  impl->https = scheme == "https";
  STAR_ASSIGN_OR_RETURN(impl->credentials, CredentialSource::Create(options));
  if (impl->https) {
    impl->config.set_validate_certificates(!options.insecure_skip_tls_verify);
    // Load the CA and the certificate once now, so bad files are errors here and not on
    // every request.
    STAR_RETURN_IF_ERROR(CheckTlsSetup(options, impl->credentials->static_credentials()));
  }
  impl->options = std::move(options);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const ClientOptions& Client::options() const { return impl_->options; }

StatusOr<json> Client::Get(const ResourceRef& r, const std::string& ns, const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("kube: get " + r.resource + ": name: required");
  return impl_->Call(http::methods::GET, Impl::Path(r, impl_->NamespaceFor(r, ns), name));
}

namespace {
std::string Selectors(const std::string& labels, const std::string& fields) {
  std::string q;
  if (!labels.empty()) q += "&labelSelector=" + Encode(labels);
  if (!fields.empty()) q += "&fieldSelector=" + Encode(fields);
  return q;
}

// The object with apiVersion and kind filled in from `r` where missing.
json WithType(const ResourceRef& r, json object) {
  if (!object.is_object()) return object;
  if (!object.contains("apiVersion")) object["apiVersion"] = r.group.empty() ? r.version : r.group + "/" + r.version;
  if (!object.contains("kind") && !r.kind.empty()) object["kind"] = r.kind;
  return object;
}

std::string NameOf(const json& object) {
  if (!object.is_object() || !object.contains("metadata") || !object["metadata"].is_object()) return "";
  const json& meta = object["metadata"];
  return meta.contains("name") && meta["name"].is_string() ? meta["name"].get<std::string>() : "";
}
}  // namespace

StatusOr<json> Client::List(const ResourceRef& r, const std::string& ns, const ListOptions& options) {
  std::string target = Impl::Path(r, ns, "");
  std::string q = Selectors(options.label_selector, options.field_selector);
  if (options.limit > 0) q += "&limit=" + std::to_string(options.limit);
  if (!options.continue_token.empty()) q += "&continue=" + Encode(options.continue_token);
  if (!q.empty()) target += "?" + q.substr(1);
  STAR_ASSIGN_OR_RETURN(json list, impl_->Call(http::methods::GET, target));
  if (!list.is_object() || !list.contains("items")) {
    return Status::Internal("kube: list " + r.resource + ": the answer has no items");
  }
  if (list["items"].is_null()) list["items"] = json::array();
  if (!list["items"].is_array()) return Status::Internal("kube: list " + r.resource + ": items is not a list");
  for (const json& item : list["items"]) {
    if (!item.is_object()) return Status::Internal("kube: list " + r.resource + ": an item is not an object");
  }
  return list;
}

StatusOr<json> Client::Create(const ResourceRef& r, const std::string& ns, const json& object) {
  if (!object.is_object()) return Status::InvalidArgument("kube: create " + r.resource + ": the object is not a JSON object");
  const json body = WithType(r, object);
  return impl_->Call(http::methods::POST, Impl::Path(r, impl_->NamespaceFor(r, ns, &object), ""), &body);
}

StatusOr<json> Client::Update(const ResourceRef& r, const std::string& ns, const json& object) {
  const std::string name = NameOf(object);
  if (name.empty()) return Status::InvalidArgument("kube: update " + r.resource + ": metadata.name: required");
  const json body = WithType(r, object);
  return impl_->Call(http::methods::PUT, Impl::Path(r, impl_->NamespaceFor(r, ns, &object), name), &body);
}

StatusOr<json> Client::UpdateStatus(const ResourceRef& r, const std::string& ns, const json& object) {
  const std::string name = NameOf(object);
  if (name.empty()) return Status::InvalidArgument("kube: update " + r.resource + "/status: metadata.name: required");
  const json body = WithType(r, object);
  return impl_->Call(http::methods::PUT, Impl::Path(r, impl_->NamespaceFor(r, ns, &object), name, "status"), &body);
}

StatusOr<json> Client::MergePatch(const ResourceRef& r, const std::string& ns, const std::string& name,
                                  const json& patch, bool status) {
  if (name.empty()) return Status::InvalidArgument("kube: patch " + r.resource + ": name: required");
  return impl_->Call(http::methods::PATCH, Impl::Path(r, impl_->NamespaceFor(r, ns), name, status ? "status" : ""),
                     &patch, "application/merge-patch+json");
}

Status Client::Delete(const ResourceRef& r, const std::string& ns, const std::string& name) {
  if (name.empty()) return Status::InvalidArgument("kube: delete " + r.resource + ": name: required");
  const json options = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
  return impl_->Call(http::methods::DEL, Impl::Path(r, impl_->NamespaceFor(r, ns), name), &options).status();
}

Status Client::Watch(const ResourceRef& r, const std::string& ns, const WatchOptions& options,
                     const std::function<bool(const WatchEvent&)>& handler, const std::atomic<bool>* stop) {
  const auto stopped = [stop] { return stop != nullptr && stop->load(); };
  std::string target = Impl::Path(r, ns, "") + "?watch=1";
  if (!options.resource_version.empty()) target += "&resourceVersion=" + Encode(options.resource_version);
  if (options.allow_bookmarks) target += "&allowWatchBookmarks=true";
  if (options.timeout.count() > 0) target += "&timeoutSeconds=" + std::to_string(options.timeout.count());
  target += Selectors(options.label_selector, options.field_selector);
  const std::string what = "kube: watch " + impl_->options.server + target;

  // Its own connection, whose inactivity timeout outlasts the server-side one; it lives
  // as long as the stream.
  http::client::http_client_config config = impl_->config;
  config.set_timeout(std::chrono::duration_cast<milliseconds>(options.timeout) + impl_->options.request_timeout);
  std::shared_ptr<http::client::http_client> client;
  const ClientFor own = [this, &config, &client](const Credentials& creds) {
    StatusOr<std::shared_ptr<http::client::http_client>> c = impl_->NewClient(config, creds);
    if (c.ok()) client = *c;
    return c;
  };
  pplx::cancellation_token_source cancel;
  StatusOr<http::http_response> opened = impl_->Exchange(own, http::methods::GET, target, nullptr, "", stop, cancel);
  if (stopped()) return Status::Ok();
  if (!opened.ok()) return opened.status();
  http::http_response resp = *opened;
  if (resp.status_code() != http::status_codes::OK) {
    try {
      const std::vector<unsigned char> bytes = resp.extract_vector().get();
      return ErrorFromBody(resp.status_code(), std::string(bytes.begin(), bytes.end()));
    } catch (const std::exception& e) {
      return ErrorFromBody(resp.status_code(), e.what());
    }
  }

  // One event per line, handed over as each line arrives.
  Status result;
  try {
    concurrency::streams::istream body = resp.body();
    while (true) {
      concurrency::streams::container_buffer<std::string> line;
      std::optional<size_t> n = Await(body.read_line(line), stop, cancel);
      if (!n) return Status::Ok();  // stopped
      if (*n == 0 && body.is_eof()) break;
      const std::string& text = line.collection();
      if (text.find_first_not_of(" \r\t") == std::string::npos) continue;
      const json event = json::parse(text, nullptr, false);
      if (!event.is_object() || !event.contains("type") || !event["type"].is_string()) {
        result = Status::Unavailable(what + ": not a watch event: " + text.substr(0, 256));
        break;
      }
      WatchEvent e;
      e.type = event["type"].get<std::string>();
      e.object = event.value("object", json::object());
      if (e.type == "ERROR") {
        const int code = e.object.is_object() && e.object.contains("code") && e.object["code"].is_number_integer()
                             ? e.object["code"].get<int>()
                             : 500;
        result = ErrorFromBody(code, e.object.dump());
        break;
      }
      if (!handler(e) || stopped()) break;
    }
  } catch (const std::exception& e) {
    if (!stopped()) result = Status::Unavailable(what + ": the stream broke: " + e.what());
  }
  cancel.cancel();  // closes the connection if the stream is still open
  return result;
}

Status RetryOnConflict(const std::function<Status()>& update, int attempts) {
  Status last = Status::Aborted("RetryOnConflict: no attempt made");
  for (int i = 0; i < std::max(attempts, 1); ++i) {
    last = update();
    if (last.code() != StatusCode::kAborted) return last;
  }
  return last;
}

}  // namespace star::kube
