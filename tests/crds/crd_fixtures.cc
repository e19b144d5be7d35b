#include "crd_fixtures.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "star/core/api/node_allocation.h"
#include "star/core/api/training_job.h"
#include "star/core/api/types.h"

namespace star::crds {

using nlohmann::json;

namespace {

// Every field of the schema set, none to its default, the cross-field rules kept.
json TrainingJobExample() {
  return json::parse(R"({
    "apiVersion": "star.dev/v1alpha1",
    "kind": "TrainingJob",
    "metadata": {"name": "fmnist", "namespace": "research"},
    "spec": {
      "suspend": true,
      "architecture": "ParameterServer",
      "workers": {
        "replicas": 4,
        "procsPerPod": 2,
        "template": {
          "metadata": {"labels": {"app": "fmnist"}},
          "spec": {"containers": [{
            "name": "trainer", "image": "star/fmnist:1", "command": ["star-run"],
            "args": ["--epochs", "3"],
            "resources": {"limits": {"cpu": "2"}, "requests": {"cpu": "500m"}}}]}}},
      "parameterServers": {
        "replicas": 2,
        "template": {"spec": {"containers": [{"name": "ps", "image": "star/fmnist:1"}]}}},
      "training": {"globalBatchSize": 256, "targetAccuracy": 0.88, "maxIterations": 10000},
      "synchronization": {"policy": "FixedK", "selector": "ML", "minK": 2},
      "mitigation": {
        "mode": "Observe",
        "detection": {"rule": "STAR", "window": 30, "threshold": 2.5},
        "amp": {"enabled": false, "dtype": "bfloat16"},
        "batchAdaptation": {"enabled": false, "minLocalBatch": 8},
        "resourceReallocation": {"enabled": false}},
      "runPolicy": {"backoffLimit": 2, "activeDeadlineSeconds": 7200,
                    "ttlSecondsAfterFinished": 300, "schedulerName": "volcano"},
      "parallelism": {"pipelineStages": 1, "microBatches": 1, "maxInFlightPerStage": 1}
    },
    "status": {
      "phase": "Running",
      "conditions": [{"type": "Ready", "status": "True", "reason": "WorkersRunning",
                      "message": "4 of 4 workers running",
                      "lastTransitionTime": "2024-05-01T12:30:00Z", "observedGeneration": 3}],
      "observedGeneration": 3,
      "syncMode": "fixed_k",
      "k": 3,
      "groups": [[0, 1], [2, 3]],
      "stragglers": [{"worker": 2, "node": "node-b", "cause": "compute", "kind": "static",
                      "slowdown": 1.8, "since": "2024-05-01T12:31:00Z"}],
      "workers": [{"batch": 64, "amp": true}],
      "iteration": 1200,
      "accuracy": 0.71,
      "ttaSeconds": 330.25,
      "estimatedTTASeconds": 340.5,
      "decisionEpoch": 3,
      "decisionApplyAtIteration": 1190,
      "pipeline": {"warmup": [8, 8, 2, 1], "predictedIterationSeconds": 0.169,
                   "slowLink": {"fromStage": 1, "toStage": 2}},
      "startTime": "2024-05-01T12:00:00Z",
      "completionTime": "2024-05-01T13:00:00Z"
    }
  })");
}

// Restores TrainingJob's cross-field rules (the CEL rules on spec) after `changed` was
// set or removed, changing only other fields: the job a user would write around it.
// spec.parallelism's rules after the field `at` changed: more than one stage makes the
// job AllReduce with a world size that is a multiple of the stages; microBatches and
// maxInFlightPerStage move to fit the stages and each other (the one under test stays);
// the global batch covers every micro-batch, or, when it is under test, the micro-batches
// shrink to fit it.
void RepairParallelism(json& spec, const std::string& at, int64_t procs, int64_t* workers,
                       int64_t* global, const std::function<void()>& make_allreduce) {
  if (!spec.contains("parallelism") || !spec["parallelism"].is_object()) return;
  json& p = spec["parallelism"];
  const auto value = [&p](const char* key) {
    return p.contains(key) && p[key].is_number_integer() ? p[key].get<int64_t>() : int64_t{1};
  };
  const int64_t stages = std::max<int64_t>(1, value("pipelineStages"));
  int64_t micro = std::max<int64_t>(1, value("microBatches"));
  int64_t in_flight = std::max<int64_t>(1, value("maxInFlightPerStage"));
  if (stages > 1) {
    make_allreduce();
    *workers = std::max<int64_t>(stages, *workers / stages * stages);
    spec["workers"]["procsPerPod"] = 1;
    procs = 1;
  }
  const int64_t replicas = *workers * procs / stages;
  if (at == "spec.training.globalBatchSize") {
    micro = std::clamp<int64_t>(*global / replicas, stages, micro);
  } else if (at != "spec.parallelism.microBatches") {
    micro = std::max({micro, stages, at == "spec.parallelism.maxInFlightPerStage" ? in_flight : 1});
  }
  micro = std::min<int64_t>(micro, api::kMaxMicroBatches);
  if (at != "spec.parallelism.maxInFlightPerStage") in_flight = std::clamp(in_flight, stages, micro);
  // The field under test keeps its value, valid or not.
  if (p.contains("microBatches") && at != "spec.parallelism.microBatches") p["microBatches"] = micro;
  if (p.contains("maxInFlightPerStage") && at != "spec.parallelism.maxInFlightPerStage") {
    p["maxInFlightPerStage"] = in_flight;
  }
  *global = std::max(*global, replicas * micro);
}

// A pipeline splits each replica's share of globalBatchSize into equal micro-batches: the
// global batch becomes a multiple of replicas * microBatches (the next one up, or down at
// the maximum). When globalBatchSize is the field under test it keeps its value and the
// job becomes a single stage instead.
void KeepMicroBatchesEqual(json& spec, const std::string& at, int64_t world, int64_t* global) {
  if (!spec.contains("parallelism") || !spec["parallelism"].is_object()) return;
  json& p = spec["parallelism"];
  const auto value = [&p](const char* key) {
    return p.contains(key) && p[key].is_number_integer() ? p[key].get<int64_t>() : int64_t{1};
  };
  const int64_t stages = value("pipelineStages"), micro = value("microBatches");
  if (stages <= 1 || micro < 1 || world % stages != 0) return;
  const int64_t unit = world / stages * micro;
  if (*global % unit == 0) return;
  if (at == "spec.training.globalBatchSize") {
    p["pipelineStages"] = 1;
    if (p.contains("maxInFlightPerStage") && at != "spec.parallelism.maxInFlightPerStage") {
      p["maxInFlightPerStage"] = 1;
    }
    return;
  }
  const int64_t up = (*global / unit + 1) * unit;
  *global = up <= api::kMaxBatchSize ? up : *global / unit * unit;
}

// status.pipeline's rules after the field `at` changed: slowLink joins neighbours and
// leaves a stage before the last; the other end of the link moves to fit the one under
// test, and the depths grow to cover it (or, when they are under test, the link moves).
void RepairPipelineStatus(json& doc, const std::string& at) {
  const json::json_pointer link_at("/status/pipeline/slowLink"), warmup_at("/status/pipeline/warmup");
  if (!doc.contains(link_at) || !doc[link_at].is_object()) return;
  json& link = doc[link_at];
  const json from = link.value("fromStage", json()), to = link.value("toStage", json());
  if (!from.is_number_integer() || !to.is_number_integer()) return;
  int64_t f = from.get<int64_t>();
  if (at == "status.pipeline.slowLink.toStage") {
    if (to < 1 || to > api::kMaxPipelineStages - 1) return;
    f = to.get<int64_t>() - 1;
  }
  if (f < 0 || f > api::kMaxPipelineStages - 2) return;
  if (doc.contains(warmup_at) && doc[warmup_at].is_array()) {
    json& warmup = doc[warmup_at];
    if (at.rfind("status.pipeline.warmup", 0) == 0) {
      f = std::min<int64_t>(f, std::max<int64_t>(0, static_cast<int64_t>(warmup.size()) - 2));
    } else {
      while (static_cast<int64_t>(warmup.size()) < f + 2) warmup.push_back(1);
    }
  }
  link["fromStage"] = f;
  link["toStage"] = f + 1;
}

void RepairTrainingJob(json& doc, const Path& changed) {
  RepairPipelineStatus(doc, ToString(changed));
  if (!doc.contains("spec") || !doc["spec"].is_object()) return;
  json& spec = doc["spec"];
  const std::string at = ToString(changed);
  const auto get = [&spec](const char* pointer, json fallback) {
    const json::json_pointer p(pointer);
    return spec.contains(p) ? spec[p] : fallback;
  };
  const auto is_int = [](const json& v) { return v.is_number_integer(); };

  // architecture, parameterServers, policy.
  const std::string arch = get("/architecture", "AllReduce").get<std::string>();
  const bool has_ps = spec.contains("parameterServers");
  const json ps = get("/parameterServers/replicas", 0);
  auto make_allreduce = [&] {
    // An absent architecture already means AllReduce (and must stay absent).
    if (spec.contains("architecture")) spec["architecture"] = "AllReduce";
    if (spec.contains("parameterServers")) spec["parameterServers"]["replicas"] = 0;
    if (get("/synchronization/policy", "Auto") == "ASGD")
      spec["synchronization"]["policy"] = "Auto";
  };
  auto make_ps = [&] {
    spec["architecture"] = "ParameterServer";
    if (!spec.contains("parameterServers")) spec["parameterServers"] = {{"replicas", 1}};
    if (!is_int(spec["parameterServers"]["replicas"]) || spec["parameterServers"]["replicas"] < 1) {
      spec["parameterServers"]["replicas"] = 1;
    }
  };
  if (at == "spec.architecture") {
    arch == "ParameterServer" ? make_ps() : make_allreduce();
  } else if (at == "spec.parameterServers" && !has_ps) {
    make_allreduce();
  } else if (at == "spec.parameterServers.replicas" && is_int(ps)) {
    ps.get<int64_t>() >= 1 ? make_ps() : make_allreduce();
  } else if (at == "spec.synchronization.policy" &&
             get("/synchronization/policy", "Auto") == "ASGD") {
    make_ps();
  }

  // workers.replicas, globalBatchSize, minK, minLocalBatch.
  json n = get("/workers/replicas", 1);
  json g = get("/training/globalBatchSize", 1);
  json mlb = get("/mitigation/batchAdaptation/minLocalBatch", 1);
  json min_k = get("/synchronization/minK", nullptr);
  if (!is_int(n) || !is_int(g) || !is_int(mlb) || n < 1 || g < 1 || mlb < 1) return;
  int64_t workers = n.get<int64_t>();
  int64_t global = g.get<int64_t>();
  int64_t min_local = mlb.get<int64_t>();
  if (at == "spec.synchronization.minK" && is_int(min_k)) {
    workers = std::max(workers, min_k.get<int64_t>());
  }
  if (at == "spec.training.globalBatchSize") {
    workers = std::min(workers, global);
    min_local = std::min(min_local, global / workers);
  } else {
    // workers * minLocalBatch must stay within globalBatchSize's maximum.
    if (workers * min_local > api::kMaxBatchSize) {
      if (at == "spec.mitigation.batchAdaptation.minLocalBatch") {
        workers = std::max<int64_t>(1, api::kMaxBatchSize / min_local);
      } else {
        min_local = std::max<int64_t>(1, api::kMaxBatchSize / workers);
      }
    }
    global = std::max(global, workers * min_local);
  }
  // workers.procsPerPod: 1 unless it is the field under test, then few enough pods that
  // the world size stays within 1024 and the global batch covers it.
  if (spec["workers"].contains("procsPerPod")) {
    const json procs = spec["workers"]["procsPerPod"];
    if (at != "spec.workers.procsPerPod") {
      spec["workers"]["procsPerPod"] = 1;
    } else if (is_int(procs) && procs >= 1) {
      const int64_t p = procs.get<int64_t>();
      workers = std::clamp<int64_t>(api::kMaxReplicas / p, 1, workers);
      global = std::max(global, workers * p * min_local);
    }
  }
  if (at != "spec.synchronization.minK" && is_int(min_k)) {
    spec["synchronization"]["minK"] = std::min(min_k.get<int64_t>(), workers);
  }
  const auto procs = [&get] {
    const json v = get("/workers/procsPerPod", 1);
    return v.is_number_integer() ? std::max<int64_t>(1, v.get<int64_t>()) : int64_t{1};
  };
  RepairParallelism(spec, at, procs(), &workers, &global, make_allreduce);
  // More workers (a pipeline's stages) still leave minLocalBatch samples each.
  global = std::max(global, workers * procs() * min_local);
  KeepMicroBatchesEqual(spec, at, workers * procs(), &global);
  spec["workers"]["replicas"] = workers;
  spec["training"]["globalBatchSize"] = global;
  if (spec.contains(json::json_pointer("/mitigation/batchAdaptation/minLocalBatch"))) {
    spec["mitigation"]["batchAdaptation"]["minLocalBatch"] = min_local;
  }
}

// One document per cross-field rule, each keeping every single-field rule.
std::vector<std::pair<std::string, json>> TrainingJobViolations() {
  std::vector<std::pair<std::string, json>> out;
  auto with = [&out](const char* field, auto edit) {
    json doc = TrainingJobExample();
    edit(doc["spec"]);
    out.emplace_back(field, std::move(doc));
  };
  with("spec.training.globalBatchSize", [](json& s) {
    s["training"]["globalBatchSize"] = 7;  // < 4 pods * 2 processes
    s["mitigation"]["batchAdaptation"]["minLocalBatch"] = 1;
  });
  with("spec.synchronization.minK", [](json& s) { s["synchronization"]["minK"] = 9; });  // > 8
  with("spec.mitigation.batchAdaptation.minLocalBatch",
       [](json& s) { s["mitigation"]["batchAdaptation"]["minLocalBatch"] = 33; });  // 256/8 = 32
  with("spec.workers.procsPerPod", [](json& s) {
    s["workers"]["replicas"] = 1024;  // * 2 processes per pod = 2048 workers
    s["training"]["globalBatchSize"] = 4096;
  });
  with("spec.parameterServers", [](json& s) { s.erase("parameterServers"); });
  with("spec.parameterServers.replicas", [](json& s) { s["parameterServers"]["replicas"] = 0; });
  with("spec.parameterServers.replicas", [](json& s) { s["architecture"] = "AllReduce"; });
  with("spec.synchronization.policy", [](json& s) {
    s["architecture"] = "AllReduce";
    s.erase("parameterServers");
    s["synchronization"]["policy"] = "ASGD";
  });
  const auto pipeline = [](json& s, int stages, int micro, std::optional<int> in_flight) {
    s["architecture"] = "AllReduce";
    s.erase("parameterServers");
    s["parallelism"] = {{"pipelineStages", stages}, {"microBatches", micro}};
    if (in_flight) s["parallelism"]["maxInFlightPerStage"] = *in_flight;
  };
  with("spec.parallelism.microBatches", [&](json& s) { pipeline(s, 4, 2, std::nullopt); });
  with("spec.parallelism.maxInFlightPerStage", [&](json& s) { pipeline(s, 4, 8, 2); });
  with("spec.parallelism.maxInFlightPerStage", [&](json& s) { pipeline(s, 1, 2, 3); });
  with("spec.parallelism.pipelineStages", [&](json& s) {  // 8 processes, 3 stages
    pipeline(s, 3, 3, 3);
  });
  with("spec.parallelism.pipelineStages", [](json& s) {  // a pipeline of ParameterServer
    s["parallelism"] = {{"pipelineStages", 2}, {"microBatches", 2}};
  });
  with("spec.training.globalBatchSize", [&](json& s) {  // 8 replicas * 64 micro-batches
    pipeline(s, 1, 64, 1);
  });
  with("spec.training.globalBatchSize", [&](json& s) {  // 4 replicas * 8 micro-batches
    pipeline(s, 2, 8, std::nullopt);
    s["training"]["globalBatchSize"] = 100;
  });
  const auto slow_link = [&out](const char* field, int from, int to) {
    json doc = TrainingJobExample();
    doc["status"]["pipeline"]["slowLink"] = {{"fromStage", from}, {"toStage", to}};
    out.emplace_back(field, std::move(doc));
  };
  slow_link("status.pipeline.slowLink.toStage", 1, 3);    // not neighbours
  slow_link("status.pipeline.slowLink.fromStage", 3, 4);  // from the last of 4 stages
  return out;
}

json NodeAllocationExample() {
  return json::parse(R"({
    "apiVersion": "star.dev/v1alpha1",
    "kind": "NodeAllocation",
    "metadata": {"name": "node-a.cluster.local"},
    "spec": {"pods": [{
      "namespace": "research", "name": "fmnist-worker-0", "uid": "0b6e2f3c-5d1a",
      "cpu": {"quotaMillicores": 1500, "weight": 200},
      "network": {"egressBitsPerSecond": 100000000, "ingressBitsPerSecond": 50000000,
                  "priority": 2},
      "guaranteed": true}]},
    "status": {
      "observedGeneration": 4,
      "applied": [{
        "namespace": "research", "name": "fmnist-worker-0", "uid": "0b6e2f3c-5d1a",
        "cpu": {"quotaMillicores": 1500, "weight": 200},
        "network": {"egressBitsPerSecond": 100000000, "ingressBitsPerSecond": 50000000,
                    "priority": 2}}],
      "conditions": [{"type": "Applied", "status": "True", "reason": "InSync",
                      "message": "cgroups and tc match the spec",
                      "lastTransitionTime": "2024-05-01T12:30:00+02:00",
                      "observedGeneration": 4}],
      "usage": {"cpuMillicores": 1200.5, "egressBitsPerSecond": 80000000.5,
                "ingressBitsPerSecond": 10000000.25},
      "headroom": {"sampledAt": "2024-05-01T12:30:05Z", "intervalSeconds": 5.5,
                   "cpu": {"capacityMillicores": 16000.5, "usedMillicores": 5200.5},
                   "network": {"interface": "eth0", "capacityBitsPerSecond": 10000000000.5,
                               "egressBitsPerSecond": 350000000.5,
                               "ingressBitsPerSecond": 120000000.5}}
    }
  })");
}

// Every wire name of enum E: its values are 0, 1, ... and ToString names any other
// value "unknown".
template <typename E>
void AddNames(std::vector<std::string>* out) {
  for (int i = 0;; ++i) {
    const std::string_view name = api::ToString(static_cast<E>(i));
    if (name == "unknown") return;
    out->emplace_back(name);
  }
}

// metav1.Condition.status, which C++ checks as a string enum.
const char* const kConditionStatuses[] = {"True", "False", "Unknown"};

template <typename T, typename Decode>
RoundTrip MakeRoundTrip(Decode decode) {
  return [decode](const json& doc) -> StatusOr<json> {
    StatusOr<T> v = decode(doc);
    if (!v.ok()) return v.status();
    return api::ToJson(*v);
  };
}

}  // namespace

Kind TrainingJobKind() {
  Kind k;
  k.model.kind = "TrainingJob";
  k.model.crd_file = "trainingjobs.star.dev.yaml";
  k.model.example = TrainingJobExample();
  k.model.repair = RepairTrainingJob;
  k.model.cross_field_violations = TrainingJobViolations();
  std::vector<std::string>& names = k.model.cpp_enum_names;
  AddNames<api::Architecture>(&names);
  AddNames<api::SyncPolicy>(&names);
  AddNames<api::ModeSelector>(&names);
  AddNames<api::DetectionRule>(&names);
  AddNames<api::AmpDtype>(&names);
  AddNames<api::JobPhase>(&names);
  AddNames<api::SyncMode>(&names);
  AddNames<api::StragglerCause>(&names);
  AddNames<api::StragglerKind>(&names);
  names.insert(names.end(), std::begin(kConditionStatuses), std::end(kConditionStatuses));
  k.round_trip =
      MakeRoundTrip<api::TrainingJob>([](const json& j) { return api::TrainingJobFromJson(j); });
  return k;
}

Kind NodeAllocationKind() {
  Kind k;
  k.model.kind = "NodeAllocation";
  k.model.crd_file = "nodeallocations.star.dev.yaml";
  k.model.example = NodeAllocationExample();
  k.model.repair = [](json&, const Path&) {};
  k.model.cpp_enum_names.assign(std::begin(kConditionStatuses), std::end(kConditionStatuses));
  k.round_trip = MakeRoundTrip<api::NodeAllocation>(
      [](const json& j) { return api::NodeAllocationFromJson(j); });
  return k;
}

std::vector<Kind> AllKinds() { return {TrainingJobKind(), NodeAllocationKind()}; }

}  // namespace star::crds
