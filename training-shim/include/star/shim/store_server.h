// StoreServer and ConnectStore: the rendezvous Store over HTTP.
//
// The server (hosted by rank 0 or the controller) keeps the keys in memory and speaks a
// tiny protocol; any Store client in any process reaches it by URL:
//   PUT  /kv/<key>                 body = value bytes                       -> 204
//   GET  /kv/<key>?timeout_ms=N    long poll: waits up to N ms for the key  -> 200 bytes | 408
//   POST /add/<key>                body = decimal delta -> 200 decimal new value | 400
// <key> is percent-encoded (any bytes allowed). Counters are stored as decimal text, so a
// Get of a counter key returns e.g. "3".
//
// With a token configured every request must carry "Authorization: Bearer <token>"; a
// missing or wrong one is answered 401, whatever the request. Every request is bounded
// (StoreLimits): 400 for a malformed request or a key that is too long, 413 for a value
// that is too large or a body without Content-Length, 507 when the store is full, 429 when
// too many long polls wait at once. timeout_ms is clamped to [0, max_poll]. Errors carry
// a text body naming the field and the limit.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "star/core/status.h"
#include "star/shim/store.h"

namespace star::shim {

// What one store may hold and one request may ask; the defaults fit a job of thousands of
// ranks (Gloo's full-mesh rendezvous puts one address list per rank).
struct StoreLimits {
  size_t max_key_bytes = 64 * 1024;           // default 64 KiB (split keys list members)
  size_t max_value_bytes = 8 * 1024 * 1024;   // default 8 MiB; also bounds a request body
  size_t max_keys = 1 << 20;                  // default 1048576 keys
  size_t max_total_bytes = 256 * 1024 * 1024; // default 256 MiB of keys and values together
  size_t max_waiting = 4096;                  // default 4096 long polls parked at once
  std::chrono::milliseconds max_poll{60000};  // default 60 s; a GET's timeout_ms is clamped to it
};

struct StoreServerOptions {
  // The job's token (STAR_JOB_TOKEN); default "" = no authentication (star local, tests).
  std::string token;
  StoreLimits limits;
};

class StoreServer {
 public:
  // Starts serving on host:port (host is an address such as "127.0.0.1"; port 0 picks a
  // free port, see port()). Unavailable if the address cannot be bound; InvalidArgument
  // naming the field for a zero limit or a max_poll outside (0, 24 h].
  [[nodiscard]] static StatusOr<std::unique_ptr<StoreServer>> Start(
      const std::string& host, int port, StoreServerOptions options = {});
  ~StoreServer();  // Stop()s.
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  // The bound port.
  int port() const;
  // "http://host:port".
  std::string url() const;
  // Stops serving: pending long polls are answered 503, later requests are refused.
  // Idempotent; thread-safe.
  void Stop();
  // Waits up to `timeout` until at least n long polls are parked waiting for their key;
  // false if they are not by then. Thread-safe (lets tests order a Set after a Get).
  bool AwaitWaiting(size_t n, std::chrono::milliseconds timeout);

 private:
  struct Impl;
  explicit StoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct StoreOptions {
  StoreOptions() = default;
  explicit StoreOptions(std::chrono::milliseconds t, std::string bearer = "")
      : timeout(t), token(std::move(bearer)) {}

  // Bound on Set and Add (which take no timeout of their own), including retries while
  // the server is not reachable yet. Get and Wait are bounded by their own timeout.
  std::chrono::milliseconds timeout{30000};
  // Sent as "Authorization: Bearer <token>"; default "" = none.
  std::string token;
};

// A Store client for the StoreServer at `url` ("http://host:port"). Does not contact the
// server: each operation retries "connection refused" (the server may start later) until
// its deadline, then fails with Unavailable naming the URL. Get/Wait past their timeout
// give DeadlineExceeded naming the key. InvalidArgument for a malformed URL. A refused
// token is FailedPrecondition; a key or value over the server's limits InvalidArgument; a
// full store OutOfRange; each with the server's reason. The returned Store is thread-safe.
[[nodiscard]] StatusOr<std::shared_ptr<Store>> ConnectStore(const std::string& url,
                                                            StoreOptions options = {});

}  // namespace star::shim
