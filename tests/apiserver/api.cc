#include "api.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "object_meta.h"
#include "object_types.h"
#include "patch.h"
#include "protobuf.h"
#include "request_limits.h"
#include "request_options.h"
#include "table.h"
#include "yaml_json.h"

namespace star::apiserver {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr char kCrdGroup[] = "apiextensions.k8s.io";
constexpr char kCrdResource[] = "customresourcedefinitions";

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

Response JsonResponse(const ApiResult& r) {
  Response resp;
  resp.code = r.code;
  resp.body = Dump(r.body);
  return resp;
}

Response TextResponse(int code, std::string text) {
  Response resp;
  resp.code = code;
  resp.content_type = "text/plain; charset=utf-8";
  resp.body = std::move(text);
  return resp;
}

std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  std::stringstream ss(path);
  std::string part;
  while (std::getline(ss, part, '/')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::string Param(const Request& req, const std::string& key) {
  auto it = req.query.find(key);
  return it == req.query.end() ? std::string() : it->second;
}

bool Truthy(const std::string& v) { return v == "true" || v == "1"; }

// The media type without parameters, lower-case.
std::string MediaType(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  t.erase(std::remove_if(t.begin(), t.end(), [](unsigned char c) { return std::isspace(c); }), t.end());
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return t;
}

// What the Accept header asks for: "" (plain JSON), "Table", "PartialObjectMetadata" or
// "PartialObjectMetadataList"; `version` gets the meta.k8s.io version asked for.
// The Table rendering a request asks for (meta.k8s.io `version`, ?includeObject).
TableOptions TableOptionsOf(const Request& req, const std::string& version) {
  TableOptions options;
  options.api_version = version;
  if (!Param(req, "includeObject").empty()) options.include_object = Param(req, "includeObject");
  return options;
}

std::string AcceptedAs(const std::string& accept, std::string* version) {
  std::stringstream ranges(accept);
  std::string range;
  while (std::getline(ranges, range, ',')) {
    std::stringstream parts(range);
    std::string part;
    std::getline(parts, part, ';');
    const std::string type = MediaType(part);
    if (type != "application/json" && type != "*/*" && type != "application/*") continue;
    std::map<std::string, std::string> params;
    while (std::getline(parts, part, ';')) {
      const size_t eq = part.find('=');
      if (eq == std::string::npos) continue;
      std::string k = part.substr(0, eq), v = part.substr(eq + 1);
      k.erase(std::remove_if(k.begin(), k.end(), [](unsigned char c) { return std::isspace(c); }), k.end());
      v.erase(std::remove_if(v.begin(), v.end(), [](unsigned char c) { return std::isspace(c); }), v.end());
      params[k] = v;
    }
    if (params.count("as") == 0) return "";
    if (params["g"] != "meta.k8s.io") continue;
    if (params["v"] != "v1" && params["v"] != "v1beta1") continue;
    const std::string as = params["as"];
    if (as != "Table" && as != "PartialObjectMetadata" && as != "PartialObjectMetadataList") continue;
    *version = "meta.k8s.io/" + params["v"];
    return as;
  }
  return "";
}

StatusOr<json> ParseBody(const Request& req) {
  if (req.body.empty()) return Status::InvalidArgument("the request body is empty");
  const std::string type = MediaType(req.content_type);
  if (type == kProtobufMediaType) return DecodeKubernetesProtobuf(req.body);
  if (type.find("protobuf") != std::string::npos || type.find("cbor") != std::string::npos) {
    return Status::Unimplemented("the body of the request was in an unknown format - accepted media types "
                                 "include: application/json, application/yaml");
  }
  if (type.find("yaml") != std::string::npos) return ParseYamlDocument(req.body);
  return ParseJson(req.body);
}

// 400 when `object` nests deeper than kMaxDepth or has a field of the wrong JSON type
// for its kind (null fields of built-in kinds are dropped, as decoding does).
std::optional<ApiResult> ShapeError(const ResourceType& type, const std::string& version, json& object) {
  if (DeeperThan(object)) {
    return BadRequest("the object nests arrays and objects deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  if (auto error = GoTypeError(type, version, object)) return BadRequest(*error);
  return std::nullopt;
}

// 415 for a body in a format the emulator does not read (CBOR, protobuf of a kind without
// a decoder), else 400.
ApiResult BodyError(const Status& s) {
  if (s.code() == StatusCode::kUnimplemented) return Failure(415, "UnsupportedMediaType", s.message());
  return BadRequest(s.message());
}

// Fields present in `before` that pruning removed from `after` ("spec.foo", "spec.x[1].y").
void PrunedFields(const json& before, const json& after, const std::string& path, std::vector<std::string>& out) {
  if (before.is_object() && after.is_object()) {
    for (const auto& [key, value] : before.items()) {
      const std::string child = path.empty() ? key : path + "." + key;
      if (!after.contains(key)) {
        if (!value.is_null()) out.push_back(child);
      } else {
        PrunedFields(value, after[key], child, out);
      }
    }
  } else if (before.is_array() && after.is_array() && before.size() == after.size()) {
    for (size_t i = 0; i < before.size(); ++i) {
      PrunedFields(before[i], after[i], path + "[" + std::to_string(i) + "]", out);
    }
  }
}

json CrdStatus(const json& crd, const json& current_status) {
  json names = crd["spec"].value("names", json::object());
  if (!names.contains("singular") && names.contains("kind") && names["kind"].is_string()) {
    std::string s = names["kind"].get<std::string>();
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    names["singular"] = s;
  }
  if (!names.contains("listKind") && names.contains("kind") && names["kind"].is_string()) {
    names["listKind"] = names["kind"].get<std::string>() + "List";
  }
  json stored = json::array();
  for (const auto& v : crd["spec"].value("versions", json::array())) {
    if (v.is_object() && v.value("storage", false)) stored.push_back(v.value("name", ""));
  }
  json conditions = current_status.is_object() && current_status.contains("conditions")
                        ? current_status["conditions"]
                        : json::array({{{"type", "NamesAccepted"},
                                        {"status", "True"},
                                        {"reason", "NoConflicts"},
                                        {"message", "no conflicts found"},
                                        {"lastTransitionTime", NowRfc3339()}},
                                       {{"type", "Established"},
                                        {"status", "True"},
                                        {"reason", "InitialNamesAccepted"},
                                        {"message", "the initial names have been accepted"},
                                        {"lastTransitionTime", NowRfc3339()}}});
  return {{"acceptedNames", names}, {"conditions", conditions}, {"storedVersions", stored}};
}

}  // namespace

struct Api::Target {
  TypePtr type;
  std::string version, ns, name, subresource, verb;
  bool IsCrd() const { return type->group == kCrdGroup && type->plural == kCrdResource; }
  bool HasStatus() const {
    const VersionSpec* v = type->Version(version);
    return v != nullptr && v->status_subresource;
  }
  // The stored object as the client sees it in the requested version.
  json Present(const json& object) const {
    json out = object;
    if (out.is_object()) {
      out["apiVersion"] = type->ApiVersion(version);
      out["kind"] = type->kind;
    }
    return out;
  }
};

Api::Api(ApiOptions options)
    : options_(options),
      store_(Store::Options{options.history_limit, options.bookmark_interval}),
      server_address_(options.server_address) {
  const TypePtr ns = registry_.Find("", "v1", "namespaces");
  for (const char* name : {"default", "kube-system", "kube-public"}) {
    json object = {{"apiVersion", "v1"},
                   {"kind", "Namespace"},
                   {"metadata", {{"name", name}}},
                   {"spec", {{"finalizers", {"kubernetes"}}}},
                   {"status", {{"phase", "Active"}}}};
    (void)store_.Create(*ns, std::move(object), false);
  }
}

void Api::set_server_address(const std::string& address) {
  std::lock_guard<std::mutex> lock(mu_);
  server_address_ = address;
}

Status Api::CreateCrd(const json& crd) {
  Target t;
  t.type = registry_.Find(kCrdGroup, "v1", kCrdResource);
  t.version = "v1";
  t.verb = "create";
  Request req;
  std::vector<std::string> warnings;
  const ApiResult r = CreateObject(t, crd, req, warnings);
  if (!r.ok()) return Status::InvalidArgument(r.body.value("message", r.body.dump()));
  return Status::Ok();
}

Status Api::LoadCrds(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::InvalidArgument("--crds " + dir + ": not a directory");
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) files.push_back(entry.path());
  }
  if (ec) return Status::InvalidArgument("--crds " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    auto docs = ParseYamlDocuments(text.str());
    if (!docs.ok()) return Status::InvalidArgument(file.string() + ": " + docs.status().message());
    for (const auto& doc : *docs) {
      if (!doc.is_object() || doc.value("kind", "") != "CustomResourceDefinition") {
        return Status::InvalidArgument(file.string() + ": not a CustomResourceDefinition (kind " +
                                       (doc.is_object() ? doc.value("kind", "<none>") : "<none>") + ")");
      }
      Status s = CreateCrd(doc);
      if (!s.ok()) return Status::InvalidArgument(file.string() + ": " + s.message());
    }
  }
  return Status::Ok();
}

void Api::Tick() { store_.Tick(Clock::now()); }

void Api::Shutdown() { store_.CloseWatches(); }

void Api::Count(const std::string& resource, const std::string& verb) {
  std::lock_guard<std::mutex> lock(mu_);
  ++requests_[resource][verb];
}

json Api::Stats() const {
  json requests = json::object(), totals = json::object();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [resource, verbs] : requests_) {
      for (const auto& [verb, n] : verbs) {
        requests[resource][verb] = n;
        totals[verb] = totals.value(verb, std::uint64_t{0}) + n;
      }
    }
  }
  const auto c = faults_.counters();
  return {{"requests", requests},
          {"totals", totals},
          {"faults", {{"errors", c.errors}, {"delayed", c.delayed}, {"droppedWatches", c.dropped_watches}}},
          {"activeWatches", store_.active_watches()},
          {"resourceVersion", std::to_string(store_.resource_version())}};
}

Response Api::Handle(const Request& req) {
  if (req.body.size() > kMaxBodyBytes) {
    return JsonResponse(Failure(413, "RequestEntityTooLarge",
                                "Request entity too large: limit is " + std::to_string(kMaxBodyBytes)));
  }
  try {
    return Route(req);
  } catch (const std::exception& e) {
    return JsonResponse(Failure(500, "InternalError", std::string("emulator: ") + e.what()));
  }
}

Response Api::Route(const Request& req) {
  const std::vector<std::string> s = Split(req.path);
  if (s.empty()) {
    return JsonResponse({200, {{"paths", {"/api", "/api/v1", "/apis", "/healthz", "/livez", "/openapi/v3",
                                          "/readyz", "/version", "/emulator/faults", "/emulator/stats"}}}});
  }
  if (s[0] == "healthz" || s[0] == "readyz" || s[0] == "livez") return TextResponse(200, "ok");
  if (s[0] == "version" && s.size() == 1) {
    return JsonResponse({200,
                         {{"major", "1"},
                          {"minor", "32"},
                          {"gitVersion", "v1.32.0-star-emulator"},
                          {"gitCommit", "0000000000000000000000000000000000000000"},
                          {"gitTreeState", "clean"},
                          {"buildDate", "2025-01-01T00:00:00Z"},
                          {"goVersion", "go1.23.4"},
                          {"compiler", "gc"},
                          {"platform", "linux/amd64"}}});
  }
  if (s[0] == "emulator") return Emulator(req, s);
  const bool discovery = s[0] == "openapi" || (s[0] == "api" && s.size() <= 2) || (s[0] == "apis" && s.size() <= 3);
  if (discovery && req.method != "GET") {
    return JsonResponse(MethodNotAllowed());
  }
  if (s[0] == "openapi") {
    if (s.size() == 2 && s[1] == "v3") return JsonResponse({200, registry_.OpenApiIndex()});
    if (s.size() >= 3 && s[1] == "v3") {
      std::optional<json> doc;
      if (s[2] == "api" && s.size() == 4) doc = registry_.OpenApiDocument("", s[3]);
      if (s[2] == "apis" && s.size() == 5) doc = registry_.OpenApiDocument(s[3], s[4]);
      if (doc) return JsonResponse({200, *doc});
    }
    return JsonResponse(PathNotFound());  // /openapi/v2 included: kubectl then relies on v3
  }
  if (s[0] == "api") {
    if (s.size() == 1) {
      std::lock_guard<std::mutex> lock(mu_);
      return JsonResponse({200, registry_.CoreVersions(server_address_)});
    }
    if (s.size() == 2) {
      auto list = registry_.ResourceList("", s[1]);
      return JsonResponse(list ? ApiResult{200, *list} : PathNotFound());
    }
    return Resource(req, "", s[1], std::vector<std::string>(s.begin() + 2, s.end()));
  }
  if (s[0] == "apis") {
    if (s.size() == 1) return JsonResponse({200, registry_.GroupList()});
    if (s.size() == 2) {
      auto group = registry_.Group(s[1]);
      return JsonResponse(group ? ApiResult{200, *group} : PathNotFound());
    }
    if (s.size() == 3) {
      auto list = registry_.ResourceList(s[1], s[2]);
      return JsonResponse(list ? ApiResult{200, *list} : PathNotFound());
    }
    return Resource(req, s[1], s[2], std::vector<std::string>(s.begin() + 3, s.end()));
  }
  return JsonResponse(PathNotFound());
}

Response Api::Emulator(const Request& req, const std::vector<std::string>& s) {
  if (s.size() == 2 && s[1] == "stats") {
    if (req.method == "GET") return JsonResponse({200, Stats()});
    if (req.method == "DELETE") {
      std::lock_guard<std::mutex> lock(mu_);
      requests_.clear();
      return JsonResponse({200, json::object()});
    }
    return JsonResponse(MethodNotAllowed());
  }
  if (s.size() == 2 && s[1] == "faults") {
    if (req.method == "GET") return JsonResponse({200, faults_.ToJson()});
    if (req.method == "DELETE") {
      faults_.Clear();
      return JsonResponse({200, faults_.ToJson()});
    }
    if (req.method != "POST" && req.method != "PUT") return JsonResponse(MethodNotAllowed());
    auto body = ParseBody(req);
    if (!body.ok()) return JsonResponse(BodyError(body.status()));
    const json rules_json = body->is_object() ? body->value("rules", json()) : *body;
    if (!rules_json.is_array()) return JsonResponse(BadRequest("expected {\"rules\": [...]}"));
    std::vector<FaultRule> rules;
    for (const auto& r : rules_json) {
      auto rule = FaultRule::FromJson(r);
      if (!rule.ok()) return JsonResponse(BadRequest(rule.status().message()));
      rules.push_back(*rule);
    }
    if (req.method == "PUT") faults_.Clear();
    for (auto& r : rules) faults_.Add(std::move(r));
    return JsonResponse({200, faults_.ToJson()});
  }
  return JsonResponse(PathNotFound());
}

Response Api::Resource(const Request& req, const std::string& group, const std::string& version,
                       const std::vector<std::string>& rest) {
  Target t;
  t.version = version;
  std::vector<std::string> parts = rest;
  // /namespaces/{ns}/{resource}/... unless it is the namespace's own subresource
  // (/api/v1/namespaces/{name}/status).
  if (parts.size() >= 3 && parts[0] == "namespaces" && registry_.Find(group, version, parts[2]) != nullptr) {
    t.ns = parts[1];
    parts.erase(parts.begin(), parts.begin() + 2);
  }
  if (parts.empty() || parts.size() > 3) return JsonResponse(PathNotFound());
  t.type = registry_.Find(group, version, parts[0]);
  if (t.type == nullptr) return JsonResponse(PathNotFound());
  if (parts.size() >= 2) t.name = parts[1];
  if (parts.size() == 3) t.subresource = parts[2];
  if (!t.ns.empty() && !t.type->namespaced) return JsonResponse(PathNotFound());
  if (t.type->namespaced && t.ns.empty() && !(req.method == "GET" && t.name.empty()) &&
      !(req.method == "DELETE" && t.name.empty())) {
    return JsonResponse(PathNotFound());
  }
  if (!t.subresource.empty() && !(t.subresource == "status" && t.HasStatus())) return JsonResponse(PathNotFound());

  if (req.method == "GET") {
    t.verb = !t.name.empty() ? "get" : (Truthy(Param(req, "watch")) ? "watch" : "list");
  } else if (req.method == "POST" && t.name.empty()) {
    t.verb = "create";
  } else if (req.method == "PUT" && !t.name.empty()) {
    t.verb = "update";
  } else if (req.method == "PATCH" && !t.name.empty()) {
    t.verb = "patch";
  } else if (req.method == "DELETE") {
    t.verb = t.name.empty() ? "deletecollection" : "delete";
  } else {
    return JsonResponse(MethodNotAllowed());
  }
  if (!t.subresource.empty() && t.verb != "get" && t.verb != "update" && t.verb != "patch") {
    return JsonResponse(MethodNotAllowed());
  }

  Count(t.subresource.empty() ? t.type->plural : t.type->plural + "/" + t.subresource, t.verb);
  const FaultDecision fault = faults_.Decide(t.verb, t.type->plural, t.subresource, t.ns);
  const std::chrono::milliseconds delay = options_.latency + fault.latency;
  if (fault.status && !(t.verb == "watch" && *fault.status == 410)) {
    ApiResult failure = Failure(*fault.status, ReasonForCode(*fault.status), fault.message);
    Response resp;
    if (*fault.status == 429) {
      failure.body["details"] = {{"retryAfterSeconds", 1}};
      resp = JsonResponse(failure);
      resp.headers.emplace_back("Retry-After", "1");
    } else {
      resp = JsonResponse(failure);
    }
    resp.delay = delay;
    return resp;
  }
  if (t.verb == "watch") {
    Response resp = Watch(t, req, fault);
    resp.delay = delay;
    return resp;
  }

  std::vector<std::string> warnings;
  ApiResult result;
  if (t.verb == "get") {
    result = Get(t, req);
  } else if (t.verb == "list") {
    result = List(t, req);
  } else if (t.verb == "create") {
    result = Create(t, req, warnings);
  } else if (t.verb == "update") {
    result = Update(t, req, warnings);
  } else if (t.verb == "patch") {
    result = Patch(t, req, warnings);
  } else if (t.verb == "delete") {
    result = Delete(t, req);
  } else {
    result = DeleteCollection(t, req);
  }
  Response resp = JsonResponse(result);
  for (const auto& w : warnings) resp.headers.emplace_back("Warning", "299 - " + json(w).dump());
  resp.delay = delay;
  return resp;
}

ApiResult Api::Get(const Target& t, const Request& req) {
  if (auto rv = ResourceVersionParam(req.query); !rv.ok()) return BadRequest(rv.status().message());
  ApiResult r = store_.Get(*t.type, t.ns, t.name);
  if (!r.ok()) return r;
  const json object = t.Present(r.body);
  std::string meta_version;
  const std::string as = AcceptedAs(req.accept, &meta_version);
  if (as == "Table") {
    const TableOptions options = TableOptionsOf(req, meta_version);
    return {200, ToTable(*t.type, t.version, {object}, Meta(object, "resourceVersion"), options)};
  }
  if (as == "PartialObjectMetadata") {
    return {200, {{"kind", "PartialObjectMetadata"}, {"apiVersion", meta_version}, {"metadata", object["metadata"]}}};
  }
  return {200, object};
}

ApiResult Api::List(const Target& t, const Request& req) {
  if (auto rv = ResourceVersionParam(req.query); !rv.ok()) return BadRequest(rv.status().message());
  if (auto limit = CountParam(req.query, "limit", INT64_MAX); !limit.ok()) return BadRequest(limit.status().message());
  auto labels = LabelSelector::Parse(Param(req, "labelSelector"));
  if (!labels.ok()) return BadRequest(labels.status().message());
  auto fields = FieldSelector::Parse(Param(req, "fieldSelector"));
  if (!fields.ok()) return BadRequest(fields.status().message());
  const Store::ListResult list = store_.List(*t.type, t.ns, *labels, *fields);
  std::vector<json> items;
  items.reserve(list.items.size());
  for (const auto& item : list.items) items.push_back(t.Present(item));
  const std::string rv = std::to_string(list.resource_version);
  std::string meta_version;
  const std::string as = AcceptedAs(req.accept, &meta_version);
  if (as == "Table") {
    const TableOptions options = TableOptionsOf(req, meta_version);
    return {200, ToTable(*t.type, t.version, items, rv, options)};
  }
  if (as == "PartialObjectMetadataList" || as == "PartialObjectMetadata") {
    json metas = json::array();
    for (const auto& item : items) {
      metas.push_back({{"kind", "PartialObjectMetadata"}, {"apiVersion", meta_version}, {"metadata", item["metadata"]}});
    }
    return {200,
            {{"kind", "PartialObjectMetadataList"},
             {"apiVersion", meta_version},
             {"metadata", {{"resourceVersion", rv}}},
             {"items", metas}}};
  }
  return {200,
          {{"apiVersion", t.type->ApiVersion(t.version)},
           {"kind", t.type->list_kind},
           {"metadata", {{"resourceVersion", rv}}},
           {"items", items}}};
}

Response Api::Watch(const Target& t, const Request& req, const FaultDecision& fault) {
  WatchOptions o;
  o.ns = t.ns;
  auto labels = LabelSelector::Parse(Param(req, "labelSelector"));
  if (!labels.ok()) return JsonResponse(BadRequest(labels.status().message()));
  auto fields = FieldSelector::Parse(Param(req, "fieldSelector"));
  if (!fields.ok()) return JsonResponse(BadRequest(fields.status().message()));
  o.labels = *labels;
  o.fields = *fields;
  const auto rv = ResourceVersionParam(req.query);
  if (!rv.ok()) return JsonResponse(BadRequest(rv.status().message()));
  o.resource_version = *rv;
  const std::string initial = Param(req, "sendInitialEvents");
  if (!initial.empty()) o.send_initial_events = Truthy(initial);
  o.bookmarks = Truthy(Param(req, "allowWatchBookmarks"));
  std::chrono::seconds timeout = options_.default_watch_timeout;
  const auto timeout_param = CountParam(req.query, "timeoutSeconds", INT64_MAX);
  if (!timeout_param.ok()) return JsonResponse(BadRequest(timeout_param.status().message()));
  if (*timeout_param) timeout = std::min(timeout, std::chrono::seconds(**timeout_param));
  o.deadline = Clock::now() + timeout;
  o.drop_after = fault.drop_watch_after;
  o.api_version = t.type->ApiVersion(t.version);
  o.kind = t.type->kind;
  std::string meta_version;
  if (AcceptedAs(req.accept, &meta_version) == "Table") {
    const TableOptions options = TableOptionsOf(req, meta_version);
    o.present = [t, options](const json& object) {
      const json presented = t.Present(object);
      return ToTable(*t.type, t.version, {presented}, Meta(presented, "resourceVersion"), options);
    };
  } else {
    o.present = [t](const json& object) { return t.Present(object); };
  }
  if (!req.open_stream) return JsonResponse(BadRequest("this transport cannot stream watches"));
  std::shared_ptr<WatchSink> sink = req.open_stream();
  Response resp;
  resp.streamed = true;
  if (fault.status) {  // an injected 410: the ERROR event a compacted history gives
    const std::uint64_t requested = o.resource_version.value_or(0);
    const json event = {{"type", "ERROR"}, {"object", TooOldResourceVersion(requested, requested + 1).body}};
    sink->Write(Dump(event) + "\n");
    sink->Close();
    return resp;
  }
  store_.Watch(*t.type, std::move(o), std::move(sink));
  return resp;
}

ApiResult Api::Admit(const Target& t, json& object, const Request& req, std::vector<std::string>& warnings) const {
  std::vector<SchemaError> errors = ValidateMeta(*t.type, object);
  if (t.IsCrd()) {
    const auto crd_errors = ValidateCrd(object);
    errors.insert(errors.end(), crd_errors.begin(), crd_errors.end());
  }
  const VersionSpec* v = t.type->Version(t.version);
  if (v != nullptr && v->schema.is_object()) {
    const json before = object;
    const auto schema_errors = DefaultPruneValidate(v->schema, object);
    errors.insert(errors.end(), schema_errors.begin(), schema_errors.end());
    std::vector<std::string> unknown;
    PrunedFields(before, object, "", unknown);
    const std::string mode = Param(req, "fieldValidation");
    if (!unknown.empty() && mode == "Strict") {
      std::string message;
      for (const auto& f : unknown) message += (message.empty() ? "" : ", ") + std::string("unknown field \"") + f + "\"";
      return BadRequest(t.type->kind + " in version \"" + t.version + "\" cannot be handled as a " + t.type->kind +
                        ": strict decoding error: " + message);
    }
    if (mode == "Warn") {
      for (const auto& f : unknown) warnings.push_back("unknown field \"" + f + "\"");
    }
  }
  if (!errors.empty()) return Invalid(t.type->group, t.type->kind, Meta(object, "name"), errors);
  return {200, json()};
}

ApiResult Api::Replacement(const Target& t, const json& current, const json& incoming_body, const Request& req,
                           std::vector<std::string>& warnings) const {
  json incoming = incoming_body;
  if (auto bad = ShapeError(*t.type, t.version, incoming)) return *bad;
  json next;
  if (t.subresource == "status") {
    next = current;
    if (incoming.contains("status")) {
      next["status"] = incoming["status"];
    } else {
      next.erase("status");
    }
    next["metadata"]["resourceVersion"] = Meta(incoming, "resourceVersion");
  } else {
    next = incoming;
    if (t.HasStatus() && !t.IsCrd()) {
      if (current.contains("status")) {
        next["status"] = current["status"];
      } else {
        next.erase("status");
      }
    }
  }
  if (!next["metadata"].is_object()) next["metadata"] = json::object();
  next["apiVersion"] = t.type->ApiVersion(t.version);
  next["kind"] = t.type->kind;
  next["metadata"]["name"] = t.name;
  ApiResult admitted = Admit(t, next, req, warnings);
  if (!admitted.ok()) return admitted;
  if (t.IsCrd()) next["status"] = CrdStatus(next, current.value("status", json()));
  return {200, next};
}

ApiResult Api::Create(const Target& t, const Request& req, std::vector<std::string>& warnings) {
  auto body = ParseBody(req);
  if (!body.ok()) return BodyError(body.status());
  return CreateObject(t, std::move(*body), req, warnings);
}

ApiResult Api::CreateObject(const Target& t, json body, const Request& req, std::vector<std::string>& warnings) {
  if (!body.is_object()) return BadRequest("the object provided is not a JSON object");
  if (auto bad = ShapeError(*t.type, t.version, body)) return *bad;
  if (body.contains("kind") && body["kind"] != t.type->kind) {
    return BadRequest("the kind of the object (" + body["kind"].dump() + ") does not match the resource (" +
                      t.type->kind + ")");
  }
  body["apiVersion"] = t.type->ApiVersion(t.version);
  body["kind"] = t.type->kind;
  if (!body["metadata"].is_object()) body["metadata"] = json::object();
  if (t.type->namespaced) {
    const std::string ns = Meta(body, "namespace");
    if (ns.empty()) {
      body["metadata"]["namespace"] = t.ns;
    } else if (ns != t.ns) {
      return BadRequest("the namespace of the provided object does not match the namespace sent on the request");
    }
  }
  if (t.type->builtin) {
    if (t.type->plural == "pods" && t.type->group.empty()) body["status"] = {{"phase", "Pending"}};
    if (t.type->plural == "namespaces" && t.type->group.empty()) body["status"] = {{"phase", "Active"}};
    if (t.type->plural == "secrets" && t.type->group.empty() && body.value("type", "").empty()) {
      body["type"] = "Opaque";  // the API server's default
    }
  } else if (t.HasStatus()) {
    body.erase("status");  // create cannot set status
  }
  ApiResult admitted = Admit(t, body, req, warnings);
  if (!admitted.ok()) return admitted;
  if (t.IsCrd()) body["status"] = CrdStatus(body, json());
  const bool dry_run = Param(req, "dryRun") == "All";
  ApiResult r = store_.Create(*t.type, std::move(body), dry_run);
  if (r.ok() && t.IsCrd() && !dry_run) SyncCrd(Meta(r.body, "name"));
  if (r.ok()) r.body = t.Present(r.body);
  return r;
}

ApiResult Api::Update(const Target& t, const Request& req, std::vector<std::string>& warnings) {
  auto parsed = ParseBody(req);
  if (!parsed.ok()) return BodyError(parsed.status());
  json body = std::move(*parsed);
  if (!body.is_object()) return BadRequest("the object provided is not a JSON object");
  if (auto bad = ShapeError(*t.type, t.version, body)) return *bad;
  if (body.contains("kind") && body["kind"] != t.type->kind) {
    return BadRequest("the kind of the object (" + body["kind"].dump() + ") does not match the resource (" +
                      t.type->kind + ")");
  }
  if (!body["metadata"].is_object()) body["metadata"] = json::object();
  const std::string name = Meta(body, "name");
  if (!name.empty() && name != t.name) {
    return BadRequest("the name of the object (" + name + ") does not match the name on the URL (" + t.name + ")");
  }
  const std::string ns = Meta(body, "namespace");
  if (t.type->namespaced && !ns.empty() && ns != t.ns) {
    return BadRequest("the namespace of the provided object does not match the namespace sent on the request");
  }
  auto mutate = [&](const json& current) -> ApiResult { return Replacement(t, current, body, req, warnings); };
  ApiResult r = store_.Update(*t.type, t.ns, t.name, mutate, Param(req, "dryRun") == "All");
  if (r.ok() && t.IsCrd()) SyncCrd(t.name);
  if (r.ok()) r.body = t.Present(r.body);
  return r;
}

ApiResult Api::Patch(const Target& t, const Request& req, std::vector<std::string>& warnings) {
  const std::string media = MediaType(req.content_type);
  enum class Kind { kMerge, kJson, kStrategic, kApply } kind;
  if (media == "application/merge-patch+json") {
    kind = Kind::kMerge;
  } else if (media == "application/json-patch+json") {
    kind = Kind::kJson;
  } else if (media == "application/strategic-merge-patch+json") {
    kind = t.type->builtin ? Kind::kStrategic : Kind::kMerge;
  } else if (media == "application/apply-patch+yaml" || media == "application/apply-patch+json") {
    kind = Kind::kApply;
  } else {
    return Failure(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types include: "
                   "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, "
                   "application/strategic-merge-patch+json");
  }
  StatusOr<json> patch = kind == Kind::kApply ? ParseYamlDocument(req.body) : ParseBody(req);
  if (!patch.ok()) return BodyError(patch.status());
  auto mutate = [&](const json& current) -> ApiResult {
    json patched;
    switch (kind) {
      case Kind::kMerge:
      case Kind::kApply:
        patched = ApplyMergePatch(current, *patch);
        break;
      case Kind::kJson: {
        auto r = ApplyJsonPatch(current, *patch);
        if (!r.ok() && r.status().code() == StatusCode::kOutOfRange) {
          return Failure(413, "RequestEntityTooLarge", r.status().message());
        }
        if (!r.ok()) return Failure(422, "Invalid", r.status().message());
        patched = std::move(*r);
        break;
      }
      case Kind::kStrategic: {
        auto r = ApplyStrategicMergePatch(current, *patch);
        if (!r.ok()) return BadRequest(r.status().message());
        patched = std::move(*r);
        break;
      }
    }
    if (!patched.is_object()) return BadRequest("the patched object is not a JSON object");
    return Replacement(t, current, patched, req, warnings);
  };
  ApiResult r = store_.Update(*t.type, t.ns, t.name, mutate, Param(req, "dryRun") == "All");
  if (r.code == 404 && kind == Kind::kApply && t.subresource.empty()) {
    json object = *patch;
    // A metadata of the wrong type is left for CreateObject to refuse.
    if (object.is_object() && (object["metadata"].is_null() || object["metadata"].is_object())) {
      if (object["metadata"].is_null()) object["metadata"] = json::object();
      object["metadata"]["name"] = t.name;
    }
    return CreateObject(t, std::move(object), req, warnings);
  }
  if (r.ok() && t.IsCrd()) SyncCrd(t.name);
  if (r.ok()) r.body = t.Present(r.body);
  return r;
}

ApiResult Api::Delete(const Target& t, const Request& req) {
  const auto read = ReadDeleteOptions(MediaType(req.content_type), req.body, req.query);
  if (!read.ok()) return BodyError(read.status());
  const DeleteOptions& options = *read;
  ApiResult r = store_.Delete(*t.type, t.ns, t.name, options);
  if (r.ok() && !options.dry_run) {
    if (t.type->group.empty() && t.type->plural == "namespaces" && r.code == 200) store_.DeleteNamespaceContents(t.name);
    if (t.IsCrd()) SyncCrd(t.name);
  }
  if (r.ok()) r.body = t.Present(r.body);
  return r;
}

ApiResult Api::DeleteCollection(const Target& t, const Request& req) {
  // Bad options are refused before anything is deleted, also when nothing matches.
  if (auto read = ReadDeleteOptions(MediaType(req.content_type), req.body, req.query); !read.ok()) {
    return BodyError(read.status());
  }
  auto labels = LabelSelector::Parse(Param(req, "labelSelector"));
  if (!labels.ok()) return BadRequest(labels.status().message());
  auto fields = FieldSelector::Parse(Param(req, "fieldSelector"));
  if (!fields.ok()) return BadRequest(fields.status().message());
  const Store::ListResult list = store_.List(*t.type, t.ns, *labels, *fields);
  json items = json::array();
  for (const auto& item : list.items) {
    Target one = t;
    one.ns = Meta(item, "namespace");
    one.name = Meta(item, "name");
    one.verb = "delete";
    ApiResult r = Delete(one, req);
    // Bad delete options fail the first item, before anything is deleted; an item
    // deleted meanwhile (404) is skipped.
    if (!r.ok() && r.code != 404) return r;
    if (r.ok()) items.push_back(r.body);
  }
  return {200,
          {{"apiVersion", t.type->ApiVersion(t.version)},
           {"kind", t.type->list_kind},
           {"metadata", {{"resourceVersion", std::to_string(store_.resource_version())}}},
           {"items", items}}};
}

void Api::SyncCrd(const std::string& name) {
  const TypePtr crd_type = registry_.Find(kCrdGroup, "v1", kCrdResource);
  const ApiResult stored = store_.Get(*crd_type, "", name);
  if (stored.ok() && !stored.body["metadata"].contains("deletionTimestamp")) {
    auto type = TypeFromCrd(stored.body);
    if (type.ok()) registry_.Put(std::make_shared<const ResourceType>(std::move(*type)));
    return;
  }
  // The CRD is gone (or going): so are its resources. The name is <plural>.<group>.
  const size_t dot = name.find('.');
  if (dot == std::string::npos) return;
  const TypePtr type = registry_.FindGroupResource(name.substr(dot + 1), name.substr(0, dot));
  if (type == nullptr || type->builtin) return;
  registry_.Remove(type->group, type->plural);
  store_.RemoveAll(*type);
}

}  // namespace star::apiserver
