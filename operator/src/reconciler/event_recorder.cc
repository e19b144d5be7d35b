#include "star/operator/reconciler/event_recorder.h"

#include <chrono>
#include <cstdio>

#include "reconciler/helpers.h"
#include "star/kube/time.h"

namespace star::op {

using nlohmann::json;

void EventRecorder::Emit(const json& job, const EventSpec& e) {
  const std::string ns = job["metadata"].value("namespace", "default");
  const std::string name = job["metadata"].value("name", "");
  const std::string now = kube::NowRfc3339();
  char suffix[32];
  snprintf(suffix, sizeof suffix, "%llx.%llx",
           static_cast<unsigned long long>(std::chrono::system_clock::now().time_since_epoch().count()),
           static_cast<unsigned long long>(seq_++));
  json ev = {{"apiVersion", "v1"},
             {"kind", "Event"},
             {"metadata", {{"name", name + "." + suffix}, {"namespace", ns}}},
             {"involvedObject",
              {{"apiVersion", "star.dev/v1alpha1"},
               {"kind", "TrainingJob"},
               {"name", name},
               {"namespace", ns},
               {"uid", job["metadata"].value("uid", "")}}},
             {"reason", e.reason},
             {"message", e.message},
             {"type", e.type},
             {"count", 1},
             {"firstTimestamp", now},
             {"lastTimestamp", now},
             {"source", {{"component", "star-operator"}}},
             {"reportingComponent", "star-operator"}};
  auto r = client_->Create(kube::Events(), ns, ev);
  if (!r.ok()) Log("event " + e.reason + " for " + ns + "/" + name + ": " + r.status().ToString());
}

}  // namespace star::op
