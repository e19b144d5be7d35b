// Apply latency of the node agent: one Reconcile of a NodeAllocation of 100 pods on the
// in-memory NodeOs (so the agent's own cost: planning, diffing, journalling, retry logic),
// p50/p99 over iterations reported as counters (microseconds).
//   BM_ApplyChanged:    every pod's quota changes each iteration (100 writes)
//   BM_ApplyUnchanged:  the steady state: reads only, nothing written
//   BM_FirstApplyJournalFile: first apply on a fresh node with a journal file on disk
//                             (one atomic write + fsync of 100 originals, then 100 writes)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <benchmark/benchmark.h>

#include "star/agent/journal.h"
#include "star/agent/memory_node_os.h"
#include "star/agent/reconciler.h"

namespace {

using namespace star::agent;  // NOLINT
constexpr int kPods = 100;

std::string Uid(int i) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "00000000-0000-0000-0000-%012d", i);
  return buf;
}

void AddPods(MemoryNodeOs& os) {
  for (int i = 0; i < kPods; ++i) {
    os.AddCgroup("kubepods/burstable/pod" + Uid(i), CpuLimits{200000, 100000, 100});
    os.AddInterface("veth" + std::to_string(i));
  }
}

star::api::NodeAllocation Alloc(int64_t millicores) {
  star::api::NodeAllocation a;
  a.name = "node-1";
  for (int i = 0; i < kPods; ++i) {
    star::api::PodAllocation p;
    p.namespace_ = "ns";
    p.name = "pod-" + std::to_string(i);
    p.uid = Uid(i);
    p.cpu.quota_millicores = millicores + i;
    p.network.egress_bits_per_second = 1'000'000'000;
    a.spec.pods.push_back(p);
  }
  return a;
}

InterfaceMap Veths() {
  InterfaceMap m;
  for (int i = 0; i < kPods; ++i) m[Uid(i)] = "veth" + std::to_string(i);
  return m;
}

void Report(benchmark::State& state, std::vector<double>& us) {
  if (us.empty()) return;
  std::sort(us.begin(), us.end());
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}

template <typename F>
double TimeUs(F&& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
      .count();
}

void BM_ApplyChanged(benchmark::State& state) {
  MemoryNodeOs os;
  AddPods(os);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal);
  const auto a = Alloc(500), b = Alloc(700);
  const auto veths = Veths();
  std::vector<double> us;
  bool flip = false;
  for (auto _ : state) {
    const auto& desired = (flip = !flip) ? a : b;
    const double t = TimeUs([&] {
      auto res = r.Reconcile(desired, veths);
      benchmark::DoNotOptimize(res);
    });
    state.SetIterationTime(t / 1e6);
    us.push_back(t);
  }
  Report(state, us);
}
BENCHMARK(BM_ApplyChanged)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_ApplyUnchanged(benchmark::State& state) {
  MemoryNodeOs os;
  AddPods(os);
  Journal journal = Journal::InMemory();
  Reconciler r(os, journal);
  const auto a = Alloc(500);
  const auto veths = Veths();
  if (!r.Reconcile(a, veths).ok()) state.SkipWithError("first apply failed");
  std::vector<double> us;
  for (auto _ : state) {
    const double t = TimeUs([&] {
      auto res = r.Reconcile(a, veths);
      benchmark::DoNotOptimize(res);
    });
    state.SetIterationTime(t / 1e6);
    us.push_back(t);
  }
  Report(state, us);
}
BENCHMARK(BM_ApplyUnchanged)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_FirstApplyJournalFile(benchmark::State& state) {
  char tmpl[] = "/tmp/star-agent-bench-XXXXXX";
  if (!mkdtemp(tmpl)) {
    state.SkipWithError("mkdtemp failed");
    return;
  }
  const std::string path = std::string(tmpl) + "/journal.json";
  const auto a = Alloc(500);
  const auto veths = Veths();
  std::vector<double> us;
  for (auto _ : state) {
    std::filesystem::remove(path);
    MemoryNodeOs os;
    AddPods(os);
    auto journal = Journal::Open(path);
    if (!journal.ok()) {
      state.SkipWithError("journal open failed");
      break;
    }
    Reconciler r(os, *journal);
    const double t = TimeUs([&] {
      auto res = r.Reconcile(a, veths);
      benchmark::DoNotOptimize(res);
    });
    state.SetIterationTime(t / 1e6);
    us.push_back(t);
  }
  std::error_code ec;
  std::filesystem::remove_all(tmpl, ec);
  Report(state, us);
}
BENCHMARK(BM_FirstApplyJournalFile)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
