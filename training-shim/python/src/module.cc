#include "bindings.h"

#include <optional>
#include <string>

#include <nlohmann/json.hpp>
#include <pybind11/stl.h>

#include "star/core/api/decision.h"
#include "star/shim/worker_config.h"

namespace py = pybind11;

namespace star::python {

void ThrowIfError(const Status& status) {
  if (status.ok()) return;
  const char* name = "StarError";
  switch (status.code()) {
    case StatusCode::kInvalidArgument: name = "ConfigError"; break;
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
    case StatusCode::kAborted: name = "PeerError"; break;
    case StatusCode::kFailedPrecondition: name = "StateError"; break;
    default: break;
  }
  py::object cls = py::module_::import("star.errors").attr(name);
  PyErr_SetObject(cls.ptr(), py::str(status.ToString()).ptr());
  throw py::error_already_set();
}

namespace {

// The STAR_* environment with `overrides` (name -> value) taking precedence.
shim::EnvLookup WithOverrides(std::map<std::string, std::string> overrides) {
  shim::EnvLookup process = shim::ProcessEnvironment();
  return [overrides = std::move(overrides), process](const std::string& name) -> std::optional<std::string> {
    auto it = overrides.find(name);
    if (it != overrides.end()) return it->second;
    return process(name);
  };
}

}  // namespace

void BindDecision(py::module_& m) {
  py::class_<api::Decision>(m, "Decision", "A decision of the job's controller (read-only).")
      .def_readonly("epoch", &api::Decision::epoch)
      .def_readonly("apply_at_iteration", &api::Decision::apply_at_iteration)
      .def_property_readonly("mode", [](const api::Decision& d) { return std::string(api::ToString(d.mode)); })
      .def_readonly("k", &api::Decision::k)
      .def_readonly("groups", &api::Decision::groups)
      .def_property_readonly("batches", [](const api::Decision& d) {
        std::map<int, int64_t> out;  // worker -> batch; empty = unchanged
        for (const auto& w : d.workers) out[w.worker] = w.batch;
        return out;
      })
      .def_property_readonly("amp", [](const api::Decision& d) {
        std::map<int, bool> out;
        for (const auto& w : d.workers) out[w.worker] = w.amp;
        return out;
      })
      .def("to_json", [](const api::Decision& d) { return api::ToJson(d).dump(); })
      .def("__repr__", [](const api::Decision& d) { return "Decision(" + api::ToJson(d).dump() + ")"; });

  py::class_<shim::WorkerConfig>(m, "WorkerConfig", "How this process takes part in a STAR job.")
      .def_readonly("job", &shim::WorkerConfig::job)
      .def_readonly("rank", &shim::WorkerConfig::rank)
      .def_readonly("world_size", &shim::WorkerConfig::world_size)
      .def_readonly("parameter_servers", &shim::WorkerConfig::parameter_servers)
      .def_readonly("store_url", &shim::WorkerConfig::store_url)
      .def_readonly("host_store", &shim::WorkerConfig::host_store)
      .def_readonly("controller_url", &shim::WorkerConfig::controller_url)
      .def_readonly("report_every", &shim::WorkerConfig::report_every)
      .def_readonly("report_seconds", &shim::WorkerConfig::report_seconds)
      .def_readonly("metrics_address", &shim::WorkerConfig::metrics_address)
      .def_property_readonly("timeout_ms", [](const shim::WorkerConfig& c) { return c.timeout.count(); })
      .def_property_readonly("worker", &shim::WorkerConfig::worker);

  m.def(
      "decision_from_json",
      [](const std::string& text) {
        const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (j.is_discarded()) ThrowIfError(Status::InvalidArgument("decision: not JSON"));
        return ValueOrThrow(api::DecisionFromJson(j, "decision"));
      },
      py::arg("text"), "A Decision from its JSON (as the controller sends it).");

  m.def(
      "config_from_environment",
      [](std::map<std::string, std::string> overrides) {
        return ValueOrThrow(shim::WorkerConfigFromEnvironment(WithOverrides(std::move(overrides))));
      },
      py::arg("overrides") = std::map<std::string, std::string>{},
      "The STAR_* environment (overrides: variable name -> value win) as a WorkerConfig. "
      "ConfigError naming the variable when one is missing or malformed.");
}

}  // namespace star::python

PYBIND11_MODULE(_star, m) {
  m.doc() = "STAR's worker session and gradient engine (see the star.torch package).";
  star::python::BindDecision(m);
  star::python::BindSession(m);
  star::python::BindEngine(m);
  star::python::BindPipeline(m);
}
