// Bearer tokens for the report endpoint (one per job; workers send it with every report).
#pragma once

#include <string>
#include <string_view>

namespace star::report {

// 32 lowercase hex digits (128 bits) from std::random_device. Thread-safe.
std::string RandomToken();

// Whether `presented` equals `expected`, in time that depends on neither their contents
// nor where they first differ (both are hashed with SHA-256 and the digests compared
// with CRYPTO_memcmp), so that a client cannot guess a token byte by byte. Thread-safe.
bool TokensEqual(std::string_view presented, std::string_view expected);

}  // namespace star::report
