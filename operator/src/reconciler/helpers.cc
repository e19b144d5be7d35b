#include "reconciler/helpers.h"

#include <time.h>

#include <chrono>
#include <iostream>
#include <random>

namespace star::op {

std::string NowRfc3339() {
  const time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  tm utc{};
  gmtime_r(&t, &utc);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

std::string RandomToken() {
  std::random_device rd;
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 32; ++i) s.push_back(kHex[rd() % 16]);
  return s;
}

bool Transient(const Status& s) {
  return s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded ||
         s.code() == StatusCode::kAborted || s.code() == StatusCode::kAlreadyExists ||
         s.code() == StatusCode::kInternal || s.code() == StatusCode::kOutOfRange;
}

void Log(const std::string& line) { std::cerr << "star-operator: " << line << std::endl; }

}  // namespace star::op
