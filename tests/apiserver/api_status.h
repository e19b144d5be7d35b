// Results of API operations and the meta/v1 Status failures the Kubernetes API server
// answers with (same reasons, codes, messages and details).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schema.h"

namespace star::apiserver {

// What one API operation produced: the HTTP code and its JSON body (an object or a list,
// or a meta/v1 Status when code >= 400).
struct ApiResult {
  int code = 200;
  nlohmann::json body;
  bool ok() const { return code < 400; }
};

// How a resource is named in messages: "trainingjobs.star.dev" (core: "pods").
std::string GroupResourceName(const std::string& group, const std::string& resource);

// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":...,
//  "reason":...,"details":...,"code":...}; details are left out when empty.
ApiResult Failure(int code, const std::string& reason, const std::string& message,
                  const nlohmann::json& details = nlohmann::json::object());

// The reason the server gives with an HTTP code (429 "TooManyRequests", 500
// "InternalError", 410 "Expired", ...).
std::string ReasonForCode(int code);

// 404 `pods "x" not found`; details {name, group, kind: resource}.
ApiResult NotFound(const std::string& group, const std::string& resource, const std::string& name);
// 409 `trainingjobs.star.dev "x" already exists`.
ApiResult AlreadyExists(const std::string& group, const std::string& resource, const std::string& name);
// 409 `Operation cannot be fulfilled on trainingjobs.star.dev "x": <why>`.
ApiResult Conflict(const std::string& group, const std::string& resource, const std::string& name,
                   const std::string& why);
// The "why" of a stale resourceVersion.
inline constexpr const char* kObjectModified =
    "the object has been modified; please apply your changes to the latest version and try again";
// 422 `TrainingJob.star.dev "x" is invalid: <errors>`; details {name, group, kind, causes}.
ApiResult Invalid(const std::string& group, const std::string& kind, const std::string& name,
                  const std::vector<SchemaError>& errors);
// 400 BadRequest with `message`.
ApiResult BadRequest(const std::string& message);
// 404 for a path that names nothing: "the server could not find the requested resource".
ApiResult PathNotFound();
// 405 "the server does not allow this method on the requested resource".
ApiResult MethodNotAllowed();
// 410 Expired "too old resource version: <requested> (<oldest available - 1>)".
ApiResult TooOldResourceVersion(unsigned long long requested, unsigned long long compacted_through);

}  // namespace star::apiserver
