// RFC 3339 timestamps in UTC.
#include "star/kube/time.h"

#include <time.h>

#include <cctype>

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

namespace {
// The offset east of UTC in seconds of "Z", "z" or "+hh:mm" / "-hh:mm"; nullopt otherwise.
std::optional<long> ZoneOffset(const char* p) {
  if ((p[0] == 'Z' || p[0] == 'z') && p[1] == '\0') return 0;
  if ((p[0] != '+' && p[0] != '-') || p[3] != ':' || p[6] != '\0') return std::nullopt;
  for (int i : {1, 2, 4, 5}) {
    if (!std::isdigit(static_cast<unsigned char>(p[i]))) return std::nullopt;
  }
  const long hours = (p[1] - '0') * 10 + (p[2] - '0'), minutes = (p[4] - '0') * 10 + (p[5] - '0');
  if (hours > 23 || minutes > 59) return std::nullopt;
  return (p[0] == '-' ? -1 : 1) * (hours * 3600 + minutes * 60);
}
}  // namespace

std::optional<std::chrono::system_clock::time_point> ParseRfc3339(const std::string& text) {
  struct tm fields {};
  const char* rest = ::strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &fields);
  if (rest == nullptr || text.size() < 20 || text[4] != '-' || text[10] != 'T') return std::nullopt;
  if (*rest == '.') {
    ++rest;
    if (!std::isdigit(static_cast<unsigned char>(*rest))) return std::nullopt;
    while (std::isdigit(static_cast<unsigned char>(*rest))) ++rest;
  }
  const std::optional<long> offset = ZoneOffset(rest);
  if (!offset) return std::nullopt;
  const time_t utc = ::timegm(&fields);
  if (utc == static_cast<time_t>(-1) && fields.tm_year != 69) return std::nullopt;
  return std::chrono::system_clock::from_time_t(utc - *offset);
}

}  // namespace star::kube
