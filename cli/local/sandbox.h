// Sandbox: the operating-system resources one `star local` job runs in, and the way its
// processes are started inside them. It creates, attaches and destroys, every touch of
// the machine going through a Host (host.h): the real one by default, a MemoryHost in
// tests. CPU limits and bandwidth shaping are written through the same Host (host())
// on the cgroups and interfaces named here.
//
// Layout (relative to the cpu controller's hierarchy: cgroup v2 when the machine's
// cgroup2 hierarchy has the cpu controller, else v1, the cpu and cpuacct hierarchies,
// co-mounted or not, with the same relative paths in each):
//   <cgroup_root>/<name>-<ownerpid>/      the job
//     slot<i>/                            slot i: its CPU capacity (quota set by the runtime)
//       main/                             the worker (or server) process
//       neighbor/                         a co-located load injected beside it
//     eval/                               the evaluator process
// Network (SandboxOptions.network): a bridge "stb<6 hex>" in the root namespace with
// address 10.213.S.1/24, S chosen so that no existing interface address lies in that
// /24; per slot i a network namespace "star-<name>-<ownerpid>-<i>" (or "star-<6 hex>-<i>"
// when that would be longer than 48 characters), a veth pair whose host side
// "stv<6 hex><i>" is a port of the bridge and whose other side is "eth0" inside the
// namespace with 10.213.S.(i+2)/24; lo is up and the default route goes via the bridge.
// <6 hex> is a hash of "<name>-<ownerpid>".
//
// Every name is derived from (cgroup_root, name, owner pid) and nothing else is recorded,
// so SweepStaleSandboxes can remove what a killed owner left behind. The owner pid is
// the creating process's pid (pid namespaces are not considered: run every `star local`
// of a machine in one pid namespace).
//
// The real host needs root (cgroup directories, `ip`); tc for SetDelay. Thread-safe.
#pragma once

#include <sys/types.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "local/host.h"
#include "star/core/status.h"

namespace star::local {

struct SandboxOptions {
  // Job name, used in every resource name: 1..63 characters of [A-Za-z0-9._-], starting
  // with a letter or digit. Required.
  std::string name;
  // Worker/server slots, 1..64. Default 1.
  int slots = 1;
  // Create a network namespace and veth per slot (needs root and iproute2's `ip`).
  // Default true.
  bool network = true;
  // Parent cgroup, relative to the cpu hierarchy root; created when missing (and left in
  // place). No leading '/', no "." or ".." components. Default "star-local".
  std::string cgroup_root = "star-local";
};

class Sandbox {
 public:
  // Creates the cgroups and (with options.network) the bridge, namespaces and veths.
  // Leftovers carrying this process's pid (a previous owner with the same pid) are removed
  // first. On any failure everything created is removed again and the error returned:
  // InvalidArgument naming the option; AlreadyExists when a sandbox of this name is alive
  // in this process; FailedPrecondition when there is no cpu cgroup hierarchy (v1 or v2),
  // when network is asked without root ("network namespaces need root") or without `ip`;
  // the failing command with its stderr otherwise (see netns_util.h RunChecked).
  [[nodiscard]] static StatusOr<std::unique_ptr<Sandbox>> Create(const SandboxOptions& options);
  // The same on `host` (not owned; it must outlive the sandbox), without the checks for
  // root and `ip`.
  [[nodiscard]] static StatusOr<std::unique_ptr<Sandbox>> Create(const SandboxOptions& options,
                                                                 Host& host);

  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;
  // Teardown(); an error is written to stderr.
  ~Sandbox();

  // Kills (SIGKILL) every process in the job's cgroups (processes spawned with cgroup ""
  // are the caller's), waits up to 5 s for the cgroups to empty, then removes the veths
  // (and the IFB devices NodeOs made for their ingress shaping), the namespaces, the
  // bridge and the cgroups. Best effort: every step is tried, the first error returned
  // (DeadlineExceeded naming the pids that did not leave). Idempotent; after an OK
  // Teardown, Spawn and SetDelay return FailedPrecondition and the name may be reused.
  // Killed children are not reaped: the caller still waits for the pids Spawn returned.
  [[nodiscard]] Status Teardown();

  // Where the sandbox lives: CPU limits and shaping of its cgroups and interfaces go
  // through it (Host::WriteCpu, Host::WriteNet).
  Host& host() const { return *host_; }
  int slots() const { return slots_; }
  bool has_network() const { return network_; }
  const std::string& name() const { return name_; }

  // Cgroup paths relative to the cpu hierarchy root, for Host::WriteCpu, e.g.
  // "star-local/job-1234/slot3/main". Accessors taking a slot return "" for a slot
  // outside [0, slots()).
  std::string job_cgroup() const;
  std::string slot_cgroup(int slot) const;
  std::string main_cgroup(int slot) const;
  std::string neighbor_cgroup(int slot) const;
  std::string eval_cgroup() const;

  // With network: the bridge's address "10.213.S.1" and slot i's "10.213.S.(i+2)";
  // without: "127.0.0.1" for both.
  std::string host_address() const;
  std::string slot_address(int slot) const;
  // The interface inside every slot's network namespace (the veth's other side).
  static constexpr const char* kSlotIfname = "eth0";
  // Slot i's host-side veth (the shaping target for Host::WriteNet); "" without network.
  std::string host_ifname(int slot) const;
  // The bridge's name; "" without network.
  std::string bridge_ifname() const;
  // Slot i's network namespace name (for `ip -n` / `tc -n`); "" without network.
  std::string netns(int slot) const;

  // Adds or replaces a netem delay of `seconds` (0 < seconds <= 60, microsecond
  // resolution) on slot i's namespace-side eth0 egress, so that it does not collide with
  // the HTB qdisc NodeOs installs on the host side; 0 removes it (OK when none is there).
  // Errors: Unavailable without network, or when the kernel has no netem qdisc
  // (CONFIG_NET_SCH_NETEM); InvalidArgument for a bad slot or delay; the failing tc
  // command otherwise.
  [[nodiscard]] Status SetDelay(int slot, double seconds);

  // Shapes slot i's namespace-side eth0 egress as an uplink shared with a co-located
  // sender (Host::SetUplinkShare); share.link_bps 0 removes it. Errors as SetDelay's
  // (InvalidArgument also for a neighbor rate other than 0, none, or in [8000, link)).
  [[nodiscard]] Status SetUplinkShare(int slot, const UplinkShare& share);

  struct SpawnSpec {
    std::vector<std::string> argv;  // argv[0]: a program path, or a name looked up in PATH
    std::vector<std::string> env;   // "K=V" entries: the complete environment
    std::string cgroup;             // job_cgroup() or one below it; "" = none (not tracked)
    int netns_slot = -1;            // run inside that slot's namespace; -1 = the root one
    int stdout_fd = -1;             // dup2'ed onto 1 when >= 0, else inherited
    int stderr_fd = -1;             // dup2'ed onto 2 when >= 0, else inherited
  };
  // Starts a process: it is in `cgroup` (cpu and cpuacct) and in the slot's namespace
  // before it executes anything, leads its own process group, has default signal
  // dispositions and an empty signal mask, stdin inherited and no other descriptors
  // beyond 0-2. Returns its pid; the caller reaps it (waitpid). Errors (the process is
  // then gone and reaped): InvalidArgument for an empty argv, a cgroup outside the job or
  // a bad netns_slot; FailedPrecondition for a namespace without network or after
  // Teardown; NotFound "exec /x/y: No such file or directory" when the program is missing;
  // Internal for other exec, setns, dup2 or cgroup-attach failures (naming the step).
  [[nodiscard]] StatusOr<pid_t> Spawn(const SpawnSpec& spec);

 private:
  Sandbox() = default;
  static StatusOr<std::unique_ptr<Sandbox>> Create(const SandboxOptions& options, Host& host,
                                                   std::unique_ptr<Host> owned);
  Status CreateNetwork();
  Status CheckSpawn(const SpawnSpec& spec);

  std::unique_ptr<Host> owned_host_;     // the real host Create(options) made, or null
  Host* host_ = nullptr;
  std::string name_;
  std::string cgroup_root_;
  pid_t owner_ = 0;
  int slots_ = 0;
  bool network_ = false;
  int subnet_ = -1;                      // S in 10.213.S.0/24, with network
  std::mutex mu_;                        // guards torn_down_
  bool torn_down_ = false;
};

// Removes the leftovers of sandboxes under `cgroup_root` whose owner process is gone (a
// `star local` killed with -9): for every cgroup "<cgroup_root>/<name>-<pid>" whose pid
// is not alive, kills the processes still in it and removes its veths, IFB devices,
// namespaces, bridge and cgroups. Sandboxes of live owners (this process included) are
// left alone; a dead owner's pid that has been reused keeps its leftovers until that
// process exits. Returns how many sandboxes it removed; 0 when `cgroup_root` does not
// exist. Errors: InvalidArgument for a bad cgroup_root; the first removal that failed
// (the others are still tried).
[[nodiscard]] StatusOr<int> SweepStaleSandboxes(const std::string& cgroup_root = "star-local");
// The same on `host`.
[[nodiscard]] StatusOr<int> SweepStaleSandboxes(Host& host, const std::string& cgroup_root);

}  // namespace star::local
