// star._star: the shim's worker session and gradient engine for Python (pybind11). The
// Python package star.torch (star/torch/) builds DistributedDataParallel, the sampler and
// step() on top; this module only binds, converts and releases the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include "star/core/status.h"

namespace star::python {

// Raises the Python exception for `status` (star.errors: ConfigError for InvalidArgument,
// PeerError for Unavailable / DeadlineExceeded / Aborted, StateError for
// FailedPrecondition, StarError otherwise), the message naming the cause. OK: returns.
void ThrowIfError(const Status& status);

template <typename T>
T ValueOrThrow(StatusOr<T> v) {
  ThrowIfError(v.status());
  return std::move(*v);
}

// Runs f() with the GIL released (for calls that wait on peers or the network).
template <typename F>
auto WithoutGil(F&& f) {
  pybind11::gil_scoped_release release;
  return f();
}

void BindDecision(pybind11::module_& m);  // Decision (opaque, read-only), WorkerConfig
void BindSession(pybind11::module_& m);   // Session: WorkerSession
void BindEngine(pybind11::module_& m);    // Engine: ConnectWorld + GradientEngine
void BindPipeline(pybind11::module_& m);  // Pipeline: ConnectWorld + PipelineEngine

}  // namespace star::python
