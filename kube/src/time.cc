// RFC 3339 timestamps in UTC.
#include "star/kube/time.h"

#include <time.h>

namespace star::kube {

std::string Rfc3339(std::chrono::system_clock::time_point t) {
  const time_t seconds = std::chrono::system_clock::to_time_t(t);
  struct tm utc {};
  ::gmtime_r(&seconds, &utc);
  char buf[32];
  const size_t n = ::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(buf, n);
}

std::string NowRfc3339() { return Rfc3339(std::chrono::system_clock::now()); }

}  // namespace star::kube
