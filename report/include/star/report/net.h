// Small socket helpers for HTTP endpoints (the report server, the shim's store, test
// servers).
#pragma once

#include <functional>
#include <string>

#include "star/core/status.h"

namespace star::report {

// A TCP port that was free on `host` a moment ago (an IPv4 literal; anything else probes
// all addresses), or 0 if none could be found. Another process may take it before the
// caller binds it: callers retry on "address in use" (ListenOnPort does).
int PickFreePort(const std::string& host);

// Calls `listen(p)` to open a listener on `host`:`port`; with port 0, on up to `attempts`
// ports picked free, since a picked port can be taken before it is bound. Returns the
// port listened on; Unavailable "cannot listen on host:port: <last error>" when every
// attempt failed (listen's own message is kept). InvalidArgument naming "port" outside
// [0, 65535].
[[nodiscard]] StatusOr<int> ListenOnPort(const std::string& host, int port,
                                         const std::function<Status(int port)>& listen,
                                         int attempts = 8);

}  // namespace star::report
