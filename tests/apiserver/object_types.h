// The field types of objects as the API server's Go types decode them: a request body
// whose fields have the wrong JSON type ("metadata.name": 5, "data": {"k": 1} for a
// ConfigMap, "spec": "x") is a 400 BadRequest there ("json: cannot unmarshal ..."), never
// stored. Checked for every kind's apiVersion, kind and metadata (ObjectMeta) and, for the
// built-in kinds, the fields of their spec and status the emulator or kubectl reads.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "resources.h"

namespace star::apiserver {

// The first field of `object` whose JSON type the kind's Go type cannot decode, as a
// message naming the field path and both types:
//   `Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal number into
//    Go struct field Pod.metadata.name of type string`
// nullopt when every checked field fits. Like the Go decoder, a null field of a struct
// is its zero value: such fields are removed from `object` (a null value in a string map
// becomes ""). Fields the table does not list are not checked.
std::optional<std::string> GoTypeError(const ResourceType& type, const std::string& version,
                                       nlohmann::json& object);

// The same for the body of a delete request (meta/v1 DeleteOptions): propagationPolicy,
// orphanDependents, gracePeriodSeconds, dryRun, preconditions.
std::optional<std::string> DeleteOptionsTypeError(nlohmann::json& body);

}  // namespace star::apiserver
