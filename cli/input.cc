#include "input.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace star::cli {

StatusOr<nlohmann::json> ReadJsonDocument(const std::string& path) {
  std::string text;
  const std::string source = path == "-" ? std::string("<stdin>") : path;
  if (path == "-") {
    std::ostringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) return Status::NotFound(source + ": cannot open: " + std::strerror(errno));
    std::ostringstream ss;
    ss << f.rdbuf();
    if (f.bad()) return Status::Unavailable(source + ": read error");
    text = ss.str();
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line L, column C: ..."
    std::string what = e.what();
    auto pos = what.find("] ");
    if (pos != std::string::npos) what = what.substr(pos + 2);
    return Status::InvalidArgument(source + ": invalid JSON: " + what);
  }
}

}  // namespace star::cli
