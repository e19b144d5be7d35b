"""star.torch.Pipeline: one stage of a pipeline-parallel job, cut from the script's whole
torch.nn.Sequential. The job's ranks are replica * stages + stage; this process keeps
its stage's slice of the layers and runs STAR's pipeline engine (a 1F1B schedule, each
link's transfers on its own thread) with the warm-up depths the job's decisions give.
A stage's replicas average its gradients after every iteration."""

import os
import weakref

import torch

from star import _star
from star.errors import ConfigError, StateError
from star.torch import _runtime


def _positive(name, value, env):
    """An int >= 1 from the argument, else the environment variable `env`, else 1."""
    if value is None:
        text = os.environ.get(env)
        if text is None:
            return 1
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{env}: must be an integer, got {text!r}") from None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name}: must be an integer >= 1, got {value!r}")
    return value


def split_layers(module, stages, balance=None):
    """The slices of `module` (a torch.nn.Sequential) for each stage: `balance` layers per
    stage, or as even as the layers allow. ConfigError when they do not divide it."""
    if not isinstance(module, torch.nn.Sequential):
        raise ConfigError(f"module: must be a torch.nn.Sequential, got {type(module).__name__}")
    layers = list(module.children())
    if balance is None:
        if len(layers) < stages:
            raise ConfigError(f"module: {len(layers)} layers cannot make {stages} stages (one layer at least each)")
        base, extra = divmod(len(layers), stages)
        balance = [base + (1 if s < extra else 0) for s in range(stages)]
    balance = list(balance)
    if len(balance) != stages or any(not isinstance(b, int) or b < 1 for b in balance):
        raise ConfigError(f"balance: must be {stages} layer counts, each >= 1, got {balance!r}")
    if sum(balance) != len(layers):
        raise ConfigError(f"balance: must add up to the module's {len(layers)} layers, got {sum(balance)}")
    slices, at = [], 0
    for b in balance:
        slices.append(torch.nn.Sequential(*layers[at:at + b]))
        at += b
    return slices


class Pipeline:
    """This process's stage of `module`:

        pipe = st.Pipeline(model, example_input=x[:micro], loss_fn=F.cross_entropy)
        optimizer = torch.optim.SGD(pipe.parameters(), lr=0.05)
        for x, y in loader:                  # every stage iterates; the first needs x,
            loss = pipe.step(x, y)           # the last y (the others may pass None)
            optimizer.step(); optimizer.zero_grad()

    stages and micro_batches default to STAR_PIPELINE_STAGES and STAR_MICRO_BATCHES (the
    operator and `star local` set them from spec.parallelism); example_input is one
    micro-batch's input, whose forward through the whole model gives the activations'
    shapes; step() returns the batch's mean loss on the last stage, None elsewhere."""

    def __init__(self, module, *, example_input, loss_fn, stages=None, micro_batches=None, balance=None):
        rt = _runtime.require("Pipeline()")
        if rt.model is not None or rt.pipeline is not None:
            raise StateError("star.torch.Pipeline: this process already runs a model")
        self.stages = _positive("stages", stages, "STAR_PIPELINE_STAGES")
        self.micro_batches = _positive("micro_batches", micro_batches, "STAR_MICRO_BATCHES")
        if self.micro_batches < self.stages:
            raise ConfigError(f"micro_batches: must be >= stages ({self.stages}), got {self.micro_batches}")
        if rt.config.world_size % self.stages:
            raise ConfigError(f"stages: must divide the job's {rt.config.world_size} workers, got {self.stages}")
        self.stage = rt.config.worker % self.stages
        self._replicas = rt.config.world_size // self.stages
        slices = split_layers(module, self.stages, balance)
        self.module = slices[self.stage]
        self.loss_fn = loss_fn
        self._shapes = self._boundary_shapes(slices, example_input)
        self._micro = example_input.shape[0]
        numel = [torch.Size(s).numel() for s in self._shapes]
        # The engine calls back through a weak reference: it must not keep this object
        # (and so itself) alive, or its threads would outlive the job.
        me = weakref.ref(self)
        self._engine = _star.Pipeline(rt.config, self.stages, self.micro_batches,
                                      numel[self.stage] if self.stage > 0 else 0,
                                      numel[self.stage + 1] if self.stage < self.stages - 1 else 0,
                                      lambda micro, flat: me()._forward(micro, flat),
                                      lambda micro, flat: me()._backward(micro, flat))
        self.iteration = 0
        self.warmup = None  # the warm-up depth the last step ran
        self._held, self._inputs, self._targets, self._loss = {}, None, None, 0.0
        rt.pipeline = self

    @staticmethod
    def _boundary_shapes(slices, example_input):
        """The shape of each stage's input (and the model's output last) for one micro-batch."""
        shapes = [tuple(example_input.shape)]
        with torch.no_grad():
            h = example_input
            for part in slices:
                h = part(h)
                shapes.append(tuple(h.shape))
        return shapes

    def _star_close(self):
        """Stops the engine (its links' threads) now; shutdown() calls it."""
        self._engine = None
        self._held.clear()

    def parameters(self):
        """This stage's parameters: what its optimizer steps."""
        return self.module.parameters()

    def step(self, inputs=None, targets=None):
        """One iteration over the batch: its micro-batches through every stage and back,
        leaving this stage's gradients (averaged over its replicas) in its parameters."""
        rt = _runtime.require("Pipeline.step()")
        if self._engine is None:
            raise StateError("star.torch.Pipeline.step: the job was shut down")
        last = self.stage == self.stages - 1
        self._inputs = self._chunks("inputs", inputs) if self.stage == 0 else None
        self._targets = self._chunks("targets", targets) if last else None
        plan = rt.session.begin_iteration(self.iteration)
        self.warmup = plan.warmup[self.stage] if plan.warmup else min(self.stages - self.stage, self.micro_batches)
        self._loss = 0.0
        rt.session.begin_compute()
        self._engine.run_iteration(self.warmup)
        rt.session.end_compute()
        rt.session.begin_communication()
        self._average_over_replicas()
        rt.session.end_communication()
        self.iteration += 1
        loss = self._loss if last else None
        rt.session.end_iteration(iteration=self.iteration, local_batch=self._micro * self.micro_batches,
                                 amp=False, loss=loss, pipeline=self._engine.take_reading())
        self._inputs = self._targets = None
        return loss

    def _chunks(self, name, batch):
        """`batch` cut into the micro-batches (ConfigError unless it has micro_batches x
        example_input's rows)."""
        want = self._micro * self.micro_batches
        if batch is None or not hasattr(batch, "shape") or batch.shape[0] != want:
            got = "None" if batch is None else (batch.shape[0] if hasattr(batch, "shape") else type(batch).__name__)
            raise ConfigError(f"{name}: stage {self.stage} needs {want} rows "
                              f"({self.micro_batches} micro-batches of {self._micro}), got {got}")
        return batch.split(self._micro)

    def _forward(self, micro, flat):
        if self.stage == 0:
            x = self._inputs[micro]
        else:
            x = torch.frombuffer(bytearray(flat), dtype=torch.float32).view(self._shapes[self.stage])
            x.requires_grad_()
        y = self.module(x)
        if self.stage == self.stages - 1:
            loss = self.loss_fn(y, self._targets[micro]) / self.micro_batches
            self._loss += loss.item()
            self._held[micro] = (x, loss)
            return None
        self._held[micro] = (x, y)
        return y.detach().contiguous().reshape(-1).numpy()

    def _backward(self, micro, flat):
        x, y = self._held.pop(micro)
        if self.stage == self.stages - 1:
            y.backward()
        else:
            y.backward(torch.frombuffer(bytearray(flat), dtype=torch.float32).view(y.shape))
        return None if self.stage == 0 else x.grad.contiguous().reshape(-1).numpy()

    def _average_over_replicas(self):
        grads = [p.grad for p in self.module.parameters() if p.grad is not None]
        if not grads or self._replicas == 1:
            return
        flat = torch.cat([g.reshape(-1) for g in grads]).numpy()
        self._engine.all_reduce_mean(flat)
        at = 0
        for g in grads:
            g.copy_(torch.from_numpy(flat[at:at + g.numel()]).view_as(g))
            at += g.numel()
