// The controllers star-operator runs on its Manager (manager.h), and what they share:
// the report endpoint (a Runnable), the TrainingJob controller with its status writer
// (a Runnable), and the NodeAllocation controller.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "star/core/status.h"
#include "star/operator/control_loop.h"
#include "star/operator/reconciler/event_recorder.h"
#include "star/operator/reconciler/job_registry.h"
#include "star/operator/reconciler/manager.h"
#include "star/operator/reconciler/node_allocation_reconciler.h"
#include "star/operator/reconciler/report_endpoint.h"
#include "star/operator/reconciler/status_records.h"
#include "star/operator/reconciler/status_writer.h"
#include "star/operator/reconciler/training_job_reconciler.h"

namespace star::op {

struct OperatorControllerOptions {
  ReportEndpointOptions report;  // default: 127.0.0.1, a free port
  // Reports reach status at most this often per job. Default 2 s.
  std::chrono::milliseconds status_interval{2000};
  TrainingJobOptions job;  // restarts and their backoff
  LoopOptions loop;        // the job control loop's options; default LoopOptions{}
  // The learned selector for jobs with selector ML; default none (they fall back to the
  // heuristic, with a LearnedSelectorUnavailable Warning Event).
  LearnedModel learned;
};

// Owns the controllers; must outlive the Manager's Stop (declare it before the Manager,
// or Stop the Manager first).
struct OperatorControllers {
  OperatorControllers(Manager* manager, LoopOptions loop, LearnedModel learned = {});

  JobRegistry registry;
  StatusRecords records;
  EventRecorder events;
  std::unique_ptr<ReportEndpoint> endpoint;
  std::unique_ptr<StatusWriter> status_writer;
  NodeAllocationReconciler nodes;
  std::unique_ptr<TrainingJobReconciler> jobs;
};

// Builds the controllers and registers them on `manager` (before it starts).
// InvalidArgument naming a bad option.
StatusOr<std::unique_ptr<OperatorControllers>> AddOperatorControllers(Manager* manager,
                                                                      OperatorControllerOptions options);

}  // namespace star::op
