#include "sim/mode_engine.h"

#include <algorithm>

#include "star/core/batch/baseline.h"

namespace star::sim {

std::optional<api::LinkReading> RingLink(const std::vector<int>& members,
                                         const std::vector<double>& own, size_t i) {
  const size_t n = members.size();
  if (n < 2) return std::nullopt;
  const size_t pred = (i + n - 1) % n;
  return api::LinkReading{members[pred], own[pred] / static_cast<double>(2 * (n - 1)), 1};
}

Setting BaselineSetting(int workers, int64_t batch_per_worker) {
  Setting s;
  s.mode = api::SyncMode::kSsgd;
  s.k = workers;
  s.batches = batch::EqualBatches(batch_per_worker * workers, workers);
  s.amp.assign(static_cast<size_t>(workers), 0);
  return s;
}

Setting SettingOf(const api::Decision& d, const Setting& previous, int workers) {
  Setting s = previous;
  s.mode = d.mode;
  s.k = std::clamp(d.k, 1, workers);
  s.order.clear();
  s.groups.clear();
  std::vector<char> listed(static_cast<size_t>(workers), 0);
  for (const auto& g : d.groups) {
    std::vector<int> group;
    for (int w : g) {
      if (w < 0 || w >= workers || listed[static_cast<size_t>(w)]) continue;
      listed[static_cast<size_t>(w)] = 1;
      group.push_back(w);
      s.order.push_back(w);
    }
    if (!group.empty()) s.groups.push_back(std::move(group));
  }
  for (int w = 0; w < workers; ++w) {
    if (listed[static_cast<size_t>(w)]) continue;
    s.order.push_back(w);
    s.groups.push_back({w});
  }
  if (s.mode == api::SyncMode::kSsgd) s.k = workers;
  for (const api::WorkerSetting& ws : d.workers) {
    if (ws.worker < 0 || ws.worker >= workers) continue;
    s.batches[static_cast<size_t>(ws.worker)] = std::max<int64_t>(1, ws.batch);
    s.amp[static_cast<size_t>(ws.worker)] = ws.amp ? 1 : 0;
  }
  return s;
}

int64_t SimState::BeginIteration(int w) {
  const auto ws = static_cast<size_t>(w);
  std::deque<Change>& due = changes[ws];
  while (!due.empty() && due.front().at <= iteration[ws]) {
    batch[ws] = due.front().batch;
    amp[ws] = due.front().amp;
    due.pop_front();
  }
  return steps[ws]++;
}

void SimState::TakeUpAllChanges() {
  for (size_t w = 0; w < changes.size(); ++w) {
    for (const Change& c : changes[w]) {
      batch[w] = c.batch;
      amp[w] = c.amp;
    }
    changes[w].clear();
  }
}

std::unique_ptr<ModeEngine> MakeEngine(SimState& state, const Setting& setting, double start) {
  const int n = state.scenario->workers;
  state.batch = setting.batches;
  state.amp = setting.amp;
  state.changes.resize(static_cast<size_t>(n));
  std::vector<int> all(static_cast<size_t>(n));
  for (int w = 0; w < n; ++w) all[static_cast<size_t>(w)] = w;
  switch (setting.mode) {
    case api::SyncMode::kGroups:
      // The parameter-server architecture has no groups mode; run them as all-reduce groups.
      return MakeGroupsEngine(state, setting.groups, start);
    case api::SyncMode::kAsgd:
      return MakeParameterServerEngine(state, setting, start);  // ASGD needs a server
    case api::SyncMode::kSsgd:
    case api::SyncMode::kFixedK:
      break;
  }
  if (state.architecture == api::Architecture::kParameterServer) {
    return MakeParameterServerEngine(state, setting, start);
  }
  if (setting.mode == api::SyncMode::kFixedK && setting.k < n) {
    return MakeFixedKEngine(state, setting, start);
  }
  return MakeGroupsEngine(state, {std::move(all)}, start);
}

}  // namespace star::sim
