#include "wire.h"

#include <nlohmann/json.hpp>

namespace star::report::wire {

using nlohmann::json;

std::string ErrorBody(const std::string& message) { return json{{"error", message}}.dump(); }

std::string ErrorMessage(const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_object() && j.contains("error") && j["error"].is_string()) {
    return j["error"].get<std::string>();
  }
  return body;
}

}  // namespace star::report::wire
