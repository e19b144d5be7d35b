#include "star/core/api/training_job.h"

#include <array>
#include <cmath>
#include <limits>
#include <utility>

#include "api/enum_table.h"
#include "star/core/api/json_reader.h"
#include "star/core/api/pod_bandwidth.h"

namespace star::api {

using nlohmann::json;

// ---- enums ----

namespace {

template <typename E, size_t N>
using Table = internal::EnumTable<E, N>;

constexpr Table<Architecture, 2> kArch{
    {{Architecture::kAllReduce, "AllReduce"}, {Architecture::kParameterServer, "ParameterServer"}}};
constexpr Table<SyncPolicy, 5> kPolicy{{{SyncPolicy::kAuto, "Auto"},
                                        {SyncPolicy::kSsgd, "SSGD"},
                                        {SyncPolicy::kAsgd, "ASGD"},
                                        {SyncPolicy::kFixedK, "FixedK"},
                                        {SyncPolicy::kGroups, "Groups"}}};
constexpr Table<ModeSelector, 2> kSelector{
    {{ModeSelector::kHeuristic, "Heuristic"}, {ModeSelector::kMl, "ML"}}};
constexpr Table<DetectionRule, 4> kRule{{{DetectionRule::kMad, "MAD"},
                                         {DetectionRule::kRelativeScore, "RelativeScore"},
                                         {DetectionRule::kStar, "STAR"},
                                         {DetectionRule::kChangePoint, "ChangePoint"}}};
constexpr Table<AmpDtype, 2> kDtype{
    {{AmpDtype::kBfloat16, "bfloat16"}, {AmpDtype::kFloat16, "float16"}}};
constexpr Table<MitigationMode, 2> kMitigationMode{
    {{MitigationMode::kMitigate, "Mitigate"}, {MitigationMode::kObserve, "Observe"}}};
constexpr Table<JobPhase, 7> kPhase{{{JobPhase::kPending, "Pending"},
                                     {JobPhase::kCreated, "Created"},
                                     {JobPhase::kRunning, "Running"},
                                     {JobPhase::kRestarting, "Restarting"},
                                     {JobPhase::kSucceeded, "Succeeded"},
                                     {JobPhase::kFailed, "Failed"},
                                     {JobPhase::kSuspended, "Suspended"}}};

}  // namespace

std::string_view ToString(SyncPolicy p) { return internal::EnumName(kPolicy, p); }
std::optional<SyncPolicy> ParseSyncPolicy(std::string_view s) { return internal::EnumParse(kPolicy, s); }
std::string_view ToString(ModeSelector s) { return internal::EnumName(kSelector, s); }
std::optional<ModeSelector> ParseModeSelector(std::string_view s) { return internal::EnumParse(kSelector, s); }
std::string_view ToString(DetectionRule r) { return internal::EnumName(kRule, r); }
std::optional<DetectionRule> ParseDetectionRule(std::string_view s) { return internal::EnumParse(kRule, s); }
std::string_view ToString(AmpDtype d) { return internal::EnumName(kDtype, d); }
std::optional<AmpDtype> ParseAmpDtype(std::string_view s) { return internal::EnumParse(kDtype, s); }
std::string_view ToString(MitigationMode m) { return internal::EnumName(kMitigationMode, m); }
std::optional<MitigationMode> ParseMitigationMode(std::string_view s) {
  return internal::EnumParse(kMitigationMode, s);
}
std::string_view ToString(JobPhase p) { return internal::EnumName(kPhase, p); }
std::optional<JobPhase> ParseJobPhase(std::string_view s) { return internal::EnumParse(kPhase, s); }

namespace {

// ---- small helpers ----

Status Invalid(const std::string& path, const std::string& reason) {
  return Status::InvalidArgument(path + ": " + reason);
}

Status AtLeast(const std::string& path, int64_t v, int64_t min) {
  if (v >= min) return Status::Ok();
  return Invalid(path, "must be >= " + std::to_string(min) + ", got " + std::to_string(v));
}

Status InRange(const std::string& path, int64_t v, int64_t min, int64_t max) {
  STAR_RETURN_IF_ERROR(AtLeast(path, v, min));
  if (v <= max) return Status::Ok();
  return Invalid(path, "must be <= " + std::to_string(max) + ", got " + std::to_string(v));
}

// Reads the optional enum field `key`, spelled as in `table`; the error lists the
// allowed spellings like ObjectReader::Enum.
template <typename E, size_t N>
void ReadEnum(ObjectReader& rd, std::string_view key, const Table<E, N>& table, E* out) {
  if (!rd.ok() || !rd.Has(key)) return;
  std::string s;
  rd.String(key, &s);
  if (!rd.ok()) return;
  if (std::optional<E> v = internal::EnumParse(table, s)) {
    *out = *v;
    return;
  }
  std::string allowed;
  for (const auto& [v, name] : table) {
    if (!allowed.empty()) allowed += ", ";
    allowed += name;
  }
  rd.Fail(key, "must be one of " + allowed + ", got \"" + s + "\"");
}

// The object at `key` for a nested reader, or nullptr when absent (recording an error
// when required).
const json* Section(ObjectReader& rd, std::string_view key, Need need) {
  if (!rd.ok()) return nullptr;
  const json* f = rd.Get(key);
  if (f == nullptr && need == Need::kRequired) rd.Fail(key, "required field is missing");
  return f;
}

// Reads an optional array of strings at `key`.
void ReadStrings(ObjectReader& rd, std::string_view key, std::vector<std::string>* out) {
  ReadArray(rd, key, out, [](const json& e, const std::string& path) -> StatusOr<std::string> {
    if (!e.is_string()) return Invalid(path, "must be a string, got " + JsonTypeName(e));
    return e.get<std::string>();
  });
}

// ---- pod templates ----

// Reads the optional CPU quantity at `key` of `rd`.
void ReadCpu(ObjectReader& rd, std::string_view key, std::optional<int64_t>* out) {
  const json* q = Section(rd, key, Need::kOptional);
  if (q == nullptr) return;
  if (!q->is_string() && !q->is_number()) {
    rd.Fail(key, "must be a CPU quantity (string or number), got " + JsonTypeName(*q));
    return;
  }
  std::optional<int64_t> m = ParseCpuMillicores(*q);
  if (!m) {
    rd.Fail(key, "must be a non-negative CPU quantity like \"500m\" or \"2\", got " + q->dump());
    return;
  }
  *out = m;
}

// Reads the optional "nvidia.com/gpu" limit of `rd`: a whole number of GPUs.
void ReadGpus(ObjectReader& rd, std::optional<int64_t>* out) {
  constexpr std::string_view kKey = "nvidia.com/gpu";
  const json* q = Section(rd, kKey, Need::kOptional);
  if (q == nullptr) return;
  std::optional<int64_t> millis;
  if (q->is_string() || q->is_number()) millis = ParseCpuMillicores(*q);
  if (!millis || *millis % 1000 != 0) {
    rd.Fail(kKey, "must be a whole number of GPUs like \"1\" or 8, got " + q->dump());
    return;
  }
  *out = *millis / 1000;
}

StatusOr<ContainerSummary> ContainerFromJson(const json& j, const std::string& path) {
  ContainerSummary c;
  ObjectReader rd(j, path);
  rd.String("name", &c.name).String("image", &c.image, Need::kOptional);
  if (rd.ok() && c.name.empty()) rd.Fail("name", "must not be empty");
  ReadStrings(rd, "command", &c.command);
  ReadStrings(rd, "args", &c.args);
  if (const json* res = Section(rd, "resources", Need::kOptional)) {
    ObjectReader rr(*res, rd.FieldPath("resources"));
    for (auto [key, out] : {std::pair{"limits", &c.cpu_limit_millicores},
                            std::pair{"requests", &c.cpu_request_millicores}}) {
      if (const json* sec = Section(rr, key, Need::kOptional)) {
        ObjectReader sr(*sec, rr.FieldPath(key));
        ReadCpu(sr, "cpu", out);
        if (out == &c.cpu_limit_millicores) ReadGpus(sr, &c.gpus);
        rr.Merge(sr.status());
      }
    }
    rd.Merge(rr.status());
  }
  if (!rd.ok()) return rd.status();
  return c;
}

// ---- spec decoding ----

// Reads a role's section; only workers have procsPerPod (`procs`).
enum class Procs { kAllowed, kNone };

void ReadReplicas(ObjectReader& parent, std::string_view key, ReplicaSpec* out, Procs procs) {
  const json* f = Section(parent, key, Need::kRequired);
  if (f == nullptr) return;
  ObjectReader rd(*f, parent.FieldPath(key));
  rd.Int("replicas", &out->replicas);
  if (procs == Procs::kAllowed) {
    rd.Int("procsPerPod", &out->procs_per_pod, Need::kOptional)
        .RejectUnknown({"replicas", "procsPerPod", "template"});
  } else {
    rd.RejectUnknown({"replicas", "template"});
  }
  if (const json* t = rd.Get("template"); rd.ok() && t != nullptr) out->pod_template = *t;
  parent.Merge(rd.status());
}

json ReplicasToJson(const ReplicaSpec& r, Procs procs) {
  json j = {{"replicas", r.replicas}};
  if (procs == Procs::kAllowed) j["procsPerPod"] = r.procs_per_pod;
  if (r.pod_template) j["template"] = *r.pod_template;
  return j;
}

// ---- status decoding ----

// A Kubernetes node name: a DNS-1123 subdomain.
constexpr size_t kMaxNodeNameLength = 253;

StatusOr<StragglerStatus> StragglerFromJson(const json& j, const std::string& path) {
  StragglerStatus s;
  ObjectReader rd(j, path);
  rd.Int("worker", &s.worker)
      .AtLeast("worker", s.worker, 0)
      .AtMost("worker", s.worker, kMaxReplicas - 1)
      .String("node", &s.node, Need::kOptional);
  std::string cause, kind;
  rd.Enum("cause", &cause, {"compute", "communication"})
      .Enum("kind", &kind, {"dynamic", "static"})
      .Number("slowdown", &s.slowdown)
      .AtLeast("slowdown", s.slowdown, 0)
      .AtMost("slowdown", s.slowdown, kMaxJsonInteger)
      .String("since", &s.since, Need::kOptional)
      .RejectUnknown({"worker", "node", "cause", "kind", "slowdown", "since"});
  if (rd.ok() && s.node.size() > kMaxNodeNameLength) {
    rd.Fail("node", "must be at most " + std::to_string(kMaxNodeNameLength) + " characters, got " +
                        std::to_string(s.node.size()));
  }
  if (rd.ok() && rd.Has("since") && !IsRfc3339(s.since)) {
    rd.Fail("since", "must be an RFC 3339 date-time, got \"" + s.since + "\"");
  }
  if (!rd.ok()) return rd.status();
  s.cause = *ParseStragglerCause(cause);
  s.kind = *ParseStragglerKind(kind);
  return s;
}

// One group of status.groups: at most kMaxReplicas ranks, each in [0, kMaxReplicas).
StatusOr<std::vector<int>> GroupFromJson(const json& j, const std::string& path) {
  if (j.is_array() && j.size() > static_cast<size_t>(kMaxReplicas)) {
    return Invalid(path, "must have at most " + std::to_string(kMaxReplicas) + " items, got " +
                             std::to_string(j.size()));
  }
  STAR_ASSIGN_OR_RETURN(std::vector<int> ranks, IntListFromJson(j, path));
  for (size_t i = 0; i < ranks.size(); ++i) {
    STAR_RETURN_IF_ERROR(InRange(IndexPath(path, i), ranks[i], 0, kMaxReplicas - 1));
  }
  return ranks;
}

StatusOr<WorkerStatus> WorkerStatusFromJson(const json& j, const std::string& path) {
  WorkerStatus w;
  ObjectReader rd(j, path);
  rd.Int("batch", &w.batch)
      .AtLeast("batch", static_cast<double>(w.batch), 1)
      .AtMost("batch", static_cast<double>(w.batch), kMaxBatchSize)
      .Bool("amp", &w.amp, Need::kOptional)
      .RejectUnknown({"batch", "amp"});
  if (!rd.ok()) return rd.status();
  return w;
}

}  // namespace

// ---- pod template helpers ----

std::optional<int64_t> ParseCpuMillicores(const json& q) {
  constexpr double kMaxCores = 9.0e12;
  if (q.is_number()) {
    const double cores = q.get<double>();
    if (!std::isfinite(cores) || cores < 0 || cores > kMaxCores) return std::nullopt;
    // Round up to whole millicores, forgiving binary representation error (0.1 * 1000).
    return static_cast<int64_t>(std::ceil(cores * 1000 - 1e-6));
  }
  if (!q.is_string()) return std::nullopt;
  const std::string& s = q.get_ref<const std::string&>();
  // <digits>[.<digits>][suffix]; value = mantissa / 10^frac_digits cores * suffix.
  size_t p = 0;
  int64_t mantissa = 0, scale = 1;
  int digits = 0;
  bool any = false, in_frac = false;
  for (; p < s.size(); ++p) {
    const char c = s[p];
    if (c == '.' && !in_frac) {
      in_frac = true;
      continue;
    }
    if (c < '0' || c > '9') break;
    any = true;
    if (mantissa != 0 || c != '0') ++digits;
    if (digits > 12) return std::nullopt;  // beyond any real CPU count or precision
    if (in_frac) {
      if (scale >= 1'000'000'000'000) return std::nullopt;
      scale *= 10;
    }
    mantissa = mantissa * 10 + (c - '0');
  }
  if (!any) return std::nullopt;
  // millicores = mantissa * num / (scale * den)
  int64_t num = 1000, den = 1;
  const std::string_view suffix = std::string_view(s).substr(p);
  if (suffix == "m") {
    num = 1;
  } else if (suffix == "u") {
    num = 1, den = 1000;
  } else if (suffix == "n") {
    num = 1, den = 1'000'000;
  } else if (suffix == "k") {
    num = 1'000'000;
  } else if (!suffix.empty()) {
    return std::nullopt;
  }
  const int64_t n = mantissa * num;  // < 1e12 * 1e6: fits
  const int64_t d = scale * den;     // <= 1e12 * 1e6: fits
  return n / d + (n % d != 0 ? 1 : 0);
}

StatusOr<std::optional<ContainerSummary>> FirstContainer(const json& pod_template,
                                                         const std::string& path) {
  ObjectReader rd(pod_template, path);
  const json* spec = Section(rd, "spec", Need::kOptional);
  if (spec == nullptr) {
    if (!rd.ok()) return rd.status();
    return std::optional<ContainerSummary>{};
  }
  ObjectReader sr(*spec, rd.FieldPath("spec"));
  const json* containers = Section(sr, "containers", Need::kOptional);
  if (!sr.ok()) return sr.status();
  if (containers == nullptr) return std::optional<ContainerSummary>{};
  if (!containers->is_array()) {
    return Invalid(sr.FieldPath("containers"),
                   "must be an array, got " + JsonTypeName(*containers));
  }
  if (containers->empty()) return Invalid(sr.FieldPath("containers"), "must not be empty");
  std::optional<ContainerSummary> first;
  for (size_t i = 0; i < containers->size(); ++i) {
    STAR_ASSIGN_OR_RETURN(
        ContainerSummary c,
        ContainerFromJson((*containers)[i], IndexPath(sr.FieldPath("containers"), i)));
    if (i == 0) first = std::move(c);
  }
  return first;
}

// ---- spec ----

// The template's container checks (FirstContainer) and its size bound.
Status CheckPodTemplate(const json& pod_template, const std::string& path) {
  const size_t bytes = pod_template.dump().size();
  if (bytes > kMaxPodTemplateBytes) {
    return Invalid(path, "must be at most " + std::to_string(kMaxPodTemplateBytes) +
                             " bytes of JSON, got " + std::to_string(bytes));
  }
  if (pod_template.is_object()) {
    const json meta = pod_template.value("metadata", json::object());
    if (meta.is_object() && meta.contains("annotations")) {
      STAR_RETURN_IF_ERROR(PodBandwidth(meta["annotations"], path + ".metadata.annotations").status());
    }
  }
  return FirstContainer(pod_template, path).status();
}

int WorldSize(const TrainingJobSpec& spec) {
  return spec.workers.replicas * spec.workers.procs_per_pod;
}

TrainingJobSpec MitigationsInForce(TrainingJobSpec spec) {
  const bool pipeline = IsPipeline(spec.parallelism);
  const bool observe = spec.mitigation.mode == MitigationMode::kObserve;
  if (!observe && !pipeline) return spec;
  SyncPolicy& policy = spec.synchronization.policy;
  if (observe ? policy == SyncPolicy::kAuto : policy != SyncPolicy::kAuto) policy = SyncPolicy::kSsgd;
  spec.mitigation.amp.enabled = false;
  spec.mitigation.batch_adaptation.enabled = false;
  spec.mitigation.resource_reallocation.enabled = false;
  return spec;
}

namespace {

// workers: replicas, procsPerPod (against the pod's GPUs), template, and the world size.
Status ValidateWorkers(const ReplicaSpec& w, const std::string& path) {
  const auto at = [&path](std::string_view field) { return JoinPath(path, field); };
  STAR_RETURN_IF_ERROR(InRange(at("workers.replicas"), w.replicas, 1, kMaxReplicas));
  STAR_RETURN_IF_ERROR(InRange(at("workers.procsPerPod"), w.procs_per_pod, 1, kMaxProcsPerPod));
  const int64_t world = int64_t{w.replicas} * w.procs_per_pod;
  if (world > kMaxReplicas) {
    return Invalid(at("workers.procsPerPod"),
                   "workers.replicas * workers.procsPerPod must be <= " +
                       std::to_string(kMaxReplicas) + ", got " + std::to_string(world));
  }
  if (!w.pod_template) return Status::Ok();
  STAR_RETURN_IF_ERROR(CheckPodTemplate(*w.pod_template, at("workers.template")));
  STAR_ASSIGN_OR_RETURN(std::optional<ContainerSummary> c,
                        FirstContainer(*w.pod_template, at("workers.template")));
  if (c && c->gpus && w.procs_per_pod > *c->gpus) {
    return Invalid(at("workers.procsPerPod"),
                   "must be <= the pod's GPUs (nvidia.com/gpu limit " +
                       std::to_string(*c->gpus) + "), got " + std::to_string(w.procs_per_pod));
  }
  return Status::Ok();
}

// A DNS-1123 subdomain: lowercase alphanumerics, '-' and '.', alphanumeric at both ends.
bool IsDnsSubdomain(const std::string& s) {
  const auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (s.empty() || s.size() > kMaxSchedulerNameLength) return false;
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '.') return false;
  }
  return true;
}

Status ValidateRunPolicy(const RunPolicySpec& r, const std::string& path) {
  const auto at = [&path](std::string_view field) { return JoinPath(path, field); };
  if (r.backoff_limit) {
    STAR_RETURN_IF_ERROR(
        InRange(at("runPolicy.backoffLimit"), *r.backoff_limit, 0, kMaxBackoffLimit));
  }
  if (r.active_deadline_seconds) {
    STAR_RETURN_IF_ERROR(InRange(at("runPolicy.activeDeadlineSeconds"),
                                 *r.active_deadline_seconds, 1, kMaxRunPolicySeconds));
  }
  if (r.ttl_seconds_after_finished) {
    STAR_RETURN_IF_ERROR(InRange(at("runPolicy.ttlSecondsAfterFinished"),
                                 *r.ttl_seconds_after_finished, 0, kMaxRunPolicySeconds));
  }
  if (!r.scheduler_name.empty() && !IsDnsSubdomain(r.scheduler_name)) {
    return Invalid(at("runPolicy.schedulerName"),
                   "must be a DNS-1123 subdomain of at most " +
                       std::to_string(kMaxSchedulerNameLength) +
                       " characters (lowercase letters, digits, '-', '.'), got \"" +
                       r.scheduler_name + "\"");
  }
  return Status::Ok();
}

}  // namespace

Status Validate(const TrainingJobSpec& s, const std::string& path) {
  const auto at = [&path](std::string_view field) { return JoinPath(path, field); };
  STAR_RETURN_IF_ERROR(ValidateWorkers(s.workers, path));
  const int64_t n = WorldSize(s);
  // How errors name the world size: the field when there is one process per pod.
  const std::string world = s.workers.procs_per_pod == 1
                                ? at("workers.replicas")
                                : at("workers.replicas") + " * " + at("workers.procsPerPod");

  if (s.parameter_servers) {
    const int64_t ps = s.parameter_servers->replicas;
    STAR_RETURN_IF_ERROR(InRange(at("parameterServers.replicas"), ps, 0, kMaxReplicas));
    if (s.parameter_servers->pod_template) {
      STAR_RETURN_IF_ERROR(
          CheckPodTemplate(*s.parameter_servers->pod_template, at("parameterServers.template")));
    }
    if (s.architecture == Architecture::kParameterServer && ps < 1) {
      return Invalid(at("parameterServers.replicas"), "must be >= 1 when " + at("architecture") +
                                                          " is ParameterServer, got " +
                                                          std::to_string(ps));
    }
    if (s.architecture == Architecture::kAllReduce && ps != 0) {
      return Invalid(
          at("parameterServers.replicas"),
          "must be 0 when " + at("architecture") + " is AllReduce, got " + std::to_string(ps));
    }
  } else if (s.architecture == Architecture::kParameterServer) {
    return Invalid(at("parameterServers"),
                   "required when " + at("architecture") + " is ParameterServer");
  }

  const TrainingSpec& t = s.training;
  STAR_RETURN_IF_ERROR(
      InRange(at("training.globalBatchSize"), t.global_batch_size, 1, kMaxBatchSize));
  if (t.global_batch_size < n) {
    return Invalid(at("training.globalBatchSize"), "must be >= " + world + " (" +
                                                       std::to_string(n) + "), got " +
                                                       std::to_string(t.global_batch_size));
  }
  if (t.target_accuracy && (!(*t.target_accuracy > 0) || !(*t.target_accuracy <= 1))) {
    return Invalid(at("training.targetAccuracy"),
                   "must be in (0, 1], got " + FormatNumber(*t.target_accuracy));
  }
  if (t.max_iterations) {
    STAR_RETURN_IF_ERROR(InRange(at("training.maxIterations"), *t.max_iterations, 1, kMaxJsonInteger));
  }

  const SynchronizationSpec& sync = s.synchronization;
  if (sync.policy == SyncPolicy::kAsgd && s.architecture != Architecture::kParameterServer) {
    return Invalid(at("synchronization.policy"), "ASGD requires " + at("architecture") +
                                                     " ParameterServer, got " +
                                                     std::string(ToString(s.architecture)));
  }
  if (sync.min_k) {
    STAR_RETURN_IF_ERROR(AtLeast(at("synchronization.minK"), *sync.min_k, 1));
    if (*sync.min_k > n) {
      return Invalid(at("synchronization.minK"), "must be <= " + world + " (" +
                                                     std::to_string(n) + "), got " +
                                                     std::to_string(*sync.min_k));
    }
  }

  const MitigationSpec& m = s.mitigation;
  STAR_RETURN_IF_ERROR(
      InRange(at("mitigation.detection.window"), m.detection.window, 3, kMaxDetectionWindow));
  if (m.detection.threshold && !(*m.detection.threshold > 0)) {
    return Invalid(at("mitigation.detection.threshold"),
                   "must be > 0, got " + FormatNumber(*m.detection.threshold));
  }
  if (m.detection.threshold && *m.detection.threshold > kMaxDetectionThreshold) {
    return Invalid(at("mitigation.detection.threshold"),
                   "must be <= " + FormatNumber(kMaxDetectionThreshold) + ", got " +
                       FormatNumber(*m.detection.threshold));
  }
  const int64_t min_local = m.batch_adaptation.min_local_batch;
  STAR_RETURN_IF_ERROR(
      InRange(at("mitigation.batchAdaptation.minLocalBatch"), min_local, 1, kMaxBatchSize));
  if (min_local > t.global_batch_size / n) {
    return Invalid(at("mitigation.batchAdaptation.minLocalBatch"),
                   "must be <= " + at("training.globalBatchSize") + " / " + world +
                       " (" + std::to_string(t.global_batch_size / n) + "), got " +
                       std::to_string(min_local));
  }
  if (m.amp.dtype == AmpDtype::kFloat16) {
    return Invalid(at("mitigation.amp.dtype"),
                   "float16 is not supported (it needs a loss scale that every worker "
                   "applies alike); use bfloat16");
  }
  STAR_RETURN_IF_ERROR(ValidateParallelism(s.parallelism, n, world, t.global_batch_size,
                                           s.architecture == Architecture::kAllReduce, path));
  return ValidateRunPolicy(s.run_policy, path);
}

namespace {

// Each reads its optional (or required) section of `parent` into `out`, merging the
// section's errors into `parent`.
void ReadTraining(ObjectReader& parent, TrainingSpec* out) {
  const json* f = Section(parent, "training", Need::kRequired);
  if (f == nullptr) return;
  ObjectReader tr(*f, parent.FieldPath("training"));
  tr.Int("globalBatchSize", &out->global_batch_size);
  if (tr.ok() && tr.Has("targetAccuracy")) {
    double v = 0;
    tr.Number("targetAccuracy", &v);
    out->target_accuracy = v;
  }
  if (tr.ok() && tr.Has("maxIterations")) {
    int64_t v = 0;
    tr.Int("maxIterations", &v);
    out->max_iterations = v;
  }
  tr.RejectUnknown({"globalBatchSize", "targetAccuracy", "maxIterations"});
  parent.Merge(tr.status());
}

void ReadSynchronization(ObjectReader& parent, SynchronizationSpec* out) {
  const json* f = Section(parent, "synchronization", Need::kOptional);
  if (f == nullptr) return;
  ObjectReader sr(*f, parent.FieldPath("synchronization"));
  ReadEnum(sr, "policy", kPolicy, &out->policy);
  ReadEnum(sr, "selector", kSelector, &out->selector);
  if (sr.ok() && sr.Has("minK")) {
    int v = 0;
    sr.Int("minK", &v);
    out->min_k = v;
  }
  sr.RejectUnknown({"policy", "selector", "minK"});
  parent.Merge(sr.status());
}

void ReadDetection(ObjectReader& parent, DetectionSpec* out) {
  const json* d = Section(parent, "detection", Need::kOptional);
  if (d == nullptr) return;
  ObjectReader dr(*d, parent.FieldPath("detection"));
  ReadEnum(dr, "rule", kRule, &out->rule);
  dr.Int("window", &out->window, Need::kOptional);
  if (dr.ok() && dr.Has("threshold")) {
    double v = 0;
    dr.Number("threshold", &v);
    out->threshold = v;
  }
  dr.RejectUnknown({"rule", "window", "threshold"});
  parent.Merge(dr.status());
}

void ReadMitigation(ObjectReader& parent, MitigationSpec* m) {
  const json* f = Section(parent, "mitigation", Need::kOptional);
  if (f == nullptr) return;
  ObjectReader mr(*f, parent.FieldPath("mitigation"));
  ReadEnum(mr, "mode", kMitigationMode, &m->mode);
  ReadDetection(mr, &m->detection);
  if (const json* a = Section(mr, "amp", Need::kOptional)) {
    ObjectReader ar(*a, mr.FieldPath("amp"));
    ar.Bool("enabled", &m->amp.enabled, Need::kOptional);
    ReadEnum(ar, "dtype", kDtype, &m->amp.dtype);
    ar.RejectUnknown({"enabled", "dtype"});
    mr.Merge(ar.status());
  }
  if (const json* b = Section(mr, "batchAdaptation", Need::kOptional)) {
    ObjectReader br(*b, mr.FieldPath("batchAdaptation"));
    br.Bool("enabled", &m->batch_adaptation.enabled, Need::kOptional)
        .Int("minLocalBatch", &m->batch_adaptation.min_local_batch, Need::kOptional)
        .RejectUnknown({"enabled", "minLocalBatch"});
    mr.Merge(br.status());
  }
  if (const json* r = Section(mr, "resourceReallocation", Need::kOptional)) {
    ObjectReader rr(*r, mr.FieldPath("resourceReallocation"));
    rr.Bool("enabled", &m->resource_reallocation.enabled, Need::kOptional)
        .RejectUnknown({"enabled"});
    mr.Merge(rr.status());
  }
  mr.RejectUnknown({"mode", "detection", "amp", "batchAdaptation", "resourceReallocation"});
  parent.Merge(mr.status());
}

void ReadRunPolicy(ObjectReader& parent, RunPolicySpec* out) {
  const json* f = Section(parent, "runPolicy", Need::kOptional);
  if (f == nullptr) return;
  ObjectReader rr(*f, parent.FieldPath("runPolicy"));
  if (rr.ok() && rr.Has("backoffLimit")) rr.Int("backoffLimit", &out->backoff_limit.emplace());
  for (auto [name, field] :
       {std::pair{"activeDeadlineSeconds", &out->active_deadline_seconds},
        std::pair{"ttlSecondsAfterFinished", &out->ttl_seconds_after_finished}}) {
    if (rr.ok() && rr.Has(name)) rr.Int(name, &field->emplace());
  }
  rr.String("schedulerName", &out->scheduler_name, Need::kOptional);
  if (rr.ok() && rr.Has("schedulerName") && out->scheduler_name.empty()) {
    rr.Fail("schedulerName", "must not be empty (leave it out for the cluster's default)");
  }
  rr.RejectUnknown(
          {"backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished", "schedulerName"});
  parent.Merge(rr.status());
}

json ToJson(const RunPolicySpec& r) {
  json j = json::object();
  if (r.backoff_limit) j["backoffLimit"] = *r.backoff_limit;
  if (r.active_deadline_seconds) j["activeDeadlineSeconds"] = *r.active_deadline_seconds;
  if (r.ttl_seconds_after_finished) j["ttlSecondsAfterFinished"] = *r.ttl_seconds_after_finished;
  if (!r.scheduler_name.empty()) j["schedulerName"] = r.scheduler_name;
  return j;
}

}  // namespace

StatusOr<TrainingJobSpec> TrainingJobSpecFromJson(const json& j, const std::string& path) {
  TrainingJobSpec s;
  ObjectReader rd(j, path);
  ReadEnum(rd, "architecture", kArch, &s.architecture);
  rd.Bool("suspend", &s.suspend, Need::kOptional);
  ReadReplicas(rd, "workers", &s.workers, Procs::kAllowed);
  if (rd.ok() && rd.Has("parameterServers")) {
    ReplicaSpec ps;
    ReadReplicas(rd, "parameterServers", &ps, Procs::kNone);
    s.parameter_servers = std::move(ps);
  }
  ReadTraining(rd, &s.training);
  ReadSynchronization(rd, &s.synchronization);
  ReadMitigation(rd, &s.mitigation);
  ReadRunPolicy(rd, &s.run_policy);
  if (const json* p = Section(rd, "parallelism", Need::kOptional)) {
    StatusOr<ParallelismSpec> parallelism = ParallelismFromJson(*p, rd.FieldPath("parallelism"));
    if (parallelism.ok()) s.parallelism = *parallelism;
    rd.Merge(parallelism.status());
  }
  rd.RejectUnknown({"suspend", "architecture", "workers", "parameterServers", "training",
                    "synchronization", "mitigation", "runPolicy", "parallelism"});
  if (rd.ok()) rd.Merge(Validate(s, path));
  if (!rd.ok()) return rd.status();
  return s;
}

json ToJson(const TrainingJobSpec& s) {
  json training = {{"globalBatchSize", s.training.global_batch_size}};
  if (s.training.target_accuracy) training["targetAccuracy"] = *s.training.target_accuracy;
  if (s.training.max_iterations) training["maxIterations"] = *s.training.max_iterations;
  json sync = {{"policy", ToString(s.synchronization.policy)},
               {"selector", ToString(s.synchronization.selector)}};
  if (s.synchronization.min_k) sync["minK"] = *s.synchronization.min_k;
  const MitigationSpec& m = s.mitigation;
  json detection = {{"rule", ToString(m.detection.rule)}, {"window", m.detection.window}};
  if (m.detection.threshold) detection["threshold"] = *m.detection.threshold;
  json j = {
      {"architecture", ToString(s.architecture)},
      {"suspend", s.suspend},
      {"workers", ReplicasToJson(s.workers, Procs::kAllowed)},
      {"training", std::move(training)},
      {"synchronization", std::move(sync)},
      {"mitigation",
       {{"mode", ToString(m.mode)},
        {"detection", std::move(detection)},
        {"amp", {{"enabled", m.amp.enabled}, {"dtype", ToString(m.amp.dtype)}}},
        {"batchAdaptation",
         {{"enabled", m.batch_adaptation.enabled},
          {"minLocalBatch", m.batch_adaptation.min_local_batch}}},
        {"resourceReallocation", {{"enabled", m.resource_reallocation.enabled}}}}},
  };
  if (s.parameter_servers) {
    j["parameterServers"] = ReplicasToJson(*s.parameter_servers, Procs::kNone);
  }
  j["runPolicy"] = ToJson(s.run_policy);
  j["parallelism"] = ToJson(s.parallelism);
  return j;
}

// ---- status ----

StatusOr<TrainingJobStatus> TrainingJobStatusFromJson(const json& j, const std::string& path) {
  TrainingJobStatus s;
  ObjectReader rd(j, path);
  ReadEnum(rd, "phase", kPhase, &s.phase);
  ReadConditions(rd, "conditions", &s.conditions);
  rd.Int("observedGeneration", &s.observed_generation, Need::kOptional)
      .AtLeast("observedGeneration", static_cast<double>(s.observed_generation), 0)
      .AtMost("observedGeneration", static_cast<double>(s.observed_generation), kMaxJsonInteger);
  if (rd.ok() && rd.Has("syncMode")) {
    std::string mode;
    rd.Enum("syncMode", &mode, {"ssgd", "fixed_k", "groups", "asgd"});
    if (rd.ok()) s.sync_mode = ParseSyncMode(mode);
  }
  if (rd.ok() && rd.Has("k")) {
    int k = 0;
    rd.Int("k", &k).AtLeast("k", k, 1).AtMost("k", k, kMaxReplicas);
    s.k = k;
  }
  for (std::string_view list : {"groups", "stragglers", "workers"}) rd.MaxItems(list, kMaxReplicas);
  ReadArray(rd, "groups", &s.groups, GroupFromJson);
  ReadArray(rd, "stragglers", &s.stragglers, StragglerFromJson);
  ReadArray(rd, "workers", &s.workers, WorkerStatusFromJson);
  rd.Int("iteration", &s.iteration, Need::kOptional)
      .AtLeast("iteration", static_cast<double>(s.iteration), 0)
      .AtMost("iteration", static_cast<double>(s.iteration), kMaxJsonInteger);
  if (rd.ok() && rd.Has("accuracy")) {
    double a = 0;
    rd.Number("accuracy", &a).AtLeast("accuracy", a, 0).AtMost("accuracy", a, 1);
    s.accuracy = a;
  }
  for (auto [name, field] : {std::pair{"ttaSeconds", &s.tta_seconds},
                              std::pair{"estimatedTTASeconds", &s.estimated_tta_seconds}}) {
    if (rd.ok() && rd.Has(name)) {
      double t = 0;
      rd.Number(name, &t).AtLeast(name, t, 0).AtMost(name, t, kMaxJsonInteger);
      *field = t;
    }
  }
  for (auto [name, field] : {std::pair{"decisionEpoch", &s.decision_epoch},
                              std::pair{"decisionApplyAtIteration", &s.decision_apply_at_iteration}}) {
    if (rd.ok() && rd.Has(name)) {
      int64_t v = 0;
      rd.Int(name, &v)
          .AtLeast(name, static_cast<double>(v), 0)
          .AtMost(name, static_cast<double>(v), kMaxJsonInteger);
      *field = v;
    }
  }
  if (rd.ok() && rd.Has("pipeline")) {
    auto pipeline = PipelineScheduleStatusFromJson(*rd.Get("pipeline"), rd.FieldPath("pipeline"));
    rd.Merge(pipeline.status());
    if (pipeline.ok()) s.pipeline = *std::move(pipeline);
  }
  for (auto [name, field] : {std::pair{"startTime", &s.start_time},
                              std::pair{"completionTime", &s.completion_time}}) {
    if (!rd.ok() || !rd.Has(name)) continue;
    rd.String(name, field);
    if (rd.ok() && !IsRfc3339(*field)) {
      rd.Fail(name, "must be an RFC 3339 date-time, got \"" + *field + "\"");
    }
  }
  rd.RejectUnknown({"phase", "conditions", "observedGeneration", "syncMode", "k", "groups",
                    "stragglers", "workers", "iteration", "accuracy", "ttaSeconds", "estimatedTTASeconds",
                    "decisionEpoch", "decisionApplyAtIteration", "pipeline", "startTime", "completionTime"});
  if (!rd.ok()) return rd.status();
  return s;
}

json ToJson(const TrainingJobStatus& s) {
  json conditions = json::array();
  for (const auto& c : s.conditions) conditions.push_back(ToJson(c));
  json stragglers = json::array();
  for (const auto& g : s.stragglers) {
    json e = {{"worker", g.worker},
              {"node", g.node},
              {"cause", ToString(g.cause)},
              {"kind", ToString(g.kind)},
              {"slowdown", g.slowdown}};
    if (!g.since.empty()) e["since"] = g.since;
    stragglers.push_back(std::move(e));
  }
  json workers = json::array();
  for (const auto& w : s.workers) workers.push_back({{"batch", w.batch}, {"amp", w.amp}});
  json j = {{"phase", ToString(s.phase)},
            {"conditions", std::move(conditions)},
            {"observedGeneration", s.observed_generation},
            {"groups", s.groups},
            {"stragglers", std::move(stragglers)},
            {"workers", std::move(workers)},
            {"iteration", s.iteration}};
  if (s.sync_mode) j["syncMode"] = ToString(*s.sync_mode);
  if (s.k) j["k"] = *s.k;
  if (s.accuracy) j["accuracy"] = *s.accuracy;
  if (s.tta_seconds) j["ttaSeconds"] = *s.tta_seconds;
  if (s.estimated_tta_seconds) j["estimatedTTASeconds"] = *s.estimated_tta_seconds;
  if (s.decision_epoch) j["decisionEpoch"] = *s.decision_epoch;
  if (s.decision_apply_at_iteration) j["decisionApplyAtIteration"] = *s.decision_apply_at_iteration;
  if (s.pipeline) j["pipeline"] = ToJson(*s.pipeline);
  if (!s.start_time.empty()) j["startTime"] = s.start_time;
  if (!s.completion_time.empty()) j["completionTime"] = s.completion_time;
  return j;
}

// ---- object ----

StatusOr<TrainingJob> TrainingJobFromJson(const json& j) {
  TrainingJob job;
  ObjectReader rd(j, "");
  rd.Merge(CheckTypeMeta(j, kTrainingJobKind));
  if (const json* m = Section(rd, "metadata", Need::kRequired)) {
    auto meta = ObjectMetaFromJson(*m, /*namespaced=*/true, "metadata");
    rd.Merge(meta.status());
    if (meta.ok()) job.metadata = *std::move(meta);
  }
  if (const json* s = Section(rd, "spec", Need::kRequired)) {
    auto spec = TrainingJobSpecFromJson(*s, "spec");
    rd.Merge(spec.status());
    if (spec.ok()) job.spec = *std::move(spec);
  }
  if (const json* s = Section(rd, "status", Need::kOptional)) {
    auto status = TrainingJobStatusFromJson(*s, "status");
    rd.Merge(status.status());
    if (status.ok()) job.status = *std::move(status);
  }
  rd.RejectUnknown({"apiVersion", "kind", "metadata", "spec", "status"});
  if (!rd.ok()) return rd.status();
  return job;
}

json ToJson(const TrainingJob& job) {
  json j = {{"apiVersion", kApiVersion},
            {"kind", kTrainingJobKind},
            {"metadata", ToJson(job.metadata, /*namespaced=*/true)},
            {"spec", ToJson(job.spec)}};
  if (job.status) j["status"] = ToJson(*job.status);
  return j;
}

}  // namespace star::api
