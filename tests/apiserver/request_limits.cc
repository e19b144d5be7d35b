#include "request_limits.h"

#include <utility>
#include <vector>

namespace star::apiserver {

using nlohmann::json;

int JsonNesting(std::string_view text, int stop_above) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest > stop_above) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

std::string TooDeepMessage() {
  return "the request body nests arrays and objects deeper than " + std::to_string(kMaxDepth) +
         " levels (json: exceeded max depth)";
}

StatusOr<json> ParseJson(const std::string& text) {
  if (JsonNesting(text) > kMaxDepth) return Status::InvalidArgument(TooDeepMessage());
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    return Status::InvalidArgument(std::string("the request body is not valid JSON: ") + e.what());
  }
}

bool DeeperThan(const json& value, int limit) {
  std::vector<std::pair<const json*, int>> stack{{&value, value.is_structured() ? 1 : 0}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (depth > limit) return true;
    if (!v->is_structured()) continue;
    for (const auto& child : *v) {
      if (child.is_structured()) stack.emplace_back(&child, depth + 1);
    }
  }
  return false;
}

}  // namespace star::apiserver
