// Small socket helpers for HTTP endpoints (the report server, the shim's store, test servers).
#pragma once

#include <string>

namespace star::report {

// A TCP port that was free on `host` a moment ago (an IPv4 literal; anything else probes
// all addresses), or 0 if none could be found. Another process may take it before the
// caller binds it: callers retry on "address in use".
int PickFreePort(const std::string& host);

}  // namespace star::report
