// Pipeline: one stage of a pipeline-parallel job (PipelineEngine) for star.torch's
// Pipeline, whose Python forward and backward run the stage's slice of the model. The
// engine calls them on the thread that runs the iteration, which holds the GIL only
// while they run; its links' threads never touch Python.
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "star/shim/pipeline_engine.h"
#include "star/shim/world.h"

namespace py = pybind11;

namespace star::python {
namespace {

// A 1-D C-contiguous float32 buffer's memory (the buffer protocol, so that no numpy C API
// of one numpy version meets another's arrays); InvalidArgument naming `what` otherwise.
StatusOr<std::span<float>> FloatBuffer(const py::buffer& b, const std::string& what, bool writable) {
  const py::buffer_info info = b.request(writable);
  if (info.format != py::format_descriptor<float>::format() || info.itemsize != sizeof(float) || info.ndim != 1 ||
      (info.size > 1 && info.strides[0] != static_cast<py::ssize_t>(sizeof(float)))) {
    return Status::InvalidArgument(what + ": must be a 1-D contiguous float32 buffer (format " + info.format + ")");
  }
  return std::span<float>(static_cast<float*>(info.ptr), static_cast<size_t>(info.size));
}

// Calls `f(micro, a read-only view of in)` (valid during the call; None when empty); its
// result (a 1-D float32 buffer, or None) into `out`.
// An exception it raises is kept in `raised` (to be raised again once the iteration
// stops) and fails the iteration.
Status CallStage(const py::function& f, const char* what, int micro, std::span<const float> in,
                 std::vector<float>& out, std::optional<py::error_already_set>& raised) {
  py::gil_scoped_acquire gil;
  try {
    py::object arg = py::none();  // nothing comes in: stage 0's forward, the last stage's backward
    if (!in.empty()) {
      arg = py::memoryview::from_buffer(in.data(), {static_cast<py::ssize_t>(in.size())},
                                        {static_cast<py::ssize_t>(sizeof(float))});
    }
    py::object r = f(micro, arg);
    out.clear();
    if (r.is_none()) return Status::Ok();
    if (!py::isinstance<py::buffer>(r)) return Status::InvalidArgument(std::string(what) + ": must return a buffer or None");
    STAR_ASSIGN_OR_RETURN(std::span<float> values, FloatBuffer(r.cast<py::buffer>(), what, false));
    out.assign(values.begin(), values.end());
    return Status::Ok();
  } catch (py::error_already_set& e) {
    raised.emplace(std::move(e));
    return Status::Internal(std::string(what) + " of micro-batch " + std::to_string(micro) + " raised");
  }
}

class Pipeline {
 public:
  Pipeline(const shim::WorkerConfig& config, int stages, int micro_batches, size_t input_floats,
           size_t output_floats, py::function forward, py::function backward)
      : forward_(std::move(forward)), backward_(std::move(backward)) {
    if (config.parameter_servers > 0) {
      ThrowIfError(Status::InvalidArgument("STAR_PARAMETER_SERVERS: a pipeline job has no parameter servers"));
    }
    if (stages < 1 || config.world_size % stages != 0) {
      ThrowIfError(Status::InvalidArgument("stages: must divide the world size (" +
                                           std::to_string(config.world_size) + "), got " + std::to_string(stages)));
    }
    stages_ = stages;
    shim::PipelineShape shape{stages, config.worker() % stages, micro_batches, input_floats, output_floats};
    shim::StageFunctions fns;
    fns.forward = [this](int j, std::span<const float> in, std::vector<float>& out) {
      return CallStage(forward_, "forward", j, in, out, raised_);
    };
    fns.backward = [this](int j, std::span<const float> in, std::vector<float>& out) {
      return CallStage(backward_, "backward", j, in, out, raised_);
    };
    ThrowIfError(WithoutGil([&] { return Connect(config, shape, std::move(fns)); }));
  }

  void RunIteration(int warmup) {
    const Status s = WithoutGil([&] { return engine_->RunIteration(warmup); });
    if (raised_) {  // the script's own exception, as it raised it
      py::error_already_set e = std::move(*raised_);
      raised_.reset();
      throw e;
    }
    ThrowIfError(s);
  }

  // The mean of `grad` (a writable 1-D float32 buffer) over the replicas of this stage,
  // in place (nothing with one).
  void AllReduceMean(const py::buffer& grad) {
    const std::span<float> g = ValueOrThrow(FloatBuffer(grad, "grad", true));
    if (!replicas_) return;
    ThrowIfError(WithoutGil([&] { return replicas_->AllReduceSum(g.data(), g.size()); }));
    const float d = static_cast<float>(replicas_->size());
    for (float& v : g) v /= d;
  }

  api::PipelineReading TakeReading() {
    const shim::PipelineComputeTimes c = engine_->TakeComputeTimes();
    return shim::ReadingOf(engine_->shape().stage, c, engine_->TakeLinks());
  }

  int stage() const { return engine_->shape().stage; }

 private:
  Status Connect(const shim::WorkerConfig& config, const shim::PipelineShape& shape, shim::StageFunctions fns) {
    STAR_ASSIGN_OR_RETURN(shim::World world, shim::ConnectWorld(config));
    store_server_ = std::move(world.store_server);
    world_ = std::move(world.collective);
    STAR_ASSIGN_OR_RETURN(engine_, shim::PipelineEngine::Connect(*world_, shape, std::move(fns)));
    const int replicas = config.world_size / stages_;
    if (replicas == 1) return Status::Ok();
    std::vector<int> members;
    for (int r = 0; r < replicas; ++r) members.push_back(r * stages_ + shape.stage);
    STAR_ASSIGN_OR_RETURN(replicas_, world_->Split(members, "pipeline-stage-" + std::to_string(shape.stage)));
    return Status::Ok();
  }

  py::function forward_, backward_;
  std::optional<py::error_already_set> raised_;
  int stages_ = 1;
  std::unique_ptr<shim::StoreServer> store_server_;  // this rank hosts the store; outlives the rest
  std::unique_ptr<shim::Collective> world_;
  std::unique_ptr<shim::PipelineEngine> engine_;
  std::unique_ptr<shim::Collective> replicas_;  // this stage over the replicas; null with one
};

}  // namespace

void BindPipeline(py::module_& m) {
  py::class_<api::PipelineReading>(m, "PipelineReading", "One stage's costs for its report (read-only).")
      .def_readonly("stage", &api::PipelineReading::stage)
      .def_readonly("forward_seconds", &api::PipelineReading::forward_seconds)
      .def_readonly("backward_seconds", &api::PipelineReading::backward_seconds)
      .def_property_readonly("peers", [](const api::PipelineReading& r) {
        std::vector<int> peers;
        for (const api::PipelineLinkReading& l : r.links) peers.push_back(l.peer);
        return peers;
      });

  py::class_<Pipeline>(m, "Pipeline",
                       "One stage of a pipeline-parallel job (PipelineEngine) over Gloo: rank % stages "
                       "is the stage. forward(micro, input) and backward(micro, grad_output) get "
                       "float32 arrays and return one (or None on the last / first stage).")
      .def(py::init<const shim::WorkerConfig&, int, int, size_t, size_t, py::function, py::function>(),
           py::arg("config"), py::arg("stages"), py::arg("micro_batches"), py::arg("input_floats"),
           py::arg("output_floats"), py::arg("forward"), py::arg("backward"))
      .def("run_iteration", &Pipeline::RunIteration, py::arg("warmup"))
      .def("all_reduce_mean", &Pipeline::AllReduceMean, py::arg("grad"))
      .def("take_reading", &Pipeline::TakeReading)
      .def_property_readonly("stage", &Pipeline::stage);
}

}  // namespace star::python
