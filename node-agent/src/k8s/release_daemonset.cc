#include "star/agent/release_daemonset.h"

#include <thread>

namespace star::agent {

using nlohmann::json;

kube::ResourceRef DaemonSets() { return {"apps", "v1", "daemonsets", true, "DaemonSet"}; }

json ReleasePatch() {
  return {{"spec",
           {{"updateStrategy", {{"type", "RollingUpdate"}, {"rollingUpdate", {{"maxUnavailable", "100%"}}}}},
            {"template", {{"metadata", {{"annotations", {{kAgentModeAnnotation, "release"}}}}}}}}}};
}

bool RolledOut(const json& ds) {
  const int64_t generation = ds.value(json::json_pointer("/metadata/generation"), int64_t{0});
  const json status = ds.value("status", json::object());
  const int64_t desired = status.value("desiredNumberScheduled", int64_t{-1});
  return status.value("observedGeneration", int64_t{0}) >= generation &&
         status.value("updatedNumberScheduled", int64_t{0}) == desired &&
         status.value("numberReady", int64_t{0}) == desired &&
         status.value("numberUnavailable", int64_t{0}) == 0;
}

Status ReleaseDaemonSet(kube::Client& client, const std::string& ns, const std::string& name,
                        const ReleaseOptions& options) {
  auto patched = client.MergePatch(DaemonSets(), ns, name, ReleasePatch());
  if (!patched.ok() && patched.status().code() == StatusCode::kNotFound) return Status::Ok();
  if (!patched.ok()) return patched.status().WithPrefix("daemonset " + ns + "/" + name);
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  json ds = *patched;
  for (;;) {
    if (RolledOut(ds)) return Status::Ok();
    if (std::chrono::steady_clock::now() >= deadline) break;
    if (options.sleep) {
      options.sleep(options.poll);
    } else {
      std::this_thread::sleep_for(options.poll);
    }
    auto got = client.Get(DaemonSets(), ns, name);
    if (!got.ok() && got.status().code() == StatusCode::kNotFound) return Status::Ok();
    if (!got.ok()) return got.status().WithPrefix("daemonset " + ns + "/" + name);
    ds = std::move(got).value();
  }
  const json status = ds.value("status", json::object());
  return Status::DeadlineExceeded(
      "daemonset " + ns + "/" + name + ": " +
      std::to_string(status.value("numberReady", int64_t{0})) + " of " +
      std::to_string(status.value("desiredNumberScheduled", int64_t{0})) +
      " nodes restored (ready in release mode) after " +
      std::to_string(options.timeout.count()) + " ms");
}

}  // namespace star::agent
