// StoreServer and ConnectStore: the rendezvous Store over HTTP.
//
// The server (hosted by rank 0 or the controller) keeps the keys in memory and speaks a
// tiny protocol; any Store client in any process reaches it by URL:
//   PUT  /kv/<key>                 body = value bytes                       -> 204
//   GET  /kv/<key>?timeout_ms=N    long poll: waits up to N ms for the key  -> 200 bytes | 408
//   POST /add/<key>                body = decimal delta -> 200 decimal new value | 400
// <key> is percent-encoded (any bytes allowed). Counters are stored as decimal text, so a
// Get of a counter key returns e.g. "3".
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "star/core/status.h"
#include "star/shim/store.h"

namespace star::shim {

class StoreServer {
 public:
  // Starts serving on host:port (host is an address such as "127.0.0.1"; port 0 picks a
  // free port, see port()). Unavailable if the address cannot be bound.
  [[nodiscard]] static StatusOr<std::unique_ptr<StoreServer>> Start(const std::string& host,
                                                                     int port);
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

 private:
  struct Impl;
  explicit StoreServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct StoreOptions {
  // Bound on Set and Add (which take no timeout of their own), including retries while
  // the server is not reachable yet. Get and Wait are bounded by their own timeout.
  std::chrono::milliseconds timeout{30000};
};

// A Store client for the StoreServer at `url` ("http://host:port"). Does not contact the
// server: each operation retries "connection refused" (the server may start later) until
// its deadline, then fails with Unavailable naming the URL. Get/Wait past their timeout
// give DeadlineExceeded naming the key. InvalidArgument for a malformed URL. The returned
// Store is thread-safe.
[[nodiscard]] StatusOr<std::shared_ptr<Store>> ConnectStore(const std::string& url,
                                                            StoreOptions options = {});

}  // namespace star::shim
