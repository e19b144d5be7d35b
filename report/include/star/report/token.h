// Bearer tokens for the report endpoint (one per job; workers send it with every report).
#pragma once

#include <string>

namespace star::report {

// 32 lowercase hex digits (128 bits) from std::random_device. Thread-safe.
std::string RandomToken();

}  // namespace star::report
