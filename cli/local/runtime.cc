#include "local/runtime.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "local/sandbox.h"
#include "star/agent/real_node_os.h"
#include "star/core/api/types.h"
#include "star/core/resources/planner.h"
#include "star/operator/control_loop.h"
#include "star/report/server.h"
#include "star/shim/store_server.h"
#include "star/shim/timing.h"

namespace star::local {

std::string_view ToString(Policy p) {
  switch (p) {
    case Policy::kAuto: return "auto";
    case Policy::kSsgd: return "ssgd";
    case Policy::kAsgd: return "asgd";
    case Policy::kFixedK: return "fixed-k";
    case Policy::kGroups: return "groups";
    case Policy::kAmp: return "amp";
    case Policy::kBoa: return "boa";
  }
  return "?";
}

StatusOr<Policy> ParsePolicy(std::string_view text) {
  for (Policy p : {Policy::kAuto, Policy::kSsgd, Policy::kAsgd, Policy::kFixedK, Policy::kGroups,
                   Policy::kAmp, Policy::kBoa}) {
    if (text == ToString(p)) return p;
  }
  return Status::InvalidArgument(
      "--policy: must be one of auto, ssgd, asgd, fixed-k, groups, amp, boa; got \"" +
      std::string(text) + "\"");
}

api::TrainingJobSpec ApplyPolicy(api::TrainingJobSpec spec, Policy policy) {
  auto& m = spec.mitigation;
  auto only = [&](api::SyncPolicy sync, bool amp, bool boa) {
    spec.synchronization.policy = sync;
    m.amp.enabled = amp;
    m.batch_adaptation.enabled = boa;
    m.resource_reallocation.enabled = false;
  };
  switch (policy) {
    case Policy::kAuto: spec.synchronization.policy = api::SyncPolicy::kAuto; break;
    case Policy::kSsgd: only(api::SyncPolicy::kSsgd, false, false); break;
    case Policy::kAsgd: only(api::SyncPolicy::kAsgd, false, false); break;
    case Policy::kFixedK: only(api::SyncPolicy::kFixedK, false, false); break;
    case Policy::kGroups: only(api::SyncPolicy::kGroups, false, false); break;
    case Policy::kAmp: only(api::SyncPolicy::kSsgd, true, false); break;
    case Policy::kBoa: only(api::SyncPolicy::kSsgd, false, true); break;
  }
  if (policy == Policy::kAsgd && spec.architecture == api::Architecture::kAllReduce) {
    spec.architecture = api::Architecture::kParameterServer;
    api::ReplicaSpec servers;
    servers.replicas = 1;  // no template: local mode gives it a small CPU share
    spec.parameter_servers = servers;
  }
  return spec;
}

Policy PolicyOf(const api::TrainingJobSpec& spec) {
  switch (spec.synchronization.policy) {
    case api::SyncPolicy::kAuto: return Policy::kAuto;
    case api::SyncPolicy::kSsgd: return Policy::kSsgd;
    case api::SyncPolicy::kAsgd: return Policy::kAsgd;
    case api::SyncPolicy::kFixedK: return Policy::kFixedK;
    case api::SyncPolicy::kGroups: return Policy::kGroups;
  }
  return Policy::kAuto;
}

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

// A short CFS period: with 100 ms, a worker limited to a fraction of a CPU runs in bursts
// and an iteration of tens of milliseconds waits for the next period (jitter of a whole
// period); 20 ms keeps that jitter small.
constexpr int64_t kCfsPeriodUs = 20000;

int64_t QuotaUs(int64_t millicores) { return millicores * kCfsPeriodUs / 1000; }

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string ListOf(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// The last `lines` lines of a file (for failure messages).
std::string Tail(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (size_t i = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0; i < all.size();
       ++i) {
    out += "\n    " + all[i];
  }
  return out;
}

std::string RandomToken() {
  std::random_device rd;
  std::string t;
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 32; ++i) t += kHex[rd() % 16];
  return t;
}

enum class Role { kServer, kWorker, kEvaluator, kNeighbor };

struct Proc {
  std::string name;  // "worker 2", "server 0", "evaluator", "neighbor of worker 1"
  Role role = Role::kWorker;
  int index = 0;  // worker / server index
  pid_t pid = -1;
  std::string log;
  bool running = false;
  int wait_status = 0;
};

struct ActiveInjection {
  Injection spec;
  bool applied = false;
  bool lifted = false;
  bool available = true;
  int proc = -1;               // neighbor process index
  bool reallocated = false;    // neighbor capped by a reallocation
};

class Runner {
 public:
  explicit Runner(const RunOptions& options) : o_(options) {}
  RunResult Run();

 private:
  void Notice(const std::string& s) const {
    if (o_.notice) o_.notice(s);
  }
  double Now() const { return shim::MonotonicSeconds() - origin_; }
  void AddEvent(double t, const std::string& event, int worker, const std::string& detail) {
    runtime_events_.push_back({t, event, worker, detail});
  }
  int SlotOf(int worker) const { return servers_ + worker; }

  Status Setup();
  std::vector<std::string> BaseEnv(int rank) const;
  Status SpawnAll();
  StatusOr<int> Spawn(Proc proc, Sandbox::SpawnSpec spec);
  std::optional<api::Decision> OnReport(const api::WorkerReport& r);
  void ReadEvaluator(int fd);
  void Tick();
  Status ApplyInjection(ActiveInjection& a);
  Status LiftInjection(ActiveInjection& a);
  void MaybeReallocate();
  void Progress();
  void StopAll();
  json BuildReport(const std::string& outcome, double wall) const;

  const RunOptions& o_;
  api::TrainingJobSpec spec_;
  Policy policy_ = Policy::kAuto;
  int workers_ = 0;
  int servers_ = 0;
  bool bundled_ = true;  // the bundled trainer (vs the manifest's command)
  int64_t worker_mc_ = 0, server_mc_ = 0;

  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<agent::NodeOs> os_;
  std::unique_ptr<shim::StoreServer> store_;
  std::unique_ptr<report::ReportServer> reports_;
  std::string token_;
  std::filesystem::path run_dir_;
  bool own_run_dir_ = false;
  double origin_ = 0;
  std::vector<Proc> procs_;
  std::vector<ActiveInjection> injections_;
  std::thread eval_reader_;
  int eval_fd_ = -1;

  // Shared with the report handler and the evaluator reader.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<op::JobControlLoop> loop_;
  json samples_ = json::array();
  json accuracy_curve_ = json::array();
  std::optional<double> tta_;
  std::optional<double> final_accuracy_;
  int64_t max_iteration_ = 0;
  int64_t last_epoch_ = 0;
  int decisions_ = 0;
  size_t timeline_seen_ = 0;
  std::vector<int> ever_flagged_;
  std::vector<op::TimelineEvent> runtime_events_;  // main thread only (merged at the end)
  double last_progress_ = -1;
};

Status Runner::Setup() {
  spec_ = o_.job.job.spec;
  policy_ = o_.policy ? *o_.policy : PolicyOf(spec_);
  if (o_.policy) spec_ = ApplyPolicy(spec_, *o_.policy);
  workers_ = spec_.workers.replicas;
  servers_ = spec_.architecture == api::Architecture::kParameterServer && spec_.parameter_servers
                 ? spec_.parameter_servers->replicas
                 : 0;
  bundled_ = o_.job.worker_command.empty();
  if (o_.timeout_seconds <= 0) return Status::InvalidArgument("--timeout: must be > 0");
  if (Status s = ValidateInjections(o_.injections, workers_); !s.ok()) return s;
  if (bundled_ && ::access(o_.trainer_binary.c_str(), X_OK) != 0) {
    return Status::FailedPrecondition("the bundled trainer \"" + o_.trainer_binary +
                                      "\" is not executable (build star-fmnist, or set "
                                      "STAR_TRAINER_BINARY)");
  }
  if (spec_.mitigation.amp.enabled && spec_.mitigation.amp.dtype == api::AmpDtype::kFloat16) {
    Notice("spec.mitigation.amp.dtype float16 needs a GPU: this CPU runs bfloat16");
  }
  op::LoopOptions lo;
  lo.apply_margin_iterations = 3 * o_.report_every;
  auto loop = op::JobControlLoop::Create(spec_, lo);
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);

  // CPU per slot: the manifest's limit, else an even share of 80% of this machine.
  const int cpus = std::max(1u, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(100, 800 * cpus / (workers_ + servers_));
  worker_mc_ = o_.job.worker_cpu_millicores > 0 ? o_.job.worker_cpu_millicores : share;
  // A parameter server applies updates (light work): 200m unless the manifest says.
  server_mc_ = o_.job.server_cpu_millicores > 0 ? o_.job.server_cpu_millicores : 200;

  SandboxOptions so;
  so.name = o_.job.job.metadata.name;
  so.slots = workers_ + servers_;
  so.network = o_.network;
  auto sandbox = Sandbox::Create(so);
  if (!sandbox.ok() && so.network) {
    Notice("network namespaces unavailable (" + sandbox.status().message() +
           "): workers share the loopback interface");
    so.network = false;
    sandbox = Sandbox::Create(so);
  }
  if (!sandbox.ok()) return sandbox.status();
  sandbox_ = std::move(*sandbox);
  agent::RealNodeOsOptions no;
  no.allowed_prefix = sandbox_->job_cgroup();
  auto os = agent::NewRealNodeOs(no);
  if (!os.ok()) return os.status();
  os_ = std::move(*os);

  for (const Injection& inj : o_.injections) {
    ActiveInjection a;
    a.spec = inj;
    if (!sandbox_->has_network() &&
        (inj.kind == InjectionKind::kBandwidth || inj.kind == InjectionKind::kDelay)) {
      a.available = false;
      Notice("--inject \"" + inj.text + "\": unavailable without network namespaces; skipped");
    }
    injections_.push_back(a);
  }

  for (int s = 0; s < workers_ + servers_; ++s) {
    const int64_t mc = s < servers_ ? server_mc_ : worker_mc_;
    if (Status st = os_->WriteCpu(sandbox_->slot_cgroup(s), {QuotaUs(mc), kCfsPeriodUs, 100});
        !st.ok()) {
      return st;
    }
  }
  if (bundled_) {
    if (Status st = os_->WriteCpu(sandbox_->eval_cgroup(),
                                  {QuotaUs(o_.eval_millicores), kCfsPeriodUs, 100});
        !st.ok()) {
      return st;
    }
  }

  auto store = shim::StoreServer::Start(sandbox_->host_address(), 0);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  token_ = RandomToken();
  report::ReportServerOptions ro;
  ro.host = sandbox_->host_address();
  ro.port = 0;
  ro.token = token_;
  auto reports = report::ReportServer::Start(
      ro, [this](const api::WorkerReport& r) { return OnReport(r); });
  if (!reports.ok()) return reports.status();
  reports_ = std::move(*reports);

  if (o_.log_dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "star-local-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      return Status::Unavailable("cannot create a temporary directory: " +
                                 std::string(std::strerror(errno)));
    }
    run_dir_ = tmpl;
    own_run_dir_ = true;
  } else {
    run_dir_ = o_.log_dir;
    std::error_code ec;
    std::filesystem::create_directories(run_dir_, ec);
    if (ec) return Status::Unavailable("--log-dir " + o_.log_dir + ": " + ec.message());
  }
  std::error_code ec;
  std::filesystem::remove_all(run_dir_ / "snapshots", ec);  // a previous run's, in --log-dir
  std::filesystem::create_directories(run_dir_ / "snapshots", ec);
  if (ec) return Status::Unavailable(run_dir_.string() + "/snapshots: " + ec.message());
  return Status::Ok();
}

std::vector<std::string> Runner::BaseEnv(int rank) const {
  std::vector<std::string> env;
  for (const char* keep : {"PATH", "HOME", "LANG", "TMPDIR", "LD_LIBRARY_PATH", "ASAN_OPTIONS",
                           "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* v = std::getenv(keep)) env.push_back(std::string(keep) + "=" + v);
  }
  const int slot = rank;
  auto set = [&](const std::string& k, const std::string& v) { env.push_back(k + "=" + v); };
  set("STAR_RANK", std::to_string(rank));
  set("STAR_WORLD_SIZE", std::to_string(workers_));
  set("STAR_PARAMETER_SERVERS", std::to_string(servers_));
  set("STAR_STORE_URL", store_->url());
  set("STAR_CONTROLLER_URL", reports_->base_url());
  set("STAR_JOB_TOKEN", token_);
  set("STAR_JOB", o_.job.job.metadata.name);
  set("STAR_LISTEN_HOST", sandbox_->slot_address(slot));
  set("STAR_REPORT_EVERY", std::to_string(o_.report_every));
  set("STAR_TIMEOUT_MS", "120000");
  set("STAR_CLOCK_ORIGIN", Fixed(origin_, 6));
  set("OMP_NUM_THREADS", std::to_string(o_.trainer_threads));
  if (bundled_) {
    set("STAR_SNAPSHOT_DIR", (run_dir_ / "snapshots").string());
    set("STAR_SNAPSHOT_EVERY", std::to_string(o_.snapshot_every));
  }
  for (const auto& [k, v] : o_.job.worker_env) set(k, v);
  return env;
}

StatusOr<int> Runner::Spawn(Proc proc, Sandbox::SpawnSpec spec) {
  int fd = ::open(proc.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::Unavailable(proc.log + ": " + std::strerror(errno));
  if (spec.stdout_fd < 0) spec.stdout_fd = fd;
  spec.stderr_fd = fd;
  auto pid = sandbox_->Spawn(spec);
  ::close(fd);
  if (!pid.ok()) return pid.status().WithPrefix(proc.name);
  proc.pid = *pid;
  proc.running = true;
  procs_.push_back(proc);
  return static_cast<int>(procs_.size() - 1);
}

Status Runner::SpawnAll() {
  // Per-rank batches: the global batch split evenly, the remainder to the lowest ranks
  // (the control loop's baseline).
  const int64_t g = spec_.training.global_batch_size;
  for (int rank = 0; rank < servers_ + workers_; ++rank) {
    const bool server = rank < servers_;
    const int w = rank - servers_;
    Proc p;
    p.role = server ? Role::kServer : Role::kWorker;
    p.index = server ? rank : w;
    p.name = server ? "server " + std::to_string(rank) : "worker " + std::to_string(w);
    p.log = (run_dir_ / ((server ? "server-" : "worker-") + std::to_string(p.index) + ".log"))
                .string();
    Sandbox::SpawnSpec sp;
    sp.env = BaseEnv(rank);
    sp.cgroup = sandbox_->main_cgroup(rank);
    sp.netns_slot = sandbox_->has_network() ? rank : -1;
    if (bundled_) {
      const int64_t batch = server ? 1 : g / workers_ + (w < g % workers_ ? 1 : 0);
      sp.argv = {o_.trainer_binary, "--batch", std::to_string(batch), "--threads",
                 std::to_string(o_.trainer_threads), "--amp", "off", "--no-eval",
                 "--log-every", "0"};
      if (spec_.training.max_iterations) {
        sp.argv.insert(sp.argv.end(),
                       {"--max-iterations", std::to_string(*spec_.training.max_iterations)});
      } else {
        sp.argv.insert(sp.argv.end(), {"--epochs", std::to_string(o_.default_epochs)});
      }
    } else {
      sp.argv = o_.job.worker_command;
    }
    auto idx = Spawn(p, sp);
    if (!idx.ok()) return idx.status();
  }
  if (bundled_) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return Status::Unavailable("pipe: " + std::string(std::strerror(errno)));
    Proc p;
    p.role = Role::kEvaluator;
    p.name = "evaluator";
    p.log = (run_dir_ / "evaluator.log").string();
    Sandbox::SpawnSpec sp;
    sp.argv = {o_.trainer_binary, "--evaluate", (run_dir_ / "snapshots").string(),
               "--eval-samples", std::to_string(o_.eval_samples), "--threads", "1",
               "--timeout-ms", std::to_string(static_cast<int64_t>(o_.timeout_seconds * 1000))};
    for (const char* keep : {"PATH", "HOME", "LANG", "ASAN_OPTIONS", "UBSAN_OPTIONS",
                             "LSAN_OPTIONS"}) {
      if (const char* v = std::getenv(keep)) sp.env.push_back(std::string(keep) + "=" + v);
    }
    sp.env.push_back("OMP_NUM_THREADS=1");
    sp.cgroup = sandbox_->eval_cgroup();
    sp.stdout_fd = fds[1];
    auto idx = Spawn(p, sp);
    ::close(fds[1]);
    if (!idx.ok()) {
      ::close(fds[0]);
      return idx.status();
    }
    eval_fd_ = fds[0];
    eval_reader_ = std::thread([this] { ReadEvaluator(eval_fd_); });
  }
  return Status::Ok();
}

std::optional<api::Decision> Runner::OnReport(const api::WorkerReport& r) {
  std::lock_guard<std::mutex> lock(mu_);
  samples_.push_back({{"t", r.time_seconds},
                      {"worker", r.worker},
                      {"iteration", r.iteration},
                      {"compute_seconds", r.compute_seconds},
                      {"communication_seconds", r.communication_seconds},
                      {"wait_seconds", r.wait_seconds},
                      {"batch", r.local_batch},
                      {"amp", r.amp}});
  max_iteration_ = std::max(max_iteration_, r.iteration);
  auto d = loop_->Observe(r);
  if (!d.ok()) {
    Notice("report of worker " + std::to_string(r.worker) + " rejected: " + d.status().message());
    return loop_->current() ? std::optional<api::Decision>(*loop_->current()) : std::nullopt;
  }
  if (*d && (*d)->epoch > last_epoch_) {
    last_epoch_ = (*d)->epoch;
    ++decisions_;
  }
  for (int w : loop_->stragglers()) {
    if (std::find(ever_flagged_.begin(), ever_flagged_.end(), w) == ever_flagged_.end()) {
      ever_flagged_.push_back(w);
    }
  }
  return *d;
}

void Runner::ReadEvaluator(int fd) {
  FILE* f = ::fdopen(fd, "r");
  if (f == nullptr) {
    ::close(fd);
    return;
  }
  char* line = nullptr;
  size_t cap = 0;
  while (::getline(&line, &cap, f) > 0) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("accuracy") || !j["accuracy"].is_number()) continue;
    const double t = j.value("time_seconds", 0.0);
    const double acc = j["accuracy"].get<double>();
    std::lock_guard<std::mutex> lock(mu_);
    accuracy_curve_.push_back({t, acc});
    final_accuracy_ = acc;
    if (!tta_ && acc >= spec_.training.target_accuracy) tta_ = t;
    cv_.notify_all();
  }
  std::free(line);
  std::fclose(f);
}

Status Runner::ApplyInjection(ActiveInjection& a) {
  const Injection& in = a.spec;
  const int slot = SlotOf(in.worker);
  switch (in.kind) {
    case InjectionKind::kCpu: {
      const auto mc = static_cast<int64_t>(std::llround(in.cpu_fraction * worker_mc_));
      if (Status s = os_->WriteCpu(sandbox_->slot_cgroup(slot),
                                   {QuotaUs(std::max<int64_t>(mc, 10)), kCfsPeriodUs, 100});
          !s.ok()) {
        return s;
      }
      break;
    }
    case InjectionKind::kNeighbor: {
      if (Status s = os_->WriteCpu(sandbox_->neighbor_cgroup(slot),
                                   {-1, kCfsPeriodUs, 100 * in.neighbor_threads});
          !s.ok()) {
        return s;
      }
      Proc p;
      p.role = Role::kNeighbor;
      p.index = in.worker;
      p.name = "neighbor of worker " + std::to_string(in.worker);
      p.log = (run_dir_ / ("neighbor-" + std::to_string(in.worker) + ".log")).string();
      Sandbox::SpawnSpec sp;
      sp.argv = o_.busy_command;
      sp.argv.insert(sp.argv.end(), {"--threads", std::to_string(in.neighbor_threads),
                                     "--seconds", Fixed(o_.timeout_seconds, 0)});
      if (const char* v = std::getenv("PATH")) sp.env.push_back(std::string("PATH=") + v);
      sp.cgroup = sandbox_->neighbor_cgroup(slot);
      auto idx = Spawn(p, sp);
      if (!idx.ok()) return idx.status();
      a.proc = *idx;
      break;
    }
    case InjectionKind::kBandwidth: {
      agent::NetLimits lim;
      lim.egress_bits_per_second = in.bandwidth_bps;
      lim.ingress_bits_per_second = in.bandwidth_bps;
      if (Status s = os_->WriteNet(sandbox_->host_ifname(slot), lim); !s.ok()) return s;
      break;
    }
    case InjectionKind::kDelay:
      if (Status s = sandbox_->SetDelay(slot, in.delay_seconds); !s.ok()) return s;
      break;
  }
  a.applied = true;
  return Status::Ok();
}

Status Runner::LiftInjection(ActiveInjection& a) {
  const Injection& in = a.spec;
  const int slot = SlotOf(in.worker);
  a.lifted = true;
  switch (in.kind) {
    case InjectionKind::kCpu:
      return os_->WriteCpu(sandbox_->slot_cgroup(slot), {QuotaUs(worker_mc_), kCfsPeriodUs, 100});
    case InjectionKind::kNeighbor:
      if (a.proc >= 0 && procs_[a.proc].running) {
        ::kill(-procs_[a.proc].pid, SIGKILL);
        ::waitpid(procs_[a.proc].pid, &procs_[a.proc].wait_status, 0);
        procs_[a.proc].running = false;
      }
      return os_->WriteCpu(sandbox_->neighbor_cgroup(slot), {-1, kCfsPeriodUs, 100});
    case InjectionKind::kBandwidth:
      return os_->WriteNet(sandbox_->host_ifname(slot), agent::NetLimits{});
    case InjectionKind::kDelay:
      return sandbox_->SetDelay(slot, 0);
  }
  return Status::Ok();
}

// Takes CPU from an injected neighbor for a worker the loop flags as a compute straggler
// (see the file comment of runtime.h).
void Runner::MaybeReallocate() {
  if (!spec_.mitigation.resource_reallocation.enabled || policy_ != Policy::kAuto) return;
  std::vector<std::pair<int, double>> compute_stragglers;  // worker, slowdown
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int w : loop_->stragglers()) {
      const detect::WorkerView v = loop_->straggler_view(w);
      if (v.cause == api::StragglerCause::kCompute) compute_stragglers.push_back({w, v.slowdown});
    }
  }
  for (auto [w, slowdown] : compute_stragglers) {
    for (ActiveInjection& a : injections_) {
      if (a.spec.kind != InjectionKind::kNeighbor || a.spec.worker != w || !a.applied ||
          a.lifted || a.reallocated) {
        continue;
      }
      const int n = a.spec.neighbor_threads;
      resources::ClusterState cs;
      // Bandwidth is not planned here: a nominal link the pods split evenly.
      constexpr int64_t kLink = 1'000'000'000;
      cs.nodes.push_back({"slot" + std::to_string(w), {worker_mc_, kLink}});
      resources::Job job;
      job.name = o_.job.job.metadata.name;
      job.synchronous = true;
      job.iteration_seconds = 1;
      resources::Job other;
      other.name = "neighbor";
      other.synchronous = false;
      other.iteration_seconds = 1;
      cs.jobs = {job, other};
      resources::Pod worker;
      worker.name = "worker-" + std::to_string(w);
      worker.uid = "w";
      worker.node = cs.nodes[0].name;
      worker.job = job.name;
      worker.allocation.cpu_millicores = worker_mc_ / (n + 1);
      worker.allocation.bandwidth_bps = kLink / 2;
      resources::Pod neighbor;
      neighbor.name = "neighbor";
      neighbor.uid = "n";
      neighbor.node = cs.nodes[0].name;
      neighbor.job = other.name;
      neighbor.allocation.cpu_millicores = worker_mc_ - worker.allocation.cpu_millicores;
      neighbor.allocation.bandwidth_bps = kLink / 2;
      neighbor.guaranteed = a.spec.neighbor_guarantee_cpus > 0;
      neighbor.request.cpu_millicores = std::min<int64_t>(
          neighbor.allocation.cpu_millicores,
          static_cast<int64_t>(std::llround(a.spec.neighbor_guarantee_cpus * 1000)));
      cs.pods = {worker, neighbor};
      resources::ReallocationRequest req;
      req.job = job.name;
      req.demands = {{"w", {worker_mc_ - worker.allocation.cpu_millicores, 0}}};
      req.horizon_seconds = 60;
      // Every worker of the job waits on the straggler: worker-seconds lost.
      req.sync_loss_seconds =
          workers_ * req.horizon_seconds * std::max(0.0, 1.0 - 1.0 / std::max(slowdown, 1.0));
      auto plan = resources::PlanReallocation(cs, req, resources::PlannerOptions{});
      a.reallocated = true;  // decided once per injection, applied or not
      const double t = Now();
      if (!plan.ok()) {
        Notice("reallocation for worker " + std::to_string(w) + ": " + plan.status().message());
        continue;
      }
      const int64_t granted = plan->granted.cpu_millicores;
      if (granted <= 0 || req.sync_loss_seconds <= plan->imposed_slowdown_seconds) {
        AddEvent(t, "reallocate_skipped", w,
                 "granted=" + std::to_string(granted) + "m sync_loss=" +
                     Fixed(req.sync_loss_seconds, 1) + "s imposed=" +
                     Fixed(plan->imposed_slowdown_seconds, 1) + "s");
        continue;
      }
      const int64_t neighbor_after = plan->pods[1].after.cpu_millicores;
      Status s = os_->WriteCpu(sandbox_->neighbor_cgroup(SlotOf(w)),
                               {QuotaUs(neighbor_after), kCfsPeriodUs, 100 * n});
      if (!s.ok()) {
        Notice("reallocation for worker " + std::to_string(w) + ": " + s.message());
        continue;
      }
      AddEvent(t, "reallocate", w,
               "neighbor cpu " + std::to_string(neighbor.allocation.cpu_millicores) + "m -> " +
                   std::to_string(neighbor_after) + "m (guarantee " +
                   std::to_string(neighbor.request.cpu_millicores) + "m), worker +" +
                   std::to_string(granted) + "m");
    }
  }
}

void Runner::Progress() {
  if (!o_.progress) return;
  const double t = Now();
  if (t - last_progress_ < 1.0) return;
  last_progress_ = t;
  std::string line;
  std::lock_guard<std::mutex> lock(mu_);
  std::string mode = "ssgd";
  std::vector<int> amp;
  if (const api::Decision* d = loop_->current()) {
    mode = std::string(api::ToString(d->mode));
    if (d->mode == api::SyncMode::kFixedK) mode += " k=" + std::to_string(d->k);
    for (const auto& ws : d->workers) {
      if (ws.amp) amp.push_back(ws.worker);
    }
  }
  line = "[" + Fixed(t, 1) + "s] iteration " + std::to_string(max_iteration_) + "  accuracy " +
         (final_accuracy_ ? Fixed(*final_accuracy_, 3) : std::string("-")) + "/" +
         Fixed(spec_.training.target_accuracy, 3) + "  mode " + mode + "  stragglers " +
         ListOf(loop_->stragglers()) + "  amp " + ListOf(amp);
  // ETA: the accuracy slope over the last few evaluations, extrapolated to the target.
  const size_t m = accuracy_curve_.size();
  if (m >= 3 && !tta_) {
    const auto& a = accuracy_curve_[m - 3];
    const auto& b = accuracy_curve_[m - 1];
    const double slope = (b[1].get<double>() - a[1].get<double>()) /
                         std::max(1e-9, b[0].get<double>() - a[0].get<double>());
    if (slope > 0) {
      // Evaluations trail the run: extrapolate from the last snapshot's time.
      const double at = b[0].get<double>() + (spec_.training.target_accuracy - b[1].get<double>()) / slope;
      line += "  eta " + Fixed(std::max(0.0, at - t), 0) + "s";
    }
  }
  o_.progress(line);
}

void Runner::StopAll() {
  // Workers and servers get SIGTERM first (a trainer may flush), everything SIGKILL after
  // a bounded grace period; the sandbox's teardown kills whatever is left in its cgroups.
  for (Proc& p : procs_) {
    if (p.running) ::kill(-p.pid, p.role == Role::kNeighbor ? SIGKILL : SIGTERM);
  }
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  for (Proc& p : procs_) {
    while (p.running) {
      pid_t r = ::waitpid(p.pid, &p.wait_status, WNOHANG);
      if (r == p.pid || r < 0) {
        p.running = false;
      } else if (Clock::now() > deadline) {
        ::kill(-p.pid, SIGKILL);
        ::waitpid(p.pid, &p.wait_status, 0);
        p.running = false;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  }
}

json Runner::BuildReport(const std::string& outcome, double wall) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<op::TimelineEvent> events = runtime_events_;
  if (loop_) {
    const auto& tl = loop_->timeline();
    events.insert(events.end(), tl.begin(), tl.end());
  }
  std::stable_sort(events.begin(), events.end(),
                   [](const auto& a, const auto& b) { return a.t < b.t; });
  json timeline = json::array();
  for (const auto& e : events) {
    timeline.push_back({{"t", e.t}, {"event", e.event}, {"worker", e.worker}, {"detail", e.detail}});
  }
  json injections = json::array();
  json unavailable = json::array();
  for (const auto& a : injections_) {
    (a.available ? injections : unavailable).push_back(a.spec.text);
  }
  std::string final_mode = "ssgd";
  if (loop_ && loop_->current()) final_mode = std::string(api::ToString(loop_->current()->mode));
  json report = {
      {"job", o_.job.job.metadata.name},
      {"policy", std::string(ToString(policy_))},
      {"architecture", std::string(api::ToString(spec_.architecture))},
      {"outcome", outcome},
      {"tta_seconds", tta_ ? json(*tta_) : json(nullptr)},
      {"target_accuracy", spec_.training.target_accuracy},
      {"final_accuracy", final_accuracy_ ? json(*final_accuracy_) : json(nullptr)},
      {"iterations", max_iteration_},
      {"wall_seconds", wall},
      {"workers", workers_},
      {"parameter_servers", servers_},
      {"worker_cpu_millicores", worker_mc_},
      {"network_namespaces", sandbox_ && sandbox_->has_network()},
      {"decisions", decisions_},
      {"final_mode", final_mode},
      {"stragglers", ever_flagged_},
      {"injections", injections},
      {"unavailable_injections", unavailable},
      {"timeline", timeline},
      {"accuracy_curve", accuracy_curve_},
      {"samples", samples_}};
  return report;
}

RunResult Runner::Run() {
  RunResult result;
  if (Status s = Setup(); !s.ok()) {
    result.status = s;
    return result;  // the Sandbox destructor removes whatever Setup created
  }
  origin_ = shim::MonotonicSeconds();
  AddEvent(0, "start", -1,
           "policy " + std::string(ToString(policy_)) + ", " + std::to_string(workers_) +
               " workers" + (servers_ ? ", " + std::to_string(servers_) + " servers" : "") +
               ", " + std::to_string(worker_mc_) + "m CPU each");
  std::string outcome;
  Status status = SpawnAll();
  if (!status.ok()) outcome = "failed";
  bool budget_done = false;
  std::optional<Clock::time_point> drain_deadline;
  while (outcome.empty()) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (tta_) {
        outcome = "target_reached";
        break;
      }
    }
    const double t = Now();
    if (o_.stop && o_.stop->load()) {
      outcome = "interrupted";
      status = Status::Aborted("interrupted");
      break;
    }
    if (t > o_.timeout_seconds) {
      outcome = "timeout";
      status = Status::DeadlineExceeded("the run took longer than --timeout (" +
                                        Fixed(o_.timeout_seconds, 0) + " s)");
      break;
    }
    // Processes that ended.
    int workers_done = 0;
    for (Proc& p : procs_) {
      if (p.running && ::waitpid(p.pid, &p.wait_status, WNOHANG) == p.pid) p.running = false;
      if (p.running) continue;
      const bool clean = WIFEXITED(p.wait_status) && WEXITSTATUS(p.wait_status) == 0;
      if (p.role == Role::kWorker && clean) ++workers_done;
      if (!clean && p.role != Role::kNeighbor) {
        std::string how = WIFSIGNALED(p.wait_status)
                              ? "was killed by signal " + std::to_string(WTERMSIG(p.wait_status))
                              : "exited with status " + std::to_string(WEXITSTATUS(p.wait_status));
        status = Status::Internal(p.name + " " + how + "; the end of " + p.log + ":" +
                                  Tail(p.log, 8));
        outcome = "failed";
        break;
      }
    }
    if (!outcome.empty()) break;
    if (workers_done == workers_ && !budget_done) {
      budget_done = true;  // the iteration budget is done: let the evaluator drain
      std::ofstream(run_dir_ / "snapshots" / "done").put('\n');
      drain_deadline = Clock::now() + std::chrono::seconds(120);
    }
    if (budget_done) {
      bool eval_running = false;
      for (const Proc& p : procs_) eval_running |= p.role == Role::kEvaluator && p.running;
      if (!eval_running || Clock::now() > *drain_deadline) {
        outcome = "max_iterations";
        break;
      }
    }
    for (ActiveInjection& a : injections_) {
      if (!a.available) continue;
      if (!a.applied && t >= a.spec.start_seconds) {
        if (Status s = ApplyInjection(a); !s.ok()) {
          if (s.code() == StatusCode::kUnavailable) {
            // E.g. no netem in this kernel: the run goes on without this injection.
            a.available = false;
            Notice("--inject \"" + a.spec.text + "\": unavailable here (" + s.message() +
                   "); skipped");
            continue;
          }
          status = s.WithPrefix("--inject \"" + a.spec.text + "\"");
          outcome = "failed";
          break;
        }
        AddEvent(t, "inject", a.spec.worker, a.spec.text);
        Notice("injected " + a.spec.text + " at " + Fixed(t, 1) + " s");
      }
      if (a.applied && !a.lifted && a.spec.end_seconds && t >= *a.spec.end_seconds) {
        if (Status s = LiftInjection(a); !s.ok()) {
          status = s.WithPrefix("--inject \"" + a.spec.text + "\"");
          outcome = "failed";
          break;
        }
        AddEvent(t, "lift", a.spec.worker, a.spec.text);
        Notice("lifted " + a.spec.text + " at " + Fixed(t, 1) + " s");
      }
    }
    if (!outcome.empty()) break;
    MaybeReallocate();
    Progress();
  }
  const double wall = Now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (tta_) AddEvent(*tta_, "target_reached", -1, "accuracy >= " + Fixed(spec_.training.target_accuracy, 3));
  }
  AddEvent(wall, "stop", -1, outcome);
  StopAll();
  if (eval_reader_.joinable()) eval_reader_.join();
  reports_.reset();
  store_.reset();
  if (sandbox_) {
    if (Status s = sandbox_->Teardown(); !s.ok()) {
      Notice("cleanup: " + s.message());
      if (status.ok()) status = s;
    }
  }
  result.report = BuildReport(outcome, wall);
  result.status = status;
  if (own_run_dir_) {
    if (status.ok() || status.code() == StatusCode::kAborted) {
      std::error_code ec;
      std::filesystem::remove_all(run_dir_, ec);
    } else {
      Notice("worker logs kept in " + run_dir_.string());
    }
  }
  return result;
}

}  // namespace

RunResult RunLocalJob(const RunOptions& options) {
  Runner runner(options);
  return runner.Run();
}

}  // namespace star::local
