#include "star/agent/faulty_node_os.h"

#include <cassert>
#include <utility>

namespace star::agent {

FaultyNodeOs::FaultyNodeOs(NodeOs* base) : base_(base) { assert(base_ != nullptr); }

void FaultyNodeOs::FailNext(NodeOsMethod method, Status status, int count, int skip) {
  assert(!status.ok());
  std::lock_guard lock(mu_);
  scheduled_[method].push_back({skip, count, false, std::move(status)});
}

void FaultyNodeOs::FailNextAfterApply(NodeOsMethod method, Status status, int count) {
  assert(!status.ok());
  std::lock_guard lock(mu_);
  scheduled_[method].push_back({0, count, true, std::move(status)});
}

void FaultyNodeOs::FailWithProbability(NodeOsMethod method, double p, Status status,
                                       uint64_t seed) {
  assert(!status.ok());
  std::lock_guard lock(mu_);
  random_[method] = Random{p, std::move(status), std::mt19937_64(seed)};
}

void FaultyNodeOs::CrashAfterWrites(int64_t n) {
  std::lock_guard lock(mu_);
  writes_until_crash_ = n;
  if (n <= 0) crashed_ = true;
}

void FaultyNodeOs::Heal() {
  std::lock_guard lock(mu_);
  scheduled_.clear();
  random_.clear();
  writes_until_crash_.reset();
  crashed_ = false;
}

bool FaultyNodeOs::crashed() const {
  std::lock_guard lock(mu_);
  return crashed_;
}

int64_t FaultyNodeOs::calls(NodeOsMethod method) const {
  std::lock_guard lock(mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

int64_t FaultyNodeOs::injected_failures() const {
  std::lock_guard lock(mu_);
  return injected_;
}

int64_t FaultyNodeOs::writes_passed() const {
  std::lock_guard lock(mu_);
  return writes_passed_;
}

std::optional<FaultyNodeOs::Decision> FaultyNodeOs::Decide(NodeOsMethod method,
                                                          bool is_write) {
  std::lock_guard lock(mu_);
  ++calls_[method];
  if (crashed_) {
    ++injected_;
    return Decision{Status::Aborted("FaultyNodeOs: crashed after the configured writes"), false};
  }
  auto sit = scheduled_.find(method);
  if (sit != scheduled_.end() && !sit->second.empty()) {
    Scheduled& s = sit->second.front();
    if (s.skip > 0) {
      --s.skip;
    } else {
      Decision d{s.status, s.after_apply};
      if (--s.count <= 0) sit->second.pop_front();
      ++injected_;
      if (d.after_apply && is_write) ++writes_passed_;
      return d;
    }
  }
  auto rit = random_.find(method);
  if (rit != random_.end()) {
    std::uniform_real_distribution<double> u(0.0, 1.0);
    if (u(rit->second.rng) < rit->second.p) {
      ++injected_;
      return Decision{rit->second.status, false};
    }
  }
  if (is_write) {
    ++writes_passed_;
    if (writes_until_crash_.has_value() && --*writes_until_crash_ <= 0) crashed_ = true;
  }
  return std::nullopt;
}

template <typename R, typename F>
R FaultyNodeOs::Call(NodeOsMethod method, bool is_write, F&& f) {
  std::optional<Decision> d = Decide(method, is_write);
  if (!d.has_value()) return f();
  if (d->after_apply) (void)f();  // applied; the caller sees the injected error
  return R(d->status);
}

StatusOr<bool> FaultyNodeOs::CgroupExists(const std::string& cgroup) {
  return Call<StatusOr<bool>>(NodeOsMethod::kCgroupExists, false,
                              [&] { return base_->CgroupExists(cgroup); });
}

StatusOr<CpuLimits> FaultyNodeOs::ReadCpu(const std::string& cgroup) {
  return Call<StatusOr<CpuLimits>>(NodeOsMethod::kReadCpu, false,
                                   [&] { return base_->ReadCpu(cgroup); });
}

Status FaultyNodeOs::WriteCpu(const std::string& cgroup, const CpuLimits& limits) {
  return Call<Status>(NodeOsMethod::kWriteCpu, true,
                      [&] { return base_->WriteCpu(cgroup, limits); });
}

StatusOr<CpuStats> FaultyNodeOs::ReadCpuStats(const std::string& cgroup) {
  return Call<StatusOr<CpuStats>>(NodeOsMethod::kReadCpuStats, false,
                                  [&] { return base_->ReadCpuStats(cgroup); });
}

StatusOr<std::vector<std::string>> FaultyNodeOs::ListCgroups(const std::string& cgroup) {
  return Call<StatusOr<std::vector<std::string>>>(NodeOsMethod::kListCgroups, false,
                                                  [&] { return base_->ListCgroups(cgroup); });
}

StatusOr<bool> FaultyNodeOs::InterfaceExists(const std::string& ifname) {
  return Call<StatusOr<bool>>(NodeOsMethod::kInterfaceExists, false,
                              [&] { return base_->InterfaceExists(ifname); });
}

StatusOr<NetLimits> FaultyNodeOs::ReadNet(const std::string& ifname) {
  return Call<StatusOr<NetLimits>>(NodeOsMethod::kReadNet, false,
                                   [&] { return base_->ReadNet(ifname); });
}

Status FaultyNodeOs::WriteNet(const std::string& ifname, const NetLimits& limits) {
  return Call<Status>(NodeOsMethod::kWriteNet, true,
                      [&] { return base_->WriteNet(ifname, limits); });
}

StatusOr<NetStats> FaultyNodeOs::ReadNetStats(const std::string& ifname) {
  return Call<StatusOr<NetStats>>(NodeOsMethod::kReadNetStats, false,
                                  [&] { return base_->ReadNetStats(ifname); });
}

StatusOr<std::string> FaultyNodeOs::PodInterface(const std::string& cgroup) {
  return Call<StatusOr<std::string>>(NodeOsMethod::kPodInterface, false,
                                     [&] { return base_->PodInterface(cgroup); });
}

}  // namespace star::agent
