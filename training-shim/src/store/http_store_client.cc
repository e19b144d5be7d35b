// ConnectStore: the Store client of StoreServer over cpprestsdk's http_client.
// cpprest exceptions are converted to Status here and nowhere else.
#include <algorithm>
#include <cpprest/http_client.h>
#include <optional>
#include <thread>

#include "star/shim/store_server.h"
#include "store/store_util.h"

namespace star::shim {
namespace {

namespace http = web::http;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A long poll asks the server to wait at most this long; the client re-polls until the
// caller's timeout, so one HTTP request never outlives the client's socket timeout.
constexpr milliseconds kMaxPoll{2000};
constexpr milliseconds kSocketSlack{10000};

class HttpStore final : public Store {
 public:
  HttpStore(std::string url, StoreOptions options)
      : url_(std::move(url)), options_(options), client_(url_, Config()) {}

  Status Set(const std::string& key, const Bytes& value) override {
    const auto deadline = DeadlineAfter(Clock::now(), options_.timeout);
    STAR_ASSIGN_OR_RETURN(
        http::http_response resp,
        Request(http::methods::PUT, "/kv/" + web::uri::encode_data_string(key), value, deadline));
    if (resp.status_code() != http::status_codes::NoContent) return BadReply("Set", key, resp);
    return Status::Ok();
  }

  StatusOr<Bytes> Get(const std::string& key, milliseconds timeout) override {
    const auto deadline = DeadlineAfter(Clock::now(), timeout);
    const std::string path = "/kv/" + web::uri::encode_data_string(key);
    while (true) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      const milliseconds poll = std::clamp(left, milliseconds(0), kMaxPoll);
      STAR_ASSIGN_OR_RETURN(
          http::http_response resp,
          Request(http::methods::GET, path + "?timeout_ms=" + std::to_string(poll.count()),
                  std::nullopt, deadline));
      if (resp.status_code() == http::status_codes::OK) {
        STAR_ASSIGN_OR_RETURN(std::vector<unsigned char> body, Body(resp));
        return Bytes(body.begin(), body.end());
      }
      if (resp.status_code() != http::status_codes::RequestTimeout) {
        return BadReply("Get", key, resp);
      }
      if (Clock::now() >= deadline) return KeyTimeout(key, timeout);
    }
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    const auto deadline = DeadlineAfter(Clock::now(), options_.timeout);
    STAR_ASSIGN_OR_RETURN(http::http_response resp,
                          Request(http::methods::POST, "/add/" + web::uri::encode_data_string(key),
                                  CounterBytes(delta), deadline));
    if (resp.status_code() != http::status_codes::OK) return BadReply("Add", key, resp);
    STAR_ASSIGN_OR_RETURN(std::vector<unsigned char> body, Body(resp));
    return ParseCounter(key, Bytes(body.begin(), body.end()));
  }

  Status Wait(const std::vector<std::string>& keys, milliseconds timeout) override {
    const auto deadline = DeadlineAfter(Clock::now(), timeout);
    for (const auto& key : keys) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
      auto value = Get(key, std::max(left, milliseconds(0)));
      if (value.status().code() == StatusCode::kDeadlineExceeded) return KeyTimeout(key, timeout);
      STAR_RETURN_IF_ERROR(value.status());
    }
    return Status::Ok();
  }

 private:
  static http::client::http_client_config Config() {
    http::client::http_client_config config;
    config.set_timeout(kMaxPoll + kSocketSlack);
    return config;
  }

  // Sends one request, retrying while the server cannot be reached, until `deadline`.
  StatusOr<http::http_response> Request(const http::method& method, const std::string& path,
                                        const std::optional<Bytes>& body,
                                        Clock::time_point deadline) {
    milliseconds backoff{10};
    std::string last_error;
    while (true) {
      try {
        http::http_request req(method);
        req.set_request_uri(web::uri(path));
        if (!options_.token.empty()) {
          req.headers().add(http::header_names::authorization, "Bearer " + options_.token);
        }
        if (body) req.set_body(std::vector<unsigned char>(body->begin(), body->end()));
        return client_.request(req).get();
      } catch (const std::exception& e) {
        last_error = e.what();
      }
      const auto left = deadline - Clock::now();
      if (left <= Clock::duration::zero()) {
        return Status::Unavailable("store: cannot reach " + url_ + ": " + last_error);
      }
      std::this_thread::sleep_for(std::min<Clock::duration>(backoff, left));
      backoff = std::min(backoff * 2, milliseconds(200));
    }
  }

  StatusOr<std::vector<unsigned char>> Body(http::http_response& resp) {
    try {
      return resp.extract_vector().get();
    } catch (const std::exception& e) {
      return Status::Unavailable("store: reading reply from " + url_ + ": " + e.what());
    }
  }

  // The Status of a refused request: the server's reason for bad input (400, 413) and a
  // full store (507); FailedPrecondition for a refused token; Unavailable otherwise.
  Status BadReply(const char* op, const std::string& key, http::http_response& resp) {
    const std::string where = "store: " + std::string(op) + " \"" + key.substr(0, 64) +
                              "\" at " + url_ + ": HTTP " + std::to_string(resp.status_code());
    switch (resp.status_code()) {
      case http::status_codes::Unauthorized:
        return Status::FailedPrecondition(where + ": the store refused this job's token");
      case http::status_codes::BadRequest:
      case http::status_codes::RequestEntityTooLarge:
        return Status::InvalidArgument(where + ": " + Reason(resp));
      case 507:
        return Status::OutOfRange(where + ": " + Reason(resp));
      default:
        return Status::Unavailable(where);
    }
  }

  std::string Reason(http::http_response& resp) {
    auto body = Body(resp);
    return body.ok() ? std::string(body->begin(), body->end()) : body.status().message();
  }

  const std::string url_;
  const StoreOptions options_;
  http::client::http_client client_;
};

}  // namespace

StatusOr<std::shared_ptr<Store>> ConnectStore(const std::string& url, StoreOptions options) {
  try {
    web::uri uri(url);
    if (uri.scheme() != "http" || uri.host().empty()) {
      return Status::InvalidArgument("store url: want http://host:port, got \"" + url + "\"");
    }
    return std::shared_ptr<Store>(std::make_shared<HttpStore>(url, options));
  } catch (const std::exception& e) {
    return Status::InvalidArgument("store url: \"" + url + "\": " + e.what());
  }
}

}  // namespace star::shim
