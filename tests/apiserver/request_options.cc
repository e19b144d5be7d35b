#include "request_options.h"

#include <algorithm>
#include <cctype>

#include "object_types.h"
#include "protobuf.h"
#include "request_limits.h"

namespace star::apiserver {
namespace {

using nlohmann::json;

std::string Param(const QueryParams& query, const std::string& key) {
  auto it = query.find(key);
  return it == query.end() ? std::string() : it->second;
}

// `text` as an unsigned decimal number, nullopt unless it is 1..20 digits that fit.
std::optional<std::uint64_t> Digits(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  std::uint64_t v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

StatusOr<json> DeleteBody(const std::string& media_type, const std::string& body) {
  if (media_type != kProtobufMediaType) return ParseJson(body);
  STAR_ASSIGN_OR_RETURN(json decoded, DecodeKubernetesProtobuf(body));
  const json kind = decoded.value("kind", json());
  if (kind != "DeleteOptions") {
    return Status::InvalidArgument("the body of a delete request must be DeleteOptions, not " +
                                   (kind.is_string() ? kind.get<std::string>() : kind.dump()));
  }
  return decoded;
}

void ApplyBody(const json& body, DeleteOptions& options) {
  if (body.contains("propagationPolicy")) options.propagation = body["propagationPolicy"].get<std::string>();
  if (body.value("orphanDependents", false)) options.propagation = "Orphan";
  if (body.contains("preconditions")) {
    const json& p = body["preconditions"];
    if (p.contains("uid")) options.precondition_uid = p["uid"].get<std::string>();
    if (p.contains("resourceVersion")) options.precondition_resource_version = p["resourceVersion"].get<std::string>();
  }
  if (body.contains("dryRun")) {
    const json& dry = body["dryRun"];
    options.dry_run = std::find(dry.begin(), dry.end(), "All") != dry.end();
  }
}

}  // namespace

StatusOr<std::optional<std::uint64_t>> ResourceVersionParam(const QueryParams& query) {
  const std::string text = Param(query, "resourceVersion");
  if (text.empty()) return std::optional<std::uint64_t>();
  const auto v = Digits(text);
  if (!v) return Status::InvalidArgument("invalid resource version \"" + text + "\"");
  return std::optional<std::uint64_t>(*v);
}

StatusOr<std::optional<std::int64_t>> CountParam(const QueryParams& query, const std::string& name,
                                                 std::int64_t max) {
  const std::string text = Param(query, name);
  if (text.empty()) return std::optional<std::int64_t>();
  const auto v = Digits(text);
  if (!v || *v > static_cast<std::uint64_t>(max)) {
    return Status::InvalidArgument("invalid " + name + " \"" + text + "\": must be an integer from 0 to " +
                                   std::to_string(max));
  }
  return std::optional<std::int64_t>(static_cast<std::int64_t>(*v));
}

StatusOr<DeleteOptions> ReadDeleteOptions(const std::string& media_type, const std::string& body,
                                          const QueryParams& query) {
  DeleteOptions options;
  if (!body.empty()) {
    auto parsed = DeleteBody(media_type, body);
    if (!parsed.ok()) {
      if (parsed.status().code() != StatusCode::kInvalidArgument) return parsed.status();
      return Status::InvalidArgument("the DeleteOptions body is invalid: " + parsed.status().message());
    }
    if (!parsed->is_object()) return Status::InvalidArgument("the DeleteOptions body must be a JSON object");
    if (auto error = DeleteOptionsTypeError(*parsed)) return Status::InvalidArgument(*error);
    ApplyBody(*parsed, options);
  }
  STAR_RETURN_IF_ERROR(CountParam(query, "gracePeriodSeconds", INT64_MAX).status());
  if (!Param(query, "propagationPolicy").empty()) options.propagation = Param(query, "propagationPolicy");
  const std::string orphan = Param(query, "orphanDependents");
  if (orphan == "true" || orphan == "1") options.propagation = "Orphan";
  if (Param(query, "dryRun") == "All") options.dry_run = true;
  if (options.propagation != "Background" && options.propagation != "Foreground" && options.propagation != "Orphan") {
    return Status::InvalidArgument("unsupported propagationPolicy \"" + options.propagation + "\"");
  }
  return options;
}

}  // namespace star::apiserver
