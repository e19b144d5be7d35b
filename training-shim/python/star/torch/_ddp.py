"""star.torch.DistributedDataParallel: PyTorch's DDP with a communication hook that hands
the gradients to STAR's engine (SSGD, fixed-k, groups) instead of an all-reduce.

DDP runs on a process group of its own of size 1, so its own collectives never wait on a
slow peer; every byte between workers goes through the engine. The engine keeps the
model's state (parameters, then float buffers such as BatchNorm statistics) consistent
across mode switches: at a switch it reconciles that state over all workers, and the
optimizers over the model's parameters are re-synchronised the same way (_optimizers.py).
no_sync() accumulates gradients locally as in DDP: the step whose backward runs outside
it exchanges the sum."""

import contextlib
import datetime
import gc

import numpy as np
import torch
import torch.distributed as dist

from star import _star
from star.errors import ConfigError, StateError
from star.torch import _optimizers, _runtime
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
        if rt.model is not None or rt.pipeline is not None:
            raise StateError("star.torch.DistributedDataParallel: this process already wraps a model "
                             "(one per process)")
        if isinstance(module, torch.nn.parallel.DistributedDataParallel):
            raise ConfigError("star.torch.DistributedDataParallel: the module is already wrapped in torch's "
                              "DistributedDataParallel; wrap the plain model in star.torch's only (its gradients "
                              "would be averaged twice, once past STAR)")
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
        self._star_unsynced = False  # a no_sync() block was entered since the last exchange
        self._star_checked = False   # the first step's checks ran
        self.register_comm_hook(rt, _hook)
        rt.model = self

    @contextlib.contextmanager
    def no_sync(self):
        """As DDP's: backward passes inside accumulate gradients locally, and the first
        one outside exchanges the accumulated sum (star.torch.step() then ends the
        iteration; a step under no_sync() is one micro-batch of it)."""
        self._star_unsynced = True
        with super().no_sync():
            yield

    # -- used by step() and shutdown() --------------------------------------------------

    def _star_accumulating(self):
        """Whether the step that just ended ran its backward under no_sync(): a
        micro-batch, not the end of an iteration."""
        unsynced = self._star_unsynced or not self.require_backward_grad_sync
        if self.require_backward_grad_sync:
            self._star_unsynced = False
        return unsynced

    def _star_begin(self, rt):
        """The engine's BeginIteration with the model's state, when the engine needs it;
        clears the optimizers' state after a switch. Returns its stats."""
        if not self._star_checked:
            self._star_first_step_checks()
        needed = rt.engine.state_needed
        if needed:
            self._star_state.gather()
        stats = rt.engine.begin_iteration(self._star_state.flat)
        if needed:
            self._star_state.scatter()
        if stats["switched"]:
            _optimizers.resync(_optimizers.over(self.module), rt.config.world_size)
        return stats

    def _star_first_step_checks(self):
        """ConfigError for what cannot work alongside STAR: torch's own DDP around this
        model, or an optimizer whose state cannot follow a mode switch."""
        self._star_checked = True
        for obj in gc.get_objects():
            if (issubclass(type(obj), torch.nn.parallel.DistributedDataParallel) and not isinstance(obj, type(self))
                    and obj.module in (self, self.module)):
                raise ConfigError("star.torch.DistributedDataParallel: this model is also wrapped in torch's "
                                  "DistributedDataParallel; use star.torch's wrapper alone (torch's would "
                                  "all-reduce every gradient past STAR)")
        for opt in _optimizers.over(self.module):
            _optimizers.check(opt)

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
