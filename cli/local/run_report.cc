#include "local/run_report.h"

#include <algorithm>

#include "local/eta.h"
#include "local/format.h"

namespace star::local {
namespace {

using nlohmann::json;

std::string ListOf(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

json AccuracyCurve(const std::vector<std::pair<double, double>>& curve) {
  json out = json::array();
  for (const auto& [t, accuracy] : curve) out.push_back({t, accuracy});
  return out;
}

}  // namespace

json TimelineJson(const std::vector<RunEvent>& run_events,
                  const std::vector<op::TimelineEvent>& loop_events) {
  std::vector<RunEvent> rows = run_events;
  for (const op::TimelineEvent& e : loop_events) {
    rows.push_back({e.t, std::string(op::EventName(e.kind)), e.worker, op::EventDetail(e)});
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const RunEvent& a, const RunEvent& b) { return a.t < b.t; });
  json timeline = json::array();
  for (const RunEvent& e : rows) {
    timeline.push_back({{"t", e.t}, {"event", e.event}, {"worker", e.worker}, {"detail", e.detail}});
  }
  return timeline;
}

void SetLoopFields(const op::JobControlLoop& loop, ReportInputs* in) {
  in->tta = loop.tta_seconds();
  in->final_accuracy = loop.accuracy();
  in->accuracy_curve = &loop.accuracy_curve();
  in->current = loop.current();
  in->loop_events = loop.timeline();
}

void SetLoopFields(const op::JobControlLoop& loop, ProgressInputs* in) {
  in->accuracy = loop.accuracy();
  in->current = loop.current();
  in->stragglers = loop.stragglers();
  in->accuracy_curve = &loop.accuracy_curve();
  in->target_reached = loop.tta_seconds().has_value();
}

json BuildReport(const ReportInputs& in) {
  json injections = json::array();
  json unavailable = json::array();
  for (const auto& a : *in.injections) {
    (a.available ? injections : unavailable).push_back(a.spec.text);
  }
  const std::string final_mode = in.current ? std::string(api::ToString(in.current->mode)) : "ssgd";
  return {{"job", in.job},
          {"policy", in.policy},
          {"architecture", std::string(api::ToString(in.spec->architecture))},
          {"outcome", in.outcome},
          {"tta_seconds", in.tta ? json(*in.tta) : json(nullptr)},
          {"target_accuracy", in.spec->training.target_accuracy ? json(*in.spec->training.target_accuracy)
                                                                 : json(nullptr)},
          {"final_accuracy", in.final_accuracy ? json(*in.final_accuracy) : json(nullptr)},
          {"iterations", in.iterations},
          {"wall_seconds", in.wall_seconds},
          {"workers", in.workers},
          {"parameter_servers", in.servers},
          {"worker_cpu_millicores", in.worker_millicores},
          {"network_namespaces", in.network},
          {"decisions", in.decisions},
          {"final_mode", final_mode},
          {"stragglers", in.stragglers},
          {"injections", injections},
          {"unavailable_injections", unavailable},
          {"timeline", TimelineJson(in.run_events, in.loop_events)},
          {"accuracy_curve", AccuracyCurve(*in.accuracy_curve)},
          {"samples", *in.samples}};
}

std::string ProgressLine(const ProgressInputs& in) {
  std::string mode = "ssgd";
  std::vector<int> amp;
  if (const api::Decision* d = in.current) {
    mode = std::string(api::ToString(d->mode));
    if (d->mode == api::SyncMode::kFixedK) mode += " k=" + std::to_string(d->k);
    for (const auto& ws : d->workers) {
      if (ws.amp) amp.push_back(ws.worker);
    }
  }
  std::string line = "[" + Fixed(in.t, 1) + "s] iteration " + std::to_string(in.iteration) +
                     "  accuracy " + (in.accuracy ? Fixed(*in.accuracy, 3) : std::string("-")) +
                     (in.target_accuracy ? "/" + Fixed(*in.target_accuracy, 3) : std::string()) + "  mode " + mode +
                     "  stragglers " +
                     ListOf(in.stragglers) + "  amp " + ListOf(amp);
  if (!in.target_reached && in.target_accuracy) {
    const std::optional<double> eta =
        EstimateEtaSeconds(*in.accuracy_curve, *in.target_accuracy, in.t);
    line += "  eta " + (eta ? Fixed(*eta, 0) + "s" : std::string("unknown"));
  }
  return line;
}

}  // namespace star::local
