// AgentMetrics: the node agent's Prometheus metrics (the model only; serving them is the
// binary's business). Header-only so that star_agent_core does not link prometheus-cpp;
// whoever includes it links prometheus-cpp::core.
//
//   star_node_cpu_quota{pod}                  CPU quota applied, millicores (0 = unlimited)
//   star_node_bandwidth_limit{pod,direction}  bits/s applied, direction egress|ingress
//                                             (0 = unlimited)
//   star_node_apply_total{outcome}            pods per outcome: applied, unchanged,
//                                             restored, failed; whole allocations refused:
//                                             rejected (all initialised to zero)
//   star_node_apply_seconds                   duration of one Reconcile
// pod = "<namespace>/<name>". Gauges of pods that leave the allocation are removed.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "star/agent/reconciler.h"

namespace star::agent {

// Thread-safe.
class AgentMetrics {
 public:
  AgentMetrics()
      : registry_(std::make_shared<prometheus::Registry>()),
        quota_(prometheus::BuildGauge()
                   .Name("star_node_cpu_quota")
                   .Help("CPU quota applied to the pod, millicores (0 = unlimited)")
                   .Register(*registry_)),
        bandwidth_(prometheus::BuildGauge()
                       .Name("star_node_bandwidth_limit")
                       .Help("Bandwidth limit applied to the pod, bits/s (0 = unlimited)")
                       .Register(*registry_)),
        apply_(prometheus::BuildCounter()
                   .Name("star_node_apply_total")
                   .Help("Pods reconciled, by outcome (rejected: whole allocations refused)")
                   .Register(*registry_)),
        seconds_(prometheus::BuildHistogram()
                     .Name("star_node_apply_seconds")
                     .Help("Duration of one reconcile of the node's allocation")
                     .Register(*registry_)
                     .Add({}, prometheus::Histogram::BucketBoundaries{
                                  0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10})) {
    for (const char* o : {"applied", "unchanged", "restored", "failed", "rejected"}) {
      apply_.Add({{"outcome", o}});
    }
  }

  // Records one Reconcile's outcome and duration.
  void Observe(const StatusOr<ReconcileResult>& result, double seconds) {
    std::lock_guard lock(mu_);
    seconds_.Observe(seconds);
    if (!result.ok()) {
      apply_.Add({{"outcome", "rejected"}}).Increment();
      return;
    }
    std::map<std::string, bool> seen;
    for (const PodResult& p : result->pods) {
      apply_.Add({{"outcome", std::string(PodActionName(p.action))}}).Increment();
      if (!p.in_allocation || p.action == PodAction::kFailed) continue;
      const std::string pod = p.namespace_ + "/" + p.name;
      seen[pod] = true;
      quota_.Add({{"pod", pod}}).Set(static_cast<double>(p.cpu.quota_millicores));
      const bool shaped = !p.interface.empty();
      bandwidth_.Add({{"pod", pod}, {"direction", "egress"}})
          .Set(shaped ? static_cast<double>(p.network.egress_bits_per_second) : 0);
      bandwidth_.Add({{"pod", pod}, {"direction", "ingress"}})
          .Set(shaped ? static_cast<double>(p.network.ingress_bits_per_second) : 0);
    }
    for (const std::string& pod : pods_) {
      if (seen.count(pod)) continue;
      quota_.Remove(&quota_.Add({{"pod", pod}}));
      bandwidth_.Remove(&bandwidth_.Add({{"pod", pod}, {"direction", "egress"}}));
      bandwidth_.Remove(&bandwidth_.Add({{"pod", pod}, {"direction", "ingress"}}));
    }
    pods_.clear();
    for (const auto& [pod, unused] : seen) pods_.push_back(pod);
  }

  // The Prometheus text exposition of every metric.
  std::string Serialize() const {
    std::ostringstream out;
    prometheus::TextSerializer().Serialize(out, registry_->Collect());
    return out.str();
  }

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::mutex mu_;
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Gauge>& quota_;
  prometheus::Family<prometheus::Gauge>& bandwidth_;
  prometheus::Family<prometheus::Counter>& apply_;
  prometheus::Histogram& seconds_;
  std::vector<std::string> pods_;
};

}  // namespace star::agent
