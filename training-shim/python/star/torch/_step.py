"""star.torch.step(): one training iteration, timed for STAR's reports, with the job's
decisions in force (autocast when AMP is on for this worker) and the gradient exchange of
the backward pass inside it."""

import numpy as np
import torch

from star.errors import StarError, StateError
from star.torch import _runtime


class Step:
    """`with star.torch.step() as s:` forward and backward; optionally `s.loss =
    loss.item()` for the reports. The optimizer steps after the block."""

    def __init__(self):
        self.loss = None
        self._rt = None
        self._autocast = None
        self._stats = None
        self._local_norm = None
        self._error = None
        self.iteration = 0
        self.batch = 0
        self.amp = False

    def __enter__(self):
        rt = _runtime.require("step()")
        if rt.model is None:
            raise StateError("star.torch.step: wrap the model with star.torch.DistributedDataParallel first")
        if rt.step is not None:
            raise StateError("star.torch.step: already inside a step (steps do not nest)")
        engine = rt.engine
        plan = rt.session.begin_iteration(engine.iteration)
        for d in plan.received:
            engine.schedule(d)
            rt.decisions.append(d)
        begin = rt.model._star_begin(rt)
        rt.session.add_wait(begin["wait_seconds"])
        self.iteration = engine.iteration
        self.batch = rt.drawn_batch or rt.batches_at(self.iteration)[rt.config.worker]
        self.amp = plan.amp
        rt.session.begin_compute()
        if self.amp:
            device = "cuda" if next(rt.model.parameters()).is_cuda else "cpu"
            self._autocast = torch.autocast(device_type=device, dtype=rt.amp_dtype)
            self._autocast.__enter__()
        self._rt = rt
        rt.step = self
        return self

    def exchange(self, grad):
        """The backward pass's gradient (mean over this worker's batch) through the
        engine, in place (called by the communication hook)."""
        rt = self._rt
        try:
            rt.session.end_compute()
            rt.session.begin_communication()
            self._local_norm = float(np.dot(grad, grad)) if rt.session.report_due else None
            self._stats = rt.engine.exchange(grad, self.batch, grad)
            rt.session.add_wait(self._stats["wait_seconds"])
            rt.session.end_communication()
        except StarError as e:
            self._error = e
            raise

    def __exit__(self, exc_type, exc, tb):
        rt = self._rt
        if self._autocast is not None:
            self._autocast.__exit__(None, None, None)
        rt.step = None
        if self._error is not None:
            raise self._error  # the engine's own error, not DDP's wrapping of it
        if exc_type is not None:
            return False
        if self._stats is None:
            raise StateError("star.torch.step: no gradients reached STAR in this step; call "
                             "loss.backward() inside `with star.torch.step():`")
        stats, local = self._stats, self._local_norm
        global_norm = None
        if local is not None and stats["updated"] and stats["update_batch"] > self.batch:
            global_norm = stats["update_grad_sq_norm"]
        else:
            local = None
        rt.session.end_iteration(iteration=rt.engine.iteration, local_batch=int(self.batch), amp=self.amp,
                                 local_grad_sq_norm=local, global_grad_sq_norm=global_norm,
                                 loss=None if self.loss is None else float(self.loss))
        return False


def step():
    """One training iteration: `with star.torch.step(): loss = ...; loss.backward()`."""
    return Step()
