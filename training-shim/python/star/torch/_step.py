"""star.torch.step(): one training iteration (or one micro-batch of it), timed for STAR's
reports, with the job's decisions in force (autocast when AMP is on for this worker) and
the gradient exchange of the backward pass inside it.

An iteration ends with the step whose backward pass exchanges gradients. A step whose
backward ran under the model's no_sync() (gradient accumulation) is a micro-batch: the
iteration stays open, and the next step adds its micro-batch to it; the samples of all
of them are the iteration's batch."""

import warnings
from dataclasses import dataclass

import numpy as np
import torch

from star.errors import StarError, StateError
from star.torch import _runtime


@dataclass
class Open:
    """The iteration steps accumulate into: its number, this worker's batch in force, the
    samples drawn for it (None: not drawn by AdaptiveBatchSampler), the sampler's lookahead,
    AMP, and the micro-batch steps so far."""
    iteration: int
    batch: int
    drawn: int = None
    lookahead: int = 0
    amp: bool = False
    micro_steps: int = 0


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
        if rt.open is None:
            rt.open = _begin(rt)
        opened = rt.open
        self.iteration, self.amp = opened.iteration, opened.amp
        self.batch = opened.drawn if opened.drawn is not None else opened.batch
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
            local_norm = float(np.dot(grad, grad)) if rt.session.report_due else None
            self.exchanged(rt.engine.exchange(grad, self.batch, grad), local_norm)
            rt.session.add_wait(self._stats["wait_seconds"])
            rt.session.end_communication()
        except StarError as e:
            self.failed(e)
            raise

    def exchanged(self, stats, local_grad_sq_norm):
        """The engine's stats of this step's exchange, and this worker's squared gradient
        norm when a report is due (None otherwise); the hook's exchanger calls it when the
        last bucket is done."""
        self._stats, self._local_norm = stats, local_grad_sq_norm

    def failed(self, error):
        """The exchange failed: step() raises `error` (the engine's own) at its end."""
        self._error = error

    def __exit__(self, exc_type, exc, tb):
        rt = self._rt
        if self._autocast is not None:
            self._autocast.__exit__(None, None, None)
        rt.step = None
        if self._error is not None:
            rt.open = None
            raise self._error  # the engine's own error, not DDP's wrapping of it
        if exc_type is not None:
            return False
        if self._stats is None:
            if rt.model._star_accumulating():
                rt.session.end_compute()  # a micro-batch: the iteration goes on
                rt.open.micro_steps += 1
                return False
            raise StateError("star.torch.step: no gradients reached STAR in this step; call "
                             "loss.backward() inside `with star.torch.step():` (under the model's no_sync() "
                             "when accumulating gradients)")
        self._end(rt)
        return False

    def _end(self, rt):
        opened, rt.open = rt.open, None
        stats, local = self._stats, self._local_norm
        global_norm = None
        if local is not None and stats["updated"] and stats["update_batch"] > self.batch:
            global_norm = stats["update_grad_sq_norm"]
        else:
            local = None
        rt.session.end_iteration(iteration=rt.engine.iteration, local_batch=int(self.batch), amp=self.amp,
                                 local_grad_sq_norm=local, global_grad_sq_norm=global_norm,
                                 loss=None if self.loss is None else float(self.loss),
                                 lookahead=opened.lookahead or None)


def _begin(rt):
    """Opens the next iteration: the decisions received, the engine's BeginIteration, and
    this worker's batch (the one the sampler drew for it, checked against the decisions)."""
    engine = rt.engine
    plan = rt.session.begin_iteration(engine.iteration)
    for d in plan.received:
        engine.schedule(d)
        rt.decisions.append(d)
    begin = rt.model._star_begin(rt)
    rt.session.add_wait(begin["wait_seconds"])
    it = engine.iteration
    batch = rt.batches_at(it)[rt.config.worker]
    drawn, ahead = rt.take_drawn(it)
    if drawn is not None and drawn != batch:
        warnings.warn(f"star.torch: iteration {it}: the data loader drew {drawn} samples before a decision "
                      f"set this worker's batch to {batch} (it draws {ahead} batches ahead); training "
                      "goes on with the samples drawn", RuntimeWarning, stacklevel=3)
    return Open(iteration=it, batch=batch, drawn=drawn, lookahead=ahead, amp=plan.amp)


def step():
    """One training iteration: `with star.torch.step(): loss = ...; loss.backward()`."""
    return Step()
