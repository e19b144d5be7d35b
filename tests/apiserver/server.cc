// The cpprestsdk adapter. cpprest exceptions are converted here and nowhere else.
#include "server.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cpprest/http_listener.h>
#include <cpprest/producerconsumerstream.h>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <thread>
#include <yaml-cpp/binary.h>

#include "star/report/net.h"
#include "yaml_json.h"

namespace star::apiserver {
namespace {

namespace http = web::http;
using Clock = std::chrono::steady_clock;

// A watch's lines go into a producer/consumer buffer that the response streams from.
class BufferSink : public WatchSink {
 public:
  // A client this far behind (or gone, the server no longer reading) is dropped.
  static constexpr size_t kMaxBacklog = 16 << 20;

  explicit BufferSink(concurrency::streams::producer_consumer_buffer<uint8_t> buf) : buf_(std::move(buf)) {}
  ~BufferSink() override { Close(); }

  bool Write(const std::string& line) override {
    try {
      if (!buf_.can_write() || buf_.in_avail() > kMaxBacklog) return false;
      buf_.putn_nocopy(reinterpret_cast<const uint8_t*>(line.data()), line.size()).get();
      buf_.sync().get();
      return true;
    } catch (const std::exception&) {
      return false;
    }
  }

  void Close() override {
    try {
      if (buf_.can_write()) buf_.close(std::ios_base::out).get();
    } catch (const std::exception&) {
      // Already closed by the other side.
    }
  }

 private:
  concurrency::streams::producer_consumer_buffer<uint8_t> buf_;
};

std::string DecodeQueryPart(std::string s) {
  std::replace(s.begin(), s.end(), '+', ' ');
  return web::uri::decode(s);
}

StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) return Status::InvalidArgument(what + " " + path + ": cannot be read");
  return text.str();
}

// Loads the serving certificate and key, and the client CA, into a TLS context now, so a
// bad file is an error of Start and not of every handshake.
StatusOr<std::function<void(boost::asio::ssl::context&)>> TlsSetup(const ApiServerTls& tls) {
  if (tls.key_file.empty()) return Status::InvalidArgument("tls.key_file: required with tls.cert_file");
  auto setup = [tls](boost::asio::ssl::context& ctx) {
    ctx.set_options(boost::asio::ssl::context::default_workarounds | boost::asio::ssl::context::no_sslv2 |
                    boost::asio::ssl::context::no_sslv3 | boost::asio::ssl::context::no_tlsv1 |
                    boost::asio::ssl::context::no_tlsv1_1);
    ctx.use_certificate_chain_file(tls.cert_file);
    ctx.use_private_key_file(tls.key_file, boost::asio::ssl::context::pem);
    if (!tls.client_ca_file.empty()) {
      ctx.load_verify_file(tls.client_ca_file);
      ctx.set_verify_mode(boost::asio::ssl::verify_peer | boost::asio::ssl::verify_fail_if_no_peer_cert);
    }
  };
  for (const auto& [file, what] : {std::pair{tls.cert_file, "tls.cert_file"}, {tls.key_file, "tls.key_file"},
                                   {tls.client_ca_file, "tls.client_ca_file"}, {tls.ca_file, "tls.ca_file"}}) {
    if (!file.empty()) STAR_RETURN_IF_ERROR(ReadTextFile(file, what).status());
  }
  try {
    boost::asio::ssl::context probe(boost::asio::ssl::context::tls_server);
    setup(probe);
  } catch (const std::exception& e) {
    return Status::InvalidArgument("tls: " + tls.cert_file + ", " + tls.key_file + ": " + e.what());
  }
  return std::function<void(boost::asio::ssl::context&)>(setup);
}

// The Status a real API server answers an unauthenticated request with.
http::http_response Unauthorized() {
  const nlohmann::json status = {{"kind", "Status"}, {"apiVersion", "v1"},   {"metadata", nlohmann::json::object()},
                                 {"status", "Failure"}, {"message", "Unauthorized"}, {"reason", "Unauthorized"},
                                 {"code", 401}};
  http::http_response resp(http::status_codes::Unauthorized);
  const std::string text = status.dump();
  resp.set_body(std::vector<unsigned char>(text.begin(), text.end()));
  resp.headers().set_content_type("application/json");
  return resp;
}

// Health and version answer anonymous requests, as system:public-info-viewer allows.
bool IsPublic(const std::string& path) {
  return path == "/healthz" || path == "/livez" || path == "/readyz" || path == "/version";
}

}  // namespace

struct ApiServer::Impl {
  struct Delayed {
    Clock::time_point due;
    std::uint64_t seq;
    std::function<void()> reply;
    bool operator>(const Delayed& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  explicit Impl(ApiServerOptions o) : options(std::move(o)), api(options.api), tokens(options.tokens) {}

  ApiServerOptions options;
  Api api;
  int port = 0;
  mutable std::mutex tokens_mu;
  std::vector<std::string> tokens;  // accepted bearer tokens; empty = anyone
  std::atomic<int> unauthorized{0};
  std::unique_ptr<http::experimental::listener::http_listener> listener;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed;
  std::uint64_t seq = 0;
  std::thread timer;
  // Replies not yet sent in full (a watch's until its stream ends). cpprest's listener
  // close() races with a connection still writing (a segfault in asio's reactor), so Stop
  // closes it only once these are done.
  std::mutex reply_mu;
  int replying = 0;  // guarded by reply_mu
  std::condition_variable replied;

  void Reply(http::http_request& req, const http::http_response& resp) {
    {
      std::lock_guard<std::mutex> lock(reply_mu);
      ++replying;
    }
    auto done = [this] {
      std::lock_guard<std::mutex> lock(reply_mu);
      if (--replying == 0) replied.notify_all();
    };
    try {
      req.reply(resp).then([done](pplx::task<void> t) {
        try {
          t.get();
        } catch (const std::exception&) {
          // The client went away.
        }
        done();
      });
    } catch (const std::exception&) {
      done();  // the client went away
    }
  }

  // Waits (bounded) until every reply has been sent in full.
  void AwaitReplies(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(reply_mu);
    replied.wait_for(lock, limit, [&] { return replying == 0; });
  }

  void Handle(http::http_request req) {
    Request r;
    try {
      r.method = req.method();
      const web::uri& uri = req.relative_uri();
      r.path = web::uri::decode(uri.path());
      for (const auto& [k, v] : web::uri::split_query(uri.query())) r.query[DecodeQueryPart(k)] = DecodeQueryPart(v);
      const auto& headers = req.headers();
      if (auto it = headers.find("Accept"); it != headers.end()) r.accept = it->second;
      if (auto it = headers.find("Content-Type"); it != headers.end()) r.content_type = it->second;
      if (!IsPublic(r.path) && !Authenticated(headers)) {
        ++unauthorized;
        Reply(req, Unauthorized());
        return;
      }
      if (r.method != "GET") {
        const std::vector<unsigned char> bytes = req.extract_vector().get();
        r.body.assign(bytes.begin(), bytes.end());
      }
    } catch (const std::exception& e) {
      http::http_response resp(http::status_codes::BadRequest);
      const std::string text = std::string("emulator: cannot read the request: ") + e.what();
      resp.set_body(std::vector<unsigned char>(text.begin(), text.end()));
      Reply(req, resp);
      return;
    }
    std::optional<http::http_response> stream;
    r.open_stream = [&stream]() -> std::shared_ptr<WatchSink> {
      concurrency::streams::producer_consumer_buffer<uint8_t> buf;
      http::http_response resp(http::status_codes::OK);
      resp.set_body(buf.create_istream(), "application/json");
      resp.headers().add("Cache-Control", "no-cache, private");
      // The connection ends with the watch: no read of a next request that Stop's close of
      // the listener could race with.
      resp.headers().add("Connection", "close");
      stream = resp;
      return std::make_shared<BufferSink>(buf);
    };
    const Response out = api.Handle(r);
    http::http_response resp;
    if (out.streamed && stream) {
      resp = *stream;
    } else {
      resp = http::http_response(static_cast<http::status_code>(out.code));
      resp.set_body(std::vector<unsigned char>(out.body.begin(), out.body.end()));
      resp.headers().set_content_type(out.content_type);
    }
    for (const auto& [k, v] : out.headers) resp.headers().add(k, v);
    if (out.delay.count() <= 0) {
      Reply(req, resp);
      return;
    }
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) {
      Reply(req, resp);
      return;
    }
    delayed.push(Delayed{Clock::now() + out.delay, seq++, [this, req, resp]() mutable { Reply(req, resp); }});
    cv.notify_all();
  }

  // A bearer token among `tokens` (or no tokens to check).
  bool Authenticated(const http::http_headers& headers) const {
    std::lock_guard<std::mutex> lock(tokens_mu);
    if (tokens.empty()) return true;
    auto it = headers.find("Authorization");
    if (it == headers.end() || it->second.rfind("Bearer ", 0) != 0) return false;
    return std::find(tokens.begin(), tokens.end(), it->second.substr(7)) != tokens.end();
  }

  // Answers delayed requests when due, and drives the API's periodic work.
  void TimerLoop() {
    const auto tick = std::clamp<std::chrono::milliseconds>(options.api.bookmark_interval / 4,
                                                            std::chrono::milliseconds(10),
                                                            std::chrono::milliseconds(250));
    auto next_tick = Clock::now() + tick;
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      auto wake = next_tick;
      if (!delayed.empty()) wake = std::min(wake, delayed.top().due);
      cv.wait_until(lock, wake, [&] { return stopping || (!delayed.empty() && delayed.top().due <= Clock::now()); });
      std::vector<std::function<void()>> due;
      while (!delayed.empty() && delayed.top().due <= Clock::now()) {
        due.push_back(delayed.top().reply);
        delayed.pop();
      }
      const bool ticking = Clock::now() >= next_tick;
      lock.unlock();
      for (auto& reply : due) reply();
      if (ticking) {
        api.Tick();
        next_tick = Clock::now() + tick;
      }
      lock.lock();
    }
  }
};

ApiServer::ApiServer(ApiServerOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

ApiServer::~ApiServer() { Stop(); }

Status ApiServer::Start() {
  if (!impl_->options.crds_dir.empty()) STAR_RETURN_IF_ERROR(impl_->api.LoadCrds(impl_->options.crds_dir));
  for (const auto& rule : impl_->options.faults) impl_->api.faults().Add(rule);
  const std::string& host = impl_->options.host;
  Impl* raw = impl_.get();
  http::experimental::listener::http_listener_config config;
  if (impl_->options.tls.enabled()) {
    STAR_ASSIGN_OR_RETURN(auto setup, TlsSetup(impl_->options.tls));
    config.set_ssl_context_callback(setup);
  }
  const std::string scheme = impl_->options.tls.enabled() ? "https://" : "http://";
  StatusOr<int> port = report::ListenOnPort(host, impl_->options.port, [raw, &host, &config, &scheme](int p) {
    try {
      auto listener = std::make_unique<http::experimental::listener::http_listener>(
          web::uri(scheme + host + ":" + std::to_string(p)), config);
      listener->support([raw](http::http_request req) { raw->Handle(std::move(req)); });
      listener->open().wait();
      raw->listener = std::move(listener);
      return Status::Ok();
    } catch (const std::exception& e) {
      return Status::Unavailable(e.what());
    }
  });
  if (!port.ok()) return port.status();
  impl_->port = *port;
  impl_->api.set_server_address(host + ":" + std::to_string(impl_->port));
  impl_->timer = std::thread([raw] { raw->TimerLoop(); });
  return Status::Ok();
}

void ApiServer::Stop() {
  std::vector<std::function<void()>> pending;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
    while (!impl_->delayed.empty()) {
      pending.push_back(impl_->delayed.top().reply);
      impl_->delayed.pop();
    }
  }
  impl_->cv.notify_all();
  if (impl_->timer.joinable()) impl_->timer.join();
  impl_->api.Shutdown();
  for (auto& reply : pending) reply();
  impl_->AwaitReplies(std::chrono::seconds(10));
  if (impl_->listener) {
    try {
      impl_->listener->close().wait();
    } catch (const std::exception&) {
      // Closing failed: the server is going away anyway.
    }
  }
}

int ApiServer::port() const { return impl_->port; }

std::string ApiServer::url() const {
  return (impl_->options.tls.enabled() ? "https://" : "http://") + impl_->options.host + ":" +
         std::to_string(impl_->port);
}

Api& ApiServer::api() { return impl_->api; }

void ApiServer::SetTokens(std::vector<std::string> tokens) {
  std::lock_guard<std::mutex> lock(impl_->tokens_mu);
  impl_->tokens = std::move(tokens);
}

int ApiServer::unauthorized() const { return impl_->unauthorized.load(); }

std::string ApiServer::Kubeconfig() const {
  nlohmann::json cluster = {{"server", url()}};
  if (!impl_->options.tls.ca_file.empty()) {
    const StatusOr<std::string> ca = ReadTextFile(impl_->options.tls.ca_file, "tls.ca_file");
    const std::string pem = ca.ok() ? *ca : "";
    cluster["certificate-authority-data"] =
        YAML::EncodeBase64(reinterpret_cast<const unsigned char*>(pem.data()), pem.size());
  }
  const KubeconfigUser& u = impl_->options.kubeconfig_user;
  nlohmann::json user = nlohmann::json::object();
  if (!u.client_cert_file.empty()) {
    user = {{"client-certificate", u.client_cert_file}, {"client-key", u.client_key_file}};
  } else if (!u.token.empty()) {
    user = {{"token", u.token}};
  }
  const nlohmann::json config = {
      {"apiVersion", "v1"},
      {"kind", "Config"},
      {"clusters", {{{"name", "star-emulator"}, {"cluster", cluster}}}},
      {"users", {{{"name", "star-emulator"}, {"user", user}}}},
      {"contexts",
       {{{"name", "star-emulator"},
         {"context", {{"cluster", "star-emulator"}, {"user", "star-emulator"}, {"namespace", "default"}}}}}},
      {"current-context", "star-emulator"}};
  return ToYaml(config);
}

Status ApiServer::WriteKubeconfig(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << Kubeconfig();
    if (!out) return Status::Unavailable("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::Unavailable("cannot rename " + tmp + " to " + path);
  return Status::Ok();
}

}  // namespace star::apiserver
