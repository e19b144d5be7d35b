// A request body read with a bound: what a client sends never costs the server more than
// one chunk of memory beyond the limit, whatever Content-Length says or however long a
// chunked body runs.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#ifndef _TURN_OFF_PLATFORM_STRING
#define _TURN_OFF_PLATFORM_STRING  // cpprest otherwise defines a macro U()
#endif
#include <cpprest/http_msg.h>

namespace star::report::body {

// Read and dropped at a time: 64 KiB.
inline constexpr size_t kChunkBytes = 64 * 1024;

// The body when it is at most `limit` bytes; nullopt when it is longer (by its
// Content-Length, before reading any of it, or found while reading), the rest of it then
// read and dropped. Blocks until the body has arrived; throws what cpprest throws when
// the connection breaks.
std::optional<std::string> ReadAtMost(const web::http::http_request& request, size_t limit);

// Reads the body and drops it (cpprest writes the answer only once the body has arrived,
// and would otherwise hold all of it in memory).
void Drain(const web::http::http_request& request);

}  // namespace star::report::body
