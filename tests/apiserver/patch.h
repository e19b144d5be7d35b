// The patch formats of PATCH requests.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>

#include "star/core/status.h"

namespace star::apiserver {

// application/merge-patch+json (RFC 7386): objects merge, null deletes, the rest replaces.
nlohmann::json ApplyMergePatch(nlohmann::json target, const nlohmann::json& patch);

// The most operations one JSON patch may have (the API server's limit).
inline constexpr size_t kMaxJsonPatchOperations = 10000;

// application/json-patch+json (RFC 6902). InvalidArgument when an operation fails
// (a missing path, a failed test); OutOfRange (a 413) for more than
// kMaxJsonPatchOperations operations or `copy` operations that together copy more than
// kMaxBodyBytes (each doubling the object would otherwise grow it without bound).
StatusOr<nlohmann::json> ApplyJsonPatch(const nlohmann::json& target, const nlohmann::json& patch);

// application/strategic-merge-patch+json, approximated without the Go types' patch
// metadata: a merge patch in which lists of objects with a known merge key (containers,
// env, volumes, ports, conditions, ownerReferences, ...) merge element by element,
// `finalizers` merges as a set, and the directives $patch (replace|delete), $retainKeys,
// $setElementOrder/<list> and $deleteFromPrimitiveList/<list> are honoured or dropped.
// InvalidArgument when the patch is not an object.
StatusOr<nlohmann::json> ApplyStrategicMergePatch(nlohmann::json target, const nlohmann::json& patch);

}  // namespace star::apiserver
