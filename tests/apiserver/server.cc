// The cpprestsdk adapter. cpprest exceptions are converted here and nowhere else.
#include "server.h"

#include <condition_variable>
#include <cpprest/http_listener.h>
#include <cpprest/producerconsumerstream.h>
#include <cstdio>
#include <fstream>
#include <queue>
#include <thread>

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

void Reply(http::http_request& req, const http::http_response& resp) {
  try {
    req.reply(resp).then([](pplx::task<void> t) {
      try {
        t.get();
      } catch (const std::exception&) {
        // The client went away.
      }
    });
  } catch (const std::exception&) {
    // The client went away.
  }
}

}  // namespace

struct ApiServer::Impl {
  struct Delayed {
    Clock::time_point due;
    std::uint64_t seq;
    std::function<void()> reply;
    bool operator>(const Delayed& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  explicit Impl(ApiServerOptions o) : options(std::move(o)), api(options.api) {}

  ApiServerOptions options;
  Api api;
  int port = 0;
  std::unique_ptr<http::experimental::listener::http_listener> listener;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::priority_queue<Delayed, std::vector<Delayed>, std::greater<Delayed>> delayed;
  std::uint64_t seq = 0;
  std::thread timer;

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
    delayed.push(Delayed{Clock::now() + out.delay, seq++, [req, resp]() mutable { Reply(req, resp); }});
    cv.notify_all();
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
  StatusOr<int> port = report::ListenOnPort(host, impl_->options.port, [raw, &host](int p) {
    try {
      auto listener = std::make_unique<http::experimental::listener::http_listener>(
          web::uri("http://" + host + ":" + std::to_string(p)));
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
  if (impl_->listener) {
    try {
      impl_->listener->close().wait();
    } catch (const std::exception&) {
      // Closing failed: the server is going away anyway.
    }
  }
}

int ApiServer::port() const { return impl_->port; }

std::string ApiServer::url() const { return "http://" + impl_->options.host + ":" + std::to_string(impl_->port); }

Api& ApiServer::api() { return impl_->api; }

std::string ApiServer::Kubeconfig() const {
  const nlohmann::json config = {
      {"apiVersion", "v1"},
      {"kind", "Config"},
      {"clusters", {{{"name", "star-emulator"}, {"cluster", {{"server", url()}}}}}},
      {"users", {{{"name", "star-emulator"}, {"user", {{"token", "star-emulator-token"}}}}}},
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
