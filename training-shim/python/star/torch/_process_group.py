"""torch.distributed's default process group for the script, and STAR's rendezvous store
when only torchrun's environment says where the job meets.

init() leaves a default group the script may use (its own collectives, barriers,
evaluation): the one the script made before init() (its rank and size must be STAR's),
else one made over MASTER_ADDR:MASTER_PORT (torchrun's rendezvous, or the operator's pods),
else, for a lone worker, one in memory. A job of several workers with STAR_* but no
MASTER_ADDR/MASTER_PORT (a manifest run by `star local`) has no default group."""

import datetime
import os

import torch
import torch.distributed as dist

from star.errors import ConfigError, PeerError
from star.torch import _environment

STORE_KEY = "star/store_url"


def _setting(env, name, default):
    """A STAR_* value as init() passes it on: its override, else the environment's."""
    return env.get(name, os.environ.get(name, default))


def ensure_default_group(config, placement):
    """Makes the default group if there is none and it can be made. Returns whether it
    made it (shutdown() then destroys it). ConfigError when an existing default group's
    rank or size is not this worker's."""
    if config.parameter_servers > 0:
        return False  # star.torch refuses these jobs when the model is wrapped
    rank, size = config.worker, config.world_size
    if dist.is_available() and dist.is_initialized():
        if dist.get_rank() != rank or dist.get_world_size() != size:
            raise ConfigError(f"torch.distributed's default group is rank {dist.get_rank()} of "
                              f"{dist.get_world_size()}, but this worker is rank {rank} of {size} "
                              "(STAR_RANK, STAR_WORLD_SIZE)")
        return False
    timeout = datetime.timedelta(milliseconds=config.timeout_ms)
    nccl = _setting(placement.env, "STAR_BACKEND", "gloo") == "nccl"
    backend = "nccl" if nccl and torch.cuda.is_available() else "gloo"
    if placement.master is not None:
        # env:// reads MASTER_ADDR and MASTER_PORT (and torchrun's agent store, when it has one).
        try:
            dist.init_process_group(backend, init_method="env://", rank=rank, world_size=size, timeout=timeout)
        except (RuntimeError, OSError) as e:  # a peer or the master not there within the timeout
            host, port = placement.master
            raise PeerError(f"torch.distributed's default group over MASTER_ADDR:MASTER_PORT ({host}:{port}), "
                            f"rank {rank} of {size}: {e}") from e
        return True
    if size == 1:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1, timeout=timeout)
        return True
    return False


def rendezvous_store(config, placement, env):
    """When several workers have no STAR_STORE_URL but a default group: worker 0 picks a
    free port for STAR's store, which it will host, and hands the URL to the others
    through the default group's store. Sets STAR_STORE_URL and STAR_HOST_STORE in `env`;
    returns whether it did."""
    if config.world_size == 1 or config.store_url or not dist.is_initialized():
        return False
    store = dist.distributed_c10d._get_default_store()
    if config.worker == 0:
        host = _setting(env, "STAR_LISTEN_HOST", "127.0.0.1")
        url = f"http://{host}:{_environment.free_port(host)}"
        store.set(STORE_KEY, url)
        env["STAR_HOST_STORE"] = "1"
    else:
        url = store.get(STORE_KEY).decode()  # waits up to the group's timeout
        env["STAR_HOST_STORE"] = "0"
    env["STAR_STORE_URL"] = url
    return True
