"""For tests and tools: hand this worker a decision as if its controller had sent it."""

from star import _star
from star.torch import _runtime


def schedule(decision_json):
    """Schedules a decision (its JSON text) on this worker's engine, and lets the sampler
    see its batches. Every worker must be given the same decision."""
    rt = _runtime.require("_testing.schedule()")
    if rt.engine is None:
        raise _runtime.StateError("star.torch._testing.schedule: wrap the model first")
    d = _star.decision_from_json(decision_json)
    rt.engine.schedule(d)
    rt.decisions.append(d)
