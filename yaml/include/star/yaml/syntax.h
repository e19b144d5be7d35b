// Whether text is well-formed YAML, by libyaml: the guard run before yaml-cpp, which
// never returns on some malformed input (see yaml/CMakeLists.txt).
#pragma once

#include <string>
#include <string_view>

#include "star/core/status.h"

namespace star::yaml {

// OK when `text` parses as a YAML stream (any number of documents). Otherwise
// InvalidArgument "<what>:LINE:COLUMN: <libyaml's problem>" (from 1), or
// "<what>:LINE:COLUMN: not valid UTF-8 (...)" for bytes that are not UTF-8.
Status CheckSyntax(std::string_view text, const std::string& what);

}  // namespace star::yaml
