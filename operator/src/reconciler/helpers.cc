#include "reconciler/helpers.h"

#include <iostream>

namespace star::op {

bool RetryableApiError(const Status& s) {
  return IsTransient(s) || s.code() == StatusCode::kAlreadyExists || s.code() == StatusCode::kInternal ||
         s.code() == StatusCode::kOutOfRange;
}

void Log(const std::string& line) { std::cerr << "star-operator: " << line << std::endl; }

}  // namespace star::op
