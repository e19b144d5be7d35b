// Journal: the original CPU and network limits of everything the agent has changed,
// persisted before the change, so that the agent can put them back when a pod leaves its
// allocation, even after a crash (kill -9) and restart.
//
// File format (JSON, written whole: temp file + fsync + rename + fsync of the directory):
//   {"version": 1, "pods": {"<uid>": {"cpu": {"cgroup": "...", "quotaUs": -1,
//     "periodUs": 100000, "weight": 100},
//     "net": {"interface": "...", "egressBitsPerSecond": 0, "ingressBitsPerSecond": 0,
//     "priority": 0}}}}
// ("cpu" and "net" are each optional). A journal that cannot be parsed is never guessed
// at: Open fails; the agent moves it aside (MoveJournalAside) and rebuilds what to
// restore from what the node shows (journal_rebuild.h).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "star/agent/node_os.h"
#include "star/core/status.h"

namespace star::agent {

struct CpuOriginal {
  std::string cgroup;
  CpuLimits limits;
  friend bool operator==(const CpuOriginal&, const CpuOriginal&) = default;
};

struct NetOriginal {
  std::string interface;
  NetLimits limits;
  friend bool operator==(const NetOriginal&, const NetOriginal&) = default;
};

struct JournalEntry {
  std::optional<CpuOriginal> cpu;
  std::optional<NetOriginal> net;
  friend bool operator==(const JournalEntry&, const JournalEntry&) = default;
};

using JournalEntries = std::map<std::string, JournalEntry>;  // by pod uid

// Not thread-safe: one owner (the Reconciler) uses it.
class Journal {
 public:
  // Loads the journal at `path`; a missing file is an empty journal (its directory must
  // exist). Errors: FailedPrecondition "journal <path>: ..." when the file is unreadable or
  // corrupt (bad JSON, wrong version, bad uid/cgroup/interface, bad field, or a limit the
  // kernel cannot hold: quotaUs -1 or 1..kMaxQuotaUs, periodUs 1000..1000000, weight
  // 1..10000, rates >= 0). `corrupt`, when given, is set to whether the file was read but
  // is corrupt (as opposed to unreadable).
  [[nodiscard]] static StatusOr<Journal> Open(std::string path, bool* corrupt = nullptr);
  // A journal that lives only in memory (tests, benchmarks): Commit never touches disk.
  static Journal InMemory();

  const JournalEntries& entries() const { return entries_; }
  const JournalEntry* Find(const std::string& uid) const;

  // Applies `changes` (uid -> new entry, or nullopt to erase it) and persists the result
  // atomically. On error nothing changes, in memory or on disk. An empty `changes` is a
  // no-op (no write).
  [[nodiscard]] Status Commit(const std::map<std::string, std::optional<JournalEntry>>& changes);

  const std::string& path() const { return path_; }
  // Number of successful writes of the file (tests and metrics).
  int64_t writes() const { return writes_; }

 private:
  explicit Journal(std::string path) : path_(std::move(path)) {}
  std::string path_;  // "" = in memory
  JournalEntries entries_;
  int64_t writes_ = 0;
};

// Renames the journal at `path` to "<path>.corrupt-<UTC YYYYMMDDTHHMMSSZ of now>" (with
// ".1", ".2", ... appended when that name is taken) and returns the new path. Unavailable
// naming both paths when the rename fails.
[[nodiscard]] StatusOr<std::string> MoveJournalAside(const std::string& path,
                                                     std::chrono::system_clock::time_point now);

// Serialises / parses the file format above (exposed for tests). Parse errors are
// InvalidArgument naming the field ("pods.abc.cpu.quotaUs: ...").
std::string SerializeJournal(const JournalEntries& entries);
[[nodiscard]] StatusOr<JournalEntries> ParseJournal(const std::string& text);

}  // namespace star::agent
