// Server-side printing: the meta.k8s.io Table that `kubectl get` asks for
// (Accept: application/json;as=Table;v=v1;g=meta.k8s.io).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "resources.h"

namespace star::apiserver {

struct TableOptions {
  std::string api_version = "meta.k8s.io/v1";  // or meta.k8s.io/v1beta1
  std::string include_object = "Metadata";     // ?includeObject=None|Metadata|Object
  bool column_definitions = true;
};

// A Table of `objects` of `type` in `version`: the Name column, then the version's
// printer columns (AGE alone when it has none) evaluated on each object; each row's
// object is a PartialObjectMetadata, the whole object, or left out (include_object).
nlohmann::json ToTable(const ResourceType& type, const std::string& version,
                       const std::vector<nlohmann::json>& objects, const std::string& resource_version,
                       const TableOptions& options);

// Kubernetes' short age ("45s", "3m12s", "5h", "2d3h", "1y20d") of an RFC 3339
// timestamp; "<unknown>" if it cannot be read.
std::string HumanAge(const std::string& rfc3339);

}  // namespace star::apiserver
