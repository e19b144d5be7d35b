#include "flag_error.h"

#include <algorithm>
#include <string>

namespace star::cli {

Status AsFlagError(const Status& s,
                   std::initializer_list<std::pair<std::string_view, std::string_view>> renamed) {
  if (s.ok()) return s;
  const std::string m = s.message();
  const size_t colon = m.find(':');
  std::string field = m.substr(0, colon == std::string::npos ? m.size() : colon);
  std::string flag;
  for (const auto& [f, name] : renamed) {
    if (field == f) flag = name;
  }
  if (flag.empty()) {
    std::replace(field.begin(), field.end(), '_', '-');
    flag = "--" + field;
  }
  return Status(s.code(), flag + (colon == std::string::npos ? "" : m.substr(colon)));
}

}  // namespace star::cli
