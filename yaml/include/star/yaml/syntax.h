// Whether text is well-formed YAML, by libyaml: positions for syntax errors, and the
// guard run before yaml-cpp reads a text (see yaml/CMakeLists.txt).
#pragma once

#include <string>
#include <string_view>

#include "star/core/status.h"

namespace star::yaml {

// OK when `text` parses as a YAML stream (any number of documents). Otherwise
// InvalidArgument "<what>:LINE:COLUMN: <libyaml's problem>" (from 1), or
// "<what>:LINE:COLUMN: not valid UTF-8 (...)" for bytes that are not UTF-8, or
// "<what>:LINE:COLUMN: nested deeper than MAX levels" past `max_depth` collections (the
// check stops there: libyaml's time grows with the square of the nesting).
Status CheckSyntax(std::string_view text, const std::string& what, int max_depth = 1000);

}  // namespace star::yaml
