"""The process's STAR runtime: its configuration and worker session, and once a model is
wrapped its gradient engine. One per process: init() makes it, shutdown() ends it."""

import os
import sys
import warnings

import torch
import torch.distributed as dist

from star import _star
from star.errors import ConfigError, PeerError, StarError, StateError
from star.torch import _environment, _process_group

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
AMP_DTYPES = {"bfloat16": torch.bfloat16}  # _environment.AMP_DTYPES, as torch types

_runtime = None


class Runtime:
    """What init() set up; the wrapped model and the engine join later."""

    def __init__(self, config, amp_dtype, settings, placement, made_group):
        self.config = config
        self.amp_dtype = amp_dtype
        self.settings = settings    # _environment.TrainingSettings: the job's global batch, ...
        self.placement = placement  # _environment.Placement: where the rank came from
        self.made_group = made_group  # init() made torch.distributed's default group
        self.session = _star.Session(config, local_batch=1)
        self.model = None       # the star.torch.DistributedDataParallel
        self.engine = None      # _star.Engine, made by the model
        self.pipeline = None    # the star.torch.Pipeline, when this process runs a stage
        self.decisions = []     # every decision received, in arrival order
        self.default_batch = None  # the sampler's batch_size: every worker's until a decision
        self.drawn = {}            # iteration -> this worker's batch the sampler drew for it
        self.drawn_ahead = None    # the furthest iteration the sampler has drawn for
        self.step = None           # the open step (star.torch._step.Step), if any
        self.open = None           # the iteration steps are accumulating into (_step.Open)

    def note_drawn(self, iteration, batch):
        """The sampler drew `batch` samples for `iteration` (maybe ahead of training)."""
        self.drawn[iteration] = batch
        self.drawn_ahead = iteration if self.drawn_ahead is None else max(self.drawn_ahead, iteration)

    def take_drawn(self, iteration):
        """The batch drawn for `iteration` (None: the sampler drew none), forgetting it
        and anything drawn for earlier iterations (rounds a fixed-k child skipped);
        and how many iterations past it the sampler has drawn."""
        batch = self.drawn.pop(iteration, None)
        for stale in [i for i in self.drawn if i < iteration]:
            del self.drawn[stale]
        ahead = 0 if self.drawn_ahead is None else max(0, self.drawn_ahead - iteration)
        return batch, ahead

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
    where STAR_RANK / STAR_WORLD_SIZE are absent, torchrun's RANK / WORLD_SIZE (the job
    then meets at MASTER_ADDR:MASTER_PORT); with neither, this process trains alone (rank
    0 of 1, a one-line notice on stderr). STAR_* win where both are set. Keyword arguments
    override the environment: rank, world_size, job, store_url, host_store,
    listen_host, controller_url, token, report_ca, report_every, report_seconds, metrics_address,
    timeout_ms, clock_origin, backend ("gloo", the default, or "nccl": all-reduces on the
    current CUDA device through NCCL, messages over Gloo), and amp_dtype (the autocast type when a decision turns AMP
    on: "bfloat16", on CPU and CUDA; default STAR_AMP_DTYPE or "bfloat16"; float16 would
    need a loss scale the workers agree on, which star.torch does not keep).
    Afterwards torch.distributed has a default process group the script may use (see
    _process_group.py for when it cannot), and with LOCAL_RANK set and CUDA present the
    current device is LOCAL_RANK's. ConfigError names a missing or bad variable or
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
    settings = _environment.training_settings(os.environ, amp_name)
    place = _environment.placement(env, os.environ)
    env = place.env
    if place.master is not None and "STAR_LISTEN_HOST" not in env and "STAR_LISTEN_HOST" not in os.environ:
        env["STAR_LISTEN_HOST"] = _environment.address_towards(*place.master)
    config = _star.config_from_environment(env)
    made_group = _process_group.ensure_default_group(config, place)
    try:
        if _process_group.rendezvous_store(config, place, env):
            config = _star.config_from_environment(env)
        if place.local_rank is not None and torch.cuda.is_available():
            torch.cuda.set_device(place.local_rank % torch.cuda.device_count())
        _runtime = Runtime(config, AMP_DTYPES[settings.amp_dtype], settings, place, made_group)
    except BaseException:
        if made_group:
            dist.destroy_process_group()
        raise
    if place.notice:
        print(place.notice, file=sys.stderr, flush=True)


def is_initialized():
    return _runtime is not None


def rank():
    """This worker's rank among the job's workers (0 .. world_size() - 1)."""
    return require("rank()").config.worker


def world_size():
    """The number of workers in the job."""
    return require("world_size()").config.world_size


def local_rank():
    """This process's rank on its machine (torchrun's LOCAL_RANK: its GPU when the pod
    runs one process per GPU); 0 when LOCAL_RANK is not set."""
    rt = require("local_rank()")
    return rt.placement.local_rank or 0


def global_batch():
    """The job's global batch (spec.training.globalBatchSize, STAR_GLOBAL_BATCH: the sum of
    every worker's batch), or None when the job does not set one."""
    return require("global_batch()").settings.global_batch


def max_iterations():
    """The job's iteration limit (spec.training.maxIterations, STAR_MAX_ITERATIONS), or None
    when the job sets none. The script stops when iteration() reaches it."""
    return require("max_iterations()").settings.max_iterations


def iteration():
    """Iterations the job has run, as this worker's engine counts them (a fixed-k child
    skips ahead with its parent); 0 before a model is wrapped."""
    rt = require("iteration()")
    if rt.pipeline is not None:
        return rt.pipeline.iteration
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
    if rt.pipeline is not None:
        rt.pipeline._star_close()  # stops its links' threads
    rt.pipeline = None
    rt.session = None
    if rt.made_group and dist.is_initialized():
        dist.destroy_process_group()
    if error is not None:
        raise error
