"""The optimizers over a wrapped model's parameters, and their state across mode switches.

At a switch the engine reconciles the model's state over all workers (averaged when
leaving groups, else rank 0's). The optimizers' state (momentum buffers, Adam's moments
and step) follows the same way: every worker's floating-point state is averaged over
torch.distributed's default group and counters take their maximum, so the workers that
merge go on from one state. Inside SSGD every worker's state is the same already, so a
switch out of it keeps the moments as they are. Without a default group the state is
cleared instead, with a warning."""

import gc
import warnings

import torch
import torch.distributed as dist

from star.errors import ConfigError, StateError

# Optimizers whose state is not per-parameter tensors and numbers (history lists).
REFUSED = ("LBFGS",)


def over(module):
    """The torch.optim.Optimizer objects alive now that optimize any of `module`'s
    parameters, in a deterministic order (by the first parameter's position)."""
    position = {id(p): i for i, p in enumerate(module.parameters())}
    found = []
    for obj in gc.get_objects():
        if issubclass(type(obj), torch.optim.Optimizer):  # type(): no attribute lookups on every object
            first = min((position[id(p)] for g in obj.param_groups for p in g["params"] if id(p) in position),
                        default=None)
            if first is not None:
                found.append((first, obj))
    return [o for _, o in sorted(found, key=lambda f: f[0])]


def check(optimizer):
    """ConfigError naming an optimizer whose state STAR cannot re-synchronise."""
    name = type(optimizer).__name__
    if name in REFUSED:
        raise ConfigError(f"optimizer {name}: its state (curvature history) cannot be re-synchronised across "
                          "STAR's mode switches; use an optimizer with per-parameter state (SGD, Adam, AdamW, "
                          "RMSprop, Adagrad, ...) or spec.synchronization.policy ssgd")
    for state in optimizer.state.values():
        for key, value in state.items():
            if not isinstance(value, (torch.Tensor, int, float)):
                raise ConfigError(f"optimizer {name}: state {key!r} is a {type(value).__name__}, which STAR "
                                  "cannot re-synchronise across mode switches; keep per-parameter state in "
                                  "tensors and numbers, or use spec.synchronization.policy ssgd")


def resync(optimizers, world_size):
    """After a switch, on every worker at once: averages each optimizer's floating-point
    state over the default group and takes the maximum of its counters. Returns False
    (having cleared the state) when there is no default group."""
    if not (dist.is_available() and dist.is_initialized()):
        for opt in optimizers:
            opt.state.clear()
        if optimizers:
            warnings.warn("star.torch: optimizer state cleared at a mode switch: torch.distributed has no default "
                          "group to re-synchronise it over (set MASTER_ADDR and MASTER_PORT)", RuntimeWarning)
        return False
    for opt in optimizers:
        check(opt)
        floats, counters = _state_tensors(opt)
        _reduce(floats, dist.ReduceOp.SUM, world_size, "moments")
        _reduce(counters, dist.ReduceOp.MAX, 1, "counters")
    return True


def _state_tensors(opt):
    """The optimizer's state as (floating-point tensors, counters), in parameter order.
    Plain numbers in the state become tensors here and go back as numbers afterwards
    (_NumberSlot)."""
    floats, counters = [], []
    for group in opt.param_groups:
        for p in group["params"]:
            state = opt.state.get(p, {})
            for key in sorted(state):
                value = state[key]
                if not isinstance(value, torch.Tensor):
                    value = _NumberSlot(state, key, p.device)
                is_counter = key == "step" or not value.is_floating_point()
                (counters if is_counter else floats).append(value)
    return floats, counters


class _NumberSlot:
    """A number in an optimizer's state, reduced as a one-element tensor and written back
    as a number of its type."""

    def __init__(self, state, key, device):
        self.state, self.key, self.kind = state, key, type(state[key])
        self.tensor = torch.tensor(float(state[key]), dtype=torch.float64, device=device)
        self.device = self.tensor.device

    def is_floating_point(self):
        return self.kind is float

    def numel(self):
        return 1

    def detach(self):
        return self.tensor

    def copy_(self, value):
        self.state[self.key] = self.kind(value.item())


def _reduce(tensors, op, divide, what):
    """All-reduces the tensors as one flat buffer (first checking every worker has the same
    number of elements), then writes the result back (divided by `divide`)."""
    device = tensors[0].device if tensors else torch.device("cpu")
    if dist.get_backend() == "nccl" and device.type != "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    sizes = torch.tensor([sum(t.numel() for t in tensors)] * 2, dtype=torch.float64, device=device)
    sizes[1] = -sizes[1]
    dist.all_reduce(sizes, op=dist.ReduceOp.MAX)
    if sizes[0] != -sizes[1]:
        raise StateError(f"star.torch: the workers' optimizer {what} differ in size ({int(-sizes[1])} to "
                         f"{int(sizes[0])} elements): every worker must build the same optimizer over the same "
                         "parameters")
    if not tensors:
        return
    flat = torch.cat([t.detach().reshape(-1).to(device, torch.float64) for t in tensors])
    dist.all_reduce(flat, op=op)
    if divide != 1:
        flat /= divide
    at = 0
    with torch.no_grad():
        for t in tensors:
            part = flat[at:at + t.numel()]
            t.copy_(part if isinstance(t, _NumberSlot) else part.view_as(t).to(t.dtype))
            at += t.numel()
