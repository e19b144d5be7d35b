// Helpers shared by the fuzz targets (tests/fuzz/*_fuzz.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace star::fuzz {

// The input as text.
inline std::string_view AsText(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// The input parsed as JSON, or a discarded value when it is not JSON (never throws).
inline nlohmann::json ParseJson(const uint8_t* data, size_t size) {
  return nlohmann::json::parse(data, data + size, /*cb=*/nullptr, /*allow_exceptions=*/false);
}

// An invariant the decoder promises: when it does not hold, print what and abort, which
// libFuzzer reports as a crash (and saves the input).
inline void Check(bool ok, std::string_view what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "invariant violated: %.*s\n%s\n", static_cast<int>(what.size()),
               what.data(), detail.c_str());
  std::abort();
}

// Through text and back, as on the wire: what a peer decodes from what we send.
inline nlohmann::json OverTheWire(const nlohmann::json& j) {
  return nlohmann::json::parse(j.dump());
}

}  // namespace star::fuzz
