// What `star local` itself did during a run (start, inject, lift, reallocate,
// reallocate_skipped, reallocate_undone, target_reached, stop): its entries on the
// report's timeline, beside the control loop's op::TimelineEvents (run_report.h merges
// the two by time).
#pragma once

#include <functional>
#include <string>

namespace star::local {

struct RunEvent {
  double t = 0;        // run time, seconds
  std::string event;   // the timeline's "event"
  int worker = -1;     // -1 for the whole job
  std::string detail;  // the timeline's "detail"
};

// Where a component of the runtime records its events.
using RunEventSink = std::function<void(RunEvent)>;

}  // namespace star::local
