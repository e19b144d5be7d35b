"""The process's STAR runtime: its configuration and worker session, and once a model is
wrapped its gradient engine. One per process: init() makes it, shutdown() ends it."""

import os
import warnings

import torch

from star import _star
from star.errors import ConfigError, PeerError, StarError, StateError

# init() keyword -> the STAR_* variable it overrides (the C++ shim's WorkerConfig reads them).
ENV_NAMES = {
    "rank": "STAR_RANK", "world_size": "STAR_WORLD_SIZE", "job": "STAR_JOB",
    "parameter_servers": "STAR_PARAMETER_SERVERS", "store_url": "STAR_STORE_URL",
    "host_store": "STAR_HOST_STORE", "listen_host": "STAR_LISTEN_HOST",
    "controller_url": "STAR_CONTROLLER_URL", "token": "STAR_JOB_TOKEN", "report_ca": "STAR_REPORT_CA",
    "report_every": "STAR_REPORT_EVERY", "report_seconds": "STAR_REPORT_SECONDS",
    "metrics_address": "STAR_METRICS_ADDRESS",
    "timeout_ms": "STAR_TIMEOUT_MS", "clock_origin": "STAR_CLOCK_ORIGIN", "backend": "STAR_BACKEND",
}
AMP_DTYPES = {"bfloat16": torch.bfloat16}

_runtime = None


class Runtime:
    """What init() set up; the wrapped model and the engine join later."""

    def __init__(self, config, amp_dtype):
        self.config = config
        self.amp_dtype = amp_dtype
        self.session = _star.Session(config, local_batch=1)
        self.model = None       # the star.torch.DistributedDataParallel
        self.engine = None      # _star.Engine, made by the model
        self.decisions = []     # every decision received, in arrival order
        self.default_batch = None  # the sampler's batch_size: every worker's until a decision
        self.drawn_batch = None    # the size of the batch the sampler drew last
        self.step = None           # the open step (star.torch._step.Step), if any

    def batches_at(self, iteration):
        """Every worker's batch at `iteration`: the newest decision in force that sets
        batches, else the sampler's batch_size."""
        batches = [self.default_batch or 1] * self.config.world_size
        for d in sorted(self.decisions, key=lambda d: (d.apply_at_iteration, d.epoch)):
            if d.apply_at_iteration > iteration:
                break
            for worker, batch in d.batches.items():
                batches[worker] = batch
        return batches


def require(what):
    """The runtime, or StateError naming the call made before init()."""
    if _runtime is None:
        raise StateError(f"star.torch.{what}: call star.torch.init() first")
    return _runtime


def init(**overrides):
    """Joins this process to its STAR job. Reads the STAR_* environment the operator and
    `star local` set (STAR_RANK, STAR_WORLD_SIZE, STAR_STORE_URL, STAR_CONTROLLER_URL, ...);
    keyword arguments override it: rank, world_size, job, store_url, host_store,
    listen_host, controller_url, token, report_ca, report_every, report_seconds, metrics_address,
    timeout_ms, clock_origin, backend ("gloo", the default, or "nccl": all-reduces on the
    current CUDA device through NCCL, messages over Gloo), and amp_dtype (the autocast type when a decision turns AMP
    on: "bfloat16", on CPU and CUDA; default STAR_AMP_DTYPE or "bfloat16"; float16 would
    need a loss scale the workers agree on, which star.torch does not keep). ConfigError names a missing or bad variable or
    argument; StateError if already initialised."""
    global _runtime
    if _runtime is not None:
        raise StateError("star.torch.init: already initialised; call star.torch.shutdown() first")
    amp_name = overrides.pop("amp_dtype", None)
    unknown = sorted(set(overrides) - set(ENV_NAMES))
    if unknown:
        raise ConfigError(f"star.torch.init: unknown argument(s) {', '.join(unknown)} "
                          f"(known: {', '.join(sorted(ENV_NAMES))}, amp_dtype)")
    env = {}
    for key, value in overrides.items():
        if isinstance(value, bool):
            value = "1" if value else "0"
        env[ENV_NAMES[key]] = str(value)
    amp_name = amp_name or os.environ.get("STAR_AMP_DTYPE") or "bfloat16"
    if amp_name not in AMP_DTYPES:
        raise ConfigError(f"amp_dtype: must be one of {', '.join(AMP_DTYPES)}, got {amp_name!r}")
    config = _star.config_from_environment(env)
    _runtime = Runtime(config, AMP_DTYPES[amp_name])


def is_initialized():
    return _runtime is not None


def rank():
    """This worker's rank among the job's workers (0 .. world_size() - 1)."""
    return require("rank()").config.worker


def world_size():
    """The number of workers in the job."""
    return require("world_size()").config.world_size


def iteration():
    """Iterations the job has run, as this worker's engine counts them (a fixed-k child
    skips ahead with its parent); 0 before a model is wrapped."""
    rt = require("iteration()")
    return rt.engine.iteration if rt.engine is not None else 0


def mode():
    """The synchronization mode in force: "ssgd", "fixed_k" or "groups"."""
    rt = require("mode()")
    return rt.engine.mode if rt.engine is not None else "ssgd"


def report_accuracy(value):
    """Reports a test accuracy in [0, 1] measured now (usually on rank 0): the job's
    accuracy curve, its target and its time to accuracy in `star local`'s report and the
    TrainingJob's status. It goes out with this worker's next report."""
    rt = require("report_accuracy()")
    if isinstance(value, torch.Tensor):
        value = value.item()
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"accuracy: must be a number in [0, 1], got {value!r}") from None
    rt.session.report_accuracy(value)


def shutdown():
    """Ends this worker's part in the job: finishes the exchange so no peer waits for it,
    sends the reports still queued, and frees everything. Idempotent. A peer failure while
    finishing is raised after everything is freed."""
    global _runtime
    rt = _runtime
    if rt is None:
        return
    _runtime = None
    error = None
    try:
        if rt.model is not None:
            rt.model._star_finish(rt)
    except PeerError as e:
        error = e
    except StateError:
        pass  # the engine failed earlier; that error was raised then
    try:
        rt.session.flush(10000)
    except StarError as e:
        warnings.warn(f"star.torch.shutdown: reports not all delivered: {e}")
    if rt.model is not None:
        rt.model._star_detach()
    rt.engine = None
    rt.session = None
    if error is not None:
        raise error
