"""The CUDA path: models and data on the GPU, the gradients staged through host memory to
the engine; the nccl backend's all-reduces on the device; bf16 autocast on CUDA. Skipped
where torch sees no CUDA device (the suite's machines have none)."""

import pytest
import torch

from harness import expect_all_ok, free_port, run_workers
import scenarios
from test_amp import expect_amp_on_worker_1_only, run_amp_decision
from test_switch import expect_switched_and_converged

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

CUDA = {"SCENARIO_DEVICE": "cuda"}
# GPU and CPU arithmetic round differently; one epoch of this model stays well inside.
ATOL = 1e-4


def expect_matches_ddp_on_cpu(tmp_path, workers, env):
    (tmp_path / "star").mkdir()
    (tmp_path / "ddp").mkdir()
    ours = run_workers(workers, "ssgd", tmp_path / "star", env=env)
    expect_all_ok(ours)
    theirs = run_workers(workers, "plain_ddp", tmp_path / "ddp", env={"DDP_PORT": str(free_port())})
    expect_all_ok(theirs)
    reference = torch.tensor(theirs[0][2]["params"])
    for rank, (_, _, result) in enumerate(ours):
        assert result["iteration"] == scenarios.SAMPLES // (8 * workers)
        assert torch.allclose(torch.tensor(result["params"]), reference, atol=ATOL), f"rank {rank}"


def test_ssgd_on_cuda_matches_pytorch_ddp_on_cpu(tmp_path):
    expect_matches_ddp_on_cpu(tmp_path, 2, CUDA)


def test_nccl_backend_matches_pytorch_ddp_on_cpu(tmp_path):
    # NCCL takes one rank per device: as many workers as there are GPUs, at most 3.
    workers = min(torch.cuda.device_count(), 3)
    expect_matches_ddp_on_cpu(tmp_path, workers, dict(CUDA, STAR_BACKEND="nccl"))


def test_switches_on_cuda(tmp_path):
    expect_switched_and_converged(run_workers(4, "switch", tmp_path, env=CUDA))


def test_bf16_autocast_on_cuda_per_worker(tmp_path):
    expect_amp_on_worker_1_only(run_amp_decision(tmp_path, env=CUDA))
