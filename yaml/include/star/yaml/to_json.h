// YAML to JSON: how `star local` reads manifests and star-agent its allocation files.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::yaml {

// YAML (JSON included) -> one JSON value per document, in order; an empty document is null.
// Scalars: quoted (or block, or tagged !!str) -> string; plain scalars that read as an
// int64 -> integer, as a YAML 1.2 float ("0.5", "1e3", ".5") -> number, true/false (any
// of true, True, TRUE) -> bool, null/~/empty -> null; everything else (e.g. "500m") ->
// string. Errors are InvalidArgument "<name>:<line>:<column>: <reason>" (1-based): syntax errors
// (CheckSyntax), duplicate mapping keys, non-scalar keys, keys or scalars that are not
// well-formed UTF-8, nesting deeper than 512 levels, and documents that expand (through
// aliases) to more than 1,000,000 values (an anchored node counts twice: the anchor keeps
// a copy, so chains of anchors stay bounded too).
StatusOr<std::vector<nlohmann::json>> ToJson(std::string_view text, const std::string& name_for_errors);


}  // namespace star::yaml
