// StoreServer (cpprestsdk http_listener) and its client, ConnectStore (http_client).
// cpprest exceptions are converted to Status here and nowhere else.

#include <condition_variable>
#include <cpprest/http_client.h>
#include <cpprest/http_listener.h>
#include <list>
#include <map>
#include <mutex>
#include <thread>

#include "star/report/net.h"
#include "star/shim/store_server.h"
#include "store/store_util.h"

namespace star::shim {
namespace {

namespace http = web::http;
using Clock = std::chrono::steady_clock;

constexpr char kKvPrefix[] = "/kv/";
constexpr char kAddPrefix[] = "/add/";

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

http::http_response BytesResponse(http::status_code code, const Bytes& body) {
  http::http_response resp(code);
  resp.set_body(std::vector<unsigned char>(body.begin(), body.end()));
  return resp;
}

// Bodies go out as byte vectors (cpprest's string-body path trips UBSan's vptr check on
// its own types).
http::http_response TextResponse(http::status_code code, const std::string& text) {
  return BytesResponse(code, Bytes(text.begin(), text.end()));
}

}  // namespace

struct StoreServer::Impl {
  struct Waiter {
    std::string key;
    http::http_request request;
    Clock::time_point deadline;
  };

  std::string host;
  int port = 0;
  std::unique_ptr<http::experimental::listener::http_listener> listener;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  std::map<std::string, Bytes> kv;
  std::list<Waiter> waiters;
  std::thread timer;

  void Handle(http::http_request req) {
    try {
      const std::string path = req.relative_uri().path();
      if (StartsWith(path, kKvPrefix) && req.method() == http::methods::PUT) {
        const std::string key = web::uri::decode(path.substr(sizeof(kKvPrefix) - 1));
        std::vector<unsigned char> body = req.extract_vector().get();
        Put(key, Bytes(body.begin(), body.end()));
        req.reply(http::status_codes::NoContent);
      } else if (StartsWith(path, kKvPrefix) && req.method() == http::methods::GET) {
        const std::string key = web::uri::decode(path.substr(sizeof(kKvPrefix) - 1));
        auto query = web::uri::split_query(req.relative_uri().query());
        long timeout_ms = 0;
        if (auto it = query.find("timeout_ms"); it != query.end()) {
          timeout_ms = std::stol(it->second);
        }
        GetOrPark(key, std::move(req), std::chrono::milliseconds(timeout_ms));
      } else if (StartsWith(path, kAddPrefix) && req.method() == http::methods::POST) {
        const std::string key = web::uri::decode(path.substr(sizeof(kAddPrefix) - 1));
        std::vector<unsigned char> body = req.extract_vector().get();
        auto delta = ParseCounter(key, Bytes(body.begin(), body.end()));
        if (!delta.ok()) {
          req.reply(TextResponse(http::status_codes::BadRequest, delta.status().message()));
          return;
        }
        auto value = Add(key, *delta);
        if (!value.ok()) {
          req.reply(TextResponse(http::status_codes::BadRequest, value.status().message()));
          return;
        }
        req.reply(BytesResponse(http::status_codes::OK, CounterBytes(*value)));
      } else {
        req.reply(TextResponse(http::status_codes::NotFound, "no such endpoint: " + path));
      }
    } catch (const std::exception& e) {
      try {
        req.reply(TextResponse(http::status_codes::BadRequest, std::string("store server: ") + e.what()));
      } catch (const std::exception&) {
        // The connection is gone; nothing to tell.
      }
    }
  }

  void Put(const std::string& key, Bytes value) {
    std::vector<http::http_request> ready;
    {
      std::lock_guard<std::mutex> lock(mu);
      SetLocked(key, value, &ready);
    }
    for (auto& r : ready) r.reply(BytesResponse(http::status_codes::OK, value));
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) {
    std::vector<http::http_request> ready;
    int64_t value = 0;
    Bytes bytes;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = kv.find(key); it != kv.end()) {
        STAR_ASSIGN_OR_RETURN(value, ParseCounter(key, it->second));
      }
      value += delta;
      bytes = CounterBytes(value);
      SetLocked(key, bytes, &ready);
    }
    for (auto& r : ready) r.reply(BytesResponse(http::status_codes::OK, bytes));
    return value;
  }

  // Stores key and moves the long polls waiting for it into *ready. Needs mu held.
  void SetLocked(const std::string& key, const Bytes& value,
                 std::vector<http::http_request>* ready) {
    kv[key] = value;
    for (auto it = waiters.begin(); it != waiters.end();) {
      if (it->key == key) {
        ready->push_back(std::move(it->request));
        it = waiters.erase(it);
      } else {
        ++it;
      }
    }
  }

  void GetOrPark(const std::string& key, http::http_request req,
                 std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    if (auto it = kv.find(key); it != kv.end()) {
      Bytes value = it->second;
      lock.unlock();
      req.reply(BytesResponse(http::status_codes::OK, value));
      return;
    }
    if (stopping || timeout.count() <= 0) {
      lock.unlock();
      req.reply(stopping ? http::status_codes::ServiceUnavailable
                         : http::status_codes::RequestTimeout);
      return;
    }
    waiters.push_back(Waiter{key, std::move(req), Clock::now() + timeout});
    cv.notify_all();
  }

  // Answers 408 to long polls past their deadline; runs until stopping.
  void TimerLoop() {
    std::unique_lock<std::mutex> lock(mu);
    while (!stopping) {
      auto next = Clock::time_point::max();
      std::vector<http::http_request> expired;
      const auto now = Clock::now();
      for (auto it = waiters.begin(); it != waiters.end();) {
        if (it->deadline <= now) {
          expired.push_back(std::move(it->request));
          it = waiters.erase(it);
        } else {
          next = std::min(next, it->deadline);
          ++it;
        }
      }
      if (!expired.empty()) {
        lock.unlock();
        for (auto& r : expired) r.reply(http::status_codes::RequestTimeout);
        lock.lock();
        continue;
      }
      if (next == Clock::time_point::max()) {
        cv.wait(lock);
      } else {
        cv.wait_until(lock, next);
      }
    }
  }
};

StoreServer::StoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StoreServer::~StoreServer() { Stop(); }

int StoreServer::port() const { return impl_->port; }
std::string StoreServer::url() const {
  return "http://" + impl_->host + ":" + std::to_string(impl_->port);
}

StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const std::string& host, int port) {
  auto impl = std::make_unique<Impl>();
  impl->host = host;
  Impl* raw = impl.get();
  StatusOr<int> bound = report::ListenOnPort(host, port, [raw, &host](int p) {
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
  if (!bound.ok()) {
    return Status(bound.status().code(), "store server: " + bound.status().message());
  }
  impl->port = *bound;
  impl->timer = std::thread([raw] { raw->TimerLoop(); });
  return std::unique_ptr<StoreServer>(new StoreServer(std::move(impl)));
}

void StoreServer::Stop() {
  std::vector<http::http_request> pending;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return;
    impl_->stopping = true;
    for (auto& w : impl_->waiters) pending.push_back(std::move(w.request));
    impl_->waiters.clear();
  }
  impl_->cv.notify_all();
  for (auto& r : pending) {
    try {
      r.reply(http::status_codes::ServiceUnavailable);
    } catch (const std::exception&) {
    }
  }
  if (impl_->timer.joinable()) impl_->timer.join();
  try {
    impl_->listener->close().wait();
  } catch (const std::exception&) {
    // Closing failed: the process is going away from this server anyway.
  }
}

}  // namespace star::shim
