#include "local/runtime.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "local/format.h"
#include "local/injector.h"
#include "local/reallocation.h"
#include "local/run_report.h"
#include "local/sandbox.h"
#include "local/supervisor.h"
#include "star/core/api/json_reader.h"
#include "star/core/api/types.h"
#include "star/core/batch/baseline.h"
#include "star/operator/control_loop.h"
#include "star/operator/learned_model.h"
#include "star/report/server.h"
#include "star/report/token.h"
#include "star/shim/cpu_features.h"
#include "star/shim/store_server.h"
#include "star/shim/timing.h"

namespace star::local {

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

class Runner {
 public:
  explicit Runner(const RunOptions& options) : o_(options) {}
  RunResult Run();

 private:
  void Notice(const std::string& s) const {
    if (o_.notice) o_.notice(s);
  }
  double Now() const { return shim::MonotonicSeconds() - origin_; }
  void AddEvent(RunEvent e) { run_events_.push_back(std::move(e)); }

  Status Setup();
  Status SetupJob();
  Status SetupSandbox();
  Status SetupEndpoints();
  Status SetupRunDir();
  std::vector<std::string> BaseEnv(int rank) const;
  Status SpawnAll();
  Status SpawnEvaluator();
  StatusOr<std::vector<int>> SpawnNeighbor(const Injection& in);
  StatusOr<std::vector<int>> SpawnBwNeighbor(const Injection& in);
  std::optional<api::Decision> OnReport(const api::WorkerReport& r);
  void ReadEvaluator(int fd);
  std::string Loop(Status* status);
  void MaybeReallocate();
  void Progress();
  void Finish(const std::string& outcome, Status status, RunResult* result);
  json BuildReport(const std::string& outcome, double wall) const;

  const RunOptions& o_;
  api::TrainingJobSpec spec_;
  Policy policy_ = Policy::kAuto;
  int workers_ = 0;
  int servers_ = 0;
  bool bundled_ = true;  // the bundled trainer (vs the manifest's command)
  int64_t worker_mc_ = 0, server_mc_ = 0;

  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<Supervisor> procs_;
  std::unique_ptr<Injector> injector_;
  std::unique_ptr<Reallocator> reallocator_;  // null unless policy auto reallocates
  std::unique_ptr<shim::StoreServer> store_;
  std::unique_ptr<report::ReportServer> reports_;
  std::string token_;
  int peer_slot_ = -1;   // the bwneighbors' sink slot, when there is one
  int master_port_ = 0;  // torch.distributed's rendezvous at worker 0 (a manifest's command)
  std::filesystem::path run_dir_;
  bool own_run_dir_ = false;
  double origin_ = 0;
  std::thread eval_reader_;
  int eval_fd_ = -1;

  // Shared with the report handler and the evaluator reader.
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<op::JobControlLoop> loop_;
  json samples_ = json::array();
  int64_t max_iteration_ = 0;
  int64_t last_epoch_ = 0;
  int decisions_ = 0;
  std::vector<int> ever_flagged_;
  std::vector<RunEvent> run_events_;  // main thread only (merged at the end)
  double last_progress_ = -1;
};

Status Runner::Setup() {
  STAR_RETURN_IF_ERROR(SetupJob());
  STAR_RETURN_IF_ERROR(SetupSandbox());
  STAR_RETURN_IF_ERROR(SetupEndpoints());
  return SetupRunDir();
}

// The spec under the policy, the options' checks, the control loop and the CPU shares.
Status Runner::SetupJob() {
  spec_ = o_.job.job.spec;
  policy_ = o_.policy ? *o_.policy : PolicyOf(spec_);
  if (o_.policy) spec_ = ApplyPolicy(spec_, *o_.policy);
  spec_ = api::MitigationsInForce(spec_);  // Observe: detect and report only
  workers_ = api::WorldSize(spec_);  // procsPerPod > 1: that many worker processes per pod
  servers_ = spec_.architecture == api::Architecture::kParameterServer && spec_.parameter_servers
                 ? spec_.parameter_servers->replicas
                 : 0;
  bundled_ = o_.job.worker_command.empty();
  if (o_.timeout_seconds <= 0) return Status::InvalidArgument("--timeout: must be > 0");
  if (Status s = ValidateInjections(o_.injections, workers_); !s.ok()) return s;
  if (Status s = ValidateLinkDelays(o_.injections, spec_.parallelism.pipeline_stages); !s.ok()) return s;
  for (const Injection& in : o_.injections) {
    if (in.kind == InjectionKind::kDelay && in.peer && !bundled_) {
      return Status::InvalidArgument("--inject \"" + in.text + "\": a delay with peer is made by the bundled "
                                     "pipeline trainer's stages; the manifest gives its own command");
    }
  }
  if (bundled_ && ::access(o_.trainer_binary.c_str(), X_OK) != 0) {
    return Status::FailedPrecondition("the bundled trainer \"" + o_.trainer_binary +
                                      "\" is not executable (build star-fmnist, or set "
                                      "STAR_TRAINER_BINARY)");
  }
  if (spec_.mitigation.amp.enabled && !shim::CpuHasNativeBf16()) {
    // Emulated bf16 autocast (no native bf16 in the CPU) made a worker 4-12x slower.
    spec_.mitigation.amp.enabled = false;
    Notice("spec.mitigation.amp: off for this run: this CPU has no native bf16 "
           "(avx512_bf16 or amx_bf16), where mixed precision is slower than fp32");
  }
  op::LoopOptions lo;
  lo.apply_margin_iterations = 3 * o_.report_every;
  op::LearnedModel learned;
  if (op::UsesLearnedSelector(spec_)) {
    learned = op::LearnedModelOf(op::LoadSelectorModel(o_.selector_model));
    if (learned.selector == nullptr) {
      Notice("selector ML: learned selector unavailable (" + learned.unavailable_reason +
             "); the heuristic selects the mode");
    }
  }
  auto loop = op::JobControlLoop::Create(spec_, lo, std::move(learned));
  if (!loop.ok()) return loop.status();
  loop_ = std::move(*loop);

  // CPU per slot: the manifest's limit, else an even share of 80% of this machine.
  const int cpus = std::max(1u, std::thread::hardware_concurrency());
  const int64_t share = std::max<int64_t>(100, 800 * cpus / (workers_ + servers_));
  worker_mc_ = o_.job.worker_cpu_millicores > 0 ? o_.job.worker_cpu_millicores : share;
  // A parameter server applies updates (light work): 200m unless the manifest says.
  server_mc_ = o_.job.server_cpu_millicores > 0 ? o_.job.server_cpu_millicores : 200;
  return Status::Ok();
}

// The sandbox (with network namespaces when it can have them), its slots' CPU quotas,
// the process supervisor, the injector and (policy auto) the reallocator.
Status Runner::SetupSandbox() {
  SandboxOptions so;
  so.name = o_.job.job.metadata.name;
  so.slots = workers_ + servers_;
  // bwneighbor traffic goes to a sink in a slot of its own.
  const bool peer = std::any_of(o_.injections.begin(), o_.injections.end(), [](const Injection& in) {
    return in.kind == InjectionKind::kBwNeighbor;
  });
  if (peer) peer_slot_ = so.slots++;
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
  procs_ = std::make_unique<Supervisor>(*sandbox_);
  InjectorOptions io;
  io.sandbox = sandbox_.get();
  io.servers = servers_;
  io.workers = workers_;
  io.worker_millicores = worker_mc_;
  io.peer_slot = peer_slot_;
  io.start_neighbor = [this](const Injection& in) { return SpawnNeighbor(in); };
  io.stop_neighbor = [this](int proc) { procs_->Kill(proc); };
  io.event = [this](RunEvent e) { AddEvent(std::move(e)); };
  io.notice = o_.notice;
  injector_ = std::make_unique<Injector>(io, o_.injections);
  if (spec_.mitigation.resource_reallocation.enabled && policy_ == Policy::kAuto) {
    ReallocationContext rc;
    rc.job = o_.job.job.metadata.name;
    rc.workers = workers_;
    rc.servers = servers_;
    rc.worker_millicores = worker_mc_;
    rc.sandbox = sandbox_.get();
    rc.peer_slot = peer_slot_;
    rc.event = [this](RunEvent e) { AddEvent(std::move(e)); };
    rc.notice = o_.notice;
    reallocator_ = std::make_unique<Reallocator>(std::move(rc));
  }

  Host& host = sandbox_->host();
  for (int s = 0; s < workers_ + servers_; ++s) {
    const int64_t mc = s < servers_ ? server_mc_ : worker_mc_;
    STAR_RETURN_IF_ERROR(host.WriteCpu(sandbox_->slot_cgroup(s), {QuotaUs(mc), kCfsPeriodUs, 100}));
  }
  if (!bundled_) return Status::Ok();
  return host.WriteCpu(sandbox_->eval_cgroup(), {QuotaUs(o_.eval_millicores), kCfsPeriodUs, 100});
}

// A bwneighbor's sink listens on this port plus its worker's index.
constexpr int kBlastPort = 5201;

// torch.distributed's port at worker 0, as on the operator's pods.
constexpr int kMasterPort = 29501;

// A TCP port free on 127.0.0.1 now.
static StatusOr<int> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal("MASTER_PORT: socket: " + std::string(std::strerror(errno)));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) return Status::Internal("MASTER_PORT: no free loopback port: " + std::string(std::strerror(err)));
  return static_cast<int>(ntohs(a.sin_port));
}

// The rendezvous store and the report endpoint, on the host's address, behind one token.
Status Runner::SetupEndpoints() {
  token_ = report::RandomToken();
  shim::StoreServerOptions so;
  so.token = token_;
  auto store = shim::StoreServer::Start(sandbox_->host_address(), 0, so);
  if (!store.ok()) return store.status();
  store_ = std::move(*store);
  report::ReportServerOptions ro;
  ro.host = sandbox_->host_address();
  ro.port = 0;
  ro.token = token_;
  auto reports = report::ReportServer::Start(
      ro, [this](const api::WorkerReport& r) { return OnReport(r); });
  if (!reports.ok()) return reports.status();
  reports_ = std::move(*reports);
  // A manifest's own script meets its torch.distributed default group at worker 0, as
  // the operator's pods do: in worker 0's own network namespace any port is free.
  if (!bundled_) {
    STAR_ASSIGN_OR_RETURN(master_port_, sandbox_->has_network() ? StatusOr<int>(kMasterPort) : FreeLoopbackPort());
  }
  return Status::Ok();
}

// The directory of logs and snapshots: --log-dir, or a temporary one.
Status Runner::SetupRunDir() {
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
  const char* inherited = std::getenv("PYTHONPATH");
  std::string python_path = o_.python_path;
  if (inherited != nullptr && *inherited != '\0') {
    python_path += (python_path.empty() ? "" : ":") + std::string(inherited);
  }
  if (!python_path.empty()) env.push_back("PYTHONPATH=" + python_path);
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
  set("STAR_REPORT_SECONDS", api::FormatNumber(o_.report_seconds));
  set("STAR_TIMEOUT_MS", "120000");
  set("STAR_CLOCK_ORIGIN", Fixed(origin_, 6));
  set("OMP_NUM_THREADS", std::to_string(o_.trainer_threads));
  // The job's training settings, as the operator gives them to pods (one source for the
  // script: star.torch and star-fmnist refuse a batch that disagrees).
  set("STAR_GLOBAL_BATCH", std::to_string(spec_.training.global_batch_size));
  set("STAR_AMP_DTYPE", std::string(api::ToString(spec_.mitigation.amp.dtype)));
  if (spec_.training.max_iterations) {
    set("STAR_MAX_ITERATIONS", std::to_string(*spec_.training.max_iterations));
  }
  for (const auto& [name, value] : api::PipelineEnv(spec_.parallelism)) set(name, value);
  if (rank >= servers_) {
    const std::string delays = LinkDelayEnv(o_.injections, rank - servers_);
    if (!delays.empty()) set("STAR_LINK_DELAY", delays);
  }
  if (bundled_) {
    set("STAR_SNAPSHOT_DIR", (run_dir_ / "snapshots").string());
    set("STAR_SNAPSHOT_EVERY", std::to_string(o_.snapshot_every));
  }
  if (master_port_ > 0) {
    set("MASTER_ADDR", sandbox_->slot_address(servers_));
    set("MASTER_PORT", std::to_string(master_port_));
    // torch's Gloo listens on the address the host name resolves to (loopback in a
    // namespace) unless told the interface inside each worker's namespace.
    if (sandbox_->has_network()) set("GLOO_SOCKET_IFNAME", Sandbox::kSlotIfname);
  }
  for (const auto& [k, v] : o_.job.worker_env) set(k, v);
  return env;
}

Status Runner::SpawnAll() {
  // Per-rank batches: the control loop's baseline (the global batch split evenly; a
  // pipeline's stages share their replica's batch).
  const int stages = spec_.parallelism.pipeline_stages;
  const std::vector<int64_t> batches =
      batch::EqualBatches(spec_.training.global_batch_size, workers_ / stages);
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
      const int64_t batch = server ? 1 : batches[static_cast<size_t>(w / stages)];
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
    auto idx = procs_->Spawn(p, sp);
    if (!idx.ok()) return idx.status();
  }
  // The evaluator reads the data-parallel model's snapshots; a pipeline's stages hold
  // slices of another model.
  return bundled_ && !api::IsPipeline(spec_.parallelism) ? SpawnEvaluator() : Status::Ok();
}

// The evaluator of the bundled trainer: its stdout (one JSON line per evaluation) is read
// by ReadEvaluator on a thread of its own.
Status Runner::SpawnEvaluator() {
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
  auto idx = procs_->Spawn(p, sp);
  ::close(fds[1]);
  if (!idx.ok()) {
    ::close(fds[0]);
    return idx.status();
  }
  eval_fd_ = fds[0];
  eval_reader_ = std::thread([this] { ReadEvaluator(eval_fd_); });
  return Status::Ok();
}

// The busy-loop neighbor of a neighbor injection, in its slot's neighbor cgroup.
StatusOr<std::vector<int>> Runner::SpawnNeighbor(const Injection& in) {
  if (in.kind == InjectionKind::kBwNeighbor) return SpawnBwNeighbor(in);
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
  sp.cgroup = sandbox_->neighbor_cgroup(servers_ + in.worker);
  STAR_ASSIGN_OR_RETURN(int proc, procs_->Spawn(p, sp));
  return std::vector<int>{proc};
}

// A bwneighbor's sink in the peer slot's namespace and its sender in the worker's, both in
// the peer slot's cgroup (a co-located job brings its own CPU: only the uplink is shared).
StatusOr<std::vector<int>> Runner::SpawnBwNeighbor(const Injection& in) {
  const int port = kBlastPort + in.worker;
  auto spawn = [&](const std::string& role, int netns_slot, std::vector<std::string> args) {
    Proc p;
    p.role = Role::kNeighbor;
    p.index = in.worker;
    p.name = "bwneighbor " + role + " of worker " + std::to_string(in.worker);
    p.log = (run_dir_ / ("bwneighbor-" + role + "-" + std::to_string(in.worker) + ".log")).string();
    Sandbox::SpawnSpec sp;
    sp.argv = o_.blast_command;
    sp.argv.insert(sp.argv.end(), args.begin(), args.end());
    sp.argv.insert(sp.argv.end(), {"--seconds", Fixed(o_.timeout_seconds, 0)});
    sp.cgroup = sandbox_->slot_cgroup(peer_slot_);
    sp.netns_slot = netns_slot;
    return procs_->Spawn(p, sp);
  };
  STAR_ASSIGN_OR_RETURN(int sink, spawn("sink", peer_slot_, {"--listen", std::to_string(port)}));
  StatusOr<int> sender = spawn("sender", servers_ + in.worker,
                               {"--to", sandbox_->slot_address(peer_slot_) + ":" + std::to_string(port)});
  if (!sender.ok()) {
    procs_->Kill(sink);
    return sender.status();
  }
  return std::vector<int>{sink, *sender};
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
  if (r.accuracy && loop_->tta_seconds()) cv_.notify_all();  // the target may be reached
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
    const json& time = j.contains("time_seconds") ? j["time_seconds"] : json(0.0);
    const double t = time.is_number() ? time.get<double>() : -1;
    const double acc = j["accuracy"].get<double>();
    std::lock_guard<std::mutex> lock(mu_);
    if (Status s = loop_->ObserveAccuracy(t, acc); !s.ok()) {
      Notice("evaluation ignored: " + s.message());
      continue;
    }
    cv_.notify_all();
  }
  std::free(line);
  std::fclose(f);
}

// Acts on the loop's resource request when it changed (reallocation.h has the rule).
void Runner::MaybeReallocate() {
  if (!reallocator_) return;
  op::ResourceNeeds needs;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (loop_->resource_needs().revision == reallocator_->revision()) return;
    needs = loop_->resource_needs();
  }
  const std::vector<int> unmet = reallocator_->Update(needs, Now(), injector_->injections());
  std::lock_guard<std::mutex> lock(mu_);
  loop_->NoteUnmetNeeds(needs.revision, unmet);
}

void Runner::Progress() {
  if (!o_.progress) return;
  const double t = Now();
  if (t - last_progress_ < 1.0) return;
  last_progress_ = t;
  std::lock_guard<std::mutex> lock(mu_);
  ProgressInputs in;
  in.t = t;
  in.iteration = max_iteration_;
  in.target_accuracy = spec_.training.target_accuracy;
  SetLoopFields(*loop_, &in);
  o_.progress(ProgressLine(in));
}

json Runner::BuildReport(const std::string& outcome, double wall) const {
  std::lock_guard<std::mutex> lock(mu_);
  ReportInputs in;
  in.job = o_.job.job.metadata.name;
  in.policy = std::string(ToString(policy_));
  in.spec = &spec_;
  in.outcome = outcome;
  in.wall_seconds = wall;
  in.iterations = max_iteration_;
  in.workers = workers_;
  in.servers = servers_;
  in.worker_millicores = worker_mc_;
  in.network = sandbox_ && sandbox_->has_network();
  in.decisions = decisions_;
  in.stragglers = ever_flagged_;
  in.run_events = run_events_;
  const std::vector<std::pair<double, double>> no_curve;
  in.accuracy_curve = &no_curve;
  if (loop_) SetLoopFields(*loop_, &in);
  const std::vector<ActiveInjection> none;
  in.injections = injector_ ? &injector_->injections() : &none;
  in.samples = &samples_;
  return local::BuildReport(in);
}

// The control loop of the run: until the target, the budget, a failure, the timeout or
// an interrupt. Returns the outcome; *status says why it failed.
std::string Runner::Loop(Status* status) {
  bool budget_done = false;
  std::optional<Clock::time_point> drain_deadline;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (loop_->tta_seconds()) return "target_reached";
    }
    const double t = Now();
    if (o_.stop && o_.stop->load()) {
      *status = Status::Aborted("interrupted");
      return "interrupted";
    }
    if (t > o_.timeout_seconds) {
      *status = Status::DeadlineExceeded("the run took longer than --timeout (" +
                                         Fixed(o_.timeout_seconds, 0) + " s)");
      return "timeout";
    }
    int workers_done = 0;  // processes that ended
    if (*status = procs_->Reap(&workers_done); !status->ok()) return "failed";
    if (workers_done == workers_ && !budget_done) {
      budget_done = true;  // the iteration budget is done: let the evaluator drain
      std::ofstream(run_dir_ / "snapshots" / "done").put('\n');
      drain_deadline = Clock::now() + std::chrono::seconds(120);
    }
    if (budget_done && (!procs_->Running(Role::kEvaluator) || Clock::now() > *drain_deadline)) {
      return "max_iterations";
    }
    if (*status = injector_->Tick(t); !status->ok()) return "failed";
    MaybeReallocate();
    Progress();
  }
}

RunResult Runner::Run() {
  RunResult result;
  if (Status s = Setup(); !s.ok()) {
    result.status = s;
    return result;  // the Sandbox destructor removes whatever Setup created
  }
  origin_ = shim::MonotonicSeconds();
  AddEvent({0, "start", -1,
            "policy " + std::string(ToString(policy_)) + ", " + std::to_string(workers_) +
                " workers" + (servers_ ? ", " + std::to_string(servers_) + " servers" : "") +
                ", " + std::to_string(worker_mc_) + "m CPU each"});
  Status status = SpawnAll();
  const std::string outcome = status.ok() ? Loop(&status) : "failed";
  Finish(outcome, status, &result);
  return result;
}

// Stops everything, tears the sandbox down and writes the report.
void Runner::Finish(const std::string& outcome, Status status, RunResult* result) {
  const double wall = Now();
  AddEvent({wall, "stop", -1, outcome});
  procs_->StopAll();
  if (eval_reader_.joinable()) eval_reader_.join();
  reports_.reset();
  store_.reset();
  if (Status s = sandbox_->Teardown(); !s.ok()) {
    Notice("cleanup: " + s.message());
    if (status.ok()) status = s;
  }
  result->report = BuildReport(outcome, wall);
  result->status = status;
  if (own_run_dir_) {
    if (status.ok() || status.code() == StatusCode::kAborted) {
      std::error_code ec;
      std::filesystem::remove_all(run_dir_, ec);
    } else {
      Notice("worker logs kept in " + run_dir_.string());
    }
  }
}

}  // namespace

RunResult RunLocalJob(const RunOptions& options) {
  Runner runner(options);
  return runner.Run();
}

}  // namespace star::local
