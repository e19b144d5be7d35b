"""star.torch.DistributedDataParallel: PyTorch's DDP with a communication hook that hands
the gradients to STAR's engine (SSGD, fixed-k, groups) instead of an all-reduce.

DDP runs on a process group of its own of size 1, so its own collectives never wait on a
slow peer; every byte between workers goes through the engine. The engine keeps the
model's state (parameters, then float buffers such as BatchNorm statistics) consistent
across mode switches: at a switch it reconciles that state over all workers and the
optimizers over the model's parameters start afresh (their state is cleared), as STAR's
C++ engine resets its momentum."""

import datetime
import gc

import numpy as np
import torch
import torch.distributed as dist

from star import _star
from star.errors import ConfigError, StateError
from star.torch import _runtime
from star.torch._exchange import hook as _hook
from star.torch._state import ModelState


class DistributedDataParallel(torch.nn.parallel.DistributedDataParallel):
    """DDP over STAR: `model = star.torch.DistributedDataParallel(model, **ddp_kwargs)`
    after star.torch.init(), on every worker. Collective: every worker's constructor
    meets the others' (rank 0's state is copied to every worker, as DDP does). Takes
    DDP's keyword arguments except process_group. CPU tensors go to the engine without a
    copy; CUDA tensors are staged through host memory."""

    def __init__(self, module, **ddp_kwargs):
        rt = _runtime.require("DistributedDataParallel")
        if rt.model is not None:
            raise StateError("star.torch.DistributedDataParallel: this process already wraps a model "
                             "(one per process)")
        if "process_group" in ddp_kwargs:
            raise ConfigError("star.torch.DistributedDataParallel: process_group: STAR brings its own")
        group = _solo_group(datetime.timedelta(milliseconds=rt.config.timeout_ms))
        super().__init__(module, process_group=group, **ddp_kwargs)
        self._star_state = ModelState(module)
        if self._star_state.grad_size == 0:
            raise ConfigError("star.torch.DistributedDataParallel: the model has no trainable parameters")
        self._star_state.gather()
        rt.engine = _star.Engine(rt.config, self._star_state.flat, self._star_state.grad_size)
        self._star_state.scatter()  # rank 0's
        self._star_grad = np.zeros(self._star_state.grad_size, dtype=np.float32)
        self._star_buckets = []     # (bucket, future) of this backward pass
        self.register_comm_hook(rt, _hook)
        rt.model = self

    # -- used by step() and shutdown() --------------------------------------------------

    def _star_begin(self, rt):
        """The engine's BeginIteration with the model's state, when the engine needs it;
        clears the optimizers' state after a switch. Returns its stats."""
        needed = rt.engine.state_needed
        if needed:
            self._star_state.gather()
        stats = rt.engine.begin_iteration(self._star_state.flat)
        if needed:
            self._star_state.scatter()
        if stats["switched"]:
            self._star_reset_optimizers()
        return stats

    def _star_reset_optimizers(self):
        """Clears the state (momentum, moments) of every optimizer over these parameters:
        after a switch the workers' states would differ."""
        params = {id(p) for p in self.module.parameters()}
        for obj in gc.get_objects():
            if isinstance(obj, torch.optim.Optimizer) and any(
                    id(p) in params for g in obj.param_groups for p in g["params"]):
                obj.state.clear()

    def _star_finish(self, rt):
        self._star_state.gather()
        rt.engine.finish(self._star_state.flat)

    def _star_detach(self):
        self._star_buckets = []


def _solo_group(timeout):
    """A Gloo process group of this process alone, for DDP's own collectives (which then
    never wait on a peer), registered nowhere (the script's own groups are untouched)."""
    store = dist.HashStore()
    gloo = dist.ProcessGroupGloo(store, 0, 1, timeout)
    if isinstance(gloo, dist.ProcessGroup):  # PyTorch 1.x: the backend is the group
        return gloo
    # PyTorch 2.x: a ProcessGroup that dispatches CPU and CUDA tensors to the backend, as
    # torch.distributed builds its own groups.
    kind = dist.ProcessGroup.BackendType.GLOO
    try:
        group = dist.ProcessGroup(store, 0, 1)
    except TypeError:  # 2.0-2.1 take the options too
        group = dist.ProcessGroup(store, 0, 1, dist.ProcessGroup.Options(backend="gloo"))
    if hasattr(group, "_set_default_backend"):
        group._set_default_backend(kind)
    if hasattr(gloo, "_set_sequence_number_for_group"):
        gloo._set_sequence_number_for_group()
    for device in ("cpu", "cuda"):
        group._register_backend(torch.device(device), kind, gloo)
    return group
