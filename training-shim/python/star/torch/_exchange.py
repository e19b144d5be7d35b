"""The DDP communication hook of star.torch.DistributedDataParallel: hands the gradient
buckets of a backward pass to STAR's engine and resolves DDP's futures with the averaged
gradients.

In ssgd and groups each bucket is exchanged as soon as backward produces it, on a
communication thread (one per model), strictly in bucket-index order (the same on every
worker), so the all-reduces overlap the rest of backward; the first bucket carries the
batch total and runs the engine's arrival barrier. In fixed_k (a child sends its whole
gradient to its parent) the last bucket exchanges them all at once, as one gradient.

Timing for STAR's reports: compute (forward and backward) ends when backward hands over
its last bucket; communication is from then until the last bucket's exchange is done (the
part not hidden behind backward), less the wait the engine measured."""

import queue
import threading

import numpy as np
import torch

from star.errors import StateError


def hook(rt, bucket):
    """DDP communication hook: a future for the bucket's averaged gradient."""
    model = rt.model
    future = torch.futures.Future()
    step = rt.step
    if step is None:
        future.set_exception(StateError("star.torch: backward() ran outside `with star.torch.step():`; "
                                        "STAR exchanges gradients only inside a step"))
        return future
    if bucket.index() == 0:
        model._star_parts = rt.engine.parts_supported  # constant until the exchange ends
    if getattr(model, "_star_parts", False):
        _exchanger(model).submit(rt, step, bucket, future)
        return future
    model._star_buckets.append((bucket, future))
    if bucket.is_last():
        buckets, model._star_buckets = model._star_buckets, []
        _exchange_whole(model, step, buckets)
    return future


def _exchange_whole(model, step, buckets):
    """Copies every bucket into the flat gradient, exchanges it (without the GIL) and
    resolves each bucket's future with its part of the averaged gradient."""
    state = model._star_state
    grad = torch.from_numpy(model._star_grad)
    with torch.no_grad():
        for b, _ in buckets:
            for p, g in zip(b.parameters(), b.gradients()):
                grad[state.grad_slice(p)].copy_(g.reshape(-1))
    try:
        step.exchange(model._star_grad)
    except Exception as e:  # noqa: BLE001 - handed to every waiting future
        for _, f in buckets:
            f.set_exception(e)
        return
    with torch.no_grad():
        for b, f in buckets:
            for p, g in zip(b.parameters(), b.gradients()):
                g.copy_(grad[state.grad_slice(p)].view_as(g))
            f.set_result(b.buffer())


def _exchanger(model):
    ex = getattr(model, "_star_exchanger", None)
    if ex is None:
        ex = model._star_exchanger = _BucketExchanger()
    return ex


class _Job:
    """One bucket on its way through the engine: the bucket's buffer, the float32 host
    array the engine exchanges in place (the buffer itself when it is a contiguous
    float32 CPU tensor, else a copy) and DDP's future."""

    def __init__(self, rt, step, bucket, future):
        self.rt, self.step, self.future = rt, step, future
        self.index, self.last = bucket.index(), bucket.is_last()
        self.buffer = bucket.buffer()
        b = self.buffer.detach()
        self.staged = not (b.device.type == "cpu" and b.dtype == torch.float32 and b.is_contiguous())
        self.host = b.to("cpu", torch.float32).contiguous() if self.staged else b
        self.array = self.host.reshape(-1).numpy()

    def resolve(self):
        if self.staged:
            with torch.no_grad():
                self.buffer.copy_(self.host.view_as(self.buffer))
            if self.buffer.is_cuda:
                torch.cuda.current_stream(self.buffer.device).synchronize()
        self.future.set_result(self.buffer)


class _BucketExchanger:
    """The communication thread of one model: exchanges the buckets of each backward pass
    in index order (a bucket that arrives early waits for the ones before it), then
    records the step's stats and timing. After an error, every later bucket of that pass
    fails with it."""

    def __init__(self):
        self._jobs = queue.SimpleQueue()
        self.parts = 0  # buckets exchanged
        self._thread = threading.Thread(target=self._run, name="star-exchange", daemon=True)
        self._thread.start()

    def submit(self, rt, step, bucket, future):
        job = _Job(rt, step, bucket, future)
        job.report = rt.session.report_due
        if job.last:  # backward has produced every bucket: compute ends here
            rt.session.end_compute()
            rt.session.begin_communication()
        self._jobs.put(job)

    def _run(self):
        waiting, next_index, sq, error = {}, 0, 0.0, None
        while True:
            job = self._jobs.get()
            waiting[job.index] = job
            while next_index in waiting:
                job = waiting.pop(next_index)
                next_index += 1
                if error is None:
                    try:
                        sq = self._exchange(job, sq)
                    except Exception as e:  # noqa: BLE001 - handed to the step and the futures
                        error = e
                        job.step.failed(e)  # step() raises the engine's own error
                if error is not None:
                    job.future.set_exception(error)
                if job.last:
                    waiting, next_index, sq, error = {}, 0, 0.0, None

    def _exchange(self, job, sq):
        """Exchanges one bucket and resolves its future; returns the squared norm of this
        worker's gradient so far (for the reports)."""
        step = job.step
        if job.report:
            sq += float(np.dot(job.array, job.array))
        stats = job.rt.engine.exchange_part(job.array, step.batch, job.last)
        self.parts += 1
        if job.last:
            step.exchanged(stats, sq if job.report else None)
            job.rt.session.add_wait(stats["wait_seconds"])
            job.rt.session.end_communication()
        job.resolve()
        return sq
