// Limits on what one request may hold, as a real API server has them (its body size, the
// nesting of JSON and YAML documents), so that no later step (schema validation, patches,
// tables, dumping the answer) recurses without bound or holds more than a body's worth.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "star/core/status.h"

namespace star::apiserver {

// Request bodies over this many bytes are a 413 RequestEntityTooLarge (the API server's
// 3 MiB).
inline constexpr size_t kMaxBodyBytes = 3 * 1024 * 1024;
// Arrays and objects nest at most this deep (`[]` is 1, `{"a":[]}` is 2); deeper request
// bodies, and patches whose result is deeper, are a 400.
inline constexpr int kMaxDepth = 1000;

// The deepest nesting of arrays and objects in JSON `text` (brackets inside strings do
// not count), reading no further once it exceeds `stop_above`.
int JsonNesting(std::string_view text, int stop_above = kMaxDepth);

// JSON `text` parsed. InvalidArgument for malformed text (nlohmann's message) or nesting
// deeper than kMaxDepth (checked before parsing).
StatusOr<nlohmann::json> ParseJson(const std::string& text);

// Whether `value` nests arrays and objects deeper than `limit`. Iterative: safe for any
// value.
bool DeeperThan(const nlohmann::json& value, int limit = kMaxDepth);

// The message of a body nested too deeply.
std::string TooDeepMessage();

}  // namespace star::apiserver
