#include "sim/scenario.h"

#include <string>

#include "star/core/api/json_reader.h"

namespace star::sim {
namespace {

using nlohmann::json;

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
  if (rd.ok() && !e.cpu && !e.bandwidth) {
    rd.Fail("cpu", "an episode needs cpu or bandwidth (or both)");
  }
  rd.RejectUnknown({"worker", "start", "end", "cpu", "bandwidth"});
  if (!rd.ok()) return rd.status();
  return e;
}

}  // namespace

StatusOr<Scenario> ScenarioFromJson(const json& j) {
  Scenario s;
  api::ObjectReader rd(j, "");
  std::string arch = "AllReduce";
  rd.Enum("architecture", &arch, {"AllReduce", "ParameterServer"}, api::Need::kOptional)
      .Int("workers", &s.workers)
      .AtLeast("workers", s.workers, 1)
      .Int("batch_per_worker", &s.batch_per_worker)
      .AtLeast("batch_per_worker", static_cast<double>(s.batch_per_worker), 1)
      .Number("noise_scale", &s.noise_scale)
      .AtLeast("noise_scale", s.noise_scale, 0)
      .Number("min_updates", &s.min_updates)
      .Greater("min_updates", s.min_updates, 0)
      .Number("compute_seconds_per_sample", &s.compute_seconds_per_sample)
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
  rd.RejectUnknown({"architecture", "workers", "batch_per_worker", "noise_scale", "min_updates",
                    "compute_seconds_per_sample", "communication_seconds", "jitter", "episodes",
                    "seed", "report_every", "amp_speedup", "amp_available", "staleness_penalty", "momentum",
                    "group_replicas",
                    "asgd_cpu_overhead", "asgd_bandwidth_overhead", "parameter_servers",
                    "server_update_seconds", "detection_window", "min_k", "max_seconds"});
  if (!rd.ok()) return rd.status();
  s.architecture = *api::ParseArchitecture(arch);
  return s;
}

json ScenarioToJson(const Scenario& s) {
  json episodes = json::array();
  for (const Episode& e : s.episodes) {
    json j = {{"worker", e.worker}, {"start", e.start}};
    if (e.end) j["end"] = *e.end;
    if (e.cpu) j["cpu"] = *e.cpu;
    if (e.bandwidth) j["bandwidth"] = *e.bandwidth;
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
  return j;
}

double CleanSsgdSeconds(const Scenario& s) {
  const double global = static_cast<double>(s.workers) * static_cast<double>(s.batch_per_worker);
  const double iteration = static_cast<double>(s.batch_per_worker) * s.compute_seconds_per_sample +
                           s.communication_seconds;
  return s.min_updates * (1 + s.noise_scale / global) * iteration;
}

double TimeLimitSeconds(const Scenario& s) {
  return s.max_seconds ? *s.max_seconds : kDefaultTimeLimitFactor * CleanSsgdSeconds(s);
}

}  // namespace star::sim
