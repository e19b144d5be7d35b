// `star sim` for a pipeline-parallel job (Scenario::pipeline): the real control loop
// against the pipeline model (core pipeline/schedule.h), the model the loop itself
// chooses warm-up depths with.
//
// Every replica runs one iteration at a time. An iteration starting at t takes, for each
// replica, the model's time for the warm-up depths in force and the stage and link costs
// at t, plus outside_seconds; the replicas wait for the slowest, then all-reduce
// (communication_seconds over the slowest bandwidth fraction, with more than one
// replica). The costs at t: a stage's forward and backward divided by its worker's CPU
// fraction; a link's transfers divided by the smaller bandwidth fraction of its two
// workers; its latency the sum of the delays of its active episodes; each cost times
// its worker's jitter for the iteration. Every stage reports as the pipeline trainer
// does (star-fmnist's pipeline.cc): its iteration in compute_seconds, the all-reduce in
// communication_seconds, and its pipeline reading (per micro-batch costs, per link the
// message time and latency). A decision's depths apply from its apply_at_iteration on,
// on every stage at once. One model update per iteration over the whole batch.
#pragma once

#include "sim/scenario.h"
#include "sim/simulator.h"
#include "star/operator/control_loop.h"

namespace star::sim {

// Runs `s` (s.pipeline set) with `loop` until the target or the time limit.
[[nodiscard]] StatusOr<SimResult> SimulatePipeline(const Scenario& s, op::JobControlLoop loop,
                                                   const SimOptions& options);

}  // namespace star::sim
