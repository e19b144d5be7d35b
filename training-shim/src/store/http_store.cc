// StoreServer (cpprestsdk http_listener) and its client, ConnectStore (http_client).
// cpprest exceptions are converted to Status here and nowhere else.

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cpprest/http_client.h>
#include <cpprest/http_listener.h>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "star/report/net.h"
#include "star/shim/store_server.h"
#include "store/kv_table.h"
#include "store/store_auth.h"
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

// The HTTP answer to a failed store operation.
http::status_code CodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
      return http::status_codes::BadRequest;
    case StatusCode::kOutOfRange:
      return 507;  // Insufficient Storage: the store is full
    default:
      return http::status_codes::InternalError;
  }
}

// "timeout_ms" of a long poll: absent = 0; negative = 0; clamped to max_poll.
StatusOr<std::chrono::milliseconds> PollTimeout(const http::http_request& req,
                                                std::chrono::milliseconds max_poll) {
  const auto query = web::uri::split_query(req.relative_uri().query());
  const auto it = query.find("timeout_ms");
  if (it == query.end()) return std::chrono::milliseconds(0);
  int64_t ms = 0;
  const std::string& text = it->second;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), ms);
  const bool whole = end == text.data() + text.size() && !text.empty();
  if (ec == std::errc::result_out_of_range && whole) {
    ms = text.front() == '-' ? 0 : max_poll.count();
  } else if (ec != std::errc() || !whole) {
    return Status::InvalidArgument("store: timeout_ms: \"" + text.substr(0, 32) +
                                   "\" is not an integer");
  }
  return std::clamp(std::chrono::milliseconds(ms), std::chrono::milliseconds(0), max_poll);
}

Status CheckLimits(const StoreLimits& l) {
  auto zero = [](const char* field) {
    return Status::InvalidArgument(std::string("store limits: ") + field + ": must be > 0");
  };
  if (l.max_key_bytes == 0) return zero("max_key_bytes");
  if (l.max_value_bytes == 0) return zero("max_value_bytes");
  if (l.max_keys == 0) return zero("max_keys");
  if (l.max_total_bytes == 0) return zero("max_total_bytes");
  if (l.max_waiting == 0) return zero("max_waiting");
  if (l.max_poll <= std::chrono::milliseconds(0) || l.max_poll > std::chrono::hours(24)) {
    return Status::InvalidArgument("store limits: max_poll: must be in (0, 24h], got " +
                                   std::to_string(l.max_poll.count()) + " ms");
  }
  return Status::Ok();
}

}  // namespace

struct StoreServer::Impl {
  struct Waiter {
    std::string key;
    http::http_request request;
    Clock::time_point deadline;
  };

  explicit Impl(StoreServerOptions o) : options(std::move(o)), kv(options.limits) {}

  const StoreServerOptions options;
  std::string host;
  int port = 0;
  std::unique_ptr<http::experimental::listener::http_listener> listener;

  std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  KvTable kv;
  std::list<Waiter> waiters;
  std::thread timer;

  void Handle(http::http_request req) {
    try {
      if (!Authorized(req)) {
        req.reply(TextResponse(http::status_codes::Unauthorized, "store: unauthorized"));
        return;
      }
      Route(req);
    } catch (const std::exception& e) {
      try {
        req.reply(TextResponse(http::status_codes::BadRequest, std::string("store server: ") + e.what()));
      } catch (const std::exception&) {
        // The connection is gone; nothing to tell.
      }
    }
  }

  bool Authorized(const http::http_request& req) const {
    if (options.token.empty()) return true;
    const auto it = req.headers().find(http::header_names::authorization);
    return BearerMatches(it == req.headers().end() ? "" : it->second, options.token);
  }

  void Route(http::http_request& req) {
    const std::string path = req.relative_uri().path();
    const bool kv_path = StartsWith(path, kKvPrefix);
    if (!(kv_path || StartsWith(path, kAddPrefix))) {
      req.reply(TextResponse(http::status_codes::NotFound, "no such endpoint: " + path.substr(0, 64)));
      return;
    }
    const size_t prefix = kv_path ? sizeof(kKvPrefix) - 1 : sizeof(kAddPrefix) - 1;
    const std::string key = web::uri::decode(path.substr(prefix));
    if (Status checked = kv.CheckKey(key); !checked.ok()) {
      req.reply(TextResponse(CodeFor(checked), checked.message()));
    } else if (kv_path && req.method() == http::methods::PUT) {
      HandlePut(req, key);
    } else if (kv_path && req.method() == http::methods::GET) {
      StatusOr<std::chrono::milliseconds> timeout = PollTimeout(req, options.limits.max_poll);
      if (!timeout.ok()) {
        req.reply(TextResponse(CodeFor(timeout.status()), timeout.status().message()));
        return;
      }
      GetOrPark(key, std::move(req), *timeout);
    } else if (!kv_path && req.method() == http::methods::POST) {
      HandleAdd(req, key);
    } else {
      req.reply(TextResponse(http::status_codes::MethodNotAllowed,
                             "store: " + req.method() + " not allowed on " + path.substr(0, 64)));
    }
  }

  // The request's body, at most max_value_bytes; replies (411, 413) and returns nullopt if
  // it has no Content-Length or a longer one.
  std::optional<Bytes> ReadBody(http::http_request& req) {
    const auto& headers = req.headers();
    if (headers.has(http::header_names::transfer_encoding) ||
        !headers.has(http::header_names::content_length)) {
      req.reply(TextResponse(http::status_codes::LengthRequired,
                             "store: a request body needs a Content-Length"));
      return std::nullopt;
    }
    const size_t limit = options.limits.max_value_bytes;
    if (headers.content_length() > limit) {
      req.reply(TextResponse(http::status_codes::RequestEntityTooLarge,
                             "store: body of " + std::to_string(headers.content_length()) +
                                 " bytes exceeds the limit of " + std::to_string(limit) + " bytes"));
      return std::nullopt;
    }
    std::vector<unsigned char> body = req.extract_vector().get();
    return Bytes(body.begin(), body.end());
  }

  void HandlePut(http::http_request& req, const std::string& key) {
    std::optional<Bytes> body = ReadBody(req);
    if (!body) return;
    Status set = Put(key, std::move(*body));
    if (!set.ok()) {
      req.reply(TextResponse(CodeFor(set), set.message()));
      return;
    }
    req.reply(http::status_codes::NoContent);
  }

  void HandleAdd(http::http_request& req, const std::string& key) {
    std::optional<Bytes> body = ReadBody(req);
    if (!body) return;
    auto delta = ParseCounter(key, *body);
    if (!delta.ok()) {
      req.reply(TextResponse(http::status_codes::BadRequest, delta.status().message()));
      return;
    }
    auto value = Add(key, *delta);
    if (!value.ok()) {
      req.reply(TextResponse(CodeFor(value.status()), value.status().message()));
      return;
    }
    req.reply(BytesResponse(http::status_codes::OK, CounterBytes(*value)));
  }

  Status Put(const std::string& key, Bytes value) {
    std::vector<http::http_request> ready;
    {
      std::lock_guard<std::mutex> lock(mu);
      STAR_RETURN_IF_ERROR(kv.Set(key, value));
      TakeWaitersLocked(key, &ready);
    }
    for (auto& r : ready) r.reply(BytesResponse(http::status_codes::OK, value));
    return Status::Ok();
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) {
    std::vector<http::http_request> ready;
    int64_t value = 0;
    Bytes bytes;
    {
      std::lock_guard<std::mutex> lock(mu);
      STAR_ASSIGN_OR_RETURN(value, kv.Add(key, delta));
      bytes = CounterBytes(value);
      TakeWaitersLocked(key, &ready);
    }
    for (auto& r : ready) r.reply(BytesResponse(http::status_codes::OK, bytes));
    return value;
  }

  // Moves the long polls waiting for key into *ready. Needs mu held.
  void TakeWaitersLocked(const std::string& key, std::vector<http::http_request>* ready) {
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
    if (const Bytes* found = kv.Find(key)) {
      Bytes value = *found;
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
    if (waiters.size() >= options.limits.max_waiting) {
      lock.unlock();
      req.reply(TextResponse(http::status_codes::TooManyRequests,
                             "store: " + std::to_string(options.limits.max_waiting) +
                                 " requests wait already (max_waiting)"));
      return;
    }
    waiters.push_back(Waiter{key, std::move(req), DeadlineAfter(Clock::now(), timeout)});
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

StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(const std::string& host, int port,
                                                          StoreServerOptions options) {
  STAR_RETURN_IF_ERROR(CheckLimits(options.limits));
  auto impl = std::make_unique<Impl>(std::move(options));
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

bool StoreServer::AwaitWaiting(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(impl_->mu);
  return impl_->cv.wait_until(lock, DeadlineAfter(Clock::now(), timeout),
                              [&] { return impl_->waiters.size() >= n; });
}

}  // namespace star::shim
