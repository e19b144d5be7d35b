"""Where init() finds this process's place in the job, and the job's training settings.

The place comes from the STAR_* variables (the operator, `star local`), else torchrun's
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), else nowhere:
one process alone (rank 0 of 1, no controller). Where both are set, STAR_* win, variable
by variable. The training settings are the TrainingJob's, as the operator passes them to
every worker: STAR_GLOBAL_BATCH, STAR_MAX_ITERATIONS and STAR_AMP_DTYPE."""

import socket
from dataclasses import dataclass, field
from typing import Optional

from star.errors import ConfigError

# STAR_* variable -> torchrun's variable it falls back to.
TORCHRUN_FALLBACK = {"STAR_RANK": "RANK", "STAR_WORLD_SIZE": "WORLD_SIZE"}
AMP_DTYPES = ("bfloat16",)


@dataclass
class Placement:
    """This process's place: `env` the STAR_* values init() passes on (the overrides and
    what torchrun's variables filled in), `source` "star", "torchrun" or "none", `master`
    torchrun's (MASTER_ADDR, MASTER_PORT) when both are set, `local_rank` LOCAL_RANK."""
    env: dict
    source: str
    master: Optional[tuple] = None
    local_rank: Optional[int] = None
    local_world_size: Optional[int] = None
    notice: Optional[str] = None


@dataclass
class TrainingSettings:
    """The job's spec.training and AMP dtype as the worker sees them (None: not set)."""
    global_batch: Optional[int] = None
    max_iterations: Optional[int] = None
    amp_dtype: str = "bfloat16"
    amp_source: str = field(default="the default")


def _integer(name, value, minimum):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: must be an integer >= {minimum}, got {value!r}") from None
    if number < minimum:
        raise ConfigError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    return number


def _optional_integer(environ, name, minimum):
    value = environ.get(name)
    return None if value in (None, "") else _integer(name, value, minimum)


def placement(overrides, environ):
    """The Placement from init()'s overrides (STAR_* name -> value) over `environ`.
    ConfigError names a torchrun variable that is malformed or missing beside its pair."""
    env = dict(overrides)

    def star(name):
        return env.get(name, environ.get(name))

    has_star = any(star(n) is not None for n in TORCHRUN_FALLBACK)
    has_torchrun = any(environ.get(n) is not None for n in TORCHRUN_FALLBACK.values())
    master = None
    if environ.get("MASTER_ADDR") and environ.get("MASTER_PORT"):
        master = (environ["MASTER_ADDR"], _integer("MASTER_PORT", environ["MASTER_PORT"], 1))
    local_rank = _optional_integer(environ, "LOCAL_RANK", 0)
    local_world = _optional_integer(environ, "LOCAL_WORLD_SIZE", 1)
    if not has_star and not has_torchrun:
        env.update({"STAR_RANK": "0", "STAR_WORLD_SIZE": "1"})
        reports = "reporting to " + star("STAR_CONTROLLER_URL") if star("STAR_CONTROLLER_URL") else "reporting nothing"
        return Placement(env, "none", master, local_rank, local_world,
                         notice="star.torch: no STAR_RANK/STAR_WORLD_SIZE or torchrun RANK/WORLD_SIZE in the "
                                f"environment: training as one process (rank 0 of 1), {reports}")
    source = "star"
    for star_name, torch_name in TORCHRUN_FALLBACK.items():
        if star(star_name) is not None:
            continue
        if environ.get(torch_name) is None:
            raise ConfigError(f"{star_name} (or torchrun's {torch_name}): not set")
        env[star_name] = str(_integer(torch_name, environ[torch_name], 0 if torch_name == "RANK" else 1))
        source = "torchrun"
    if source == "torchrun" and env["STAR_RANK"] != "0" and star("STAR_HOST_STORE") in ("1", "true"):
        # A pod of several processes (spec.workers.procsPerPod) that hosts the store: its
        # processes share the pod's STAR_* and take their ranks from torchrun; only rank 0's
        # process serves the store.
        env["STAR_HOST_STORE"] = "0"
    metrics = star("STAR_METRICS_ADDRESS")
    if metrics and local_world and local_world > 1 and local_rank:
        # The pod's processes share its address: each serves its metrics on the pod's
        # port + LOCAL_RANK.
        env["STAR_METRICS_ADDRESS"] = _offset_port("STAR_METRICS_ADDRESS", metrics, local_rank)
    return Placement(env, source, master, local_rank, local_world)


def _offset_port(name, address, offset):
    host, sep, port = address.rpartition(":")
    if not sep:
        raise ConfigError(f"{name}: must be HOST:PORT, got {address!r}")
    return f"{host}:{_integer(name + ' port', port, 0) + offset}"


def address_towards(host, port):
    """The local address this machine reaches `host` from (where peers reach this process
    when they reach the master); where that cannot be told (`host` does not resolve yet),
    the address this machine's name resolves to, else 127.0.0.1."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, port))  # UDP: sends nothing, picks the route
            return s.getsockname()[0]
    except OSError:
        pass
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def free_port(host):
    """A TCP port free on `host` now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def training_settings(environ, amp_dtype=None):
    """The TrainingSettings from STAR_GLOBAL_BATCH, STAR_MAX_ITERATIONS and STAR_AMP_DTYPE
    (init()'s amp_dtype wins over the last). ConfigError names a malformed one, and
    float16 with the reason it is refused."""
    settings = TrainingSettings(global_batch=_optional_integer(environ, "STAR_GLOBAL_BATCH", 1),
                                max_iterations=_optional_integer(environ, "STAR_MAX_ITERATIONS", 1))
    if amp_dtype is not None:
        settings.amp_dtype, settings.amp_source = amp_dtype, "amp_dtype"
    elif environ.get("STAR_AMP_DTYPE"):
        settings.amp_dtype, settings.amp_source = environ["STAR_AMP_DTYPE"], "STAR_AMP_DTYPE"
    if settings.amp_dtype == "float16":
        raise ConfigError(f"{settings.amp_source}: float16 is not supported: it needs a loss scale every "
                          "worker agrees on, which STAR does not keep; use bfloat16 "
                          "(spec.mitigation.amp.dtype)")
    if settings.amp_dtype not in AMP_DTYPES:
        raise ConfigError(f"{settings.amp_source}: must be one of {', '.join(AMP_DTYPES)}, "
                          f"got {settings.amp_dtype!r}")
    return settings
