#include "body.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace star::report::body {
namespace {

// Appends up to `want` bytes of the body to `out` (nothing when `out` is null); returns
// how many were read, less than `want` only at the end of the body.
size_t Read(const web::http::http_request& request, size_t want, std::string* out) {
  auto buf = request.body().streambuf();
  std::vector<uint8_t> chunk(kChunkBytes);
  size_t got = 0;
  while (got < want) {
    const size_t n = buf.getn(chunk.data(), std::min(chunk.size(), want - got)).get();
    if (n == 0) break;
    if (out != nullptr) out->append(reinterpret_cast<const char*>(chunk.data()), n);
    got += n;
  }
  return got;
}

}  // namespace

std::optional<std::string> ReadAtMost(const web::http::http_request& request, size_t limit) {
  if (request.headers().content_length() > limit) {
    Drain(request);
    return std::nullopt;
  }
  std::string text;
  if (Read(request, limit, &text) == limit && Read(request, 1, nullptr) == 1) {
    Drain(request);
    return std::nullopt;
  }
  return text;
}

void Drain(const web::http::http_request& request) {
  while (Read(request, kChunkBytes, nullptr) == kChunkBytes) {
  }
}

}  // namespace star::report::body
