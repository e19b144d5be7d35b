"""Where init() finds the job: STAR_*, else torchrun's variables, else one process alone;
and the job's training settings (STAR_GLOBAL_BATCH, STAR_MAX_ITERATIONS, STAR_AMP_DTYPE)."""

import json
import os
import subprocess

import pytest
import torch
import torch.distributed as dist

import star.torch as st
from harness import HERE, PYTHON, expect_all_ok, free_port
import scenarios

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK",
                 "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def clean_env(monkeypatch):
    """No STAR_* and no torchrun variables; whatever a test initialises is ended."""
    for name in list(os.environ):
        if name.startswith("STAR_") or name in TORCHRUN_VARS or name.startswith("TORCHELASTIC_"):
            monkeypatch.delenv(name)
    yield monkeypatch
    st.shutdown()
    if dist.is_initialized():
        dist.destroy_process_group()


def torchrun_env(rank, world, master_port):
    """What torchrun (torch/distributed/run.py, --standalone) gives worker `rank` of a
    one-node job. Debian's torchrun 1.13 itself fails on Python 3.11 before it starts any
    worker (elastic's Std.from_str returns None), so the test sets what it would."""
    return {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world),
            "GROUP_RANK": "0", "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(world), "GROUP_WORLD_SIZE": "1",
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(master_port), "TORCHELASTIC_USE_AGENT_STORE": "False",
            "TORCHELASTIC_RUN_ID": "pytest", "OMP_NUM_THREADS": "1"}


def test_two_workers_launched_by_torchrun_alone_train_and_agree(tmp_path, clean_env):
    port = free_port()
    procs = [subprocess.Popen([PYTHON, os.path.join(HERE, "scenarios.py"), "torchrun", str(tmp_path)],
                              env=dict(os.environ, STAR_TIMEOUT_MS="20000", **torchrun_env(rank, 2, port)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for rank in range(2)]
    results = []
    try:
        for rank, p in enumerate(procs):
            out, _ = p.communicate(timeout=180)
            path = tmp_path / f"{rank}.json"
            results.append((p.returncode, out, json.loads(path.read_text()) if path.exists() else None))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    expect_all_ok(results)
    r0, r1 = results[0][2], results[1][2]
    assert [r0["rank"], r1["rank"]] == [0, 1] and r0["world_size"] == r1["world_size"] == 2
    assert [r0["local_rank"], r1["local_rank"]] == [0, 1], "LOCAL_RANK"
    assert r0["rank_sum"] == r1["rank_sum"] == 1.0, "the default group is the job's two workers"
    assert r0["iteration"] == r1["iteration"] == scenarios.SAMPLES // (8 * 2)
    assert torch.allclose(torch.tensor(r0["params"]), torch.tensor(r1["params"]), atol=1e-6), "the workers agree"
    assert r0["loss_after"] < r0["loss_before"]


def test_without_any_environment_one_process_trains_alone_with_a_notice(clean_env, capsys):
    st.init()
    notice = capsys.readouterr().err.strip().splitlines()
    assert len(notice) == 1 and "one process" in notice[0], notice
    assert (st.rank(), st.world_size(), st.local_rank()) == (0, 1, 0)
    assert dist.is_initialized() and dist.get_world_size() == 1, "the script gets a default group"
    ds = scenarios.data()
    model = st.DistributedDataParallel(scenarios.make_model())
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    before = scenarios.full_loss(model.module, ds)
    scenarios.train(model, ds, opt, st.AdaptiveBatchSampler(ds, batch_size=16))
    assert scenarios.full_loss(model.module, ds) < before
    st.shutdown()
    assert not dist.is_initialized(), "shutdown() ends the group init() made"


def test_star_variables_win_over_torchruns(clean_env):
    clean_env.setenv("STAR_RANK", "0")
    clean_env.setenv("STAR_WORLD_SIZE", "1")
    clean_env.setenv("RANK", "1")
    clean_env.setenv("WORLD_SIZE", "2")
    clean_env.setenv("LOCAL_RANK", "1")
    st.init()
    assert (st.rank(), st.world_size(), st.local_rank()) == (0, 1, 1)


def test_torchruns_variables_stand_in_for_missing_star_ones(clean_env):
    clean_env.setenv("RANK", "0")
    clean_env.setenv("WORLD_SIZE", "1")
    st.init()
    assert (st.rank(), st.world_size()) == (0, 1)


def test_in_a_pod_of_several_processes_only_rank_0_hosts_the_store(clean_env):
    # The operator's pod 0 with procsPerPod 2: STAR_* without STAR_RANK, and STAR_HOST_STORE;
    # torchrun starts two processes in it and gives each its RANK.
    from star.torch import _environment
    pod = {"STAR_WORLD_SIZE": "4", "STAR_HOST_STORE": "1", "STAR_STORE_URL": "http://pod-0:29400",
           "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}
    first = _environment.placement({}, dict(pod, RANK="0", LOCAL_RANK="0"))
    second = _environment.placement({}, dict(pod, RANK="1", LOCAL_RANK="1"))
    assert (first.env["STAR_RANK"], first.env.get("STAR_HOST_STORE", "1")) == ("0", "1")
    assert (second.env["STAR_RANK"], second.env["STAR_HOST_STORE"]) == ("1", "0")
    assert second.local_rank == 1 and second.local_world_size == 2


def test_in_a_pod_of_several_processes_each_serves_metrics_on_its_own_port(clean_env):
    from star.torch import _environment
    pod = {"STAR_WORLD_SIZE": "4", "STAR_METRICS_ADDRESS": "0.0.0.0:9400", "WORLD_SIZE": "4",
           "LOCAL_WORLD_SIZE": "2"}
    first = _environment.placement({}, dict(pod, RANK="2", LOCAL_RANK="0"))
    second = _environment.placement({}, dict(pod, RANK="3", LOCAL_RANK="1"))
    assert first.env.get("STAR_METRICS_ADDRESS", "0.0.0.0:9400") == "0.0.0.0:9400"
    assert second.env["STAR_METRICS_ADDRESS"] == "0.0.0.0:9401"


def test_a_half_or_malformed_torchrun_environment_is_named(clean_env):
    clean_env.setenv("RANK", "0")
    with pytest.raises(st.ConfigError, match=r"STAR_WORLD_SIZE \(or torchrun's WORLD_SIZE\): not set"):
        st.init()
    clean_env.setenv("WORLD_SIZE", "two")
    with pytest.raises(st.ConfigError, match="WORLD_SIZE: must be an integer >= 1, got 'two'"):
        st.init()
    assert not st.is_initialized() and not dist.is_initialized()


def test_a_master_nobody_serves_is_a_peer_error_naming_it(clean_env):
    # Rank 1 of 2 waits for rank 0's store at MASTER_ADDR:MASTER_PORT, which never comes.
    for name, value in torchrun_env(1, 2, free_port()).items():
        clean_env.setenv(name, value)
    clean_env.setenv("STAR_TIMEOUT_MS", "1500")
    with pytest.raises(st.PeerError, match=r"MASTER_ADDR:MASTER_PORT \(127.0.0.1:\d+\), rank 1 of 2"):
        st.init()
    assert not st.is_initialized() and not dist.is_initialized()


def test_a_default_group_of_another_size_is_refused(clean_env):
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    with pytest.raises(st.ConfigError, match="default group is rank 0 of 1, but this worker is rank 0 of 2"):
        st.init(rank=0, world_size=2)


def test_a_batch_that_disagrees_with_the_jobs_global_batch_is_refused_naming_both(clean_env):
    clean_env.setenv("STAR_GLOBAL_BATCH", "256")
    st.init(rank=0, world_size=4)
    assert st.global_batch() == 256
    ds = scenarios.data()
    with pytest.raises(st.ConfigError) as e:
        st.AdaptiveBatchSampler(ds, batch_size=128)
    assert str(e.value) == ("the script's global batch 512 (batch_size 128 x 4 workers) disagrees with "
                            "spec.training.globalBatchSize 256 (STAR_GLOBAL_BATCH)")
    assert isinstance(e.value, st.StarError)
    assert st.AdaptiveBatchSampler(ds, batch_size=64).global_batch == 256
    assert st.AdaptiveBatchSampler(ds).global_batch == 256, "batch_size left out: the job's share"


def test_a_global_batch_that_does_not_split_equally_needs_a_batch_size(clean_env):
    clean_env.setenv("STAR_GLOBAL_BATCH", "250")
    st.init(rank=0, world_size=4)
    with pytest.raises(st.ConfigError, match="250 .* does not divide equally among 4 workers"):
        st.AdaptiveBatchSampler(scenarios.data())


def test_the_iteration_limit_is_the_jobs(clean_env):
    st.init(rank=0, world_size=1)
    assert st.max_iterations() is None and st.global_batch() is None
    st.shutdown()
    clean_env.setenv("STAR_MAX_ITERATIONS", "3000")
    st.init(rank=0, world_size=1)
    assert st.max_iterations() == 3000
    st.shutdown()
    clean_env.setenv("STAR_MAX_ITERATIONS", "-1")
    with pytest.raises(st.ConfigError, match="STAR_MAX_ITERATIONS: must be an integer >= 1, got '-1'"):
        st.init(rank=0, world_size=1)


def test_float16_amp_is_refused_with_the_reason(clean_env):
    clean_env.setenv("STAR_AMP_DTYPE", "float16")
    with pytest.raises(st.ConfigError, match="STAR_AMP_DTYPE: float16 is not supported: it needs a loss scale"):
        st.init(rank=0, world_size=1)
    with pytest.raises(st.ConfigError, match="amp_dtype: float16 is not supported"):
        st.init(rank=0, world_size=1, amp_dtype="float16")
    clean_env.setenv("STAR_AMP_DTYPE", "bfloat16")
    st.init(rank=0, world_size=1)
