"""Clear exceptions, not crashes or hangs: a dead peer, wrong use, bad arguments."""

import os

import pytest
import torch

import star.torch as st
from harness import free_port, run_workers
import scenarios


def test_a_dead_peer_raises_peer_error_on_every_other_worker(tmp_path):
    results = run_workers(3, "kill", tmp_path, env={"STAR_TIMEOUT_MS": "3000"})
    assert results[2][0] == 3 and results[2][2] is None  # the one that died
    for rank in (0, 1):
        code, out, result = results[rank]
        assert code == 0, out
        assert result["error"] == "PeerError", f"rank {rank}: {result}"


def test_wrong_use_raises_named_errors(clean_env):
    with pytest.raises(st.StateError, match="init"):
        with st.step():
            pass
    with pytest.raises(st.StateError, match="init"):
        st.rank()
    with pytest.raises(st.ConfigError, match="STAR_WORLD_SIZE"):
        st.init(rank=0)  # half a place: no environment at all is a lone worker (test_environment.py)
    with pytest.raises(st.ConfigError, match="bogus"):
        st.init(rank=0, world_size=1, bogus=1)
    with pytest.raises(st.ConfigError, match="world_size"):
        st.init(rank=0, world_size=0)
    st.init(rank=0, world_size=1)
    with pytest.raises(st.StateError, match="already"):
        st.init(rank=0, world_size=1)
    with pytest.raises(st.StateError, match="DistributedDataParallel"):
        with st.step():
            pass
    with pytest.raises(st.ConfigError, match="batch_size"):
        st.AdaptiveBatchSampler(scenarios.data(), batch_size=0)
    with pytest.raises(st.ConfigError, match="accuracy"):
        st.report_accuracy(1.5)
    with pytest.raises(st.ConfigError, match="accuracy"):
        st.report_accuracy("high")
    with pytest.raises(st.ConfigError, match="process_group"):
        st.DistributedDataParallel(scenarios.make_model(), process_group=None)


def test_a_lone_worker_trains_and_backward_outside_a_step_is_refused(clean_env):
    st.init(rank=0, world_size=1)
    ds = scenarios.data()
    model = st.DistributedDataParallel(scenarios.make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    before = scenarios.full_loss(model.module, ds)
    scenarios.train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=16))
    assert scenarios.full_loss(model.module, ds) < before
    x, y = ds.tensors
    with pytest.raises(Exception, match="outside"):
        torch.nn.functional.cross_entropy(model(x[:4]), y[:4]).backward()
    with pytest.raises(st.StateError, match="backward"):
        with st.step():
            model(x[:4])  # no backward


def test_parameter_server_jobs_are_refused_with_the_reason(clean_env):
    st.init(rank=1, world_size=1, parameter_servers=1)
    with pytest.raises(st.ConfigError, match="parameter-server"):
        st.DistributedDataParallel(scenarios.make_model())


def test_an_unknown_backend_is_refused_naming_it(clean_env):
    with pytest.raises(st.ConfigError, match="backend: must be gloo or nccl"):
        st.init(rank=0, world_size=1, backend="mpi")


@pytest.mark.skipif(os.path.exists("/dev/nvidia0"), reason="a CUDA device is present")
def test_the_nccl_backend_without_a_cuda_device_is_a_config_error(clean_env):
    # One worker with a store of its own goes through the whole connection: Gloo, then NCCL.
    st.init(rank=0, world_size=1, backend="nccl", host_store=True, store_url=f"http://127.0.0.1:{free_port()}",
            timeout_ms=10000)
    with pytest.raises(st.ConfigError, match="backend: nccl"):
        st.DistributedDataParallel(scenarios.make_model())


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(10))


def test_what_cannot_work_beside_star_is_refused_naming_the_change(clean_env):
    st.init(rank=0, world_size=1)
    with pytest.raises(st.ConfigError, match="map-style"):
        st.AdaptiveBatchSampler(_Stream(), batch_size=2)
    with pytest.raises(st.ConfigError, match="accumulation_steps"):
        st.AdaptiveBatchSampler(scenarios.data(), batch_size=2, accumulation_steps=3)
    import torch.distributed as dist
    with pytest.raises(st.ConfigError, match="already wrapped in torch's"):
        st.DistributedDataParallel(torch.nn.parallel.DistributedDataParallel(
            scenarios.make_model(), process_group=dist.new_group([0])))
    model = st.DistributedDataParallel(scenarios.make_model())
    lbfgs = torch.optim.LBFGS(model.parameters())
    x, y = scenarios.data().tensors
    with pytest.raises(st.ConfigError, match="LBFGS"):
        with st.step():
            torch.nn.functional.cross_entropy(model(x[:4]), y[:4]).backward()
    del lbfgs


def test_a_model_wrapped_in_torchs_ddp_too_is_refused(clean_env):
    import torch.distributed as dist
    st.init(rank=0, world_size=1)
    model = st.DistributedDataParallel(scenarios.make_model())
    outer = torch.nn.parallel.DistributedDataParallel(model, process_group=dist.new_group([0]))
    x, y = scenarios.data().tensors
    with pytest.raises(st.ConfigError, match="also wrapped in torch's"):
        with st.step():
            torch.nn.functional.cross_entropy(outer(x[:4]), y[:4]).backward()
