// Engine: the job's communicator (ConnectWorld) and a GradientEngine over it, on numpy
// float32 buffers that share memory with the model's tensors where they can.
#include <memory>
#include <span>
#include <string>

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "star/shim/gradient_engine.h"
#include "star/shim/world.h"

namespace py = pybind11;

namespace star::python {
namespace {

using FloatArray = py::array_t<float, py::array::c_style>;

// A writable 1-D float32 C-contiguous array's memory (ConfigError naming `name` otherwise).
std::span<float> Span(py::array& a, const char* name) {
  if (!py::isinstance<FloatArray>(a) || a.ndim() != 1 || !(a.flags() & py::array::c_style)) {
    ThrowIfError(Status::InvalidArgument(std::string(name) + ": must be a 1-D C-contiguous float32 array"));
  }
  if (!a.writeable()) ThrowIfError(Status::InvalidArgument(std::string(name) + ": must be writable"));
  return {static_cast<float*>(a.mutable_data()), static_cast<size_t>(a.size())};
}

class Engine {
 public:
  Engine(const shim::WorkerConfig& config, py::array state, size_t grad_size, bool measure_wait) {
    if (config.parameter_servers > 0) {
      ThrowIfError(Status::InvalidArgument(
          "STAR_PARAMETER_SERVERS: " + std::to_string(config.parameter_servers) +
          ": parameter-server jobs are not supported from Python (their servers own the "
          "parameters and apply the update, which would bypass the script's optimizer); "
          "use architecture AllReduce"));
    }
    std::span<float> s = Span(state, "state");
    shim::EngineOptions options;
    options.timeout = config.timeout;
    options.measure_wait = measure_wait;
    StatusOr<shim::World> world = WithoutGil([&] { return shim::ConnectWorld(config); });
    ThrowIfError(world.status());
    store_server_ = std::move(world->store_server);
    engine_ = ValueOrThrow(WithoutGil([&] {
      return shim::GradientEngine::Create(std::move(world->collective), s, grad_size, options);
    }));
  }

  py::dict BeginIteration(py::array state) {
    std::span<float> s = Span(state, "state");
    const shim::BeginStats b = ValueOrThrow(WithoutGil([&] { return engine_->BeginIteration(s); }));
    py::dict d;
    d["iteration"] = b.iteration;
    d["switched"] = b.switched;
    d["wait_seconds"] = b.wait_seconds;
    d["communication_seconds"] = b.communication_seconds;
    d["switch_seconds"] = b.switch_seconds;
    return d;
  }

  py::dict Exchange(py::array grad, int64_t batch, py::array out) {
    std::span<float> g = Span(grad, "grad"), o = Span(out, "out");
    return StatsDict(ValueOrThrow(WithoutGil([&] { return engine_->Exchange(g, batch, o); })));
  }

  static py::dict StatsDict(const shim::StepStats& st) {
    py::dict d;
    d["iteration"] = st.iteration;
    d["updated"] = st.updated;
    d["update_batch"] = st.update_batch;
    d["contributions"] = st.contributions;
    d["update_grad_sq_norm"] = st.update_grad_sq_norm;
    d["communication_seconds"] = st.communication_seconds;
    d["wait_seconds"] = st.wait_seconds;
    d["switch_seconds"] = st.switch_seconds;
    return d;
  }

  // One part of the gradient (a DDP bucket), in place: GradientEngine::ExchangePart.
  py::dict ExchangePart(py::array part, int64_t batch, bool last) {
    std::span<float> p = Span(part, "part");
    return StatsDict(ValueOrThrow(WithoutGil([&] { return engine_->ExchangePart(p, batch, last); })));
  }

  void Finish(py::array state) {
    std::span<float> s = Span(state, "state");
    ThrowIfError(WithoutGil([&] { return engine_->Finish(s); }));
  }

  shim::GradientEngine& engine() { return *engine_; }

 private:
  std::unique_ptr<shim::StoreServer> store_server_;  // this rank hosts the store; outlives engine_
  std::unique_ptr<shim::GradientEngine> engine_;
};

}  // namespace

void BindEngine(py::module_& m) {
  py::class_<Engine>(m, "Engine",
                     "The job's gradient exchange (GradientEngine) over Gloo. Every worker "
                     "creates one at once; state is the model's parameters then float "
                     "buffers, grad_size the trainable part.")
      .def(py::init<const shim::WorkerConfig&, py::array, size_t, bool>(), py::arg("config"),
           py::arg("state"), py::arg("grad_size"), py::arg("measure_wait") = true)
      .def("begin_iteration", &Engine::BeginIteration, py::arg("state"))
      .def("exchange", &Engine::Exchange, py::arg("grad"), py::arg("batch"), py::arg("out"))
      .def("exchange_part", &Engine::ExchangePart, py::arg("part"), py::arg("batch"), py::arg("last"),
           "One part of the gradient (in place), in the same order and sizes on every worker; "
           "the last one ends the iteration. Only where parts_supported (ssgd, groups).")
      .def("schedule", [](Engine& e, const api::Decision& d) { ThrowIfError(e.engine().Schedule(d)); })
      .def("finish", &Engine::Finish, py::arg("state"))
      .def_property_readonly("iteration", [](Engine& e) { return e.engine().iteration(); })
      .def_property_readonly("mode", [](Engine& e) { return std::string(api::ToString(e.engine().mode())); })
      .def_property_readonly("rank", [](Engine& e) { return e.engine().rank(); })
      .def_property_readonly("size", [](Engine& e) { return e.engine().size(); })
      .def_property_readonly("parts_supported", [](Engine& e) { return e.engine().parts_supported(); })
      .def_property_readonly("is_child", [](Engine& e) { return e.engine().is_child(); })
      .def_property_readonly("state_needed", [](Engine& e) { return e.engine().state_needed(); })
      .def_property_readonly("state_size", [](Engine& e) { return e.engine().state_size(); })
      .def_property_readonly("grad_size", [](Engine& e) { return e.engine().grad_size(); });
}

}  // namespace star::python
