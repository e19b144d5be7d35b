// Reading a command's input document: a file path, or "-" for standard input.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::cli {

// Reads and parses a JSON document. Errors name the source: "in.json: no such file",
// "in.json: invalid JSON at line 3, column 7: ...".
StatusOr<nlohmann::json> ReadJsonDocument(const std::string& path);

}  // namespace star::cli
