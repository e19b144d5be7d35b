#include "star/shim/timing.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace star::shim {

double MonotonicSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double SquaredL2Norm(std::span<const float> v) {
  // Eight independent partial sums: the compiler can vectorise them (one sum cannot be
  // reordered without -ffast-math), and they are also a little more accurate.
  constexpr size_t kLanes = 8;
  double part[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= v.size(); i += kLanes) {
    for (size_t l = 0; l < kLanes; ++l) {
      part[l] += static_cast<double>(v[i + l]) * static_cast<double>(v[i + l]);
    }
  }
  double s = 0;
  for (; i < v.size(); ++i) s += static_cast<double>(v[i]) * static_cast<double>(v[i]);
  for (double p : part) s += p;
  return s;
}

namespace {

// Sums `x` into `sum`: the stage and each link's peer are the latest, the rest add up.
void AddPipeline(api::PipelineReading& sum, const api::PipelineReading& x) {
  sum.stage = x.stage;
  sum.forward_seconds += x.forward_seconds;
  sum.backward_seconds += x.backward_seconds;
  sum.links.resize(x.links.size());
  for (size_t i = 0; i < x.links.size(); ++i) {
    api::PipelineLinkReading& l = sum.links[i];
    l.peer = x.links[i].peer;
    l.seconds += x.links[i].seconds;
    l.bytes += x.links[i].bytes;
    l.wait_seconds += x.links[i].wait_seconds;
    l.latency_seconds += x.links[i].latency_seconds;
  }
}

api::PipelineReading MeanPipeline(api::PipelineReading sum, int n) {
  sum.forward_seconds /= n;
  sum.backward_seconds /= n;
  for (api::PipelineLinkReading& l : sum.links) {
    l.seconds /= n;
    l.bytes = std::max<int64_t>(1, l.bytes / n);
    l.wait_seconds /= n;
    l.latency_seconds /= n;
  }
  return sum;
}

}  // namespace

IterationTimer::IterationTimer(IterationTimerOptions options) : options_(std::move(options)) {
  if (!options_.now) options_.now = MonotonicSeconds;
  origin_ = options_.origin_seconds ? *options_.origin_seconds : options_.now();
}

double IterationTimer::elapsed_seconds() const { return std::max(0.0, options_.now() - origin_); }

Status IterationTimer::BeginCompute() {
  if (compute_start_) return Status::FailedPrecondition("BeginCompute: compute phase already open");
  compute_start_ = options_.now();
  return Status::Ok();
}

Status IterationTimer::EndCompute() {
  if (!compute_start_) return Status::FailedPrecondition("EndCompute: no compute phase open");
  compute_ += std::max(0.0, options_.now() - *compute_start_);
  compute_start_.reset();
  return Status::Ok();
}

Status IterationTimer::BeginCommunication() {
  if (comm_start_) {
    return Status::FailedPrecondition("BeginCommunication: communication phase already open");
  }
  comm_start_ = options_.now();
  comm_wait_ = 0;
  return Status::Ok();
}

Status IterationTimer::EndCommunication() {
  if (!comm_start_) {
    return Status::FailedPrecondition("EndCommunication: no communication phase open");
  }
  comm_ += std::max(0.0, options_.now() - *comm_start_ - comm_wait_);
  comm_start_.reset();
  comm_wait_ = 0;
  return Status::Ok();
}

Status IterationTimer::AddWait(double seconds) {
  if (!(seconds >= 0)) {
    return Status::InvalidArgument("wait_seconds: must be >= 0, got " + std::to_string(seconds));
  }
  wait_ += seconds;
  if (comm_start_) comm_wait_ += seconds;
  return Status::Ok();
}

StatusOr<IterationSample> IterationTimer::EndIteration(const IterationInfo& info) {
  if (compute_start_ || comm_start_) {
    return Status::FailedPrecondition(std::string("EndIteration: ") +
                                      (compute_start_ ? "compute" : "communication") +
                                      " phase still open");
  }
  if (info.iteration < 0) {
    return Status::InvalidArgument("iteration: must be >= 0, got " +
                                   std::to_string(info.iteration));
  }
  if (info.local_batch < 1) {
    return Status::InvalidArgument("local_batch: must be >= 1, got " +
                                   std::to_string(info.local_batch));
  }
  IterationSample s{compute_, comm_, wait_, info};
  compute_ = comm_ = wait_ = 0;
  ++n_;
  compute_sum_ += s.compute_seconds;
  comm_sum_ += s.communication_seconds;
  wait_sum_ += s.wait_seconds;
  if (info.link) {
    link_sum_.peer = info.link->peer;
    link_sum_.seconds += info.link->seconds;
    link_sum_.bytes += info.link->bytes;
    ++link_n_;
  }
  if (info.pipeline) {
    AddPipeline(pipeline_sum_, *info.pipeline);
    ++pipeline_n_;
  }
  local_norm_.Add(info.local_grad_sq_norm);
  global_norm_.Add(info.global_grad_sq_norm);
  loss_.Add(info.loss);
  last_ = info;
  return s;
}

StatusOr<api::WorkerReport> IterationTimer::TakeReport() {
  if (n_ == 0) return Status::FailedPrecondition("TakeReport: no iteration since the last report");
  api::WorkerReport r;
  r.job = options_.job;
  r.worker = options_.worker;
  r.iteration = last_.iteration;
  r.iterations = n_;
  r.time_seconds = elapsed_seconds();
  r.compute_seconds = compute_sum_ / n_;
  r.communication_seconds = comm_sum_ / n_;
  r.wait_seconds = wait_sum_ / n_;
  r.local_batch = last_.local_batch;
  r.amp = last_.amp;
  r.local_grad_sq_norm = local_norm_.Get();
  r.global_grad_sq_norm = global_norm_.Get();
  r.loss = loss_.Get();
  r.lookahead = last_.lookahead;
  if (link_n_ > 0) {
    r.link = api::LinkReading{link_sum_.peer, link_sum_.seconds / link_n_,
                              std::max<int64_t>(1, link_sum_.bytes / link_n_)};
  }
  if (pipeline_n_ > 0) r.pipeline = MeanPipeline(pipeline_sum_, pipeline_n_);
  link_sum_ = {};
  link_n_ = 0;
  pipeline_sum_ = {};
  pipeline_n_ = 0;
  n_ = 0;
  compute_sum_ = comm_sum_ = wait_sum_ = 0;
  local_norm_ = global_norm_ = loss_ = Mean{};
  return r;
}

}  // namespace star::shim
