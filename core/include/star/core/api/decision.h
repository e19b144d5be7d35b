// Decision: what the controller tells every worker of a job to do from a given
// iteration on (sync mode, k or groups, per-worker AMP and batch). It travels back on
// the report response; all workers switch at apply_at_iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "star/core/api/types.h"
#include "star/core/status.h"

namespace star::api {

struct WorkerSetting {
  int worker = 0;     // rank, >= 0
  bool amp = false;   // run this worker in mixed precision
  int64_t batch = 1;  // local batch size (samples per iteration), >= 1

  friend bool operator==(const WorkerSetting&, const WorkerSetting&) = default;
};

struct Decision {
  int64_t epoch = 0;               // decision sequence number, >= 0; newer wins
  int64_t apply_at_iteration = 0;  // first iteration run under this decision, >= 0
  SyncMode mode = SyncMode::kSsgd;
  // Gradients per update: n for ssgd, the k of fixed_k, 1 for asgd; >= 1, and <= the
  // number of workers when `workers` is given.
  int k = 1;
  // For mode groups: a partition of the worker ranks (each group synchronous inside).
  // For mode fixed_k: the workers in speed order, fastest first (the groups concatenated;
  // ranks not listed follow in ascending order): the first k form the ring, the others
  // are children (see star/shim/sync_engine.h). Empty for ssgd and asgd.
  std::vector<std::vector<int>> groups;
  // One entry per worker (ranks unique); empty = no per-worker change.
  std::vector<WorkerSetting> workers;
  // A pipeline job's warm-up depth per stage (star/core/pipeline/schedule.h), each >= 1
  // and none deeper than the stage before it; empty = the job's static schedule. Every
  // stage takes it up at apply_at_iteration.
  std::vector<int> warmup;
  // The pipeline model's iteration time under `warmup` (seconds, >= 0); 0 without one
  // (Validate refuses another value then).
  double predicted_iteration_seconds = 0;
  // The link `warmup` absorbs, by the stage it leaves (it joins stages slow_link and
  // slow_link + 1): in [0, warmup.size() - 1) with a warmup, else -1 (none named).
  int slow_link = -1;

  friend bool operator==(const Decision&, const Decision&) = default;
};

// Checks a decision built in code or decoded. Rules: epoch >= 0; apply_at_iteration
// >= 0; k >= 1; worker ranks >= 0 and unique; batch >= 1; when workers are given,
// k <= workers.size(); mode groups needs non-empty groups; groups, when given, hold no
// empty group, no rank twice, only ranks >= 0, and (when workers are given) exactly
// the workers' ranks; warmup depths >= 1 and non-increasing, the prediction finite and
// >= 0, slow_link -1 or (with a warmup) a link between two of its stages. Errors name the field under `path` ("groups[1][0]: duplicate of
// groups[0][2]"). O(n log n) in the number of workers.
[[nodiscard]] Status Validate(const Decision& d, const std::string& path = "");

// Whether `a` and `b` synchronise the same way: the same mode, and for fixed_k the same
// k and order, for groups the same partition as given (k and groups are ignored for ssgd
// and asgd). A decision that differs from the one in force only in per-worker AMP and
// batches changes no exchange: every worker takes it up at its apply_at_iteration on its
// own, with no switch (star/shim/sync_engine.h). O(n).
[[nodiscard]] bool SameSynchronization(const Decision& a, const Decision& b);
// snake_case wire form: {"epoch","apply_at_iteration","mode":"ssgd|fixed_k|groups|asgd",
// "k","groups":[[...]],"workers":[{"worker","amp","batch"}]}; every field is written,
// except "warmup" and "predicted_iteration_seconds", written only with a warmup, and
// "slow_link", written only when >= 0.
nlohmann::json ToJson(const Decision& d);
// Required: epoch, apply_at_iteration, mode, k. Optional: groups (default []),
// workers (default []), warmup (default []), predicted_iteration_seconds (default 0),
// slow_link (default -1);
// in workers[], worker and batch are required, amp defaults to false. Unknown fields are rejected. Then Validate(d, path).
StatusOr<Decision> DecisionFromJson(const nlohmann::json& j, const std::string& path = "");

}  // namespace star::api
