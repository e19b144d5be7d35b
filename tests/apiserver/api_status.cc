#include "api_status.h"

namespace star::apiserver {

using nlohmann::json;

std::string GroupResourceName(const std::string& group, const std::string& resource) {
  return group.empty() ? resource : resource + "." + group;
}

ApiResult Failure(int code, const std::string& reason, const std::string& message, const json& details) {
  json status = {{"kind", "Status"},   {"apiVersion", "v1"},  {"metadata", json::object()},
                 {"status", "Failure"}, {"message", message}, {"reason", reason},
                 {"code", code}};
  if (details.is_object() && !details.empty()) status["details"] = details;
  return {code, std::move(status)};
}

std::string ReasonForCode(int code) {
  switch (code) {
    case 400: return "BadRequest";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "NotFound";
    case 405: return "MethodNotAllowed";
    case 406: return "NotAcceptable";
    case 409: return "Conflict";
    case 410: return "Expired";
    case 413: return "RequestEntityTooLarge";
    case 415: return "UnsupportedMediaType";
    case 422: return "Invalid";
    case 429: return "TooManyRequests";
    case 500: return "InternalError";
    case 503: return "ServiceUnavailable";
    case 504: return "Timeout";
    default: return code >= 500 ? "InternalError" : "Unknown";
  }
}

namespace {
json Details(const std::string& group, const std::string& kind, const std::string& name) {
  json d = json::object();
  if (!name.empty()) d["name"] = name;
  if (!group.empty()) d["group"] = group;
  d["kind"] = kind;
  return d;
}
}  // namespace

ApiResult NotFound(const std::string& group, const std::string& resource, const std::string& name) {
  return Failure(404, "NotFound", GroupResourceName(group, resource) + " \"" + name + "\" not found",
                 Details(group, resource, name));
}

ApiResult AlreadyExists(const std::string& group, const std::string& resource, const std::string& name) {
  return Failure(409, "AlreadyExists",
                 GroupResourceName(group, resource) + " \"" + name + "\" already exists",
                 Details(group, resource, name));
}

ApiResult Conflict(const std::string& group, const std::string& resource, const std::string& name,
                   const std::string& why) {
  return Failure(409, "Conflict",
                 "Operation cannot be fulfilled on " + GroupResourceName(group, resource) + " \"" +
                     name + "\": " + why,
                 Details(group, resource, name));
}

ApiResult Invalid(const std::string& group, const std::string& kind, const std::string& name,
                  const std::vector<SchemaError>& errors) {
  const std::string qualified = group.empty() ? kind : kind + "." + group;
  json details = Details(group, kind, name);
  json causes = json::array();
  for (const auto& e : errors) {
    causes.push_back({{"reason", e.type}, {"message", e.message}, {"field", e.field}});
  }
  details["causes"] = causes;
  return Failure(422, "Invalid",
                 qualified + " \"" + name + "\" is invalid: " + FormatSchemaErrors(errors), details);
}

ApiResult BadRequest(const std::string& message) { return Failure(400, "BadRequest", message); }

ApiResult PathNotFound() {
  return Failure(404, "NotFound", "the server could not find the requested resource");
}

ApiResult MethodNotAllowed() {
  return Failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
}

ApiResult TooOldResourceVersion(unsigned long long requested, unsigned long long compacted_through) {
  return Failure(410, "Expired",
                 "too old resource version: " + std::to_string(requested) + " (" +
                     std::to_string(compacted_through) + ")");
}

}  // namespace star::apiserver
