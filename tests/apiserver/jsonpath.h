// The JSONPath subset of CRD additionalPrinterColumns: `.status.phase`,
// `.spec.workers.replicas`, `.items[0]`, `.items[-1]`, `.items[*].name`, `['a.b']`,
// `.conditions[?(@.type=="Ready")].status` (== and !=), optionally wrapped in `{}`.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "star/core/status.h"

namespace star::apiserver {

// Every value `path` selects in `root` (none when a field is missing).
// InvalidArgument for syntax this subset does not cover.
StatusOr<std::vector<nlohmann::json>> EvalJsonPath(const nlohmann::json& root, std::string_view path);

}  // namespace star::apiserver
