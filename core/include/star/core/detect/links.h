// Which worker a slow link belongs to (ALGORITHMS.md section 1, communication stragglers).
//
// In a ring all-reduce every member waits on the slowest link, so every member reports
// the same communication time and the straggler detector cannot tell whose link is slow.
// Each worker also reports the link into it from its ring predecessor, timed on the
// all-reduce's fastest hop (api::LinkReading): a slow link is seen by the worker behind
// it. LinkTable keeps those readings and names the worker a slow link belongs to:
//   * a link is slow when its time per byte (the median of its newest `history`
//     readings) is at least `slow_ratio` times the typical link's: the median of the
//     faster half of the links (a worker slow both ways slows two links, half of a
//     4-ring's: a median over all would lie between the slow and the fast);
//   * a worker whose links in and out are both slow is named (its uplink is slow both
//     ways, as a shaped or congested NIC is); a slow link whose receiver is not named
//     that way names its sender (a co-located job sending through the sender's uplink
//     takes the sender's egress), unless the link into that sender is 1.25x slower still:
//     a worker forwards what it receives, so behind a slow link its own link out is
//     timed slow too.
// OwnShare turns that into what the detector and the mode selector need: the part of a
// worker's measured communication that is its own. A named worker keeps all of it; every
// other worker keeps the typical link's share of the slowest link's time (the ring
// without the slow link would be that much faster). With fewer than 3 links known, or no
// slow link, every share is 1: a clean ring changes nothing.
// Pure: no clock, no I/O; not thread-safe. Observe is O(history); the verdicts are
// computed once after a change (O(n log n)) and then read in O(1).
#pragma once

#include <cstddef>
#include <vector>

#include "star/core/api/worker_report.h"

namespace star::detect {

struct LinkOptions {
  double slow_ratio = 1.5;  // > 1
  int history = 3;          // readings per link, in [1, 64]
  // A named worker whose slow link's newest two readings are each at least this many
  // times the typical link is strong evidence (StrongSlowdown); > slow_ratio.
  double strong_ratio = 4;
  // The bar for a worker whose slow link just went away with what it was given (the
  // loop's give-back probes whether the worker still needs it): the same slowdown
  // coming back is expected, not noise; in (slow_ratio, strong_ratio].
  double recurrence_ratio = 2.5;
};

class LinkTable {
 public:
  explicit LinkTable(int workers, LinkOptions options = {});

  // Records the link into `receiver` (0 <= receiver < workers; the reading's peer in
  // range and not the receiver, else ignored). A link whose sender changes (a new ring)
  // starts its history afresh.
  void Observe(int receiver, const api::LinkReading& reading);

  // Workers named by a slow link, ascending.
  const std::vector<int>& Named();
  // The share of `worker`'s measured communication that is its own, in (0, 1].
  double OwnShare(int worker);
  // A link's time per byte over the typical link's (1 when unknown); by receiver.
  double Slowdown(int receiver);
  // For a named worker whose link out is strong evidence (see LinkOptions::strong_ratio):
  // that link's time per byte over the typical link's; else 0. A ring's members all wait
  // on such a link, so the worker's own timings show it only once its share is its own.
  // `recurrence`: judged by recurrence_ratio instead of strong_ratio.
  double StrongSlowdown(int worker, bool recurrence = false);

 private:
  struct Link {
    int sender = -1;
    std::vector<double> per_byte;  // newest `history` readings, oldest first
    double level = 0;              // median of per_byte (0 when empty), when fresh
  };
  // The verdicts of the readings as they are now (after any Observe).
  struct Verdict {
    double typical = 0;              // the faster half's median level; 0 below 3 links
    double slowest = 0;
    std::vector<int> receiver_of;    // by sender; -1 when no known link leaves it
    std::vector<int> named;          // ascending
    std::vector<char> is_named;      // by worker
  };
  void Refresh();
  bool Slow(int receiver) const;  // against verdict_.typical
  // The link out of `worker` is slow of its own (not paced by a slower link into it).
  bool SlowOut(int worker) const;

  LinkOptions options_;
  std::vector<Link> links_;  // by receiver
  Verdict verdict_;
  bool fresh_ = false;
};

}  // namespace star::detect
