#include "local/command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "local/inject_spec.h"
#include "local/manifest.h"
#include "local/netns_util.h"
#include "local/plot.h"
#include "local/runtime.h"
#include "local/sandbox.h"

namespace star::local {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

int Fail(const Status& s) {
  std::cerr << "star local: " << s.message() << "\n";
  return 1;
}

std::string SelfDir() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

bool Executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

// The bundled trainer: $STAR_TRAINER_BINARY, next to star, in the build tree, on PATH.
std::string FindTrainer() {
  if (const char* env = std::getenv("STAR_TRAINER_BINARY")) return env;
  const std::string beside = SelfDir() + "/star-fmnist";
  if (Executable(beside)) return beside;
#ifdef STAR_FMNIST_BUILD_PATH
  if (Executable(STAR_FMNIST_BUILD_PATH)) return STAR_FMNIST_BUILD_PATH;
#endif
  if (auto on_path = FindProgram("star-fmnist"); on_path.ok()) return *on_path;
  return beside;
}

// The run for a human, on stderr: the timeline and one line of outcome.
void PrintTimeline(const nlohmann::json& r) {
  std::cerr << "timeline:\n";
  for (const auto& e : r["timeline"]) {
    const int w = e["worker"].get<int>();
    char line[512];
    std::snprintf(line, sizeof(line), "  %7.1fs  %-18s %-9s %s\n", e["t"].get<double>(),
                  e["event"].get<std::string>().c_str(),
                  w < 0 ? "job" : ("worker " + std::to_string(w)).c_str(),
                  e["detail"].get<std::string>().c_str());
    std::cerr << line;
  }
  char line[512];
  const auto& tta = r["tta_seconds"];
  std::snprintf(line, sizeof(line),
                "policy %s: %s; %.1f s wall, %lld iterations, final accuracy %s (target %s)\n",
                r["policy"].get<std::string>().c_str(),
                tta.is_null() ? (r["target_accuracy"].is_null() ? "no target" : "target not reached")
                              : ("target reached in " + std::to_string(tta.get<double>()).substr(0, 6) + " s").c_str(),
                r["wall_seconds"].get<double>(), static_cast<long long>(r["iterations"].get<int64_t>()),
                r["final_accuracy"].is_null() ? "-" : std::to_string(r["final_accuracy"].get<double>()).substr(0, 6).c_str(),
                r["target_accuracy"].is_null() ? "none" : std::to_string(r["target_accuracy"].get<double>()).substr(0, 5).c_str());
  std::cerr << line;
}

// --report and --plot go to existing directories.
Status CheckOutputDirs(const LocalArgs& args) {
  for (const auto* out : {&args.report, &args.plot}) {
    if (out->empty()) continue;
    auto dir = std::filesystem::path(*out).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir)) {
      return Status::InvalidArgument(std::string(out == &args.report ? "--report" : "--plot") +
                                     ": directory " + dir.string() + " does not exist");
    }
  }
  return Status::Ok();
}

// Checks every input before anything is created: the run's job, policy, injections
// and timeout in `options`.
Status CheckInputs(const LocalArgs& args, RunOptions& options) {
  auto job = LoadManifest(args.manifest);
  if (!job.ok()) return job.status();
  if (!args.policy.empty()) {
    auto p = ParsePolicy(args.policy);
    if (!p.ok()) return p.status();
    options.policy = *p;
  }
  for (const std::string& spec : args.injects) {
    auto inj = ParseInjection(spec);
    if (!inj.ok()) return inj.status();
    options.injections.push_back(*inj);
  }
  STAR_RETURN_IF_ERROR(ValidateInjections(options.injections, api::WorldSize(job->job.spec)));
  STAR_RETURN_IF_ERROR(ValidateLinkDelays(options.injections, job->job.spec.parallelism.pipeline_stages));
  auto timeout = ParseDuration(args.timeout);
  if (!timeout.ok()) return timeout.status().WithPrefix("--timeout");
  if (*timeout <= 0) return Status::InvalidArgument("--timeout: must be > 0");
  STAR_RETURN_IF_ERROR(CheckOutputDirs(args));
  if (::geteuid() != 0) {
    return Status::FailedPrecondition(
        "needs root: each worker runs in its own cgroup (and network namespace); run it with "
        "sudo");
  }
  options.job = *job;
  options.timeout_seconds = *timeout;
  return Status::Ok();
}

// The star Python package's directory: $STAR_PYTHONPATH, else the build tree's when it
// was built; "" when neither (an installed package needs no path).
std::string FindPythonPackage() {
  if (const char* env = std::getenv("STAR_PYTHONPATH")) return env;
#ifdef STAR_PYTHON_BUILD_PATH
  std::error_code ec;
  if (std::filesystem::exists(std::string(STAR_PYTHON_BUILD_PATH) + "/star/__init__.py", ec)) {
    return STAR_PYTHON_BUILD_PATH;
  }
#endif
  return "";
}

// The trainer, the busy command (this binary), the Python package and the run's switches.
void SetRunEnvironment(const LocalArgs& args, RunOptions& options) {
  options.trainer_binary = FindTrainer();
  options.python_path = FindPythonPackage();
  std::string self = SelfDir() + "/star";
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) self = exe.string();
  options.busy_command = {self, "busy"};
  options.blast_command = {self, "blast"};
  options.network = !args.no_network;
  options.log_dir = args.log_dir;
  options.selector_model = args.selector_model;
  options.stop = &g_stop;
}

// Progress and notices on stderr: progress rewrites one line on a terminal and is
// throttled elsewhere (through `last_plain`, which must outlive the run).
void SetReporting(const LocalArgs& args, bool tty, std::chrono::steady_clock::time_point& last_plain,
                  RunOptions& options) {
  if (!args.quiet) {
    options.progress = [tty, &last_plain](const std::string& line) {
      if (tty) {
        std::cerr << "\r\033[K" << line << std::flush;
        return;
      }
      // Logs and pipes: a line every 5 s.
      auto now = std::chrono::steady_clock::now();
      if (now - last_plain < std::chrono::seconds(5)) return;
      last_plain = now;
      std::cerr << line << "\n";
    };
  }
  options.notice = [tty, quiet = args.quiet](const std::string& line) {
    if (quiet) return;
    std::cerr << (tty ? "\r\033[K" : "") << "star local: " << line << "\n";
  };
}

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(sig, &sa, nullptr);
}

// Writes the report, the plot, the timeline and the summary of a started run; the exit code.
int Finish(const LocalArgs& args, const RunResult& result) {
  if (!args.report.empty()) {
    std::ofstream out(args.report);
    out << result.report.dump(2) << "\n";
    if (!out) std::cerr << "star local: --report " << args.report << ": write failed\n";
  }
  if (!args.plot.empty()) {
    if (Status s = WritePlot(result.report, args.plot); !s.ok()) {
      std::cerr << "star local: " << s.message() << "\n";
    }
  }
  if (!args.quiet) PrintTimeline(result.report);
  nlohmann::json summary = result.report;
  summary.erase("samples");
  std::cout << summary.dump() << std::endl;
  if (result.status.code() == StatusCode::kAborted) {
    std::cerr << "star local: interrupted; every worker, cgroup and namespace was removed\n";
    return 130;
  }
  if (!result.status.ok()) return Fail(result.status);
  return 0;
}

}  // namespace

int RunLocalCommand(const LocalArgs& args) {
  RunOptions options;
  if (Status s = CheckInputs(args, options); !s.ok()) return Fail(s);
  SetRunEnvironment(args, options);
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  auto last_plain = std::chrono::steady_clock::now() - std::chrono::seconds(60);
  SetReporting(args, tty, last_plain, options);

  auto swept = SweepStaleSandboxes();
  if (swept.ok() && *swept > 0) {
    options.notice("removed " + std::to_string(*swept) + " sandbox(es) left by a killed run");
  }
  InstallStopHandlers();

  RunResult result = RunLocalJob(options);
  if (tty && !args.quiet) std::cerr << "\r\033[K";
  if (result.report.is_null()) return Fail(result.status);  // nothing started
  return Finish(args, result);
}

int RunBusy(int threads, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(seconds));
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([deadline] {
      volatile uint64_t x = 0;
      while (std::chrono::steady_clock::now() < deadline) {
        for (int j = 0; j < 100000; ++j) x = x + static_cast<uint64_t>(j);
      }
    });
  }
  for (auto& t : pool) t.join();
  return 0;
}

}  // namespace star::local
