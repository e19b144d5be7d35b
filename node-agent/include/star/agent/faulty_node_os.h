// FaultyNodeOs: wraps any NodeOs and injects failures, deterministically, for tests of
// everything built on NodeOs (the leveldb fault-injection Env pattern).
//
// An injected failure is returned *instead of* calling the wrapped NodeOs, so nothing is
// applied, unless it was injected with FailNextAfterApply (the call reaches the wrapped
// NodeOs and its result is replaced: "applied, but the caller saw an error").
// All methods are thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <string>

#include "star/agent/node_os.h"

namespace star::agent {

enum class NodeOsMethod {
  kCgroupExists,
  kReadCpu,
  kWriteCpu,
  kReadCpuStats,
  kListCgroups,
  kInterfaceExists,
  kReadNet,
  kWriteNet,
  kReadNetStats,
  kPodInterface,
};

class FaultyNodeOs final : public NodeOs {
 public:
  // `base` is not owned and must outlive this object.
  explicit FaultyNodeOs(NodeOs* base);

  // The next `count` calls of `method`, after letting `skip` calls through, return
  // `status` (must not be OK). Schedules queue up in the order they were added.
  void FailNext(NodeOsMethod method, Status status, int count = 1, int skip = 0);
  // Like FailNext, but the call is passed to the wrapped NodeOs first (and applied).
  void FailNextAfterApply(NodeOsMethod method, Status status, int count = 1);
  // From now on each call of `method` fails with `status` with probability p, drawn from
  // a generator seeded with `seed` (same seed and call sequence, same failures).
  void FailWithProbability(NodeOsMethod method, double p, Status status, uint64_t seed);
  // After `n` more writes (WriteCpu/WriteNet calls that reached the wrapped NodeOs),
  // every call of any method returns Aborted ("crashed"), as if the process died there.
  void CrashAfterWrites(int64_t n);
  // Removes every injected fault and un-crashes.
  void Heal();

  bool crashed() const;
  int64_t calls(NodeOsMethod method) const;   // every call, failed or not
  int64_t injected_failures() const;          // calls answered with an injected error
  int64_t writes_passed() const;              // writes that reached the wrapped NodeOs

  // NodeOs.
  CgroupVersion cgroup_version() const override { return base_->cgroup_version(); }
  StatusOr<bool> CgroupExists(const std::string& cgroup) override;
  StatusOr<CpuLimits> ReadCpu(const std::string& cgroup) override;
  Status WriteCpu(const std::string& cgroup, const CpuLimits& limits) override;
  StatusOr<CpuStats> ReadCpuStats(const std::string& cgroup) override;
  StatusOr<std::vector<std::string>> ListCgroups(const std::string& cgroup) override;
  StatusOr<bool> InterfaceExists(const std::string& ifname) override;
  StatusOr<NetLimits> ReadNet(const std::string& ifname) override;
  Status WriteNet(const std::string& ifname, const NetLimits& limits) override;
  StatusOr<NetStats> ReadNetStats(const std::string& ifname) override;
  StatusOr<std::string> PodInterface(const std::string& cgroup) override;

 private:
  struct Scheduled {
    int skip = 0;
    int count = 0;
    bool after_apply = false;
    Status status;
  };
  struct Random {
    double p = 0;
    Status status;
    std::mt19937_64 rng;
  };
  // What to do with one call: nullopt = pass through; otherwise the injected status and
  // whether to apply first.
  struct Decision {
    Status status;
    bool after_apply = false;
  };
  std::optional<Decision> Decide(NodeOsMethod method, bool is_write);
  void NotePassedWrite();
  template <typename R, typename F>
  R Call(NodeOsMethod method, bool is_write, F&& f);

  NodeOs* const base_;
  mutable std::mutex mu_;
  std::map<NodeOsMethod, std::deque<Scheduled>> scheduled_;
  std::map<NodeOsMethod, Random> random_;
  std::map<NodeOsMethod, int64_t> calls_;
  std::optional<int64_t> writes_until_crash_;
  bool crashed_ = false;
  int64_t injected_ = 0;
  int64_t writes_passed_ = 0;
};

}  // namespace star::agent
