// The Kubernetes API of the emulator, independent of the HTTP library: a Request in, a
// Response out (or a watch stream). Routing, discovery, the verbs with their per-kind
// rules (status subresources, schemas, patches, CRD registration), Tables, fault
// injection and request statistics.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "api_status.h"
#include "faults.h"
#include "resources.h"
#include "star/core/status.h"
#include "store.h"

namespace star::apiserver {

struct Request {
  std::string method;  // GET | POST | PUT | PATCH | DELETE
  std::string path;    // decoded, without the query: "/apis/star.dev/v1alpha1/namespaces/a/trainingjobs"
  std::map<std::string, std::string> query;  // decoded
  std::string accept;
  std::string content_type;
  std::string body;
  // Starts the response of a watch (200, chunked application/json) and returns where its
  // lines go. Unset: the transport cannot stream and watches are refused.
  std::function<std::shared_ptr<WatchSink>()> open_stream;
};

struct Response {
  int code = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool streamed = false;               // the answer went to open_stream()'s sink
  std::chrono::milliseconds delay{0};  // injected latency: answer this much later
};

struct ApiOptions {
  size_t history_limit = 10000;  // changes kept for watches from a resourceVersion
  std::chrono::milliseconds bookmark_interval{std::chrono::seconds(5)};  // allowWatchBookmarks
  std::chrono::seconds default_watch_timeout{1800};  // watches without timeoutSeconds
  std::chrono::milliseconds latency{0};  // added to every request for a resource
  std::string server_address = "127.0.0.1:0";  // host:port, for /api
};

class Api {
 public:
  // Starts with the built-in kinds and the namespaces default, kube-system, kube-public.
  explicit Api(ApiOptions options);

  // Creates every CustomResourceDefinition in *.yaml, *.yml and *.json files of `dir`
  // (several documents per file allowed). InvalidArgument names the file and the problem.
  Status LoadCrds(const std::string& dir);
  // Creates one CRD (as POST .../customresourcedefinitions would).
  Status CreateCrd(const nlohmann::json& crd);

  // Thread-safe. Never throws.
  Response Handle(const Request& request);

  // Periodic work: watch bookmarks and timeouts.
  void Tick();
  // Ends every watch stream.
  void Shutdown();

  void set_server_address(const std::string& address);
  FaultInjector& faults() { return faults_; }
  Store& store() { return store_; }
  Registry& registry() { return registry_; }
  // GET /emulator/stats: request counts per resource and verb, fault counters, watches.
  nlohmann::json Stats() const;

 private:
  struct Target;  // a parsed resource path
  Response Route(const Request& req);
  Response Emulator(const Request& req, const std::vector<std::string>& segments);
  Response Resource(const Request& req, const std::string& group, const std::string& version,
                    const std::vector<std::string>& rest);
  ApiResult Get(const Target& t, const Request& req);
  ApiResult List(const Target& t, const Request& req);
  Response Watch(const Target& t, const Request& req, const FaultDecision& fault);
  ApiResult Create(const Target& t, const Request& req, std::vector<std::string>& warnings);
  ApiResult CreateObject(const Target& t, nlohmann::json body, const Request& req,
                         std::vector<std::string>& warnings);
  ApiResult Update(const Target& t, const Request& req, std::vector<std::string>& warnings);
  ApiResult Patch(const Target& t, const Request& req, std::vector<std::string>& warnings);
  ApiResult Delete(const Target& t, const Request& req);
  ApiResult DeleteCollection(const Target& t, const Request& req);
  // What an update (or patch) of `current` to `incoming` stores: for the status
  // subresource only incoming's status (and resourceVersion), else incoming with
  // current's status kept (built-in kinds; CRDs recompute theirs); then admitted.
  ApiResult Replacement(const Target& t, const nlohmann::json& current, const nlohmann::json& incoming,
                        const Request& req, std::vector<std::string>& warnings) const;
  // Prunes, defaults and validates `object` for its kind; 422 (or 400 for unknown fields
  // under ?fieldValidation=Strict) on failure.
  ApiResult Admit(const Target& t, nlohmann::json& object, const Request& req,
                  std::vector<std::string>& warnings) const;
  void SyncCrd(const std::string& name);  // registry <- the stored CRD (or its absence)
  void Count(const std::string& resource, const std::string& verb);

  ApiOptions options_;
  Registry registry_;
  Store store_;
  FaultInjector faults_;
  mutable std::mutex mu_;  // guards the fields below
  std::string server_address_;
  std::map<std::string, std::map<std::string, std::uint64_t>> requests_;  // resource -> verb -> n
};

}  // namespace star::apiserver
