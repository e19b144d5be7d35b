// Session: one worker's WorkerSession (timing, reports, decisions in force, metrics).
#include <chrono>
#include <memory>
#include <optional>

#include <pybind11/stl.h>

#include "bindings.h"
#include "star/shim/worker_session.h"

namespace py = pybind11;

namespace star::python {
namespace {

std::unique_ptr<shim::WorkerSession> MakeSession(const shim::WorkerConfig& config, int64_t local_batch,
                                                 bool amp, int64_t report_timeout_ms) {
  shim::WorkerSessionOptions o;
  o.config = config;
  o.local_batch = local_batch;
  o.amp = amp;
  o.report_timeout = std::chrono::milliseconds(report_timeout_ms);
  return ValueOrThrow(WithoutGil([&] { return shim::WorkerSession::Create(std::move(o)); }));
}

py::dict SampleDict(const shim::IterationSample& s) {
  py::dict d;
  d["compute_seconds"] = s.compute_seconds;
  d["communication_seconds"] = s.communication_seconds;
  d["wait_seconds"] = s.wait_seconds;
  return d;
}

}  // namespace

void BindSession(py::module_& m) {
  py::class_<shim::IterationPlan>(m, "Plan", "What is in force for one iteration.")
      .def_readonly("iteration", &shim::IterationPlan::iteration)
      .def_readonly("decision_epoch", &shim::IterationPlan::decision_epoch)
      .def_property_readonly("mode", [](const shim::IterationPlan& p) { return std::string(api::ToString(p.mode)); })
      .def_readonly("k", &shim::IterationPlan::k)
      .def_readonly("groups", &shim::IterationPlan::groups)
      .def_readonly("amp", &shim::IterationPlan::amp)
      .def_readonly("local_batch", &shim::IterationPlan::local_batch)
      .def_readonly("received", &shim::IterationPlan::received)
      .def_readonly("warmup", &shim::IterationPlan::warmup);

  using S = shim::WorkerSession;
  py::class_<S>(m, "Session", "A worker's half of the report protocol (WorkerSession).")
      .def(py::init(&MakeSession), py::arg("config"), py::arg("local_batch"), py::arg("amp") = false,
           py::arg("report_timeout_ms") = 5000)
      .def("begin_iteration", [](S& s, int64_t it) {
             // May wait for a report's answer: without the GIL.
             return ValueOrThrow(WithoutGil([&] { return s.BeginIteration(it); }));
           })
      .def("begin_compute", [](S& s) { ThrowIfError(s.BeginCompute()); })
      .def("end_compute", [](S& s) { ThrowIfError(s.EndCompute()); })
      .def("begin_communication", [](S& s) { ThrowIfError(s.BeginCommunication()); })
      .def("end_communication", [](S& s) { ThrowIfError(s.EndCommunication()); })
      .def("add_wait", [](S& s, double seconds) { ThrowIfError(s.AddWait(seconds)); })
      .def_property_readonly("report_due", &S::report_due)
      .def(
          "end_iteration",
          [](S& s, int64_t iteration, int local_batch, bool amp, std::optional<double> local_norm,
             std::optional<double> global_norm, std::optional<double> loss, std::optional<int> lookahead,
             std::optional<api::PipelineReading> pipeline) {
            shim::IterationInfo info;
            info.iteration = iteration;
            info.local_batch = local_batch;
            info.amp = amp;
            info.local_grad_sq_norm = local_norm;
            info.global_grad_sq_norm = global_norm;
            info.loss = loss;
            info.lookahead = lookahead;
            info.pipeline = std::move(pipeline);
            // May wait for the report's answer.
            return SampleDict(ValueOrThrow(WithoutGil([&] { return s.EndIteration(info); })));
          },
          py::arg("iteration"), py::arg("local_batch"), py::arg("amp"),
          py::arg("local_grad_sq_norm") = std::nullopt, py::arg("global_grad_sq_norm") = std::nullopt,
          py::arg("loss") = std::nullopt, py::arg("lookahead") = std::nullopt, py::arg("pipeline") = std::nullopt)
      .def("report_accuracy", [](S& s, double v) { ThrowIfError(s.ReportAccuracy(v)); })
      .def("flush", [](S& s, int64_t timeout_ms) {
             ThrowIfError(WithoutGil([&] { return s.Flush(std::chrono::milliseconds(timeout_ms)); }));
           })
      .def_property_readonly("metrics_port", &S::metrics_port)
      .def_property_readonly("report_stats", [](const S& s) {
        const shim::ReportStats r = s.report_stats();
        py::dict d;
        d["queued"] = r.queued;
        d["answered"] = r.answered;
        d["failed"] = r.failed;
        d["dropped"] = r.dropped;
        d["decisions"] = r.decisions;
        d["last_error"] = r.last_error;
        return d;
      });
}

}  // namespace star::python
