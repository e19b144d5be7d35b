#include "sim/scenario.h"

#include <string>

#include "star/core/api/json_reader.h"
#include "star/core/pipeline/schedule.h"

namespace star::sim {
namespace {

using nlohmann::json;

constexpr double kMaxDelaySeconds = 10;  // as star local's --inject delay
constexpr int kMaxStages = 64, kMaxMicroBatches = 1024;  // as spec.parallelism

// "pipeline": the stages' costs (PipelineScenario in scenario.h).
StatusOr<PipelineScenario> PipelineFromJson(const json& j) {
  PipelineScenario p;
  api::ObjectReader rd(j, "pipeline");
  rd.Int("stages", &p.stages)
      .AtLeast("stages", p.stages, 2)
      .AtMost("stages", p.stages, kMaxStages)
      .Int("micro_batches", &p.micro_batches)
      .AtLeast("micro_batches", p.micro_batches, p.stages)
      .AtMost("micro_batches", p.micro_batches, kMaxMicroBatches)
      .NumberArray("forward_seconds", &p.forward_seconds)
      .NumberArray("backward_seconds", &p.backward_seconds)
      .Number("activation_seconds", &p.activation_seconds)
      .AtLeast("activation_seconds", p.activation_seconds, 0)
      .Number("gradient_seconds", &p.gradient_seconds)
      .AtLeast("gradient_seconds", p.gradient_seconds, 0)
      .Number("outside_seconds", &p.outside_seconds, api::Need::kOptional)
      .AtLeast("outside_seconds", p.outside_seconds, 0);
  if (rd.ok() && rd.Has("max_in_flight")) {
    int k = 0;
    rd.Int("max_in_flight", &k).AtLeast("max_in_flight", k, p.stages);
    p.max_in_flight = k;
  }
  for (const auto& [key, costs] : {std::pair{"forward_seconds", &p.forward_seconds},
                                   std::pair{"backward_seconds", &p.backward_seconds}}) {
    if (!rd.ok()) break;
    if (costs->size() != static_cast<size_t>(p.stages)) {
      rd.Fail(key, "must have one entry per stage (" + std::to_string(p.stages) + "), got " +
                       std::to_string(costs->size()));
    }
    for (size_t i = 0; rd.ok() && i < costs->size(); ++i) {
      if (!((*costs)[i] >= 0)) rd.Fail(key, "entries must be >= 0, got " + api::FormatNumber((*costs)[i]));
    }
  }
  rd.RejectUnknown({"stages", "micro_batches", "max_in_flight", "forward_seconds", "backward_seconds",
                    "activation_seconds", "gradient_seconds", "outside_seconds"});
  if (!rd.ok()) return rd.status();
  return p;
}

// The checks across a pipeline and the rest: the workers make whole replicas, a
// replica's batch splits into the micro-batches, and a delay is on a link of one.
Status CheckPipeline(const Scenario& s) {
  const auto bad = [](const std::string& field, const std::string& reason) {
    return Status::InvalidArgument(field + ": " + reason);
  };
  if (!s.pipeline) {
    for (size_t i = 0; i < s.episodes.size(); ++i) {
      if (s.episodes[i].delay) return bad("episodes[" + std::to_string(i) + "].delay", "only for a pipeline");
    }
    return Status::Ok();
  }
  const PipelineScenario& p = *s.pipeline;
  if (s.workers % p.stages != 0) {
    return bad("workers", "must be a multiple of pipeline.stages (" + std::to_string(p.stages) + "), got " +
                              std::to_string(s.workers));
  }
  if (s.batch_per_worker % p.micro_batches != 0) {
    return bad("batch_per_worker", "must be a multiple of pipeline.micro_batches (" +
                                       std::to_string(p.micro_batches) + "), got " +
                                       std::to_string(s.batch_per_worker));
  }
  for (size_t i = 0; i < s.episodes.size(); ++i) {
    const Episode& e = s.episodes[i];
    if (!e.peer) continue;
    const bool neighbour = *e.peer < s.workers && *e.peer / p.stages == e.worker / p.stages &&
                           (*e.peer == e.worker + 1 || *e.peer == e.worker - 1);
    if (!neighbour) {
      return bad("episodes[" + std::to_string(i) + "].peer",
                 "must be a neighbouring stage of worker " + std::to_string(e.worker) +
                     " in its replica, got " + std::to_string(*e.peer));
    }
  }
  return Status::Ok();
}

// Reads an optional fraction field in (0, 1].
void Fraction(api::ObjectReader& rd, std::string_view key, std::optional<double>* out) {
  if (!rd.ok() || !rd.Has(key)) return;
  double v = 0;
  rd.Number(key, &v);
  if (rd.ok() && !(v > 0 && v <= 1)) {
    rd.Fail(key, "must be in (0, 1], got " + api::FormatNumber(v));
    return;
  }
  *out = v;
}

// An episode's "delay" (seconds in (0, 10]) and its "peer": both or neither.
void ReadDelay(api::ObjectReader& rd, Episode& e) {
  if (!rd.ok() || (!rd.Has("delay") && !rd.Has("peer"))) return;
  double delay = 0;
  int peer = 0;
  rd.Number("delay", &delay).Greater("delay", delay, 0).AtMost("delay", delay, kMaxDelaySeconds);
  if (rd.ok() && !rd.Has("peer")) rd.Fail("peer", "required with delay: the stage whose link is delayed");
  rd.Int("peer", &peer).AtLeast("peer", peer, 0);
  e.delay = delay;
  e.peer = peer;
}

StatusOr<Episode> EpisodeFromJson(const json& j, const std::string& path, int workers) {
  Episode e;
  api::ObjectReader rd(j, path);
  rd.Int("worker", &e.worker).AtLeast("worker", e.worker, 0);
  if (rd.ok() && e.worker >= workers) {
    rd.Fail("worker", "must be < workers (" + std::to_string(workers) + "), got " +
                          std::to_string(e.worker));
  }
  rd.Number("start", &e.start, api::Need::kOptional).AtLeast("start", e.start, 0);
  if (rd.ok() && rd.Has("end")) {
    double end = 0;
    rd.Number("end", &end).Greater("end", end, e.start);
    e.end = end;
  }
  Fraction(rd, "cpu", &e.cpu);
  Fraction(rd, "bandwidth", &e.bandwidth);
  ReadDelay(rd, e);
  if (rd.ok() && !e.cpu && !e.bandwidth && !e.delay) {
    rd.Fail("cpu", "an episode needs cpu or bandwidth (or both)");
  }
  rd.RejectUnknown({"worker", "start", "end", "cpu", "bandwidth", "delay", "peer"});
  if (!rd.ok()) return rd.status();
  return e;
}

}  // namespace

StatusOr<Scenario> ScenarioFromJson(const json& j) {
  Scenario s;
  api::ObjectReader rd(j, "");
  std::string arch = "AllReduce";
  const bool pipeline = j.is_object() && j.contains("pipeline");
  if (pipeline) s.compute_seconds_per_sample = 1;  // unused: the stages' costs replace it
  rd.Enum("architecture", &arch, {"AllReduce", "ParameterServer"}, api::Need::kOptional)
      .Int("workers", &s.workers)
      .AtLeast("workers", s.workers, 1)
      .Int("batch_per_worker", &s.batch_per_worker)
      .AtLeast("batch_per_worker", static_cast<double>(s.batch_per_worker), 1)
      .Number("noise_scale", &s.noise_scale)
      .AtLeast("noise_scale", s.noise_scale, 0)
      .Number("min_updates", &s.min_updates)
      .Greater("min_updates", s.min_updates, 0)
      .Number("compute_seconds_per_sample", &s.compute_seconds_per_sample,
              pipeline ? api::Need::kOptional : api::Need::kRequired)
      .Greater("compute_seconds_per_sample", s.compute_seconds_per_sample, 0)
      .Number("communication_seconds", &s.communication_seconds)
      .AtLeast("communication_seconds", s.communication_seconds, 0)
      .Number("jitter", &s.jitter, api::Need::kOptional)
      .AtLeast("jitter", s.jitter, 0)
      .AtMost("jitter", s.jitter, 1);
  int64_t seed = 1;
  rd.Int("seed", &seed, api::Need::kOptional).AtLeast("seed", static_cast<double>(seed), 0);
  s.seed = static_cast<uint64_t>(seed);
  rd.Int("report_every", &s.report_every, api::Need::kOptional)
      .AtLeast("report_every", s.report_every, 1)
      .Number("amp_speedup", &s.amp_speedup, api::Need::kOptional)
      .AtLeast("amp_speedup", s.amp_speedup, 1)
      .Bool("amp_available", &s.amp_available, api::Need::kOptional)
      .Number("staleness_penalty", &s.staleness_penalty, api::Need::kOptional)
      .AtLeast("staleness_penalty", s.staleness_penalty, 0)
      .Number("momentum", &s.momentum, api::Need::kOptional)
      .AtLeast("momentum", s.momentum, 0)
      .Bool("group_replicas", &s.group_replicas, api::Need::kOptional)
      .Number("asgd_cpu_overhead", &s.asgd_cpu_overhead, api::Need::kOptional)
      .AtLeast("asgd_cpu_overhead", s.asgd_cpu_overhead, 0)
      .Number("asgd_bandwidth_overhead", &s.asgd_bandwidth_overhead, api::Need::kOptional)
      .AtLeast("asgd_bandwidth_overhead", s.asgd_bandwidth_overhead, 0)
      .Int("parameter_servers", &s.parameter_servers, api::Need::kOptional)
      .AtLeast("parameter_servers", s.parameter_servers, 1)
      .Number("server_update_seconds", &s.server_update_seconds, api::Need::kOptional)
      .AtLeast("server_update_seconds", s.server_update_seconds, 0);
  if (rd.ok() && s.momentum >= 1) {
    rd.Fail("momentum", "must be < 1, got " + api::FormatNumber(s.momentum));
  }
  if (rd.ok() && rd.Has("min_k")) {
    int k = 0;
    rd.Int("min_k", &k).AtLeast("min_k", k, 1);
    if (rd.ok() && k > s.workers) {
      rd.Fail("min_k", "must be <= workers (" + std::to_string(s.workers) + "), got " +
                           std::to_string(k));
    }
    s.min_k = k;
  }
  if (rd.ok() && rd.Has("detection_window")) {
    int w = 0;
    rd.Int("detection_window", &w).AtLeast("detection_window", w, 3);
    s.detection_window = w;
  }
  if (rd.ok() && rd.Has("max_seconds")) {
    double m = 0;
    rd.Number("max_seconds", &m).Greater("max_seconds", m, 0);
    s.max_seconds = m;
  }
  if (rd.ok()) {
    const int workers = s.workers;
    api::ReadArray(rd, "episodes", &s.episodes, [workers](const json& e, const std::string& p) {
      return EpisodeFromJson(e, p, workers);
    });
  }
  if (rd.ok() && pipeline) {
    auto p = PipelineFromJson(j["pipeline"]);
    if (p.ok()) s.pipeline = *std::move(p);
    rd.Merge(p.status());
  }
  if (rd.ok() && pipeline && arch != "AllReduce") rd.Fail("architecture", "a pipeline must be AllReduce");
  if (rd.ok()) rd.Merge(CheckPipeline(s));
  rd.RejectUnknown({"architecture", "workers", "batch_per_worker", "noise_scale", "min_updates",
                    "compute_seconds_per_sample", "communication_seconds", "jitter", "episodes", "pipeline",
                    "seed", "report_every", "amp_speedup", "amp_available", "staleness_penalty", "momentum",
                    "group_replicas",
                    "asgd_cpu_overhead", "asgd_bandwidth_overhead", "parameter_servers",
                    "server_update_seconds", "detection_window", "min_k", "max_seconds"});
  if (!rd.ok()) return rd.status();
  s.architecture = *api::ParseArchitecture(arch);
  return s;
}

namespace {

json ToJson(const PipelineScenario& p) {
  json j = {{"stages", p.stages},
            {"micro_batches", p.micro_batches},
            {"forward_seconds", p.forward_seconds},
            {"backward_seconds", p.backward_seconds},
            {"activation_seconds", p.activation_seconds},
            {"gradient_seconds", p.gradient_seconds},
            {"outside_seconds", p.outside_seconds}};
  if (p.max_in_flight) j["max_in_flight"] = *p.max_in_flight;
  return j;
}

}  // namespace

pipeline::PipelineCosts CleanCosts(const PipelineScenario& p) {
  pipeline::PipelineCosts c;
  c.micro_batches = p.micro_batches;
  for (int i = 0; i < p.stages; ++i) {
    c.stages.push_back({p.forward_seconds[static_cast<size_t>(i)], p.backward_seconds[static_cast<size_t>(i)]});
  }
  c.links.assign(static_cast<size_t>(p.stages - 1), {p.activation_seconds, p.gradient_seconds});
  return c;
}

json ScenarioToJson(const Scenario& s) {
  json episodes = json::array();
  for (const Episode& e : s.episodes) {
    json j = {{"worker", e.worker}, {"start", e.start}};
    if (e.end) j["end"] = *e.end;
    if (e.cpu) j["cpu"] = *e.cpu;
    if (e.bandwidth) j["bandwidth"] = *e.bandwidth;
    if (e.delay) j["delay"] = *e.delay;
    if (e.peer) j["peer"] = *e.peer;
    episodes.push_back(std::move(j));
  }
  json j = {{"architecture", api::ToString(s.architecture)},
            {"workers", s.workers},
            {"batch_per_worker", s.batch_per_worker},
            {"noise_scale", s.noise_scale},
            {"min_updates", s.min_updates},
            {"compute_seconds_per_sample", s.compute_seconds_per_sample},
            {"communication_seconds", s.communication_seconds},
            {"jitter", s.jitter},
            {"episodes", std::move(episodes)},
            {"seed", s.seed},
            {"report_every", s.report_every},
            {"amp_speedup", s.amp_speedup},
            {"amp_available", s.amp_available},
            {"staleness_penalty", s.staleness_penalty},
            {"momentum", s.momentum},
            {"group_replicas", s.group_replicas},
            {"asgd_cpu_overhead", s.asgd_cpu_overhead},
            {"asgd_bandwidth_overhead", s.asgd_bandwidth_overhead},
            {"parameter_servers", s.parameter_servers},
            {"server_update_seconds", s.server_update_seconds}};
  if (s.detection_window) j["detection_window"] = *s.detection_window;
  if (s.min_k) j["min_k"] = *s.min_k;
  if (s.max_seconds) j["max_seconds"] = *s.max_seconds;
  if (s.pipeline) j["pipeline"] = ToJson(*s.pipeline);
  return j;
}

double CleanSsgdSeconds(const Scenario& s) {
  if (s.pipeline) {
    const PipelineScenario& p = *s.pipeline;
    const int replicas = s.workers / p.stages;
    const double global = static_cast<double>(replicas) * static_cast<double>(s.batch_per_worker);
    const StatusOr<double> schedule =
        pipeline::IterationSeconds(CleanCosts(p), pipeline::OneFOneB(p.stages, p.micro_batches));
    const double iteration = (schedule.ok() ? *schedule : 0) + p.outside_seconds +
                             (replicas > 1 ? s.communication_seconds : 0);
    return s.min_updates * (1 + s.noise_scale / global) * iteration;
  }
  const double global = static_cast<double>(s.workers) * static_cast<double>(s.batch_per_worker);
  const double iteration = static_cast<double>(s.batch_per_worker) * s.compute_seconds_per_sample +
                           s.communication_seconds;
  return s.min_updates * (1 + s.noise_scale / global) * iteration;
}

double TimeLimitSeconds(const Scenario& s) {
  return s.max_seconds ? *s.max_seconds : kDefaultTimeLimitFactor * CleanSsgdSeconds(s);
}

}  // namespace star::sim
